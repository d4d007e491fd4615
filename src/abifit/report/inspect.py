"""`abifit inspect` rendered: one block per ELF object (or its listed symbols), then a summary
line; `--json` prints the same objects as one versioned document. An object that could not be
read is left out of the text (the command line writes its error on stderr, once) and counted in
the summary; the JSON document holds it with its error."""

from __future__ import annotations

import textwrap
from dataclasses import asdict

from abifit.engines.inspect import InspectReport, ObjectReport, SymbolRow, SymbolSelection
from abifit.report.gpu import coverage_json, coverage_reason, target_json
from abifit.report.json import JsonObject, schema_version

_FILE_TYPES = {"DYN": "shared object", "EXEC": "executable", "REL": "relocatable object",
               "CORE": "core file"}


def inspect_json(report: InspectReport, transfer: dict[str, int] | None = None) -> JsonObject:
    """The `--json` document of `abifit inspect`."""
    return {
        "transfer": transfer,
        "schema_version": schema_version("inspect"),
        "command": "inspect",
        "targets": list(report.targets),
        "symbols": report.symbols.value,
        "match": report.match,
        "gpu": target_json(report.gpu),
        "objects": [_object_json(o) for o in report.objects],
        "summary": {"objects": len(report.objects), "errors": report.failed},
    }


def _object_json(obj: ObjectReport) -> JsonObject:
    doc: JsonObject = {
        "path": obj.path,
        "member": obj.member,
        "error": obj.error,
    }
    if obj.error is None:
        doc.update(
            elf_class=obj.elf_class,
            byte_order=obj.byte_order,
            machine=obj.machine,
            file_type=obj.file_type,
            interpreter=obj.interpreter,
            soname=obj.soname,
            needed=list(obj.needed),
            rpath=list(obj.rpath),
            runpath=list(obj.runpath),
            flags=obj.flags,
            flags_1=obj.flags_1,
            symbol_counts={"defined": obj.defined, "undefined": obj.undefined, "weak": obj.weak},
            required_versions=[asdict(r) for r in obj.required_versions],
            defined_versions=list(obj.defined_versions),
            warnings=list(obj.warnings),
        )
        doc["gpu_code"] = _gpu_code_json(obj)
        doc["gpu"] = coverage_json(obj.gpu) if obj.gpu is not None else None
        if obj.symbols is not None:
            doc["symbols"] = [_symbol_json(s) for s in obj.symbols]
    return doc


def _gpu_code_json(obj: ObjectReport) -> JsonObject | None:
    if obj.gpu_error is not None:
        return {"error": obj.gpu_error}
    if obj.gpu_code is None:
        return None
    from abifit.sim.gpu import summarize as summarize_gpu_code

    summary = summarize_gpu_code(obj.gpu_code)
    return {
        "error": None,
        "containers": summary.containers,
        "entries": summary.entries,
        "sass": list(summary.sass),
        "ptx": list(summary.ptx),
        "groups": [{"containers": g.count, "sass": list(g.sass), "ptx": list(g.ptx)}
                   for g in summary.groups],
        "without_kernels": summary.without_kernels,
        "embedded": None if summary.embedded is None else {
            "containers": summary.embedded.containers,
            "sections": list(summary.embedded.sections),
            "sass": list(summary.embedded.sass), "ptx": list(summary.embedded.ptx)},
        "notes": list(summary.notes),
    }


def _symbol_json(row: SymbolRow) -> JsonObject:
    """A row's fields but its display name (`asdict` copies each value deeply: slow for
    75,000 rows of scalars)."""
    return {"name": row.name, "demangled": row.demangled, "version": row.version,
            "version_file": row.version_file, "hidden": row.hidden, "defined": row.defined,
            "binding": row.binding, "type": row.type, "visibility": row.visibility,
            "value": row.value, "size": row.size}


def inspect_text(report: InspectReport) -> str:
    """The text rendering of `abifit inspect`: the objects that could be read, the summary."""
    read = [o for o in report.objects if o.error is None]
    if report.symbols is SymbolSelection.NONE:
        blocks = ["\n".join(_object_text(o)) for o in read]
    else:  # objects without a listed symbol are left out of the text
        blocks = ["\n".join(_symbols_text(o)) for o in read if o.symbols]
    if not report.objects:
        blocks.append("no ELF objects found")
    return "\n\n".join([*blocks, _summary_line(report)]) + "\n"


