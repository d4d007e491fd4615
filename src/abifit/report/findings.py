"""Findings and warnings, as JSON and as text blocks; shared by doctor, check and cuda."""

from __future__ import annotations

from dataclasses import asdict

from abifit.report.gpu import gpu_check_line
from abifit.report.json import JsonObject
from abifit.sim.findings import Finding, Severity
from abifit.sim.gpu import GpuCheck


def finding_json(finding: Finding) -> JsonObject:
    doc = asdict(finding)
    for key in ("trace", "candidates", "nearest"):
        doc[key] = list(doc[key])
    doc["import"] = doc.pop("import_name")
    return doc


_OPTIONAL = {"guarded": "package code catches its failure and goes on without it",
             "on-use": "package code loads it only when a function that needs it is called"}


def finding_text(finding: Finding) -> list[str]:
    where = finding.module or finding.object
    head = f"{finding.kind}: {where}"
    if finding.severity is not Severity.ERROR:
        head = f"optional, {head}"
    lines = [head, f"  {finding.message}"]
    why = _OPTIONAL.get(finding.reachability or "")
    if finding.import_name and why:
        lines.append(f"  `import {finding.import_name}` works without it: {why}.")
    lines += [f"  {line}" for line in finding.explanation.splitlines()]
    if finding.trace:
        lines.append("  paths considered, in order:")
        lines += [f"    {t}" for t in finding.trace]
    if finding.hint:
        lines.append(f"  hint: {finding.hint}")
    return lines


def problem_blocks(findings: tuple[Finding, ...], warnings: tuple[Finding, ...],
                   checks: tuple[GpuCheck, ...], gpu_reason: str | None) -> list[str]:
    """Findings (those that break an import first), then warnings, then one line per GPU
    checked (or why none was)."""
    ordered = sorted(findings, key=lambda f: f.severity is not Severity.ERROR)
    blocks = ["\n".join(finding_text(f)) for f in ordered]
    blocks += ["\n".join(["warning: " + line if i == 0 else line
                          for i, line in enumerate(finding_text(f))]) for f in warnings]
    gpu_lines = [gpu_check_line(c) for c in checks]
    if gpu_reason:
        gpu_lines.append(f"GPU code not checked: {gpu_reason} (give --gpu ARCH to check "
                         "for a GPU)")
    return [*blocks, "\n".join(gpu_lines)] if gpu_lines else blocks
