"""Reports rendered for people (text) and for machines (one versioned JSON document).

Both renderings are made from the same report object, so they can never disagree.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict

from .check import CheckReport
from .diagnose import Finding
from .doctor import DoctorReport
from .inspection import InspectReport, ObjectReport, SymbolRow, SymbolSelection

SCHEMA_VERSION = 1

JsonObject = dict[str, object]


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
        )
        if obj.symbols is not None:
            doc["symbols"] = [_symbol_json(s) for s in obj.symbols]
    return doc


def _symbol_json(row: SymbolRow) -> JsonObject:
    doc = asdict(row)
    del doc["display_name"]
    return doc


def inspect_json(report: InspectReport, transfer: dict[str, int] | None = None) -> JsonObject:
    """The `--json` document of `abifit inspect`."""
    return {
        "transfer": transfer,
        "schema_version": SCHEMA_VERSION,
        "command": "inspect",
        "targets": list(report.targets),
        "symbols": report.symbols.value,
        "match": report.match,
        "objects": [_object_json(o) for o in report.objects],
        "summary": {"objects": len(report.objects), "errors": report.failed},
    }


def dumps(doc: JsonObject) -> str:
    return json.dumps(doc, indent=2)


def _field(label: str, values: list[str] | tuple[str, ...], width: int = 100) -> list[str]:
    text = " ".join(values) if values else "-"
    indent = " " * 13
    wrapped = textwrap.wrap(text, width, initial_indent=f"  {label:<10} ",
                            subsequent_indent=indent, break_on_hyphens=False,
                            break_long_words=False)
    return wrapped or [f"  {label:<10} -"]


_FILE_TYPES = {"DYN": "shared object", "EXEC": "executable", "REL": "relocatable object",
               "CORE": "core file"}


def _kind(obj: ObjectReport) -> str:
    if obj.file_type == "DYN" and obj.interpreter:
        return "position-independent executable"
    return _FILE_TYPES.get(obj.file_type or "", "file")


def _object_text(obj: ObjectReport) -> list[str]:
    if obj.error is not None:
        return [obj.location, f"  error: {obj.error}"]
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
    return lines


def _symbols_text(obj: ObjectReport) -> list[str]:
    """An object's listed symbols, for a report that lists symbols instead of summaries."""
    if obj.error is not None:
        return [obj.location, f"  error: {obj.error}"]
    symbols = obj.symbols or ()
    return [f"{obj.location}  ({len(symbols)} symbols)", *(_symbol_text(s) for s in symbols)]


def _symbol_text(row: SymbolRow) -> str:
    kind = "D" if row.defined else "U"
    line = f"    {kind} {row.binding:<10} {row.type:<9} {row.display_name}"
    if row.demangled:
        line += f"\n        {row.demangled}"
    return line


def inspect_text(report: InspectReport) -> str:
    """The text rendering of `abifit inspect`."""
    if report.symbols is SymbolSelection.NONE:
        blocks = ["\n".join(_object_text(o)) for o in report.objects]
    else:  # objects without a listed symbol are left out of the text
        blocks = ["\n".join(_symbols_text(o)) for o in report.objects if o.symbols or o.error]
    if not report.objects:
        blocks.append("no ELF objects found")
    summary = f"{len(report.objects)} object(s)"
    if report.symbols is not SymbolSelection.NONE:
        listed = sum(len(o.symbols or ()) for o in report.objects)
        summary += f", {listed} symbol(s) listed"
    if report.failed:
        summary += f", {report.failed} could not be read"
    return "\n\n".join([*blocks, summary]) + "\n"


def doctor_json(report: DoctorReport) -> JsonObject:
    """The `--json` document of `abifit doctor`."""
    verification = None
    if report.verification is not None:
        verification = [asdict(v) for v in report.verification]
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "doctor",
        "verdict": "problems" if report.problems else "ok",
        "python": {"executable": report.python, "version": report.python_version},
        "modules": [{**asdict(m), "prerequisites": list(m.prerequisites)}
                    for m in report.modules],
        "findings": [_finding_json(f) for f in report.findings],
        "verification": verification,
        "summary": {
            "modules": len(report.modules),
            "loading": len(report.modules) - report.failing,
            "failing": report.failing,
            "libraries": report.libraries,
            "findings": len(report.findings),
        },
    }


