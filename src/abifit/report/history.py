"""`abifit history` rendered: each form of the symbol with the releases that define it (as
ranges of the releases examined), then where the signature changed; `--json` prints the same
report as one versioned document."""

from __future__ import annotations

from abifit.engines.history import Form, HistoryReport, ranges, span
from abifit.report.json import JsonObject, schema_version


def history_text(report: HistoryReport) -> str:
    """The text rendering of `abifit history`."""
    examined = span(report.releases)
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


def history_json(report: HistoryReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit history`."""
    return {
        "schema_version": schema_version("history"),
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
