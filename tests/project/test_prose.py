"""Findings are data below the report layer: no module of `sim/` or `engines/` writes a finding's
derivation as text. A `Finding(...)` (or a `replace(...)` of one) there takes no `explanation`,
and its `derivation` is records (`abifit.sim.derivation`), never a string, an f-string, a
concatenation or a join; the sentences are written in `abifit.report.derivation` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import SRC

PACKAGE = SRC / "abifit"
BELOW_REPORT = sorted([*(PACKAGE / "sim").rglob("*.py"), *(PACKAGE / "engines").rglob("*.py")])
DERIVATION_AT = 3  # Finding(kind, object, message, derivation, ...)


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _is_text(node: ast.expr) -> bool:
    """Whether an expression makes a string: a literal, an f-string, a sum with one, a join or
    format of a literal, either branch of a conditional."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    if isinstance(node, ast.IfExp):
        return _is_text(node.body) or _is_text(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("join", "format") and _is_text(node.func.value)
    return False


def _derivation(call: ast.Call) -> ast.expr | None:
    """The derivation a `Finding(...)` or `replace(...)` call gives, if any."""
    given = next((k.value for k in call.keywords if k.arg == "derivation"), None)
    if given is None and _name(call.func) == "Finding" and len(call.args) > DERIVATION_AT:
        given = call.args[DERIVATION_AT]
    return given


def written_derivations(me: str, source: str) -> list[str]:
    """`module:line` of each finding of `source` whose derivation is written as text."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or _name(node.func) not in ("Finding", "replace"):
            continue
        if any(k.arg == "explanation" for k in node.keywords):
            found.append(f"{me}:{node.lineno} gives a finding an explanation in words")
        given = _derivation(node)
        if given is not None and _is_text(given):
            found.append(f"{me}:{node.lineno} writes a derivation as text")
    return found


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


@pytest.mark.parametrize("path", BELOW_REPORT, ids=_module_name)
def test_findings_below_the_report_are_records(path: Path) -> None:
    """A module of sim/ or engines/ gives its findings records, not sentences."""
    assert written_derivations(_module_name(path), path.read_text("utf-8")) == []


def test_the_check_catches_a_derivation_in_words() -> None:
    """The check itself: an explanation keyword, a string or f-string derivation (by keyword
    or in its place), a joined one and one appended to in a `replace` are caught; records
    pass."""
    source = (
        'Finding(kind=K, object=o, message=m, explanation="Because o needs s, it fails.")\n'
        'Finding(K, o, m, f"Because {o} needs {s}, it fails.")\n'
        'Finding(K, o, m, derivation="\\n".join(lines))\n'
        'replace(finding, explanation=f"{finding.explanation} On the snapshot\'s machine ...")\n'
        'replace(finding, derivation=text + " More.")\n'
        "Finding(K, o, m, (NeedsLibrary(o, None, s, 3, outcome), NoFileFound()))\n"
        "replace(finding, derivation=(*finding.derivation, FoundThroughLdConf(l, d, f, 1)))\n"
    )
    assert written_derivations("abifit.sim.x", source) == [
        "abifit.sim.x:1 gives a finding an explanation in words",
        "abifit.sim.x:2 writes a derivation as text",
        "abifit.sim.x:3 writes a derivation as text",
        "abifit.sim.x:4 gives a finding an explanation in words",
        "abifit.sim.x:5 writes a derivation as text",
    ]
