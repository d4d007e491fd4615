"""`abifit resolve`: the newest set of wheels whose metadata agrees *and* whose binaries load
together.

The search is resolvelib's (the backtracking engine inside pip) over a `Provider` of wheels on
the index. Its constraints are the metadata (Requires-Dist with markers and extras, Requires-
Python and tags through the `Target`) and the loader, expressed as requirements so that
resolvelib backtracks on them like on any other:

- `Need`: a metadata requirement (a root, a `--with`, a Requires-Dist entry).
- `Fits(P, X)`: "the release of P must load next to X". Every pinned native candidate X adds
  one for each other native project the resolution has named; a candidate p of P satisfies it
  when the pairwise verdict of (X, p) holds in both directions (`commands.pairs`). A project
  that only `Fits` requirements name is not needed: its only match is `Absent`, which
  satisfies them and is dropped from the result.

`find_matches` returns candidates newest first, filtered lazily: the cheap filters (version,
`--cuda`, the driver, `--gpu`) first, then the pairwise verdicts, a few candidates ahead read in
parallel (as many as the cores that check them: this machine's, or with `--ray` a Ray
cluster's CPUs, each pair direction a task there). A rejected candidate is remembered with its
reason (a `Rejection`), in the words `check` uses; resolvelib's reporter adds the metadata
conflicts. When no set exists, `ResolutionImpossible`'s causes and the rejections become the
derivation of the conflict.

The chosen set is then checked whole, as `abifit check` checks wheels: the pairwise verdicts
are an approximation and never the last word. A failing package's release is excluded and the
resolution runs again (at most `MAX_ROUNDS` times).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from resolvelib import BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver
from resolvelib.providers import AbstractProvider
from resolvelib.structs import RequirementInformation

from abifit.engines.check import check, requires_dist, target_markers
from abifit.engines.pairwise import Elsewhere, PairJudge, PairVerdict, describe, is_native
from abifit.errors import AbifitError, UsageError
from abifit.formats.pins import Pin as FilePin  # fields' types: their hints must evaluate
from abifit.formats.pins import holds
from abifit.remote.packageindex import (
    IndexFile,  # a field's type: its hint must evaluate (datacodec)
)
from abifit.sim.findings import Finding
from abifit.sim.process import ModuleStatus
from abifit.version import __version__
from abifit.workers import usable_cores

if TYPE_CHECKING:
    from resolvelib.resolvers import Criterion

    from abifit.host.profile import HostProfile
    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gputarget import GpuTarget

Progress = Callable[[str], None]

MAX_ROUNDS = 8  # resolutions after a whole-set check fails
RESOLVER_ROUNDS = 5000
SHOWN_NEWER = 64  # newer releases listed with their reasons, per package
_LOCAL_CUDA = re.compile(r"cu(\d{2,3})")
_NAME_CUDA = re.compile(r".+-cu(\d+)")


# --- the values resolvelib works with ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """One release of a project as one wheel that fits the target; with `extras`, the same
    wheel standing for `name[extras]`."""

    name: str  # canonical
    version: Version
    file: IndexFile = field(compare=False)
    extras: frozenset[str] = frozenset()

    @property
    def identifier(self) -> str:
        return identifier(self.name, self.extras)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True, slots=True)
class Absent:
    """A project no metadata requires: only binary constraints name it."""

    name: str

    @property
    def identifier(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Need:
    """A metadata requirement: a root (`parent` None), a --with, or a Requires-Dist entry."""

    requirement: Requirement = field(compare=False)
    text: str  # the requirement as written (what compares and hashes)

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def identifier(self) -> str:
        return identifier(self.name, frozenset(self.requirement.extras))


@dataclass(frozen=True, slots=True)
class Fits:
    """A binary constraint: the release of `name` must load next to `partner`."""

    name: str
    partner: Candidate

    @property
    def identifier(self) -> str:
        return self.name


Req = Need | Fits
Pinned = Candidate | Absent


def identifier(name: str, extras: frozenset[str]) -> str:
    return f"{name}[{','.join(sorted(extras))}]" if extras else name


# --- what the report holds ----------------------------------------------------------------------


class Why(str, Enum):
    """Why a release was not chosen."""

    BINARY = "binary"  # its binaries do not load next to another package's
    METADATA = "metadata"  # its requirements conflict
    CUDA = "cuda"  # its CUDA major is not the one --cuda asks for
    DRIVER = "driver"  # its CUDA runtime needs a newer driver than the host's
    GPU = "gpu"  # no kernel image for --gpu
    SET = "set"  # the whole-set check of a chosen set failed with it
    ERROR = "error"  # it could not be read

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Rejection:
    """A release tried and not chosen, and why, in one line."""

    name: str
    version: str
    why: Why
    reason: str
    against: str | None = None  # "name version" of the package it conflicts with


@dataclass(frozen=True, slots=True)
class Pin:
    """A release of the chosen set."""

    name: str
    version: str
    filename: str
    url: str
    sha256: str | None
    role: str  # "requirement", "with", "dependency"
    native: bool
    cuda: str | None  # "12", "13" or "12.8" when the wheel is built for a CUDA release
    newer: tuple[Rejection, ...] = ()  # the newer releases, each with why it was not chosen
    newer_unlisted: int = 0  # newer releases beyond those listed


@dataclass(frozen=True, slots=True)
class Conflict:
    """Why no set exists: a derivation, its facts in order, ending in the conclusion."""

    facts: tuple[str, ...]
    packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetCheck:
    """The whole-set check of the chosen set: `abifit check` of its native wheels."""

    verdict: str  # check's verdict: fits, fits-but-host-lacks-driver, degraded, fails
    modules: int
    failing: int
    problems: tuple[str, ...] = ()
    statuses: tuple[ModuleStatus, ...] = ()  # the modules checked, and their findings
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class ResolveStats:
    pairs_checked: int  # pair directions simulated in this run
    pairs_cached: int  # pair directions whose verdict the cache held
    pairs_unchecked: int  # pair directions that cannot bind (nothing to simulate)
    naive_pairs: int  # pairs a product of the extension packages' releases would check
    candidates_tried: int  # releases whose binaries or metadata were looked at
    resolutions: int  # resolutions run (more than one when a whole-set check failed)


@dataclass(frozen=True, slots=True)
class ResolveReport:
    """Everything `abifit resolve` found: the pinned set (empty with a conflict), each
    package's newer releases and why they were not chosen, or the conflict."""

    target: str
    requirements: tuple[str, ...]
    withs: tuple[str, ...]
    pins: tuple[Pin, ...]
    conflict: Conflict | None
    set_check: SetCheck | None
    stats: ResolveStats
    notes: tuple[str, ...] = ()
    cuda: int | None = None
    driver: str | None = None  # the host's NVIDIA driver
    driver_cuda: str | None = None  # the newest CUDA that driver supports
    gpu: str | None = None
    index_urls: tuple[str, ...] = ()  # where the pinned wheels come from (for a lock file)
    abifit_version: str = __version__  # the abifit that resolved it (its page and lock say)
    file_pins: tuple[FilePin, ...] = ()  # the pins of the `-r` files, with where each is written

    @property
    def found(self) -> bool:
        return self.conflict is None

    @property
    def rejections(self) -> tuple[Rejection, ...]:
        return tuple(r for p in self.pins for r in p.newer)


