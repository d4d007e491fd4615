"""`--markdown FILE`: a short Markdown summary for a CI job's summary or a pull request's
comment: the verdict line, then a table of the problems (package, module, effect, what
fails), at most `ROWS` rows and a line that counts the others. For `diff`, the comment on a
change of lock: the modules the new stack breaks and those it fixes, the CUDA majors, the
libraries and host facts that changed, then the versions."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from abifit.engines.diff import Change, ChangeKind, DiffReport, SideKind
from abifit.report.diff import diff_outcome
from abifit.report.gate import Gate, Level, Problem

ROWS = 50  # rows of a table; the others are counted

_ORDER = {Level.ERROR: 0, Level.WARNING: 1, Level.NOTICE: 2}


def cell(text: str) -> str:
    """Text as one table cell: on one line, `|` escaped, and outside code spans `&`, `<`
    and `>` escaped (a C++ template is no HTML tag)."""
    parts = " ".join(text.split()).split("`")
    if len(parts) % 2 == 0:  # an unclosed code span: no code span at all
        parts = [" ".join(text.split()).replace("`", "'")]
    out = [part if n % 2 else html.escape(part, quote=False) for n, part in enumerate(parts)]
    return "`".join(out).replace("|", "\\|")


def code(text: str | None) -> str:
    return f"`{text}`" if text else ""


def table(head: Sequence[str], rows: Sequence[Sequence[str]], limit: int = ROWS) -> list[str]:
    """A Markdown table of at most `limit` rows, and a line that counts the others."""
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        lines += ["", f"… and {len(rows) - limit} more"]
    return lines


def _problem_row(problem: Problem) -> list[str]:
    return [problem.package or "", code(problem.module), problem.effect, problem.what]


def gate_markdown(gate: Gate, limit: int = ROWS) -> str:
    """The summary of `check`, `doctor` or `resolve`: the verdict, its line, the problems
    (those that fail the gate first)."""
    lines = [f"### abifit {gate.command}: {gate.verdict}", "", cell(gate.line), ""]
    problems = sorted(gate.problems, key=lambda p: _ORDER[p.level])
    if problems:
        lines += table(("package", "module", "effect", "what fails"),
                       [_problem_row(p) for p in problems], limit)
    else:
        lines.append("No problems found.")
    return "\n".join(lines) + "\n"


def _section(title: str, changes: Sequence[Change], head: Sequence[str],
             row: Callable[[Change], list[str]], limit: int) -> list[str]:
    if not changes:
        return []
    return ["", f"#### {title}", "", *table(head, [row(c) for c in changes], limit)]


def _first_line(text: str | None) -> str:
    return (text or "").splitlines()[0] if text else ""


def diff_markdown(report: DiffReport, limit: int = ROWS) -> str:
    """The comment on a change of lock or environment (A the old stack, B the new one): what
    B breaks, what it fixes, the CUDA majors, libraries and host facts that changed, and the
    versions (folded)."""
    broken = report.breaks
    lines = [f"### abifit diff: {report.word}", "",
             f"A: {code(report.a)} → B: {code(report.b)}", "", diff_outcome(report)]
    locks = [code(label) for label, o in zip((report.a, report.b), report.origins, strict=False)
             if o.kind is SideKind.CHECKED_LOCK]
    if locks and report.checked_for:  # a lock's wheels: read from the index, simulated there
        lines += ["", f"{' and '.join(locks)}: the wheels pinned were checked for "
                  f"{', '.join(code(t) for t in report.checked_for)}, as `abifit check -r` "
                  "checks them (nothing installed)."]
    of = {kind: [c for c in report.abi if c.kind is kind] for kind in ChangeKind}
    lines += _section("Breaks: modules that load on A and not on B", broken,
                      ("package", "module", "what fails on B"),
                      lambda c: [c.distribution or "", code(c.subject), _first_line(c.after)],
                      limit)
    lines += _section("Fixes: modules that load on B and not on A",
                      of[ChangeKind.STARTS_LOADING], ("package", "module", "what failed on A"),
                      lambda c: [c.distribution or "", code(c.subject), _first_line(c.before)],
                      limit)
    lines += _section("CUDA majors", of[ChangeKind.CUDA_MAJOR], ("module", "A", "B"),
                      lambda c: [code(c.subject), c.before or "", c.after or ""], limit)
    lines += _section("Libraries found elsewhere", of[ChangeKind.RESOLVED_ELSEWHERE],
                      ("module", "A", "B"),
                      lambda c: [code(c.subject), code(c.before), code(c.after)], limit)
    lines += _section("Host", of[ChangeKind.HOST], ("what", "A", "B"),
                      lambda c: [c.subject, c.before or "", c.after or ""], limit)
    versions = report.versions
    if versions:
        lines += ["", f"<details><summary>{len(versions)} version change(s)</summary>", "",
                  *table(("package", "A", "B"),
                         [[c.subject, c.before or "", c.after or ""] for c in versions],
                         limit), "", "</details>"]
    return "\n".join(lines) + "\n"