def _finding_json(finding: Finding) -> JsonObject:
    doc = asdict(finding)
    for key in ("trace", "candidates", "nearest"):
        doc[key] = list(doc[key])
    return doc


def _finding_text(finding: Finding) -> list[str]:
    where = finding.module or finding.object
    lines = [f"{finding.kind}: {where}", f"  {finding.message}"]
    lines += [f"  {line}" for line in finding.explanation.splitlines()]
    if finding.trace:
        lines.append("  paths considered, in order:")
        lines += [f"    {t}" for t in finding.trace]
    if finding.hint:
        lines.append(f"  hint: {finding.hint}")
    return lines


def doctor_text(report: DoctorReport) -> str:
    """The text rendering of `abifit doctor`: problems first, then one summary line."""
    blocks = ["\n".join(_finding_text(f)) for f in report.findings]
    if report.verification is not None:
        agree = sum(1 for v in report.verification if v.agrees)
        lines = [f"verified by real loading: {agree} of {len(report.verification)} predictions "
                 "agree"]
        for v in report.verification:
            if not v.agrees:
                lines.append(f"  {v.module}: predicted "
                             f"{'load' if v.predicted_loads else v.predicted_error}, real "
                             f"{'load' if v.actual_loads else v.actual_error or v.note}")
        blocks.append("\n".join(lines))
    failing = report.failing
    blocks.append(
        f"{report.python} ({report.python_version}): {len(report.modules)} native modules "
        f"checked, {len(report.modules) - failing} load, {failing} fail"
        + (f"; {len(report.findings)} problem(s)" if report.findings else "")
    )
    return "\n\n".join(blocks) + "\n"


def check_json(report: CheckReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit check`: doctor's module and finding fields, plus the
    wheels, the verdict and the transfer."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "check",
        "verdict": report.verdict,
        "target": report.target,
        "wheels": [{"name": w.name, "version": w.version, "filename": w.filename,
                    "role": w.role.value, "size": w.size} for w in report.wheels],
        "notes": list(report.notes),
        "host_missing": list(report.host_missing),
        "assumed_driver": report.assumed_driver,
        "modules": [{**asdict(m), "prerequisites": list(m.prerequisites)}
                    for m in report.modules],
        "findings": [_finding_json(f) for f in report.findings],
        "summary": {
            "modules": len(report.modules),
            "loading": len(report.modules) - report.failing,
            "failing": report.failing,
            "findings": len(report.findings),
        },
        "transfer": transfer,
    }


def _verdict_line(report: CheckReport) -> str:
    checked = f"{len(report.modules)} extension module(s) checked"
    if report.verdict == "fails":
        symbols = sum(1 for f in report.findings if f.kind in ("undefined-symbol",
                                                               "missing-version"))
        libraries = sum(1 for f in report.findings if f.kind == "missing-library")
        return (f"does not fit: {checked}, {report.failing} fail "
                f"({symbols} symbol and {libraries} library problem(s))")
    if report.host_missing:
        missing = ", ".join(report.host_missing)
        return (f"the ABI fits ({checked}), but {missing} (the NVIDIA driver) is not on this "
                "machine: the modules load only where the driver is installed")
    return f"fits: {checked}, all load"


def check_text(report: CheckReport) -> str:
    """The text rendering of `abifit check`: the wheels, the notes, the problems, the verdict."""
    lines = [f"target: {report.target}"]
    lines += [f"  {w.role.value:<10} {w.name} {w.version}  ({w.filename})" for w in report.wheels]
    blocks = ["\n".join(lines)]
    if report.notes:
        blocks.append("\n".join(f"note: {n}" for n in report.notes))
    blocks += ["\n".join(_finding_text(f)) for f in report.findings]
    blocks.append(_verdict_line(report))
    return "\n\n".join(blocks) + "\n"