# --- CUDA labels --------------------------------------------------------------------------------


def cuda_of(name: str, version: Version) -> str | None:
    """The CUDA release a wheel is built for, when its name or version says it: a local label
    (`+cu128` -> "12.8", `+cu130` -> "13.0"), a `-cu12` family (`nvidia-cublas-cu12` -> "12"),
    or a toolkit wheel of `data/library_wheels.json` (`nvidia-cuda-runtime` 13.x -> "13")."""
    local = _LOCAL_CUDA.fullmatch(version.local or "")
    if local is not None:
        digits = local.group(1)
        return f"{digits[:-1]}.{digits[-1]}"
    suffix = _NAME_CUDA.fullmatch(name)
    if suffix is not None and name.startswith("nvidia-"):
        return suffix.group(1)
    for rule_name, spec, major in _toolkit_wheels():
        if rule_name == name and spec.contains(version, prereleases=True):
            return str(major)
    return None


@functools.cache
def _toolkit_wheels() -> list[tuple[str, SpecifierSet, int]]:
    from abifit.remote.wheelfiles import load_library_table

    out: list[tuple[str, SpecifierSet, int]] = []
    for rule in load_library_table().rules:
        for wheel in rule.wheels:
            if wheel.cuda is None or "{" in wheel.requirement:
                continue
            req = Requirement(wheel.requirement)
            out.append((canonicalize_name(req.name), req.specifier, wheel.cuda))
    return out


def cuda_major(cuda: str | None) -> int | None:
    return int(cuda.split(".")[0]) if cuda else None


# --- the provider -------------------------------------------------------------------------------


