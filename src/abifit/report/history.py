"""`abifit history` rendered: each form of the symbol with the releases that define it (as
ranges of the releases examined), then where the signature changed; `--json` prints the same
report as one versioned document."""

from __future__ import annotations

from collections.abc import Sequence

from abifit.commands.history import Form, HistoryReport
from abifit.report.json import SCHEMA_VERSION, JsonObject


def history_text(report: HistoryReport) -> str:
    """The text rendering of `abifit history`."""
    examined = _span(report.releases)
    if not report.forms:
        return (f"{report.query}: defined by no release of {report.package} examined "
                f"({examined})\n")
    lines = [f"{report.query} in {report.package} ({examined}):"]
    for form in report.forms:
        lines.append(f"  {ranges(form.releases, report.releases)}: {form.demangled}")
        where = ", ".join(form.members)
        nodes = ", ".join(v for v in form.versions if v)
        lines.append(f"      {form.name}" + (f" @{nodes}" if nodes else "") + f"  in {where}")
    for change in report.changes:
        lines.append(f"  changed in {change.release} (after {change.previous}): "
                     f"{change.description}")
    undefined = [r for r in report.releases if not any(r in f.releases for f in report.forms)]
    if undefined:
        lines.append(f"  not defined in: {ranges(undefined, report.releases)}")
    return "\n".join(lines) + "\n"


def _span(releases: Sequence[str]) -> str:
    if not releases:
        return "no releases"
    if len(releases) == 1:
        return f"1 release: {releases[0]}"
    return f"{len(releases)} releases, {releases[0]} to {releases[-1]}"


def ranges(found: Sequence[str], releases: Sequence[str]) -> str:
    """`found` as runs of consecutive releases of `releases`: "2.6.0-2.9.1, 2.11.0"."""
    position = {r: i for i, r in enumerate(releases)}
    runs: list[list[str]] = []
    for release in sorted(found, key=position.__getitem__):
        if runs and position[release] == position[runs[-1][-1]] + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def history_json(report: HistoryReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit history`."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "history",
        "query": report.query,
        "package": report.package,
        "releases": list(report.releases),
        "read": list(report.read),
        "forms": [_form(f) for f in report.forms],
        "changes": [{"release": c.release, "previous": c.previous, "old": c.old or None,
                     "new": c.new or None, "description": c.description}
                    for c in report.changes],
        "transfer": transfer,
    }


def _form(form: Form) -> JsonObject:
    return {"name": form.name, "demangled": form.demangled, "releases": list(form.releases),
            "symbol_versions": [v for v in form.versions if v], "members": list(form.members)}
