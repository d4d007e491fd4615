"""`abifit doctor` rendered: problems first, then what real loading verified, then one summary
line; `--json` prints the same report as one versioned document."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.engines.kept import DoctorPrinted
from abifit.report.findings import finding_json, problem_blocks
from abifit.report.gpu import gpu_check_json
from abifit.report.json import JsonObject, dumps, schema_version
from abifit.sim.findings import Effect
from abifit.sim.process import ImportVerdict, ModuleStatus, count_effect

if TYPE_CHECKING:  # `abifit check` renders modules and imports with these functions too
    from abifit.engines.doctor import DoctorReport


def doctor_json(report: DoctorReport) -> JsonObject:
    """The `--json` document of `abifit doctor`."""
    verification = None
    if report.verification is not None:
        verification = [asdict(v) for v in report.verification]
    return {
        "schema_version": schema_version("doctor"),
        "command": "doctor",
        "verdict": report.verdict.value,
        "python": {"executable": report.python, "version": report.python_version},
        "modules": [module_json(m) for m in report.modules],
        "imports": [import_json(v) for v in report.imports],
        "findings": [finding_json(f) for f in report.findings],
        "warnings": [finding_json(f) for f in report.warnings],
        "gpu": {"checked": [gpu_check_json(c) for c in report.gpu],
                "reason": report.gpu_reason},
        "verification": verification,
        "import_checks": (None if report.import_checks is None
                          else [asdict(c) for c in report.import_checks]),
        "summary": {
            **summary_json(report.modules, report.failing, report.optional_failing),
            "imports": len(report.imports),
            "imports_failing": sum(1 for v in report.imports if not v.loads),
            "libraries": report.libraries,
            "findings": len(report.findings),
            "warnings": len(report.warnings),
        },
    }


def doctor_printed(report: DoctorReport) -> DoctorPrinted:
    """What `abifit doctor` prints of a report, in each form, and what its exit status is made
    of: kept with the run, so that a warm run prints it without the report."""
    return DoctorPrinted(
        json=dumps(doctor_json(report)) + "\n", text=doctor_text(report),
        verbose_text=doctor_text(report, verbose=True), verdict=report.verdict.value,
        prerequisite=any(f.effect is Effect.PREREQUISITE for f in report.findings))


_EFFECT_WORDS = ((Effect.DEGRADES, "{} degraded", "{} degraded"),
                 (Effect.PREREQUISITE, "{} needs a prerequisite", "{} need a prerequisite"),
                 (Effect.UNUSED, "{} unused variant", "{} unused variants"))


def effects_text(modules: Iterable[ModuleStatus]) -> str:
    """", 1 degraded, 2 need a prerequisite, 6 unused variants" for the modules that do not
    load and whose failure fails no import (`sim.verdict`), or nothing."""
    listed = list(modules)
    parts = [(one if n == 1 else many).format(n) for effect, one, many in _EFFECT_WORDS
             if (n := count_effect(listed, effect))]
    return "".join(f", {part}" for part in parts)


def degraded_names(modules: Iterable[ModuleStatus]) -> str:
    """What a degraded stack loses, by package: "xformers loses xformers._C"."""
    lost: dict[str, list[str]] = {}
    for m in modules:
        if not m.loads and m.effect is Effect.DEGRADES:
            lost.setdefault(m.distribution or m.module, []).append(m.module)
    return "; ".join(f"{dist} loses {_few(names)}" for dist, names in lost.items())


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def summary_json(modules: tuple[ModuleStatus, ...], failing: int,
                 optional: int) -> JsonObject:
    """The module counts every verdict document shares."""
    return {"modules": len(modules), "loading": len(modules) - failing - optional,
            "failing": failing, "optional_failing": optional,
            "degraded": count_effect(modules, Effect.DEGRADES),
            "prerequisite": count_effect(modules, Effect.PREREQUISITE),
            "unused": count_effect(modules, Effect.UNUSED)}


def module_json(m: ModuleStatus) -> JsonObject:
    doc = {**asdict(m), "prerequisites": list(m.prerequisites)}
    doc["import"] = doc.pop("import_name")
    return doc


def import_json(v: ImportVerdict) -> JsonObject:
    return {**asdict(v), "optional_failures": list(v.optional_failures)}


def imports_text(verdicts: tuple[ImportVerdict, ...]) -> str | None:
    """One block per import that fails: what the user sees, and the cause underneath."""
    lines = []
    for v in verdicts:
        if v.loads:
            continue
        lines.append(f"import {v.name}: fails ({v.distribution})")
        lines.append(f"  the user sees: {v.error}")
        if v.cause and v.cause_error and v.error and v.cause_error not in v.error:
            lines.append(f"  because {v.cause} does not load: {v.cause_error}")
    return "\n".join(lines) or None


def doctor_text(report: DoctorReport, verbose: bool = False) -> str:
    """The text rendering of `abifit doctor`: problems first, then one summary line."""
    blocks = problem_blocks(report.findings, report.warnings, report.gpu, report.gpu_reason,
                            verbose)
    failing_imports = imports_text(report.imports)
    if failing_imports:
        blocks.append(failing_imports)
    if report.saved_host:
        blocks.append(report.saved_host)
    if report.verification is not None:
        blocks.append(_verification_text(report))
    failing = report.failing
    errors = sum(1 for f in report.findings if f.breaks)
    lost = degraded_names(report.modules)
    blocks.append(
        f"{report.verdict}: {report.python} ({report.python_version}): {len(report.modules)} "
        f"native modules checked, {len(report.modules) - failing - report.optional_failing} "
        f"load, {failing} fail"
        + effects_text(report.modules)
        + (f"; {errors} problem(s)" if errors else "")
        + (f" ({lost})" if lost else "")
    )
    return "\n\n".join(blocks) + "\n"


def _verification_text(report: DoctorReport) -> str:
    """How many predictions real loading confirmed, and each one it did not."""
    checked = report.verification or ()
    agree = sum(1 for v in checked if v.agrees)
    lines = [f"verified by real loading: {agree} of {len(checked)} predictions agree"]
    for v in checked:
        if not v.agrees:
            lines.append(f"  {v.module}: predicted "
                         f"{'load' if v.predicted_loads else v.predicted_error}, real "
                         f"{'load' if v.actual_loads else v.actual_error or v.note}")
    if report.import_checks is not None:
        imports = report.import_checks
        agree = sum(1 for c in imports if c.agrees)
        lines.append(f"verified by real import: {agree} of {len(imports)} imports agree")
        for c in imports:
            if not c.agrees:
                lines.append(f"  import {c.name}: predicted "
                             f"{'works' if c.predicted_works else c.predicted_error}, real "
                             f"{'works' if c.actual_works else c.actual_error or c.note}")
    return "\n".join(lines)