class Provider(AbstractProvider[Req, Pinned, str]):
    """Wheels on the index as resolvelib's candidates, with the binary constraints."""

    def __init__(self, ctx: RemoteContext, judge: PairJudge, progress: Progress, *,
                 cuda: int | None = None, driver_cuda: str | None = None,
                 driver: str | None = None, gpu: GpuTarget | None = None,
                 jobs: int = 4, cores: int | None = None) -> None:
        self.ctx = ctx
        self.judge = judge
        self.progress = progress
        self.cuda = cuda
        self.driver_cuda = driver_cuda  # the newest CUDA the host's driver supports
        self.driver = driver
        self.gpu = gpu
        self.jobs = max(1, jobs)
        # how far a search reads ahead after rejections: checks are mostly CPU, so no more
        # than the cores (but 2, for the reads) beyond the one the resolution needs; `cores`:
        # those that check the pairs (a cluster's CPUs), else this machine's
        self.ahead = min(self.jobs, max(2, usable_cores() if cores is None else cores))
        self.markers = target_markers(ctx.target)
        self.roots: set[str] = set()  # names the user asked for
        self.native: set[str] = set()  # names with a native wheel among their candidates
        self.seen: set[str] = set()  # names some requirement has named
        self.excluded: dict[Candidate, Rejection] = {}  # releases a whole-set check failed
        # the requirements on each project: (the label of the release requiring it, or None
        # for the user's, the requirement)
        self.required: dict[str, list[tuple[str | None, Need]]] = {}
        self.rejections: dict[tuple[str, str], list[Rejection]] = {}
        self.tried: set[tuple[str, str]] = set()
        self.notes: list[str] = []
        # requirements the whole-set check learned ("numpy<2"), with who needs them
        self.learned: dict[str, str] = {}
        self._listings: dict[str, list[Candidate]] = {}
        self._unary: dict[Candidate, Rejection | None] = {}
        self._metadata: dict[Candidate, tuple[Requirement, ...]] = {}

    # resolvelib's interface

    def identify(self, requirement_or_candidate: Req | Pinned) -> str:
        return requirement_or_candidate.identifier

    def get_preference(self, identifier: str, resolutions: Mapping[str, Pinned],
                       candidates: Mapping[str, Iterator[Pinned]],
                       information: Mapping[str, Iterator[RequirementInformation[Req, Pinned]]],
                       backtrack_causes: Sequence[RequirementInformation[Req, Pinned]],
                       ) -> tuple[bool, bool, bool, bool, str]:
        """Pinned exactly first (one candidate, no search), then what caused the last
        backtrack, then native projects (their binary constraints bite early), then the
        user's requirements; the candidates are never counted (that would read binaries)."""
        infos = list(information[identifier])
        exact = any(isinstance(i.requirement, Need) and _is_exact(i.requirement.requirement)
                    for i in infos)
        causes = {self.identify(c.requirement) for c in backtrack_causes}
        name = identifier.split("[")[0]
        return (not exact, identifier not in causes, name not in self.native,
                name not in self.roots, identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Req]],
                     incompatibilities: Mapping[str, Iterator[Pinned]],
                     ) -> Callable[[], Iterator[Pinned]] | list[Pinned]:
        reqs = list(requirements[identifier])
        needs = [r for r in reqs if isinstance(r, Need)]
        if not needs:
            return [Absent(identifier)]
        name = needs[0].name
        extras = frozenset(needs[0].requirement.extras)
        bad = set(incompatibilities[identifier])
        partners = [r.partner for r in reqs if isinstance(r, Fits)]
        pre = self.ctx.prereleases or any(n.requirement.specifier.prereleases for n in needs)
        cheap = [c for c in self.listing(name)
                 if (pre or not c.version.is_prerelease)
                 and all(n.requirement.specifier.contains(c.version, prereleases=True)
                         for n in needs)
                 and c not in bad and Candidate(name, c.version, c.file, extras) not in bad]

        def matches() -> Iterator[Pinned]:
            for c in self._loadable(cheap, partners):
                yield Candidate(name, c.version, c.file, extras) if extras else c

        return matches

    def is_satisfied_by(self, requirement: Req, candidate: Pinned) -> bool:
        if isinstance(requirement, Fits):
            if isinstance(candidate, Absent):
                return True
            return not self._pair_failures(requirement.partner, candidate)
        if isinstance(candidate, Absent):
            return False
        return requirement.requirement.specifier.contains(candidate.version, prereleases=True)

    def get_dependencies(self, candidate: Pinned) -> list[Req]:
        if isinstance(candidate, Absent):
            return []
        self.tried.add((candidate.name, str(candidate.version)))
        out: list[Req] = []
        if candidate.extras:  # name[extra] is its base release plus the extra's requirements
            base = Requirement(f"{candidate.name}=={candidate.version}")
            out.append(Need(base, str(base)))
        for req in self.requirements_of(candidate):
            if holds(req.marker, self.markers, candidate.extras):
                need = Need(req, _text(req))
                self.seen.add(need.name)
                self._require(candidate.label, need)
                out.append(need)
        if not candidate.extras and is_native(candidate.file):
            out += [Fits(n, candidate) for n in sorted(self.native & self.seen - {candidate.name})]
        return out

    def _require(self, parent: str | None, need: Need) -> None:
        listed = self.required.setdefault(need.name, [])
        if (parent, need) not in listed:
            listed.append((parent, need))

    def held(self, partner: Candidate) -> list[str]:
        """What held the partner's project to releases like `partner`: the requirements on it
        that exclude some of its releases ("you asked for hostpkg>=2")."""
        listed = self.listing(partner.name)
        out = []
        for parent, need in self.required.get(partner.name, []):
            spec = need.requirement.specifier
            if any(not spec.contains(c.version, prereleases=True) for c in listed):
                out.append(_asked(need.text, self.learned) if parent is None
                           else f"{parent} requires {need.text}")
        return out

    # the index

    def listing(self, name: str) -> list[Candidate]:
        """One wheel per release that fits the target (the best by its tags), newest first."""
        found = self._listings.get(name)
        if found is not None:
            return found
        from abifit.remote.packageindex import select

        self.progress(f"releases of {name}")
        files = self.ctx.index.project_files(name)
        by_version: dict[Version, Candidate] = {}
        for c in select(files, Requirement(name), self.ctx.target, prereleases=True):
            by_version.setdefault(c.version, Candidate(name, c.version, c.file))
        found = list(by_version.values())
        if any(is_native(c.file) for c in found):
            self.native.add(name)
        self._listings[name] = found
        return found

    def requirements_of(self, candidate: Candidate) -> tuple[Requirement, ...]:
        base = Candidate(candidate.name, candidate.version, candidate.file)
        known = self._metadata.get(base)
        if known is not None:
            return known
        from abifit.remote.wheels import shared_wheel

        self.progress(f"metadata of {candidate.file.filename}")
        parsed = []
        for text in requires_dist(shared_wheel(candidate.file, self.ctx).metadata()):
            try:
                parsed.append(Requirement(text))
            except InvalidRequirement:
                self.notes.append(f"{candidate.label}: ignored an invalid requirement {text!r}")
        self._metadata[base] = tuple(parsed)
        return self._metadata[base]

    # the filters

    def reject(self, rejection: Rejection) -> None:
        listed = self.rejections.setdefault((rejection.name, rejection.version), [])
        if rejection not in listed:
            listed.append(rejection)

    def _loadable(self, candidates: list[Candidate], partners: list[Candidate]
                  ) -> Iterator[Candidate]:
        """The candidates that pass the cheap filters and load next to every partner, in
        order; after a rejection the pair verdicts of the next few are computed ahead, in
        parallel (1, then 2, 4, ... up to `self.ahead`, as rejections follow one another)."""
        passing = (c for c in candidates if self.unary(c) is None
                   and not any(self._forbids(p, c) for p in partners))
        if not partners:
            yield from passing
            return
        window: list[tuple[Candidate, list[Future[PairVerdict]]]] = []
        stream = (c for c in passing if not self._known_out(c, partners))
        ahead = 1  # doubles with each rejection, up to `self.ahead`: little read beyond one
        while True:
            while len(window) < ahead:
                nxt = next(stream, None)
                if nxt is None:
                    break
                window.append((nxt, [f for p in partners
                                     for f in (self.judge.submit(p.file, nxt.file),
                                               self.judge.submit(nxt.file, p.file))]))
            if not window:
                return
            candidate, _futures = window.pop(0)
            self.tried.add((candidate.name, str(candidate.version)))
            if all(not self._pair_failures(p, candidate) for p in partners):
                ahead = 1
                yield candidate
            else:
                ahead = min(self.ahead, ahead * 2)

    def _known_out(self, candidate: Candidate, partners: list[Candidate]) -> bool:
        """Whether the verdicts already computed reject the candidate: the first partner, in
        order, whose pair is not known to fit is known not to (the one a check would name).
        Such a candidate is passed over with nothing asked of the other partners, and it does
        not count as a rejection that widens the window (a later search over the same
        releases, after a new requirement, would otherwise read ahead past the one that
        fits)."""
        for partner in partners:
            known = self.judge.known(partner.file, candidate.file)
            if known is None:
                return False
            if known:
                self.tried.add((candidate.name, str(candidate.version)))
                self._pair_failures(partner, candidate)
                return True
        return False

    def _forbids(self, partner: Candidate, candidate: Candidate) -> bool:
        """Whether the metadata of either release forbids the other (`torchvision 0.24.1
        requires torch==2.9.1`): a pair that no binary check needs. Recorded as a rejection
        of the candidate."""
        for a, b in ((candidate, partner), (partner, candidate)):
            for req in self.requirements_of(a):
                if (canonicalize_name(req.name) == b.name
                        and holds(req.marker, self.markers, a.extras)
                        and not req.specifier.contains(b.version, prereleases=True)):
                    self.reject(Rejection(candidate.name, str(candidate.version), Why.METADATA,
                                          f"{a.label} requires {_text(req)}", partner.label))
                    return True
        return False

    def _pair_failures(self, partner: Candidate, candidate: Candidate) -> tuple[PairVerdict, ...]:
        """The failing directions of (partner, candidate), each recorded as a rejection of
        the candidate."""
        failing = self.judge.fits(partner.file, candidate.file)
        for verdict in failing:  # a pair that does not fit rejects either side
            why = Why.ERROR if verdict.error else Why.BINARY
            self.reject(Rejection(candidate.name, str(candidate.version), why,
                                  describe(verdict), partner.label))
            self.reject(Rejection(partner.name, str(partner.version), why, describe(verdict),
                                  candidate.label))
        return failing

    def unary(self, candidate: Candidate) -> Rejection | None:
        """Why the candidate is out on its own (--cuda, the driver, --gpu, a failed set)."""
        if candidate in self.excluded:
            return self.excluded[candidate]
        if candidate in self._unary:
            return self._unary[candidate]
        found = self._why_out(candidate)
        self._unary[candidate] = found
        if found is not None:
            self.reject(found)
        return found

    def _why_out(self, candidate: Candidate) -> Rejection | None:
        cuda = cuda_of(candidate.name, candidate.version)
        major = cuda_major(cuda)
        version = str(candidate.version)
        if self.cuda is not None and major is not None and major != self.cuda:
            return Rejection(candidate.name, version, Why.CUDA,
                             f"{candidate.label} is built for CUDA {cuda}, not CUDA {self.cuda} "
                             "(--cuda)")
        supported = cuda_major(self.driver_cuda)
        if supported is not None and major is not None and major > supported:
            return Rejection(candidate.name, version, Why.DRIVER,
                             f"{candidate.label} is built for CUDA {cuda}; the host's driver "
                             f"{self.driver} supports CUDA up to {self.driver_cuda}")
        if self.gpu is not None and is_native(candidate.file):
            return self._gpu_verdict(candidate)
        return None

    def _gpu_verdict(self, candidate: Candidate) -> Rejection | None:
        assert self.gpu is not None
        if not self.judge.shape(candidate.file).modules:
            return None
        from abifit.engines.check import Gatherer, Role, target_gpu_codes
        from abifit.sim.gpu import check_gpu_code

        self.progress(f"GPU code of {candidate.file.filename}")
        try:
            wheel = Gatherer(self.ctx, self.progress).open(candidate.file, Role.TARGET)
            verdict = check_gpu_code(target_gpu_codes([wheel] if wheel else [], self.progress),
                                     self.gpu)
        except AbifitError as e:
            return Rejection(candidate.name, str(candidate.version), Why.ERROR,
                             f"{candidate.label}: its GPU code could not be read: "
                             f"{str(e).splitlines()[0]}")
        failing = [f for f in verdict.findings if f.breaks]
        if not failing:
            return None
        return Rejection(candidate.name, str(candidate.version), Why.GPU,
                         f"{candidate.label} has no kernel image for {self.gpu.arch}: "
                         f"{failing[0].message}")


