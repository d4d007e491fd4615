"""What CI systems read of a report (`--github`, `--sarif`, `--junit`, `--markdown`): the
problems, each with its level and the place it points at, and the modules checked, by
package. `check_gate`, `doctor_gate`, `resolve_gate` and `diff_gate` make it from a command's
report; `report.annotations`, `report.sarif`, `report.junit` and `report.markdown` render it.

A problem's level follows the gate the command was given (`--fail-on`, docs/verdict.md): a
problem whose effect makes the verdict fail under it is an `error`; below it, a part of a
package lost (`degrades`) is a `warning` and a prerequisite from outside the stack a
`notice`; an unused variant is no problem (its module is a skipped test case). A finding
without an effect (GPU code, the CUDA stack) is an error when it breaks an import, else a
warning or a notice by its severity.

A problem points at the line that pins its package in a file given with `-r` (or the
snapshot of `check --snapshot`, or side B of `diff`), else at the module's file when it is
under `root` (the directory the command ran in: a repository's checkout), else at no file.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from abifit.report.derivation import explanation
from abifit.report.rules import (
    CHANGE_RULES,
    CONFLICT,
    FINDING_RULES,
    HOST_LACKS_DRIVER,
    Rule,
)
from abifit.sim.findings import Effect, Finding, FindingKind, Severity
from abifit.sim.process import ModuleStatus  # a field's type: its hint must evaluate

if TYPE_CHECKING:
    from abifit.engines.check import CheckReport
    from abifit.engines.diff import Change, DiffReport
    from abifit.engines.doctor import DoctorReport
    from abifit.engines.resolve import ResolveReport
    from abifit.formats.pins import Pin


class Level(str, Enum):
    """How a CI system shows a problem; `error` is what fails the gate."""

    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"

    def __str__(self) -> str:
        return self.value


class Outcome(Enum):
    """A module as a test case."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Place:
    """Where a problem points: a path relative to the root (with `/`), or an absolute one
    outside it (`inside` false), and the line, where one is known."""

    path: str
    line: int | None = None
    inside: bool = True


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem: its rule and level, a title, the loader's message, the explanation and
    the fix; the package and module it is about, the effect (or the change's kind) and what
    fails in a few words; where it points; what stays the same from run to run (`identity`,
    of which SARIF makes its fingerprint)."""

    rule: Rule
    level: Level
    title: str
    message: str
    explanation: str = ""
    hint: str | None = None
    package: str | None = None
    module: str | None = None
    effect: str = ""
    what: str = ""
    place: Place | None = None
    identity: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The message, the explanation and the fix, one after the other."""
        parts = [self.message, self.explanation, f"hint: {self.hint}" if self.hint else ""]
        return "\n".join(dict.fromkeys(p for p in parts if p))


@dataclass(frozen=True, slots=True)
class Case:
    """A module checked, as a test case: its outcome, and for one that does not load the
    kind of its first problem, the loader's message and the explanation."""

    package: str
    name: str
    outcome: Outcome
    kind: str = ""
    message: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Suite:
    """The modules of one package (a wheel, a pin, a distribution), as test cases."""

    name: str
    version: str | None
    cases: tuple[Case, ...]


@dataclass(frozen=True, slots=True)
class Gate:
    """What CI systems read of one run: the command, its verdict word and line (the text
    report's last line), the `--fail-on` level, the problems and the suites."""

    command: str
    verdict: str
    line: str
    fail_on: str
    problems: tuple[Problem, ...]
    suites: tuple[Suite, ...]


# --- levels ------------------------------------------------------------------------------------

_RANK = {Effect.UNUSED: 0, Effect.PREREQUISITE: 1, Effect.DEGRADES: 2, Effect.FAILS: 3}
_GATE = {"prerequisite": 1, "degraded": 2, "fails": 3}


def level_of(effect: Effect | None, severity: Severity, fail_on: str) -> Level | None:
    """The level of a problem with this effect under `--fail-on` (see the module's
    docstring); None for an unused variant."""
    if effect is None:
        return {Severity.ERROR: Level.ERROR, Severity.WARNING: Level.WARNING}.get(
            severity, Level.NOTICE)
    if effect is Effect.UNUSED:
        return None
    if _RANK[effect] >= _GATE.get(fail_on, _GATE["degraded"]):
        return Level.ERROR
    return Level.WARNING if effect is Effect.DEGRADES else Level.NOTICE


def effect_of(finding: Finding) -> Effect | None:
    """What a finding costs: `fails` when it breaks an import, else its effect."""
    return Effect.FAILS if finding.breaks else finding.effect


def status_effect(module: ModuleStatus) -> Effect | None:
    """What a module that does not load costs (None: it loads, or it is optional)."""
    if module.loads:
        return None
    if module.effect is not None:
        return module.effect
    return Effect.FAILS if module.counts else None


# --- places ------------------------------------------------------------------------------------


def place_of(path: str, root: str, line: int | None = None) -> Place:
    """A path (relative ones are taken from `root`) as a place: relative to `root` when it
    is inside it."""
    absolute = os.path.normpath(os.path.join(root, path))
    relative = os.path.relpath(absolute, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return Place(absolute, line, inside=False)
    return Place(relative.replace(os.sep, "/"), line)


def pin_places(pins: Iterable[Pin], root: str) -> dict[str, Place]:
    """The place of each package pinned in a file, by canonical name (the first pin of a
    name)."""
    out: dict[str, Place] = {}
    for pin in pins:
        if pin.file is not None:
            out.setdefault(canonicalize_name(pin.name), place_of(pin.file, root, pin.line))
    return out


def _module_place(path: str, root: str) -> Place | None:
    """An installed module's file, when it is under the root."""
    place = place_of(path, root)
    return place if place.inside else None


# --- problems ----------------------------------------------------------------------------------


def what_fails(finding: Finding) -> str:
    """What fails, in a few words: the symbol, version or library it needs, else the first
    line of the loader's message."""
    if finding.prerequisite:
        return f"needs {finding.prerequisite}" + (f" ({finding.library})"
                                                  if finding.library else "")
    if finding.kind is FindingKind.UNDEFINED_SYMBOL and finding.symbol:
        return f"needs `{finding.demangled or finding.symbol}`"
    if finding.kind is FindingKind.MISSING_VERSION and finding.version:
        return f"needs {finding.version} of {finding.library or 'a library'}"
    if finding.kind is FindingKind.MISSING_LIBRARY and finding.library:
        return f"needs {finding.library}"
    return (finding.message.splitlines() or [""])[0]


@dataclass(frozen=True, slots=True)
class Owners:
    """Who a finding is about: the module statuses by module name and by path, and the
    places of packages (pins) and of modules (under the root)."""

    by_module: Mapping[str, ModuleStatus]
    by_path: Mapping[str, ModuleStatus]
    pinned: Mapping[str, Place]
    root: str | None  # None: modules are no places (wheels that no machine has)

    @classmethod
    def of(cls, modules: Sequence[ModuleStatus], pinned: Mapping[str, Place],
           root: str | None) -> Owners:
        return cls({m.module: m for m in modules}, {m.path: m for m in modules}, pinned, root)

    def status(self, finding: Finding) -> ModuleStatus | None:
        found = self.by_module.get(finding.module) if finding.module else None
        return found or self.by_path.get(finding.object)

    def place(self, package: str | None, path: str | None) -> Place | None:
        if package and canonicalize_name(package) in self.pinned:
            return self.pinned[canonicalize_name(package)]
        return _module_place(path, self.root) if path and self.root else None


def finding_problem(finding: Finding, owners: Owners, fail_on: str) -> Problem | None:
    """A finding as a problem; None for an unused variant."""
    effect = effect_of(finding)
    level = level_of(effect, finding.severity, fail_on)
    if level is None:
        return None
    status = owners.status(finding)
    package = status.distribution if status is not None and status.distribution else None
    module = finding.module or (status.module if status is not None else None)
    subject = finding.symbol or finding.library or finding.version or ""
    return Problem(
        FINDING_RULES[finding.kind.value], level, f"{finding.kind}: {module or finding.object}",
        finding.message, explanation(finding), finding.hint, package=package, module=module,
        effect=effect.value if effect else finding.severity.value, what=what_fails(finding),
        place=owners.place(package, status.path if status is not None else finding.object),
        identity=(finding.kind.value, package or "",
                  module or posixpath.basename(finding.object), subject))


def _problems(findings: Iterable[Finding], owners: Owners, fail_on: str) -> list[Problem]:
    return [p for f in findings if (p := finding_problem(f, owners, fail_on)) is not None]


# --- test cases --------------------------------------------------------------------------------


def module_case(module: ModuleStatus, findings: Sequence[Finding], fail_on: str) -> Case:
    """A module as a test case: passed when it loads or its failure does not fail the gate
    (what it costs then in its text), failed when it does, skipped for an unused variant."""
    package = module.distribution or "(no distribution)"
    effect = status_effect(module)
    if module.loads:
        return Case(package, module.module, Outcome.PASSED)
    mine = [f for f in findings if f.module == module.module or f.object == module.path]
    kind = mine[0].kind.value if mine else "does-not-load"
    text = "\n".join(dict.fromkeys(line for f in mine for line in (
        explanation(f), f"hint: {f.hint}" if f.hint else "") if line))
    if effect is Effect.UNUSED:
        return Case(package, module.module, Outcome.SKIPPED, kind,
                    "an unused variant: the package picks another file of its set")
    level = level_of(effect, Severity.WARNING, fail_on)
    outcome = Outcome.FAILED if level is Level.ERROR else Outcome.PASSED
    cost = effect.value if effect else "optional"
    return Case(package, module.module, outcome, kind, module.error or "does not load",
                text if outcome is Outcome.FAILED else f"{cost}: {module.error}\n{text}".strip())


def _suites(modules: Sequence[ModuleStatus], findings: Sequence[Finding], fail_on: str,
            packages: Sequence[tuple[str, str | None]] = ()) -> list[Suite]:
    """One suite per package: each of `packages` (name, version: the wheels or pins), with
    the cases of its modules or none, then any other distribution whose modules were
    checked."""
    by_package: dict[str, list[Case]] = {}
    for module in modules:
        case = module_case(module, findings, fail_on)
        by_package.setdefault(canonicalize_name(case.package), []).append(case)
    suites = []
    for name, version in packages:
        suites.append(Suite(name, version, tuple(by_package.pop(canonicalize_name(name), ()))))
    suites += [Suite(cases[0].package, None, tuple(cases)) for cases in by_package.values()]
    return suites


def _loose(command: str, problems: Sequence[Problem], modules: Iterable[str]) -> list[Suite]:
    """The problems about no module checked, as one suite of the command's."""
    known = set(modules)
    cases = tuple(Case(p.package or command, p.module or p.title,
                       Outcome.FAILED if p.level is Level.ERROR else Outcome.PASSED,
                       p.rule.id, p.message, p.text)
                  for p in problems if p.module not in known)
    return [Suite(f"abifit {command}", None, cases)] if cases else []


def _last_line(text: str) -> str:
    return (text.rstrip("\n").splitlines() or [""])[-1]


# --- one gate per command ----------------------------------------------------------------------


def check_gate(report: CheckReport, fail_on: str, root: str) -> Gate:
    """`abifit check`'s problems and modules; modules point at the line that pins their
    package, never at a file (they are in wheels no machine has)."""
    from abifit.report.check import check_text

    owners = Owners.of(report.modules, pin_places(report.file_pins, root), None)
    problems = _problems((*report.findings, *report.warnings), owners, fail_on)
    if report.host_missing:
        missing = ", ".join(report.host_missing)
        problems.append(Problem(
            HOST_LACKS_DRIVER, Level.ERROR, f"{HOST_LACKS_DRIVER.id}: {missing}",
            f"{missing} (the NVIDIA driver) is not on this machine", HOST_LACKS_DRIVER.help,
            effect="fails", what=f"needs {missing}", identity=(HOST_LACKS_DRIVER.id, missing)))
    suites = _suites(report.modules, report.findings, fail_on,
                     [(w.name, w.version) for w in report.wheels])
    suites += _loose("check", problems, (m.module for m in report.modules))
    return Gate("check", report.verdict, _last_line(check_text(report)), fail_on,
                tuple(problems), tuple(suites))


def doctor_gate(report: DoctorReport, fail_on: str, root: str) -> Gate:
    """`abifit doctor`'s problems and modules; a module points at its file when the
    environment is under `root`."""
    from abifit.report.doctor import doctor_text

    owners = Owners.of(report.modules, {}, root)
    problems = _problems((*report.findings, *report.warnings), owners, fail_on)
    suites = _suites(report.modules, report.findings, fail_on)
    suites += _loose("doctor", problems, (m.module for m in report.modules))
    return Gate("doctor", report.verdict.value, _last_line(doctor_text(report)), fail_on,
                tuple(problems), tuple(suites))


def resolve_gate(report: ResolveReport, root: str) -> Gate:
    """`abifit resolve`'s problems: the conflict when no set fits (at the first line of a
    `-r` file that pins one of its packages), else what the whole-set check of the chosen
    set found; its modules by pin. A set is never chosen degraded: the gate is `degraded`."""
    from abifit.report.resolve import derivation, resolve_text

    fail_on = "degraded"
    pinned = pin_places(report.file_pins, root)
    check = report.set_check
    modules = check.statuses if check is not None else ()
    problems = _problems(check.findings if check is not None else (),
                         Owners.of(modules, pinned, None), fail_on)
    if report.conflict is not None:
        names = report.conflict.packages
        places = [pinned[canonicalize_name(n)] for n in names if canonicalize_name(n) in pinned]
        place = min(places, key=lambda p: (p.path, p.line or 0), default=None)
        text = "\n".join(line.strip() for line in derivation(report.conflict))
        problems.append(Problem(
            CONFLICT, Level.ERROR, f"{CONFLICT.id}: {', '.join(names) or 'the requirements'}",
            text, package=names[0] if names else None, effect="fails",
            what=(report.conflict.facts or ("the requirements conflict",))[-1], place=place,
            identity=(CONFLICT.id, *sorted(names))))
    suites = _suites(modules, check.findings if check is not None else (), fail_on,
                     [(p.name, p.version) for p in report.pins])
    suites += _loose("resolve", problems, (m.module for m in modules))
    verdict = "resolved" if report.found else "no set fits"
    return Gate("resolve", verdict, _last_line(resolve_text(report)), fail_on,
                tuple(problems), tuple(suites))


_CHANGE_LEVELS = {"module-gone": Level.WARNING, "cuda-major": Level.NOTICE,
                  "numpy-c-api": Level.NOTICE, "host": Level.NOTICE}


def change_problem(change: Change, pinned: Mapping[str, Place]) -> Problem | None:
    """An ABI change as a problem: a module B breaks is an error, one only B has that does
    not load a warning, a module gone a warning, another CUDA major, NumPy C API or host
    fact a notice; the others (a library found elsewhere, new version nodes, other
    bindings) are no problem."""
    kind = change.kind.value
    if kind == "stops-loading":
        level = Level.ERROR if change.breaks else Level.WARNING
    elif kind in _CHANGE_LEVELS:
        level = _CHANGE_LEVELS[kind]
    else:
        return None
    package = change.distribution
    place = pinned.get(canonicalize_name(package)) if package else None
    message = (f"{change.subject}: {change.before or '-'} -> {change.after or '-'}"
               if kind != "stops-loading" else f"{change.subject}: {change.after}")
    from abifit.report.diff import change_detail

    return Problem(CHANGE_RULES[kind], level, f"{kind}: {change.subject}", message,
                   change_detail(change), package=package,
                   module=change.subject if package else None, effect=kind,
                   what=(change.after or "").splitlines()[0] if change.after else "",
                   place=place, identity=(kind, package or "", change.subject))


def diff_gate(report: DiffReport, root: str, b_pins: Sequence[Pin] = ()) -> Gate:
    """`abifit diff`'s problems (`change_problem`): a module points at the line of B's file
    (`b_pins`: a lock or snapshot) that pins its package. Its cases: each module with a
    problem, failed when B breaks it."""
    from abifit.report.diff import diff_text

    pinned = pin_places(b_pins, root)
    problems = [p for c in report.abi if (p := change_problem(c, pinned)) is not None]
    by_package: dict[str, list[Case]] = {}
    for p in problems:
        outcome = Outcome.FAILED if p.level is Level.ERROR else Outcome.PASSED
        case = Case(p.package or "host", p.module or p.title, outcome, p.rule.id, p.message,
                    p.explanation)
        by_package.setdefault(case.package, []).append(case)
    suites = tuple(Suite(name, None, tuple(cases)) for name, cases in by_package.items())
    return Gate("diff", report.word, _last_line(diff_text(report)),
                "degraded", tuple(problems), suites)
