"""Pairwise binary verdicts for `abifit resolve`: do one wheel's extension modules load next to
another wheel?

A pair is looked at in each direction. The direction E -> H is *checked* (one `check` of E's
wheel with H's) only when both wheels hold extension modules (by their member names: the
packages a program imports, not the library bundles such as `nvidia-*`, which come in through
their metadata) and E's binaries can bind to H's: an ELF member of E needs a library
(DT_NEEDED) that H's wheel ships. Otherwise the direction fits without a simulation (an
extension that binds to a host's symbols without naming its library is left to the whole-set
check). The check includes H's own native dependencies as their metadata selects
them, as `abifit check` does; the resolution's whole-set check has the last word.

A verdict is kept in memory for the run and in the cache (`Cache.put_result`), under a digest
of both wheels (their view keys: URL, size, sha256), the target and the host, so that a
resolution that revisits a pair, or a second resolution, pays nothing.

A direction may be judged elsewhere (`Elsewhere`: `resolve --ray`, a Ray task each): the
task reads the wheels and checks the pair as `PairJudge.judged` does here, and returns the
verdict; this process counts it and is the only writer of its cache.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from abifit.engines.check import check, target_interpreter
from abifit.errors import AbifitError
from abifit.formats.elf import ElfImage
from abifit.remote.packageindex import IndexFile  # in Elsewhere's field, checked when decoded
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.verdict import costs

if TYPE_CHECKING:
    from abifit.host.profile import HostProfile
    from abifit.remote.runcontext import RemoteContext

Progress = Callable[[str], None]
# one direction (extension, host) judged elsewhere: its verdict, an error in `error`
JudgeElsewhere = Callable[[IndexFile, IndexFile], "PairVerdict"]

PAIR_FORMAT = "resolve-pair-3"  # what a stored verdict holds; a change makes old entries misses
_MODULE = re.compile(r".+\.(cpython-[^.]+|abi3|pypy[^.]*)\.so$")


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a module does not load, in the words `check` uses: the demangled symbol, the missing
    soname, with the nearest definition's change when one is known."""

    kind: str  # a FindingKind value
    subject: str  # the symbol (demangled) or the soname or the message
    change: str | None = None  # "parameter 4: `int` → `unsigned int`"


@dataclass(frozen=True, slots=True)
class PairVerdict:
    """One direction of a pair: do `extension`'s modules load next to `host`?"""

    extension: str  # "name version" of the wheel whose modules were simulated
    host: str
    checked: bool  # False: the extension cannot bind to the host (no simulation needed)
    fits: bool
    problems: tuple[Problem, ...] = ()
    error: str | None = None  # a wheel could not be read


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """Where the directions are judged, other than in this process (a Ray cluster), and how
    many at once it can judge (its CPUs)."""

    judge: JudgeElsewhere
    cpus: int


@dataclass(frozen=True, slots=True)
class Shape:
    """What a wheel's directory tells: its extension modules and the libraries it ships."""

    native: bool
    modules: tuple[str, ...]
    libraries: frozenset[str]


def is_native(file: IndexFile) -> bool:
    """Whether a wheel may carry native code: a platform tag other than `any`."""
    wheel = file.wheel()
    return wheel is not None and any(t.platform != "any" for t in wheel[3])


def label(file: IndexFile) -> str:
    """"name version" of a wheel."""
    wheel = file.wheel()
    return f"{wheel[0]} {wheel[1]}" if wheel is not None else file.filename


def problems_of(findings: tuple[Finding, ...]) -> tuple[Problem, ...]:
    """The breaking findings as problems, one per symbol or soname, in order found; a module
    that fails only because another did (blocked-by) adds nothing."""
    from abifit.formats.demangle import demangle

    out: dict[tuple[str, str], Problem] = {}
    for f in findings:
        if not costs(f) or f.kind is FindingKind.BLOCKED_BY:
            continue
        if f.kind in (FindingKind.UNDEFINED_SYMBOL, FindingKind.MISSING_VERSION) and f.symbol:
            change = f.nearest[0].change if f.nearest else None  # "parameter 4: ..."
            subject = f"`{demangle(f.symbol)}`" + (f" at version {f.version}" if f.version
                                                    else "")
            out.setdefault((f.kind.value, subject), Problem(f.kind.value, subject, change))
        elif f.kind is FindingKind.MISSING_LIBRARY and f.library:
            out.setdefault((f.kind.value, f.library), Problem(f.kind.value, f.library))
        else:
            out.setdefault((f.kind.value, f.message), Problem(f.kind.value, f.message))
    return tuple(out.values())