def _text(requirement: Requirement) -> str:
    """A requirement as reasons quote it: without its marker (it applies, or it would not be
    quoted)."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}{requirement.specifier}"


def _is_exact(requirement: Requirement) -> bool:
    return any(s.operator in ("==", "===") and "*" not in s.version
               for s in requirement.specifier)


# --- the reporter: metadata conflicts as rejections ----------------------------------------------


class Recorder(BaseReporter[Req, Pinned, str]):
    """Records, for each candidate resolvelib rejects, the requirement that conflicted."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def rejecting_candidate(self, criterion: Criterion[Req, Pinned], candidate: Pinned) -> None:
        if isinstance(candidate, Absent):
            return
        infos = list(criterion.information)
        own = [i.requirement for i in infos if i.parent == candidate]
        if not own:
            return
        requirement = own[0]
        if isinstance(requirement, Fits):
            partner_rejections = [r for (n, _v), listed in self.provider.rejections.items()
                                  if n == requirement.name for r in listed
                                  if r.against == candidate.label]
            binary = any(r.why is Why.BINARY for r in partner_rejections) or \
                not partner_rejections
            why = Why.BINARY if binary else Why.METADATA
            reason = (f"{candidate.label} loads with no release of {requirement.name} the "
                      f"other requirements allow: "
                      f"{_binary_summary(self.provider, requirement)}")
            against: str | None = requirement.name  # ranks it first among metadata reasons
        else:
            others = [i for i in infos if i.parent != candidate]
            learned = self.provider.learned
            why, reason = Why.METADATA, (f"{candidate.label} requires {requirement.text}"
                                         + (f", but {_joined(_said(i, learned) for i in others)}"
                                            if others else
                                            f": {_no_release(self.provider, requirement)}"))
            against = None
        self.provider.reject(Rejection(candidate.name, str(candidate.version), why, reason,
                                       against))


