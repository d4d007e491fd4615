"""`abifit variants` rendered: the target, the groups of wheels with identical binaries, how each
differing member's needs differ, and a summary line; `--json` prints the same report as one
versioned document."""

from __future__ import annotations

from dataclasses import asdict

from abifit.engines.variants import MemberDiff, VariantsReport
from abifit.report.json import JsonObject, schema_version

_EXAMPLES = 5


def variants_text(report: VariantsReport) -> str:
    """The text rendering of `abifit variants`: the target, the groups, one block per
    difference, then what was compared and what the target left out."""
    target = report.target if report.target is not None else "every wheel (--all)"
    lines = [f"target: {target}", ""]
    for n, group in enumerate(report.groups, 1):
        lines.append(f"group {n} ({group.architecture}, {group.members} binary member(s)):")
        lines += [f"  {f}" for f in group.filenames]
    for d in report.differences:
        lines += ["", *_difference_text(d)]
    return "\n".join([*lines, "", summary_line(report)]) + "\n"


def summary_line(report: VariantsReport) -> str:
    """`torch 2.10.0: 3 wheel(s) compared in 2 group(s) of identical binaries; 97 left out by
    the target (--all compares every wheel)`."""
    head = (f"{report.name} {report.version}: {report.compared} wheel(s) compared in "
            f"{len(report.groups)} group(s) of identical binaries")
    if report.target is None:
        if report.left_out:
            return (f"{head}; {len(report.left_out)} for macOS or Windows not compared "
                    "(abifit reads ELF files only)")
        return f"{head}; none left out (--all)"
    if not report.left_out:
        return f"{head}; the target left none out"
    return f"{head}; {len(report.left_out)} left out by the target (--all compares every wheel)"


def _difference_text(d: MemberDiff) -> list[str]:
    lines = [f"{d.path}: {d.other} against {d.reference}"]
    if d.only_in:
        lines.append(f"  only in {d.reference if d.only_in == 'reference' else d.other}")
    elif d.error:
        lines.append(f"  not compared: {d.error}")
    elif d.same_needs:
        lines.append("  bytes differ, needs are the same")
    for label, items in (("needs also", d.needed_added), ("no longer needs", d.needed_removed),
                         ("leaves undefined also", d.undefined_added),
                         ("no longer leaves undefined", d.undefined_removed),
                         ("requires versions also", d.versions_added),
                         ("no longer requires versions", d.versions_removed)):
        if items:
            shown = ", ".join(items[:_EXAMPLES])
            more = f" (+{len(items) - _EXAMPLES} more)" if len(items) > _EXAMPLES else ""
            lines.append(f"  {label}: {shown}{more}")
    return lines


def variants_json(report: VariantsReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit variants`."""
    return {
        "schema_version": schema_version("variants"),
        "command": "variants",
        "name": report.name,
        "version": report.version,
        "target": report.target,
        "groups": [asdict(g) for g in report.groups],
        "differences": [asdict(d) for d in report.differences],
        "left_out": list(report.left_out),
        "transfer": transfer,
    }