def _summary_line(report: InspectReport) -> str:
    summary = f"{len(report.objects)} object(s)"
    if report.symbols is not SymbolSelection.NONE:
        listed = sum(len(o.symbols or ()) for o in report.objects)
        summary += f", {listed} symbol(s) listed"
    with_code = sum(1 for o in report.objects if o.gpu_code is not None)
    if with_code:
        summary += f", {with_code} with GPU code"
    if report.gpu is not None:
        missing = sum(1 for o in report.objects if o.gpu and o.gpu.verdict == "no-kernel-image")
        if missing:
            summary += (f"; on {report.gpu.arch} ({report.gpu.source}): {missing} without a "
                        "kernel image")
        elif with_code:
            summary += f"; all run on {report.gpu.arch}"
        else:
            summary += f"; no GPU code to check on {report.gpu.arch}"
    if report.failed:
        summary += f", {report.failed} could not be read"
    return summary


def _field(label: str, values: list[str] | tuple[str, ...], width: int = 100) -> list[str]:
    text = " ".join(values) if values else "-"
    indent = " " * 13
    wrapped = textwrap.wrap(text, width, initial_indent=f"  {label:<10} ",
                            subsequent_indent=indent, break_on_hyphens=False,
                            break_long_words=False)
    return wrapped or [f"  {label:<10} -"]


def _kind(obj: ObjectReport) -> str:
    if obj.file_type == "DYN" and obj.interpreter:
        return "position-independent executable"
    return _FILE_TYPES.get(obj.file_type or "", "file")


def _object_text(obj: ObjectReport) -> list[str]:
    lines = [
        obj.location,
        f"  {obj.elf_class} {obj.byte_order}-endian {obj.machine} {_kind(obj)} ({obj.file_type})",
    ]
    if obj.interpreter:
        lines += _field("interp", [obj.interpreter])
    lines += _field("soname", [obj.soname] if obj.soname else [])
    lines += _field("needed", list(obj.needed))
    if obj.rpath:
        lines += _field("rpath", list(obj.rpath))
    if obj.runpath:
        lines += _field("runpath", list(obj.runpath))
    lines.append(
        f"  {'symbols':<10} {obj.defined} defined, {obj.undefined} undefined, {obj.weak} weak"
    )
    for req in obj.required_versions:
        versions = [v + (" (weak)" if v in req.weak else "") for v in req.versions]
        lines += _field("requires", [f"{req.library}:", *versions])
    if obj.defined_versions:
        lines += _field("defines", list(obj.defined_versions))
    lines += [f"  {'warning':<10} {warning}" for warning in obj.warnings]
    return lines + _gpu_code_text(obj)


def _archs(sass: tuple[str, ...], ptx: tuple[str, ...]) -> list[str]:
    return ["SASS", *sass[:-1], f"{sass[-1] if sass else '-'};", "PTX", *(ptx or ("-",))]


def _gpu_code_text(obj: ObjectReport) -> list[str]:
    if obj.gpu_error is not None:
        return [f"  {'gpu code':<10} unreadable: {obj.gpu_error}"]
    if obj.gpu_code is None:
        return []
    from abifit.sim.gpu import summarize as summarize_gpu_code

    summary = summarize_gpu_code(obj.gpu_code)
    lines = _field("gpu code", [f"{summary.containers} fat binaries, {summary.entries} image(s):",
                                *_archs(summary.sass, summary.ptx)])
    if len(summary.groups) > 1 or summary.without_kernels:  # fat binaries differ: show how
        for group in summary.groups:
            lines += _field("", [f"{group.count} x", *_archs(group.sass, group.ptx)])
    if summary.without_kernels:
        lines += _field("", [f"{summary.without_kernels} x no kernels (registration code only)"])
    if summary.embedded is not None:
        e = summary.embedded
        lines += _field("embedded", [f"{e.containers} fat binaries in {', '.join(e.sections)} "
                                     "(loaded by the library itself):", *_archs(e.sass, e.ptx)])
    lines += [f"  {'':<10} note: {note}" for note in summary.notes]
    if obj.gpu is not None:
        lines += _field(f"on {obj.gpu.gpu}", [f"{obj.gpu.verdict}:",
                                               coverage_reason(obj.gpu.reason)])
    return lines


def _symbols_text(obj: ObjectReport) -> list[str]:
    """An object's listed symbols, for a report that lists symbols instead of summaries."""
    symbols = obj.symbols or ()
    prefixes: dict[tuple[bool, str, str], str] = {}  # a few kinds among 75,000 rows
    lines = [f"{obj.location}  ({len(symbols)} symbols)"]
    for row in symbols:
        kind = (row.defined, row.binding, row.type)
        prefix = prefixes.get(kind)
        if prefix is None:
            prefix = prefixes[kind] = _symbol_prefix(*kind)
        if row.demangled:
            lines.append(f"{prefix}{row.display_name}\n        {row.demangled}")
        else:
            lines.append(prefix + row.display_name)
    return lines


def _symbol_prefix(defined: bool, binding: str, kind: str) -> str:
    return f"    {'D' if defined else 'U'} {binding:<10} {kind:<9} "