def _asked(text: str, learned: Mapping[str, str]) -> str:
    """A root requirement said: one the user gave, or one the set check learned."""
    return f"{learned[text]} needs {text}" if text in learned else f"you asked for {text}"


def _said(info: RequirementInformation[Req, Pinned], learned: Mapping[str, str]) -> str:
    req = info.requirement
    text = req.text if isinstance(req, Need) else f"loads next to {req.partner.label}"
    if info.parent is None:
        return _asked(text, learned)
    parent = info.parent.label if isinstance(info.parent, Candidate) else info.parent.name
    return f"{parent} requires {text}" if isinstance(req, Need) else f"it must load next to " \
        f"{req.partner.label}"


def _joined(items: Iterable[str]) -> str:
    listed = list(dict.fromkeys(items))
    return listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]


def _releases(versions: Iterable[str]) -> str:
    listed = list(versions)
    shown = listed[:4] + ([f"{len(listed) - 4} more"] if len(listed) > 4 else [])
    return _joined(shown)


def _binary_summary(provider: Provider, requirement: Fits) -> str:
    """Why the project's releases do not load next to the partner, the releases with one
    reason grouped."""
    return "; ".join(_binary_reasons(provider, requirement.name, requirement.partner)) or \
        f"none of its releases loads next to {requirement.partner.label}"


def _binary_reasons(provider: Provider, name: str, partner: Candidate,
                    shown: int = 3) -> list[str]:
    """The pair rejections of `name`'s releases against `partner` (their binaries, else
    their metadata), one line per reason, the releases it holds for listed in it ("which
    hostpkg 2.0 and 2.1 do not define"); `shown` lines at most."""
    found = [(version, r) for (n, version), listed in provider.rejections.items()
             if n == name for r in listed if r.against == partner.label]
    binary = [(v, r.reason) for v, r in found if r.why is Why.BINARY]
    lines = _grouped(name, binary or [(v, r.reason) for v, r in found])
    if len(lines) > shown:
        lines = [*lines[:shown - 1], f"{lines[shown - 1]} and {len(lines) - shown + 1} more"]
    return lines


def _grouped(name: str, items: Iterable[tuple[str, str]]) -> list[str]:
    """Reasons that differ only by the release of `name` they are about, as one line each."""
    groups: dict[str, list[str]] = {}
    for version, reason in items:
        groups.setdefault(reason.replace(f"{name} {version}", "\0"), []).append(version)
    out = []
    for reason, versions in groups.items():
        text = reason.replace("\0", f"{name} {_releases(versions)}")
        if len(versions) > 1:
            text = text.replace(" does not ", " do not ")
        out.append(text)
    return out


