"""Reports rendered for people (text) and for machines (one versioned JSON document).

Both renderings are made from the same report object, so they can never disagree.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from dataclasses import asdict
from enum import Enum

from abifit.commands.check import CheckReport
from abifit.commands.cuda import CudaReport
from abifit.commands.doctor import DoctorReport
from abifit.commands.inspect import InspectReport, ObjectReport, SymbolRow, SymbolSelection
from abifit.host.cudastack import Toolkit
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.gpucode import GpuCheck, GpuTarget
from abifit.sim.gpucode import summarize as summarize_gpu_code

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
        doc["gpu_code"] = _gpu_code_json(obj)
        doc["gpu"] = asdict(obj.gpu) if obj.gpu is not None else None
        if obj.symbols is not None:
            doc["symbols"] = [_symbol_json(s) for s in obj.symbols]
    return doc


def _gpu_code_json(obj: ObjectReport) -> JsonObject | None:
    if obj.gpu_error is not None:
        return {"error": obj.gpu_error}
    if obj.gpu_code is None:
        return None
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
        "gpu": _target_json(report.gpu),
        "objects": [_object_json(o) for o in report.objects],
        "summary": {"objects": len(report.objects), "errors": report.failed},
    }


def _target_json(target: GpuTarget | None) -> JsonObject | None:
    if target is None:
        return None
    return {"compute_capability": str(target.capability), "arch": target.arch,
            "driver_cuda": target.driver_release, "source": target.source}


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
    return lines + _gpu_code_text(obj)


def _archs(sass: tuple[str, ...], ptx: tuple[str, ...]) -> list[str]:
    return ["SASS", *sass[:-1], f"{sass[-1] if sass else '-'};", "PTX", *(ptx or ("-",))]


def _gpu_code_text(obj: ObjectReport) -> list[str]:
    if obj.gpu_error is not None:
        return [f"  {'gpu code':<10} unreadable: {obj.gpu_error}"]
    if obj.gpu_code is None:
        return []
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
        lines += _field(f"on {obj.gpu.gpu}", [f"{obj.gpu.verdict}:", obj.gpu.reason])
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
        "warnings": [_finding_json(f) for f in report.warnings],
        "gpu": {"checked": [_gpu_check_json(c) for c in report.gpu],
                "reason": report.gpu_reason},
        "verification": verification,
        "summary": {
            "modules": len(report.modules),
            "loading": len(report.modules) - report.failing,
            "failing": report.failing,
            "libraries": report.libraries,
            "findings": len(report.findings),
            "warnings": len(report.warnings),
        },
    }


def _gpu_check_json(check: GpuCheck) -> JsonObject:
    return {"target": _target_json(check.target),
            "objects": [{"name": o.name, "path": o.path, "error": o.error,
                         "coverage": asdict(o.coverage) if o.coverage else None}
                        for o in check.objects]}


def _gpu_check_line(check: GpuCheck) -> str:
    verdicts = Counter(o.coverage.verdict if o.coverage else "unreadable" for o in check.objects)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
    return (f"GPU {check.target.capability} ({check.target.arch}, {check.target.source}): "
            f"{len(check.objects)} object(s) with GPU code" + (f": {counts}" if counts else ""))


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


def _problem_blocks(findings: tuple[Finding, ...], warnings: tuple[Finding, ...],
                    checks: tuple[GpuCheck, ...], gpu_reason: str | None) -> list[str]:
    """Findings, then warnings, then one line per GPU checked (or why none was)."""
    blocks = ["\n".join(_finding_text(f)) for f in findings]
    blocks += ["\n".join(["warning: " + line if i == 0 else line
                          for i, line in enumerate(_finding_text(f))]) for f in warnings]
    gpu_lines = [_gpu_check_line(c) for c in checks]
    if gpu_reason:
        gpu_lines.append(f"GPU code not checked: {gpu_reason} (give --gpu ARCH to check "
                         "for a GPU)")
    return [*blocks, "\n".join(gpu_lines)] if gpu_lines else blocks


def doctor_text(report: DoctorReport) -> str:
    """The text rendering of `abifit doctor`: problems first, then one summary line."""
    blocks = _problem_blocks(report.findings, report.warnings, report.gpu, report.gpu_reason)
    if report.saved_host:
        blocks.append(report.saved_host)
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
        "warnings": [_finding_json(f) for f in report.warnings],
        "gpu": _gpu_check_json(report.gpu) if report.gpu else None,
        "summary": {
            "modules": len(report.modules),
            "loading": len(report.modules) - report.failing,
            "failing": report.failing,
            "findings": len(report.findings),
            "warnings": len(report.warnings),
        },
        "transfer": transfer,
    }


def _verdict_line(report: CheckReport) -> str:
    checked = f"{len(report.modules)} extension module(s) checked"
    if report.verdict == "fails":
        symbols = sum(1 for f in report.findings if f.kind in ("undefined-symbol",
                                                               "missing-version"))
        libraries = sum(1 for f in report.findings if f.kind == FindingKind.MISSING_LIBRARY)
        kernels = sum(1 for f in report.findings if f.kind == FindingKind.NO_KERNEL_IMAGE)
        gpu = (f"; {kernels} object(s) without a kernel image for {report.gpu.target.arch}"
               if report.gpu and kernels else "")
        return (f"does not fit: {checked}, {report.failing} fail "
                f"({symbols} symbol and {libraries} library problem(s)){gpu}")
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
    blocks += _problem_blocks(report.findings, report.warnings,
                              (report.gpu,) if report.gpu else (), None)
    blocks.append(_verdict_line(report))
    return "\n\n".join(blocks) + "\n"


# ---------------------------------------------------------------------------------------------
# abifit cuda


def _value(v: object) -> object:
    return v.value if isinstance(v, Enum) else str(v) if v is not None else None


def _toolkit_json(t: Toolkit) -> JsonObject:
    return {
        "root": t.root, "names": list(t.names), "origins": [o.value for o in t.origins],
        "version": _value(t.version), "version_source": _value(t.version_source),
        "lib_dirs": [{"path": d.path, "real_path": d.real_path, "aliases": list(d.aliases),
                      "sonames": list(d.sonames), "searched": d.search.searched,
                      "via": [v.value for v in d.search.via],
                      "in_ld_so_conf": d.search.in_ld_so_conf} for d in t.lib_dirs],
    }


def cuda_json(report: CudaReport) -> JsonObject:
    """The `--json` document of `abifit cuda`."""
    stack, driver = report.stack, report.stack.driver
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "cuda",
        "verdict": "problems" if report.findings else "ok",
        "python": {"executable": report.python, "version": report.python_version},
        "toolkits": [_toolkit_json(t) for t in stack.toolkits],
        "default_link": stack.default_link,
        "cuda_home": stack.cuda_home,
        "cuda_path": stack.cuda_path,
        "nvcc": None if stack.nvcc is None else {
            "path": stack.nvcc.path, "real_path": stack.nvcc.real_path,
            "version": _value(stack.nvcc.version), "root": stack.nvcc.root},
        "driver": {"version": driver.version, "version_source": _value(driver.version_source),
                   "kernel_module": _value(driver.kernel_module),
                   "libcuda_path": driver.libcuda_path,
                   "cuda_version": _value(driver.cuda_version),
                   "cuda_version_source": _value(driver.cuda_version_source),
                   "reason": driver.reason},
        "gpus": {"source": _value(stack.gpus.source), "reason": stack.gpus.reason,
                 "devices": [{"index": g.index, "name": g.name,
                              "compute_capability": f"{g.compute_capability[0]}."
                              f"{g.compute_capability[1]}" if g.compute_capability else None,
                              "arch": g.arch, "driver_version": g.driver_version}
                             for g in stack.gpus.gpus]},
        "runtime_sonames": [{**asdict(u), "needed_by": list(u.needed_by),
                             "provided_by": list(u.provided_by)} for u in report.sonames],
        "cuda_majors": {"needed": list(report.needed_majors),
                        "provided": list(report.provided_majors)},
        "findings": [_finding_json(f) for f in report.findings],
        "warnings": [_finding_json(f) for f in report.warnings],
        "gpu": {"checked": [_gpu_check_json(c) for c in report.gpu], "reason": report.gpu_reason},
    }


def _toolkit_text(t: Toolkit) -> list[str]:
    version = f"{t.version} ({t.version_source.value})" if t.version and t.version_source \
        else "version unknown"
    names = ", ".join(n for n in t.names if n != t.root)
    lines = [f"  {t.root}  CUDA {version}" + (f"  [also {names}]" if names else "")
             + f"  via {', '.join(o.value for o in t.origins)}"]
    for d in t.lib_dirs:
        how = ("searched (" + ", ".join(v.value for v in d.search.via) + ")" if d.search.searched
               else "NOT searched" + (" (in ld.so.conf, but ldconfig has not run)"
                                      if d.search.in_ld_so_conf else ""))
        lines.append(f"    {d.path}: {len(d.sonames)} libraries, {how}")
    return lines


def _driver_text(report: CudaReport) -> list[str]:
    d = report.stack.driver
    if d.version is None:
        return [f"driver     none found ({d.reason or 'no NVIDIA driver'})"]
    module = f", {d.kernel_module.value} kernel module" if d.kernel_module else ""
    source = f" ({d.version_source.value}{module})" if d.version_source else ""
    cuda = (f"; supports CUDA up to {d.cuda_version} ({d.cuda_version_source.value})"
            if d.cuda_version and d.cuda_version_source else
            f"; newest CUDA unknown ({d.reason})" if d.reason else "")
    return [f"driver     {d.version}{source}{cuda}"]


def _gpus_text(report: CudaReport) -> list[str]:
    gpus = report.stack.gpus
    if not gpus.gpus:
        return [f"GPUs       none found ({gpus.reason or 'no GPU'})"]
    source = gpus.source.value if gpus.source else "?"
    return [f"GPUs       {g.index}: {g.name}, compute capability "
            + (f"{g.compute_capability[0]}.{g.compute_capability[1]} ({g.arch})"
               if g.compute_capability else "unknown") + f"  [{source}]"
            for g in gpus.gpus]


def _sonames_text(report: CudaReport) -> list[str]:
    if not report.sonames:
        return ["CUDA runtime libraries in the environment: none"]
    lines = [f"CUDA runtime libraries in the environment (needed: CUDA "
             f"{'/'.join(map(str, report.needed_majors)) or '-'}; shipped: CUDA "
             f"{'/'.join(map(str, report.provided_majors)) or '-'})"]
    for u in report.sonames:
        needers = ", ".join(u.needed_by[:3]) + (f" and {len(u.needed_by) - 3} more"
                                                if len(u.needed_by) > 3 else "")
        lines.append(f"  CUDA {u.major:<3} {u.soname:<24} shipped by "
                     f"{', '.join(u.provided_by) or '-'}; needed by {needers or '-'}")
    return lines


def cuda_text(report: CudaReport) -> str:
    """The text rendering of `abifit cuda`."""
    stack = report.stack
    head = ["CUDA toolkits" + (f" (/usr/local/cuda -> {stack.default_link})"
                               if stack.default_link else "")]
    head += [line for t in stack.toolkits for line in _toolkit_text(t)]
    if not stack.toolkits:
        head.append("  none found")
    if stack.nvcc is not None:
        head.append(f"nvcc       {stack.nvcc.path} (CUDA {stack.nvcc.version or '?'})")
    head += _driver_text(report) + _gpus_text(report)
    blocks = ["\n".join(head), "\n".join(_sonames_text(report))]
    blocks += _problem_blocks(report.findings, report.warnings, report.gpu, report.gpu_reason)
    blocks.append(f"{report.python} ({report.python_version}): "
                  + (f"{len(report.findings)} CUDA problem(s)" if report.findings
                     else "no CUDA problems found"))
    return "\n\n".join(blocks) + "\n"
