"""`abifit doctor` rendered: problems first, then what real loading verified, then one summary
line; `--json` prints the same report as one versioned document."""

from __future__ import annotations

from dataclasses import asdict

from abifit.commands.doctor import DoctorReport
from abifit.report.findings import finding_json, problem_blocks
from abifit.report.gpu import gpu_check_json
from abifit.report.json import SCHEMA_VERSION, JsonObject


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
        "findings": [finding_json(f) for f in report.findings],
        "warnings": [finding_json(f) for f in report.warnings],
        "gpu": {"checked": [gpu_check_json(c) for c in report.gpu],
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


def doctor_text(report: DoctorReport) -> str:
    """The text rendering of `abifit doctor`: problems first, then one summary line."""
    blocks = problem_blocks(report.findings, report.warnings, report.gpu, report.gpu_reason)
    if report.saved_host:
        blocks.append(report.saved_host)
    if report.verification is not None:
        blocks.append(_verification_text(report))
    failing = report.failing
    blocks.append(
        f"{report.python} ({report.python_version}): {len(report.modules)} native modules "
        f"checked, {len(report.modules) - failing} load, {failing} fail"
        + (f"; {len(report.findings)} problem(s)" if report.findings else "")
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
    return "\n".join(lines)