def _no_release(provider: Provider, need: Need) -> str:
    """Why no release of a requirement is left: the reasons its releases were rejected, or
    what the index offers."""
    name = need.name
    matching = [c for c in provider._listings.get(name, [])
                if need.requirement.specifier.contains(c.version, prereleases=True)]
    items = [(str(c.version), _preferred(listed).reason) for c in matching
             if (listed := provider.rejections.get((name, str(c.version))))]
    if items:
        return "; ".join(_grouped(name, items))
    if not matching:
        return _no_wheel(provider, need)
    return f"no release of {need.text} fits"


def _no_wheel(provider: Provider, need: Need) -> str:
    from abifit.remote.packageindex import no_matching_wheel

    try:
        files = provider.ctx.index.project_files(need.name)
    except AbifitError as e:
        return str(e).splitlines()[0]
    error = no_matching_wheel(files, need.requirement, provider.ctx.target,
                              prereleases=provider.ctx.prereleases)
    return str(error).splitlines()[0]


# --- resolving ---------------------------------------------------------------------------------


def parse_requirement(text: str, option: str = "") -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as e:
        reason = str(e).splitlines()[0] if str(e) else "not a requirement"
        raise UsageError(f"{option}invalid requirement {text!r}: {reason}") from e


def resolve(requirements: Sequence[str], withs: Sequence[str], ctx: RemoteContext,
            host: HostProfile, progress: Progress, *, cuda: int | None = None,
            gpu: GpuTarget | None = None, executable: str | None = None,
            jobs: int = 4, elsewhere: Elsewhere | None = None) -> ResolveReport:
    """The newest set of wheels that the metadata allows and whose binaries load together.
    `elsewhere`: the pair directions are judged there (a Ray cluster), as many at once as
    it has CPUs (or `jobs`, if more), and the search reads ahead as far as those CPUs."""
    if not requirements and not withs:
        raise UsageError("nothing to resolve: name a requirement")
    roots = [Need(r, text) for text in requirements
             for r in [parse_requirement(text)]]
    roots += [Need(r, text) for text in withs for r in [parse_requirement(text, "--with ")]]
    driver, driver_cuda = host_driver(host)
    cores = None
    if elsewhere is not None:
        cores = elsewhere.cpus
        jobs = max(jobs, cores)
    judge = PairJudge(ctx, host, progress, executable, jobs,
                      elsewhere.judge if elsewhere is not None else None)
    provider = Provider(ctx, judge, progress, cuda=cuda, driver_cuda=driver_cuda,
                        driver=driver, gpu=gpu, jobs=jobs, cores=cores)
    try:
        return _resolve(roots, requirements, withs, provider, ctx, host, progress, executable,
                        driver, driver_cuda)
    finally:
        judge.close()


def _resolve(roots: list[Need], requirements: Sequence[str], withs: Sequence[str],
             provider: Provider, ctx: RemoteContext, host: HostProfile, progress: Progress,
             executable: str | None, driver: str | None,
             driver_cuda: str | None) -> ResolveReport:
    from abifit.remote.packageindex import select_one

    for need in roots:
        provider._require(None, need)
        provider.roots.add(need.name)
        provider.seen.add(need.name)
        select_one(ctx.index.project_files(need.name), need.requirement, ctx.target,
                   prereleases=True)  # a root no wheel fits is an error, said as check says it
    pins: tuple[Pin, ...] = ()
    conflict = None
    set_check = None
    rounds = 0
    mapping: dict[str, Pinned] = {}
    criteria: Mapping[str, Criterion[Req, Pinned]] = {}
    while rounds < MAX_ROUNDS:
        rounds += 1
        try:
            result = Resolver(provider, Recorder(provider)).resolve(
                roots, max_rounds=RESOLVER_ROUNDS)
        except ResolutionImpossible as e:
            conflict = derive_conflict(provider, list(e.causes))
            break
        except ResolutionTooDeep as e:
            raise AbifitError(f"the resolution took more than {e.round_count} rounds") from e
        mapping, criteria = dict(result.mapping), result.criteria
        chosen = [c for c in mapping.values() if isinstance(c, Candidate) and not c.extras]
        set_check, failed, learned = check_set(chosen, provider, ctx, host, progress,
                                               executable)
        new = [(text, who) for text, who in learned if text not in {n.text for n in roots}]
        if new:  # the set breaks NumPy's contract: resolve again with what it needs
            for text, who in new:
                need = Need(parse_requirement(text), text)
                roots.append(need)
                provider._require(None, need)
                provider.learned[text] = f"the NumPy C API of {who}"
            continue
        if not failed:
            break
        libraries = [c for c in chosen if is_native(c.file)
                     and not provider.judge.shape(c.file).modules]
        failed = culprits(failed, libraries, roots,
                          lambda c, lib: provider.judge.links(c.file, lib.file))
        for candidate, reason in failed.items():
            rejection = Rejection(candidate.name, str(candidate.version), Why.SET, reason)
            provider.excluded[candidate] = rejection
            provider.reject(rejection)
        if rounds == MAX_ROUNDS:
            conflict = Conflict((f"the chosen set fails its whole-set check: "
                                 f"{_joined(r for r in failed.values())}",),
                                tuple(sorted(c.name for c in failed)))
    if conflict is None:
        pins = _pins(mapping, criteria, provider, requirements, withs)
    else:
        set_check = None
    judge = provider.judge
    judge.close()  # the verdicts computed ahead count, and are in the cache
    stats = ResolveStats(judge.checked, judge.cached, judge.unchecked,
                         _naive(provider, roots), len(provider.tried), rounds)
    notes = list(provider.notes)
    if driver is None and provider.driver_cuda is None:
        notes.append("no NVIDIA driver known for the host: CUDA builds were not checked against "
                     "one (give --assume-driver VERSION)")
    return ResolveReport(str(ctx.target), tuple(requirements), tuple(withs), pins, conflict,
                         set_check, stats, tuple(notes), provider.cuda, driver, driver_cuda,
                         provider.gpu.arch if provider.gpu else None,
                         tuple(ctx.index.config.index_urls))


