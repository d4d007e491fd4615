"""`abifit diff` rendered: the ABI changes (those that break first), then the version changes,
then the verdict; `--json` prints the same report as one versioned document."""

from __future__ import annotations

from abifit.engines.diff import Change, ChangeKind, DiffReport
from abifit.report.derivation import derivation_text
from abifit.report.json import JsonObject, schema_version

_LABEL = {
    ChangeKind.STOPS_LOADING: "does not load",
    ChangeKind.STARTS_LOADING: "now loads",
    ChangeKind.MODULE_GONE: "module gone",
    ChangeKind.CUDA_MAJOR: "CUDA major",
    ChangeKind.RESOLVED_ELSEWHERE: "found elsewhere",
    ChangeKind.VERSION_NODES: "version nodes",
    ChangeKind.BINDINGS: "bindings",
    ChangeKind.NUMPY_C_API: "NumPy C API",
    ChangeKind.HOST: "host",
}


def diff_outcome(report: DiffReport) -> str:
    """The last line of the text (and of the comment): what B does to what A loaded, as far as
    it is known."""
    if report.breaks:
        return f"B breaks {len(report.breaks)} module(s) that A loaded"
    if not report.abi_compared:
        return ("versions only: whether B loads what A loaded was not compared (a lock read "
                "for its versions alone; without --versions-only its wheels are checked)")
    return "B breaks nothing A loaded"


def change_detail(c: Change) -> str:
    """Why a change matters: its derivation in words (a module that stops loading), else its
    detail."""
    return derivation_text(c.derivation) if c.derivation else c.detail


def _abi_line(c: Change) -> list[str]:
    mark = "BREAKS " if c.breaks else ""
    if c.kind is ChangeKind.STOPS_LOADING:
        head = (f"  {mark}{c.subject}: loads on A, not on B: {c.after}" if c.breaks
                else f"  {c.subject}: does not load on B: {c.after}")
    else:
        head = (f"  {_LABEL[c.kind]}: {c.subject}: {c.before or '-'} -> {c.after or '-'}"
                + (f": {c.detail}" if c.detail else ""))
        return [head]
    # the derivation and the nearest definition (the signature that changed), not every one
    return [head] + [f"      {line}" for line in change_detail(c).splitlines()[:2]]


def _version_line(c: Change) -> str:
    if c.kind is ChangeKind.ADDED:
        return f"  + {c.subject} {c.after or ''}".rstrip()
    if c.kind is ChangeKind.REMOVED:
        return f"  - {c.subject} {c.before or ''}".rstrip()
    return f"  {c.subject} {c.before} -> {c.after}"


def diff_text(report: DiffReport) -> str:
    """The text rendering of `abifit diff`."""
    lines = [f"A: {report.a}", f"B: {report.b}"]
    if report.abi:
        lines.append("ABI:")
        for c in report.abi:
            lines += _abi_line(c)
    if report.versions:
        lines.append("versions:")
        lines += [_version_line(c) for c in report.versions]
    if not report.abi and not report.versions:
        lines.append("no differences")
    lines.append(diff_outcome(report))
    return "\n".join(lines) + "\n"


def diff_json(report: DiffReport) -> JsonObject:
    """The `--json` document of `abifit diff`."""

    def change(c: Change) -> JsonObject:
        return {"kind": c.kind.value, "subject": c.subject, "before": c.before,
                "after": c.after, "detail": change_detail(c), "breaks": c.breaks}

    return {"schema_version": schema_version("diff"), "command": "diff", "a": report.a,
            "b": report.b, "sides": [{"kind": o.kind.value, "target": o.target}
                                     for o in report.origins],
            "breaks": len(report.breaks),
            "abi_compared": report.abi_compared, "abi": [change(c) for c in report.abi],
            "versions": [change(c) for c in report.versions], "notes": list(report.notes)}
