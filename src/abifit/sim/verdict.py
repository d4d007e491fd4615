"""The verdict rule: what a file that does not load costs the user, and the stack's verdict.

One rule, which every command takes its words from (check, doctor, matrix cells, resolve,
snapshot, diff, explain, the library API):

- **fails**: an import the user runs raises: the file is reached at module level by an import
  (`sim.imports`), or its load kills the process.
- **degraded**: every import works, but a file the package ships cannot load *because of the
  stack or the host*: an undefined symbol or a missing version node (an ABI break, a glibc or
  libstdc++ too old), a library the stack has in another major (`libcudart.so.12` beside a
  CUDA 13 stack), a library the stack has but the loader does not find, a library a declared
  dependency should provide, a damaged file.
- **needs a prerequisite**: the file loads once something outside the stack, which no metadata
  requires, is present (FFmpeg, TBB, an MPI library, the NVIDIA driver): not a failure.
- **unused**: a variant of a set the package picks one from at run time (one library per
  FFmpeg major, per CUDA release), and the one the target selects loads, or, when the
  selection cannot be read, another one of the set does.

The verdict of a stack is the worst effect among its findings: `fails`, else `degraded`, else
`fits` (with the prerequisites listed). Pure: the stack comes as values.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from abifit.sim.derivation import (
    CannotBeLoaded,
    DefinedByPrerequisite,
    DependencyShouldProvide,
    HostLacksVersion,
    NotDefinedInForm,
    NothingProvides,
    NotWhereLoaderLooks,
    NumpyMismatch,
    OtherBuild,
    OtherRelease,
    OwnFileFails,
    Reason,
)
from abifit.sim.findings import Effect, Finding, Verdict
from abifit.sim.loader import LoadProblem, ProblemKind

DATA = Path(__file__).parent.parent / "data"

_ORDER = (Effect.UNUSED, Effect.PREREQUISITE, Effect.DEGRADES, Effect.FAILS)


def worst(effects: Iterable[Effect | None]) -> Effect | None:
    """The effect that costs most (`fails` over `degrades` over `prerequisite` over
    `unused`); None when there is none."""
    found = [e for e in effects if e is not None]
    return max(found, key=_ORDER.index) if found else None


def verdict(findings: Iterable[Finding]) -> Verdict:
    """The verdict on a stack from its findings: `fails` when one breaks an import,
    `degraded` when a part is lost, else `fits`."""
    effects = set()
    for finding in findings:
        if finding.breaks:
            return Verdict.FAILS
        effects.add(finding.effect)
    return Verdict.DEGRADED if Effect.DEGRADES in effects else Verdict.FITS


def costs(finding: Finding) -> bool:
    """Whether a finding counts against the stack: it breaks an import, or a part of a
    package is lost to the stack or the host (what `matrix`, `resolve` and `diff` weigh)."""
    return finding.breaks or finding.effect is Effect.DEGRADES


def fails_at(found: Verdict, threshold: Verdict | str) -> bool:
    """Whether a verdict fails a gate set at `threshold` (`degraded`: degraded and fails;
    `fails`: only fails); `prerequisite` is checked by `Prerequisite` lines, not here."""
    order = (Verdict.FITS, Verdict.DEGRADED, Verdict.FAILS)
    level = Verdict(threshold) if threshold in {v.value for v in order} else Verdict.DEGRADED
    return order.index(found) >= order.index(level)


# --- what the stack offers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prerequisite:
    """A library from outside the stack that a package loads only when it is present."""

    name: str  # as a user knows it: "FFmpeg"
    get: str  # how to get it


@functools.cache
def build_sonames() -> dict[str, str]:
    """Sonames only some builds of a package ship, and that package
    (`data/prerequisites.json`'s `builds`)."""
    raw = json.loads((DATA / "prerequisites.json").read_text("utf-8"))
    table: dict[str, str] = raw["builds"]
    return table


@functools.cache
def _prerequisite_table() -> tuple[tuple[re.Pattern[str], re.Pattern[str] | None,
                                         Prerequisite], ...]:
    raw = json.loads((DATA / "prerequisites.json").read_text("utf-8"))
    return tuple((re.compile(entry["sonames"]),
                  re.compile(entry["symbols"]) if "symbols" in entry else None,
                  Prerequisite(entry["name"], entry["get"]))
                 for entry in raw["prerequisites"])


def prerequisite_of_symbol(symbol: str) -> Prerequisite | None:
    """The prerequisite whose library defines `symbol`, for a file that leaves it undefined
    and expects the process to have loaded that library (`data/prerequisites.json`)."""
    for _sonames, symbols, known in _prerequisite_table():
        if symbols is not None and symbols.fullmatch(symbol):
            return known
    return None


def prerequisite_of(soname: str) -> Prerequisite:
    """The prerequisite a missing soname belongs to (`data/prerequisites.json`), else one
    named by the soname itself."""
    for pattern, _symbols, known in _prerequisite_table():
        if pattern.fullmatch(soname):
            return known
    return Prerequisite(soname, f"install the package that provides {soname}")


def soname_stem(soname: str) -> str:
    """A soname without its version: `libcudart.so.12` -> `libcudart.so`."""
    head, dot, _ = soname.partition(".so")
    return head + dot


@dataclass(frozen=True, slots=True)
class Stack:
    """What the rule knows of the stack: the file names of its ELF files (with the
    distributions holding each), the names by their stem (`Stack.of` makes them), what each
    distribution declares (Requires-Dist whose markers hold, extras left out, installed or
    not), and the pip package that provides a soname."""

    files: Mapping[str, frozenset[str]]
    stems: Mapping[str, frozenset[str]]
    declared: Callable[[str], Sequence[str]]
    packages: Mapping[str, str | None]
    installed: frozenset[str] = frozenset()  # the distributions of the stack, by key

    @classmethod
    def of(cls, files: Mapping[str, frozenset[str]], declared: Callable[[str], Sequence[str]],
           packages: Mapping[str, str | None], installed: Iterable[str] = ()) -> Stack:
        stems: dict[str, set[str]] = {}
        for name in files:
            stems.setdefault(soname_stem(name), set()).add(name)
        return cls(files, {k: frozenset(v) for k, v in stems.items()}, declared, packages,
                   frozenset(installed))

    def other_majors(self, soname: str) -> tuple[str, ...]:
        """The files of the stack with the soname's stem and another version."""
        return tuple(sorted(self.stems.get(soname_stem(soname), frozenset()) - {soname}))

    def declares_provider(self, distribution: str, soname: str) -> str | None:
        """The declared dependency of `distribution` that should provide `soname`, if any."""
        wanted = self.packages.get(soname)
        if not wanted:
            return None
        name = re.split(r"[<>=!~;\[ ]", wanted, maxsplit=1)[0].lower().replace("_", "-")
        return name if name in self.declared(distribution) else None


@dataclass(frozen=True, slots=True)
class Cause:
    """Why one problem keeps a file from loading, as the rule sees it: the effect, what to
    install for a prerequisite, or the file of the same distribution whose failure it is; the
    `reason` as a record (`sim.derivation`), which ends the finding's derivation where the
    cause changes the fix."""

    effect: Effect
    prerequisite: Prerequisite | None = None
    sibling: str | None = None  # the own file it needs and that does not load (its effect)
    reason: Reason | None = None
    hint: str | None = None  # the fix, where the cause changes it (another build, not a wheel)


def problem_cause(problem: LoadProblem, distribution: str, stack: Stack) -> Cause:
    """What one loader problem of a file of `distribution` costs, when the import that reaches
    the file survives its failure."""
    outside = (prerequisite_of_symbol(problem.symbol)
               if problem.kind is ProblemKind.UNDEFINED_SYMBOL and problem.symbol else None)
    if outside is not None:
        return Cause(Effect.PREREQUISITE, outside,
                     reason=DefinedByPrerequisite(problem.symbol or "", outside.name))
    if problem.kind is not ProblemKind.MISSING_LIBRARY or not problem.library:
        return Cause(Effect.DEGRADES, reason=_broken(problem))
    soname = problem.library
    holders = stack.files.get(soname, frozenset())
    if distribution in holders:
        return Cause(Effect.DEGRADES, sibling=soname, reason=OwnFileFails(soname))
    if holders:
        return Cause(Effect.DEGRADES,
                     reason=NotWhereLoaderLooks(soname, tuple(sorted(holders))))
    others = stack.other_majors(soname)
    if others:
        return Cause(Effect.DEGRADES, reason=OtherRelease(soname, tuple(others)),
                     hint=_rebuild_hint(distribution, soname, others))
    build = build_sonames().get(soname)
    if build is not None and build in stack.installed:
        return Cause(Effect.DEGRADES, reason=OtherBuild(soname, build),
                     hint=f"use the build of {distribution} made for the installed build of "
                     f"{build}, or the build of {build} that ships {soname}")
    declared = stack.declares_provider(distribution, soname)
    if declared:
        return Cause(Effect.DEGRADES, reason=DependencyShouldProvide(declared, soname))
    return Cause(Effect.PREREQUISITE, prerequisite_of(soname), reason=NothingProvides(soname))


def _rebuild_hint(distribution: str, soname: str, others: Sequence[str]) -> str:
    """The fix of a library the stack has in another release: a build of the package for the
    stack's release (never the other release's wheel, which would mix two in one process)."""
    from abifit.host.cudastack import cuda_major_of_soname

    major = cuda_major_of_soname(soname)
    stack_majors = sorted({m for m in map(cuda_major_of_soname, others) if m is not None})
    if major is not None and stack_majors:
        cuda = "/".join(map(str, stack_majors))
        return (f"use a CUDA {cuda} build of {distribution} (for wheels, a "
                f"+cu{stack_majors[-1]}0-style local version), or a CUDA {major} build of "
                "the whole stack")
    return (f"use a build of {distribution} made for the stack's {', '.join(others)}, or the "
            f"release of the stack that ships {soname}")


def _broken(problem: LoadProblem) -> Reason:
    if problem.kind is ProblemKind.UNDEFINED_SYMBOL:
        return NotDefinedInForm(problem.symbol)
    if problem.kind is ProblemKind.MISSING_VERSION:
        return HostLacksVersion(problem.version, problem.library)
    if problem.kind is ProblemKind.NUMPY_C_API:
        return NumpyMismatch(problem.version, problem.library)
    return CannotBeLoaded()


# --- variant sets -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VariantRule:
    """A set of files one of which a package picks at run time (`data/import_rules.json`):
    the glob of the set (relative to site-packages), and where the pick can be read, the file
    picked for a CUDA release (`{cuda}`: `124` for 12.4) on a machine with a GPU, and the one
    picked otherwise or when that file is not in the set."""

    files: str
    pick: str | None = None
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class Member:
    """A file of a variant set as the rule sees it: its path relative to site-packages, its
    distribution, whether it loads, and whether a failure of it fails an import."""

    rel: str
    distribution: str
    loads: bool
    counts: bool


_DIGITS = re.compile(r"\d+")


def variant_sets(members: Sequence[Member],
                 rules: Mapping[str, Sequence[VariantRule]]) -> list[list[Member]]:
    """The sets of variants among `members`: those a rule names (by distribution), and, by
    their names, files of one distribution whose paths differ only in numbers
    (`libtorchcodec_core4.so` ... `core9.so`, `cu12/x.so` and `cu13/x.so`), none of whose
    failures fails an import."""
    sets: list[list[Member]] = []
    ruled: set[str] = set()
    for member in members:
        for rule in rules.get(member.distribution, ()):
            if member.rel not in ruled and _matches(member.rel, rule.files):
                group = [m for m in members if m.distribution == member.distribution
                         and _matches(m.rel, rule.files)]
                ruled.update(m.rel for m in group)
                sets.append(group)
    by_shape: dict[tuple[str, str], list[Member]] = {}
    for member in members:
        if member.rel not in ruled:
            by_shape.setdefault((member.distribution, _DIGITS.sub("#", member.rel)),
                                []).append(member)
    sets += [group for group in by_shape.values()
             if len(group) > 1 and not any(m.counts and not m.loads for m in group)]
    return sets


def _matches(rel: str, glob: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(rel, glob)


def picked(group: Sequence[Member], rule: VariantRule | None, cuda: str | None,
           gpu: bool, versions: Mapping[str, str] | None = None) -> Member | None:
    """The member a rule's pick reads for the target, else None: then any member that loads
    will do. A pick is a glob; `{cuda}` in it is the stack's CUDA release (`124`), read only
    for a machine with a GPU, and `{major:NAME}` the major version of the installed
    distribution NAME (cuda-core picks `cu12` or `cu13` by cuda-bindings' major, GPU or not)."""
    if rule is None or rule.pick is None:
        return None
    pick = _with_majors(rule.pick, versions or {})
    if pick is not None and ("{cuda}" not in pick or (gpu and cuda is not None)):
        pattern = pick.replace("{cuda}", cuda or "")
        chosen = next((m for m in group if _matches(m.rel, pattern)), None)
        if chosen is not None:
            return chosen
    return next((m for m in group if m.rel == rule.fallback), None)


_MAJOR = re.compile(r"\{major:([A-Za-z0-9_.-]+)\}")


def _with_majors(pick: str, versions: Mapping[str, str]) -> str | None:
    """`pick` with each `{major:NAME}` replaced; None when NAME is not installed."""
    missing = False

    def major(match: re.Match[str]) -> str:
        nonlocal missing
        version = versions.get(match.group(1), "")
        missing = missing or not version
        return version.split(".")[0]

    out = _MAJOR.sub(major, pick)
    return None if missing else out


def unused(group: Sequence[Member], chosen: Member | None) -> set[str]:
    """The members of a set whose failure costs nothing: all but the chosen one when a pick
    was read, else all that fail when another member loads."""
    if chosen is not None:
        return {m.rel for m in group if m is not chosen and not m.loads}
    if any(m.loads for m in group):
        return {m.rel for m in group if not m.loads}
    return set()


def stack_cuda(versions: Mapping[str, str]) -> str | None:
    """The CUDA release the stack's torch was built for, as bitsandbytes spells it (`124` for
    12.4): from torch's local version (`+cu124`), else from the CUDA runtime wheel
    (`nvidia-cuda-runtime-cu12 12.4.127`, `nvidia-cuda-runtime 13.0.96`)."""
    local = versions.get("torch", "").partition("+")[2]
    if local.startswith("cu") and local[2:].isdigit():
        return local[2:]
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"):
        parts = versions.get(name, "").split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return parts[0] + parts[1]
    return None


def rel_path(path: str, root: str) -> str:
    """A path relative to the site directory `root` (the path itself outside it)."""
    return posixpath.relpath(path, root) if path.startswith(root.rstrip("/") + "/") else path