def culprits(failed: Mapping[Candidate, str], libraries: Sequence[Candidate],
             roots: Sequence[Need],
             links: Callable[[Candidate, Candidate], bool] = lambda _c, _lib: False,
             ) -> dict[Candidate, str]:
    """The releases to exclude after a whole-set check failed. A library-only release of the
    set (no pair verdict covers those: their symbols are judged here first) that the failing
    release links (`links`: it needs a library the release ships) and that no root pins
    exactly goes first, so that an older library is tried next to the newest release that
    needs it; else the failing release, unless a root pins it exactly (`==`); then every
    library-only release no root pins exactly."""
    exact = {need.name for need in roots
             if any(s.operator in ("==", "===") and "*" not in s.version
                    for s in need.requirement.specifier)}
    out: dict[Candidate, str] = {}
    for candidate, reason in failed.items():
        blamed = [lib for lib in libraries if lib.name not in exact]
        linked = [lib for lib in blamed if links(candidate, lib)]
        if linked:
            blamed = linked
        elif candidate.name not in exact or not blamed:
            out.setdefault(candidate, reason)
            continue
        for lib in blamed:
            out.setdefault(lib, f"{reason} (next to {lib.label})")
    return out


def check_set(chosen: Sequence[Candidate], provider: Provider, ctx: RemoteContext,
              host: HostProfile, progress: Progress, executable: str | None,
              ) -> tuple[SetCheck | None, dict[Candidate, str], tuple[tuple[str, str], ...]]:
    """Check the chosen set whole: its packages with extension modules as targets, its other
    native wheels beside them. Returns the failing releases, each with its first problem, and
    the NumPy the set's modules need where they break NumPy's contract ("numpy<2")."""
    from dataclasses import replace

    from abifit.engines.pairwise import problems_of

    native = [c for c in chosen if is_native(c.file)]
    if not native:
        return None, {}, ()
    targets = [c for c in native if provider.judge.shape(c.file).modules]
    if not targets:
        return SetCheck("fits", 0, 0), {}, ()
    withs = [c for c in native if c not in targets]
    progress(f"checking the set: {', '.join(c.label for c in targets)}")
    profile = replace(host, assume_driver=host.assume_driver or "assumed")
    report = check([c.file for c in targets], [c.file for c in withs], ctx, ctx.target,
                   profile, progress, executable)
    problems = tuple(_problem_line(p) for p in problems_of(report.findings))
    verdict = SetCheck(report.verdict, len(report.modules), report.failing, problems,
                       report.modules, report.findings)
    if report.verdict not in ("fails", "degraded"):  # a degraded set is never chosen
        return verdict, {}, ()
    from abifit.sim.findings import FindingKind

    by_label = {c.name: c.label for c in targets}
    owners = {m.module: m.distribution for m in report.modules}
    needs: dict[str, str] = {}
    for f in report.findings:  # the NumPy each release's modules need, by release
        if f.kind is FindingKind.NUMPY_C_API and f.version and f.module in owners:
            owner = by_label.get(canonicalize_name(owners[f.module]), owners[f.module])
            needs.setdefault(f.version, f"{owner}'s modules")
    learned = tuple(needs.items())
    by_name = {c.name: c for c in targets}
    failed: dict[Candidate, str] = {}
    for module in report.modules:
        candidate = by_name.get(canonicalize_name(module.distribution))
        if candidate is not None and not module.loads and module.costs:
            own = problems_of(tuple(f for f in report.findings if f.module == module.module))
            why = (_problem_line(own[0]) if own and own[0].change
                   else module.error or "does not load")
            failed.setdefault(candidate, f"{candidate.label}: {module.module}: {why}")
    return verdict, failed, learned


def _problem_line(problem: object) -> str:
    from abifit.engines.pairwise import Problem

    assert isinstance(problem, Problem)
    return problem.subject + (f" ({problem.change})" if problem.change else "")