def describe(verdict: PairVerdict) -> str:
    """One line: why the extension does not load next to the host (its first problem)."""
    if verdict.error is not None:
        return f"{verdict.extension} with {verdict.host} could not be checked: {verdict.error}"
    if not verdict.problems:
        return f"{verdict.extension} does not load next to {verdict.host}"
    first = verdict.problems[0]
    if first.kind in (FindingKind.UNDEFINED_SYMBOL.value, FindingKind.MISSING_VERSION.value):
        change = f" ({first.change})" if first.change else ""
        return (f"{verdict.extension} needs {first.subject}, which {verdict.host} does not "
                f"define{change}")
    if first.kind == FindingKind.MISSING_LIBRARY.value:
        return (f"{verdict.extension} needs {first.subject}, which neither {verdict.host} nor "
                "its dependencies ship")
    return f"{verdict.extension} next to {verdict.host}: {first.subject}"


class PairJudge:
    """Pairwise verdicts over one index context, host and target, computed at most once each
    (concurrent askers of one pair wait for the first), `jobs` checks at a time: here, or by
    `elsewhere` (each direction a Ray task)."""

    def __init__(self, ctx: RemoteContext, host: HostProfile, progress: Progress,
                 executable: str | None = None, jobs: int = 4,
                 elsewhere: JudgeElsewhere | None = None) -> None:
        import os

        self.ctx = ctx
        self.elsewhere = elsewhere
        self.host = replace(host, assume_driver=host.assume_driver or "assumed")
        self.progress = progress
        self.executable = executable
        chosen, api = target_interpreter(ctx.target, executable, os.environ)
        self._run_key = (chosen, api.value)
        self.pool = ThreadPoolExecutor(max_workers=max(1, jobs),
                                       thread_name_prefix="abifit-pair")
        self._lock = threading.Lock()
        self._directions: dict[tuple[str, str], Future[PairVerdict]] = {}
        self._shapes: dict[str, Shape] = {}
        self._needed: dict[str, frozenset[str]] = {}
        self.checked = 0  # directions simulated in this run
        self.cached = 0  # directions whose verdict the cache held
        self.unchecked = 0  # directions that cannot bind (no simulation)
        self.projects: set[frozenset[str]] = set()  # pairs of projects that had to be checked

    def close(self) -> None:
        """Wait for the verdicts computed ahead (they go into the cache: a later resolution
        that asks for them reads them)."""
        self.pool.shutdown(wait=True)

    # --- what a wheel is, from its directory, metadata and views -----------------------------

    def shape(self, file: IndexFile) -> Shape:
        """The wheel's extension modules and shipped libraries, from its directory (a pure
        wheel: nothing read)."""
        with self._lock:
            known = self._shapes.get(file.url)
        if known is not None:
            return known
        if not is_native(file):
            shape = Shape(False, (), frozenset())
        else:
            from abifit.remote.wheels import shared_wheel

            self.progress(f"directory of {file.filename}")
            members = shared_wheel(file, self.ctx, relocations=True).members()
            names = [m.path for m in members]
            modules = tuple(p for p in names if _is_module(p))
            libraries = frozenset(posixpath.basename(p) for p in names
                                  if posixpath.basename(p).startswith("lib")
                                  and ".so" in posixpath.basename(p))
            shape = Shape(True, modules, libraries)
        with self._lock:
            self._shapes[file.url] = shape
        return shape

    def needed(self, file: IndexFile) -> frozenset[str]:
        """The sonames the wheel's ELF members need (their views are what a check of the
        wheel reads first)."""
        with self._lock:
            known = self._needed.get(file.url)
        if known is not None:
            return known
        from abifit.remote.wheels import shared_wheel

        wheel = shared_wheel(file, self.ctx, relocations=True)
        self.progress(f"what {file.filename} needs")
        found: set[str] = set()
        with ThreadPoolExecutor(max_workers=6) as pool:
            for view in pool.map(wheel.view, wheel.members()):
                if isinstance(view, ElfImage):
                    found.update(view.needed)
        result = frozenset(found)
        with self._lock:
            self._needed[file.url] = result
        return result

    def links(self, release: IndexFile, library: IndexFile) -> bool:
        """Whether an ELF member of the `release` wheel needs a library the `library` wheel
        ships."""
        theirs = self.shape(library).libraries
        return bool(theirs) and bool(self.needed(release) & theirs)

    def binds(self, extension: IndexFile, host: IndexFile) -> bool:
        """Whether the extension's binaries can bind to the host's: both hold extension
        modules, and an ELF member of the extension needs a library the host ships. Cheap
        reads first: directories before views (a host that ships no library is not read
        further)."""
        theirs, ours = self.shape(host), self.shape(extension)
        if not theirs.modules or not ours.modules or not theirs.libraries:
            return False
        return bool(self.needed(extension) & theirs.libraries)

    # --- verdicts ------------------------------------------------------------------------------

    def fits(self, a: IndexFile, b: IndexFile) -> tuple[PairVerdict, ...]:
        """The verdicts of both directions of a pair that fail (none: the pair fits)."""
        both = [self.submit(a, b), self.submit(b, a)]
        return tuple(v for v in (f.result() for f in both) if not v.fits)

    def known(self, a: IndexFile, b: IndexFile) -> tuple[PairVerdict, ...] | None:
        """The failing directions of a pair whose both verdicts are computed already, or None
        while either is unknown or still being computed."""
        with self._lock:
            both = [self._directions.get((a.url, b.url)), self._directions.get((b.url, a.url))]
        if any(f is None or not f.done() for f in both):
            return None
        return tuple(v for v in (f.result() for f in both if f is not None) if not v.fits)

    def submit(self, extension: IndexFile, host: IndexFile) -> Future[PairVerdict]:
        """The verdict of one direction, computed once (in the pool)."""
        key = (extension.url, host.url)
        with self._lock:
            found = self._directions.get(key)
            if found is None:
                found = self.pool.submit(self._direction, extension, host)
                self._directions[key] = found
        return found

    def _direction(self, extension: IndexFile, host: IndexFile) -> PairVerdict:
        name, other = label(extension), label(host)
        if not is_native(extension) or not is_native(host):
            return PairVerdict(name, other, False, True)
        key = self._key(extension, host)
        cache = self.ctx.cache
        stored = cache.get_result(key, PairVerdict) if cache is not None and key else None
        if isinstance(stored, PairVerdict):
            self._count(stored, extension, host, stored=True)
            return stored
        verdict = (self.elsewhere or self.judged)(extension, host)
        if verdict.error is not None:  # not kept: a later resolution tries again
            return verdict
        self._count(verdict, extension, host, stored=False)
        if cache is not None and key:
            cache.put_result(key, verdict)
        return verdict

    def _count(self, verdict: PairVerdict, extension: IndexFile, host: IndexFile, *,
               stored: bool) -> None:
        """Count a direction's verdict: simulated (this run, or `stored` by an earlier one,
        its pair of projects noted) or unchecked (the wheels cannot bind)."""
        with self._lock:
            if not verdict.checked:
                self.unchecked += 1
                return
            if stored:
                self.cached += 1
            else:
                self.checked += 1
            self.projects.add(frozenset((_project(extension), _project(host))))

    def judged(self, extension: IndexFile, host: IndexFile) -> PairVerdict:
        """The verdict of one direction of two native wheels, computed in this process (by a
        Ray task: in its worker): an error that stopped it is the verdict's `error`."""
        try:
            return self._judge(extension, host)
        except AbifitError as e:
            return PairVerdict(label(extension), label(host), True, False,
                               error=str(e).splitlines()[0])

    def _judge(self, extension: IndexFile, host: IndexFile) -> PairVerdict:
        name, other = label(extension), label(host)
        if not self.binds(extension, host):
            return PairVerdict(name, other, False, True)
        self.progress(f"checking {name} with {other}")
        report = check([extension], [host], self.ctx, self.ctx.target, self.host,
                       lambda _m: None, self.executable)
        fits = report.verdict not in ("fails", "degraded")  # never a degraded set
        return PairVerdict(name, other, True, fits, () if fits else problems_of(report.findings))

    def _key(self, extension: IndexFile, host: IndexFile) -> str | None:
        from abifit.remote.wheelcache import view_key
        from abifit.version import __version__

        keys = (view_key(extension), view_key(host))
        if not all(keys) or not self.host.fingerprint:
            return None
        target = self.ctx.target
        inputs = (PAIR_FORMAT, __version__, keys, str(target), target.platforms,
                  self.host.fingerprint, self.host.assume_driver, self._run_key)
        return hashlib.sha256(repr(inputs).encode()).hexdigest()


def _project(file: IndexFile) -> str:
    wheel = file.wheel()
    return wheel[0] if wheel is not None else file.filename


def _is_module(path: str) -> bool:
    """Whether a member is named like a Python extension module (`x.cpython-311-...so`,
    `x.abi3.so`, or a plain `x.so` not named like a library)."""
    base = posixpath.basename(path)
    if _MODULE.fullmatch(base):
        return True
    return base.endswith(".so") and not base.startswith("lib") and base[:-3].isidentifier()
