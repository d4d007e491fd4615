"""`abifit check` rendered: the wheels, the problems, then the verdict (the notes are the
command line's, on stderr); `--json` prints doctor's module and finding fields plus the wheels,
the notes, the verdict and the transfer."""

from __future__ import annotations

from abifit.engines.check import CheckReport, forbidden_pairings
from abifit.report.doctor import (
    degraded_names,
    effects_text,
    import_json,
    imports_text,
    module_json,
    summary_json,
)
from abifit.report.findings import finding_json, problem_blocks
from abifit.report.gpu import gpu_check_json
from abifit.report.json import JsonObject, schema_version
from abifit.sim.findings import FindingKind


def check_json(report: CheckReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit check`: doctor's module and finding fields, plus the
    wheels, the verdict and the transfer."""
    return {
        "schema_version": schema_version("check"),
        "command": "check",
        "verdict": report.verdict,
        "target": report.target,
        "wheels": [{"name": w.name, "version": w.version, "filename": w.filename,
                    "role": w.role.value, "size": w.size} for w in report.wheels],
        "notes": list(report.notes),
        "host_missing": list(report.host_missing),
        "assumed_driver": report.assumed_driver,
        "modules": [module_json(m) for m in report.modules],
        "imports": [import_json(v) for v in report.imports],
        "findings": [finding_json(f) for f in report.findings],
        "warnings": [finding_json(f) for f in report.warnings],
        "gpu": gpu_check_json(report.gpu) if report.gpu else None,
        "summary": {
            **summary_json(report.modules, report.failing, report.optional_failing),
            "findings": len(report.findings),
            "warnings": len(report.warnings),
        },
        "transfer": transfer,
    }


def check_text(report: CheckReport, verbose: bool = False) -> str:
    """The text rendering of `abifit check`: the wheels, the problems, the verdict."""
    lines = [f"target: {report.target}"]
    lines += [f"  {w.role.value:<10} {w.name} {w.version}  ({w.filename})" for w in report.wheels]
    blocks = ["\n".join(lines)]
    blocks += problem_blocks(report.findings, report.warnings,
                             (report.gpu,) if report.gpu else (), None, verbose)
    failing_imports = imports_text(report.imports)
    if failing_imports:
        blocks.append(failing_imports)
    blocks.append(_verdict_line(report))
    return "\n\n".join(blocks) + "\n"


def _verdict_line(report: CheckReport) -> str:
    """The verdict, and a pairing the metadata forbids said in it too (its import may fail in
    Python code, which abifit does not run)."""
    line = _verdict(report)
    forbidden = forbidden_pairings(report.notes)
    if forbidden:
        line += f"; the metadata forbids this pairing ({'; '.join(forbidden)})"
    return line


def _verdict(report: CheckReport) -> str:
    checked = f"{len(report.modules)} extension module(s) checked"
    others = effects_text(report.modules)
    if report.verdict == "fails":
        errors = [f for f in report.findings if f.breaks]
        symbols = sum(1 for f in errors if f.kind in ("undefined-symbol", "missing-version"))
        libraries = sum(1 for f in errors if f.kind == FindingKind.MISSING_LIBRARY)
        kernels = sum(1 for f in report.findings if f.kind == FindingKind.NO_KERNEL_IMAGE)
        gpu = (f"; {kernels} object(s) without a kernel image for {report.gpu.target.arch}"
               if report.gpu and kernels else "")
        numpy = sum(1 for f in errors if f.kind == FindingKind.NUMPY_C_API)
        problems = (f"{symbols} symbol, {libraries} library and {numpy} NumPy C-API problem(s)"
                    if numpy else f"{symbols} symbol and {libraries} library problem(s)")
        return f"fails: {checked}, {report.failing} fail ({problems}){gpu}{others}"
    loading = len(report.modules) - report.failing - report.optional_failing
    if report.verdict == "degraded":
        return (f"degraded: {checked}, {loading} load{others}: every import works, but "
                f"{degraded_names(report.modules)}")
    if report.host_missing:
        missing = ", ".join(report.host_missing)
        return (f"the ABI fits ({checked}{others}), but {missing} (the NVIDIA "
                "driver) is not on this machine: the modules load only where the driver is "
                "installed")
    if report.optional_failing:
        them = "it" if report.optional_failing == 1 else "them"
        return f"fits: {checked}, {loading} load{others} (the imports work without {them})"
    return f"fits: {checked}, all load"