def _pins(mapping: Mapping[str, Pinned], criteria: Mapping[str, Criterion[Req, Pinned]],
          provider: Provider, requirements: Sequence[str], withs: Sequence[str],
          ) -> tuple[Pin, ...]:
    asked = {canonicalize_name(parse_requirement(t).name) for t in requirements}
    withs_names = {canonicalize_name(parse_requirement(t).name) for t in withs}
    pins = []
    for key, pinned in sorted(mapping.items()):
        if not isinstance(pinned, Candidate) or pinned.extras:
            continue
        role = ("requirement" if key in asked else "with" if key in withs_names
                else "dependency")
        newer = newer_rejections(pinned, provider, criteria.get(key))
        shown = newer[:SHOWN_NEWER]
        pins.append(Pin(pinned.name, str(pinned.version), pinned.file.filename, pinned.file.url,
                        pinned.file.sha256, role, is_native(pinned.file),
                        cuda_of(pinned.name, pinned.version), tuple(shown),
                        len(newer) - len(shown)))
    return tuple(pins)


def newer_rejections(pinned: Candidate, provider: Provider,
                     criterion: Criterion[Req, Pinned] | None) -> list[Rejection]:
    """Each newer release of the pinned project that fits the target, with why it was not
    chosen: what was recorded when it was tried, else the requirement that excludes it."""
    out: list[Rejection] = []
    infos = list(criterion.information) if criterion is not None else []
    for c in provider.listing(pinned.name):
        if c.version <= pinned.version or (c.version.is_prerelease and not
                                           provider.ctx.prereleases):
            continue
        recorded = provider.rejections.get((c.name, str(c.version)), [])
        if recorded:
            out.append(_preferred(recorded))
            continue
        excluding = [i for i in infos if isinstance(i.requirement, Need)
                     and not i.requirement.requirement.specifier.contains(c.version, True)]
        if excluding:
            out.append(Rejection(c.name, str(c.version), Why.METADATA,
                                     _said(excluding[0], provider.learned)))
    return out


def _preferred(recorded: list[Rejection]) -> Rejection:
    """The reason to show first: a binary or CUDA reason over a metadata one."""
    order = [Why.SET, Why.BINARY, Why.DRIVER, Why.CUDA, Why.GPU, Why.ERROR, Why.METADATA]
    return min(recorded, key=lambda r: (order.index(r.why), r.against is None))


def _naive(provider: Provider, roots: Sequence[Need]) -> int:
    """The pairs a product of versions would check: for each pair of projects whose binaries
    had to be checked together, the product of their releases that fit the target and the
    roots' specifiers."""
    def count(name: str) -> int:
        specs = [n.requirement.specifier for n in roots if n.name == name]
        return sum(1 for c in provider._listings.get(name, [])
                   if (provider.ctx.prereleases or not c.version.is_prerelease)
                   and all(s.contains(c.version, prereleases=True) for s in specs))

    return sum(count(a) * count(b) for a, b in (sorted(p) for p in provider.judge.projects
                                                   if len(p) == 2))


def derive_conflict(provider: Provider,
                    causes: list[RequirementInformation[Req, Pinned]]) -> Conflict:
    """The smallest conflict resolvelib found, as facts: for a binary constraint, why the
    releases do not load next to the partner and what held the partner to its release; for a
    requirement, who asked for it and, when none of its releases is left, why."""
    facts: list[str] = []
    names: list[str] = []
    unique = {(id(i.requirement), id(i.parent)): i for i in causes}.values()
    for info in unique:
        req = info.requirement
        if isinstance(req, Fits):
            facts += _binary_reasons(provider, req.name, req.partner) or [
                f"{req.partner.label} loads with no release of {req.name}"]
            facts += provider.held(req.partner)
            names += [req.name, req.partner.name]
            continue
        names.append(req.name)
        if info.parent is not None:
            names.append(info.parent.name)
        matching = [c for c in provider._listings.get(req.name, [])
                    if req.requirement.specifier.contains(c.version, prereleases=True)]
        emptied = not matching or all(provider.rejections.get((c.name, str(c.version)))
                                      for c in matching)
        if info.parent is not None or req.requirement.specifier or emptied:
            facts.append(_said(info, provider.learned))
        if emptied:
            facts.append(_no_release(provider, req))
    return Conflict(tuple(dict.fromkeys(facts)), tuple(dict.fromkeys(names)))


# --- the host's driver -----------------------------------------------------------------------


def host_driver(host: HostProfile) -> tuple[str | None, str | None]:
    """The NVIDIA driver of the host and the newest CUDA it supports: --assume-driver VERSION,
    else the libcuda.so file a saved profile holds, else this machine's loaded driver."""
    from abifit.host.cudastack import driver_version_from_libcuda, newest_cuda_for_driver

    version = host.assume_driver
    if version is not None and not re.fullmatch(r"\d+(\.\d+)*", version):
        version = None
    if version is None and host.snapshot is not None:
        version = next((v for p in host.snapshot.libraries
                        if (v := driver_version_from_libcuda(p)) is not None), None)
    if version is None and host.snapshot is None and host.preset is None and \
            host.assume_driver is None:
        version = _loaded_driver()
    if version is None:
        return None, None
    cuda = newest_cuda_for_driver(version)
    return version, str(cuda) if cuda is not None else None


def _loaded_driver() -> str | None:
    """This machine's driver version from /proc, None without one."""
    from abifit.host.cudastack import PROC_DRIVER_VERSION, parse_proc_driver_version

    try:
        with open(PROC_DRIVER_VERSION, encoding="utf-8") as f:
            return parse_proc_driver_version(f.read())[0]
    except (OSError, ValueError, AbifitError):
        return None
