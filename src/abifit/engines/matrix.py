"""`abifit matrix EXT [EXT ...] [--versions SPEC] --against HOST_SPEC [--pythons X.Y,...]`:
which host versions does an extension fit, and which of its releases, on which Python?

A grid of pairwise verdicts (`commands.pairs.check_pair`): a row per extension release that
`--versions` selects (newest first, one wheel each that the target accepts; without it, one row:
the extension as given), a column per host release, and a sub-column per wheel variant of a
release (`+cu128`/`+cu130` on an extra index). Each cell is one `check`, run in parallel within
a limit over one shared cache: the check's stored result is the pair's verdict, so a cell asked
again costs no fetch and no simulation. A cell fits when the extension's modules would load; the
NVIDIA driver is assumed present (the question is the ABI between the wheels, not this
machine). `abifit.report.matrix` renders the report as a text grid, JSON, or one self-contained
HTML page.

Several extensions, or several target Pythons, make a `GridReport`: a `MatrixReport` for each
extension on each Python (the extensions in the order given, each for the Pythons in the order
given), whose cells are all checked as one batch (one pool, or one map over a cluster), each
`Pair` carrying its target. A matrix of the grid that cannot be made (no wheel of the extension
or of the host for that Python) is kept with its error; the same in a lone matrix is the
error of the command.
"""

from __future__ import annotations

import datetime
import os
import posixpath
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from abifit.engines.pairs import (
    SYMBOL_KINDS,
    Cell,
    MissingSymbol,
    OtherForm,
    Setting,
    cell_of,
    check_pair,
    setting_of,
)
from abifit.errors import UsageError, first_line
from abifit.host.profile import HostProfile
from abifit.remote.packageindex import (  # IndexFile, Target: a Pair's fields, checked
    IndexFile,
    Target,
    wheel_name,
)
from abifit.version import __version__

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version

    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gputarget import GpuTarget

__all__ = ["SYMBOL_KINDS", "Cell", "GridReport", "MatrixReport", "MissingSymbol", "OtherForm",
           "Pair", "Setting", "cell_of", "extension_release", "grid", "host_wheels", "matrix",
           "release_wheels"]

Progress = Callable[[str], None]
Clock = Callable[[], datetime.datetime]


@dataclass(frozen=True, slots=True)
class Pair:
    """A cell to check: the extension of a row (its release's label, "" for one row as given;
    the requirement, or the wheel chosen on the index) next to one host wheel, for one
    target."""

    release: str
    extension: str | IndexFile
    host: IndexFile
    target: Target


# the cells checked elsewhere (a cluster), in the order of the pairs
CellsElsewhere = Callable[[Sequence[Pair], Progress], list[Cell]]


@dataclass(frozen=True, slots=True)
class MatrixReport:
    """The grid: `cells` row by row (the rows' order), each row's cells in the columns' order."""

    extension: str  # the extension's requirement as given, or its name with --versions
    host: str  # the host project's name
    target: str
    cells: tuple[Cell, ...]
    rows: tuple[str, ...] = ()  # the extension releases, newest first; () for one row as given
    versions: str | None = None  # --versions SPEC
    against: str = ""  # HOST_SPEC
    checked_at: str = ""  # when, ISO 8601 in UTC to the minute
    abifit_version: str = ""
    setting: Setting | None = field(default=None, compare=False)
    package: str = ""  # the extension project's name
    python: str = ""  # the target Python, X.Y
    error: str | None = None  # in a grid: why this matrix could not be made (no cells then)

    @property
    def fits(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.fits)

    @property
    def checked(self) -> bool:
        """Whether any cell could be checked (a matrix of errors says nothing of fitting)."""
        return self.error is None and any(c.error is None for c in self.cells)

    @property
    def columns(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(host version, its variants) in the order checked: newest first."""
        out: dict[str, list[str]] = {}
        for cell in self.cells:
            variants = out.setdefault(cell.version, [])
            if cell.variant not in variants:
                variants.append(cell.variant)
        return tuple((v, tuple(vs)) for v, vs in out.items())

    @property
    def grid(self) -> tuple[tuple[str, tuple[Cell, ...]], ...]:
        """(row label, its cells) in order; one row labelled with the extension as given
        when the report has no `rows`."""
        if not self.rows:
            return ((self.extension, self.cells),)
        return tuple((row, tuple(c for c in self.cells if c.release == row))
                     for row in self.rows)


@dataclass(frozen=True, slots=True)
class GridReport:
    """Several matrices against one host package: one per extension and target Python, the
    extensions in the order given, each for the Pythons in the order given."""

    matrices: tuple[MatrixReport, ...]
    extensions: tuple[str, ...]  # as given (their names with --versions)
    pythons: tuple[str, ...]  # X.Y, in the order given
    host: str  # the host project's name
    against: str  # HOST_SPEC
    versions: str | None = None  # --versions SPEC, for every extension
    checked_at: str = ""
    abifit_version: str = ""

    @property
    def cells(self) -> tuple[Cell, ...]:
        return tuple(c for m in self.matrices for c in m.cells)

    @property
    def fits(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.fits)

    @property
    def unchecked(self) -> tuple[MatrixReport, ...]:
        """The matrices of which no cell could be checked."""
        return tuple(m for m in self.matrices if not m.checked)

    @property
    def without_fit(self) -> tuple[MatrixReport, ...]:
        """The matrices checked in which no host wheel fits."""
        return tuple(m for m in self.matrices if m.checked and not m.fits)


def extension_release(cell: Cell) -> str:
    """The extension release a cell checked: its row's, else the version of the extension's
    wheel; "" when no wheel was read."""
    if cell.release:
        return cell.release
    name = posixpath.basename(cell.extension_filename)
    found = wheel_name(name) if name.endswith(".whl") else None
    return "" if found is None else str(found[1])


def _requirement(text: str) -> Requirement:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise UsageError(f"invalid requirement {text!r}: {str(e).splitlines()[0]}") from e


def release_wheels(requirement: Requirement, ctx: RemoteContext) -> list[IndexFile]:
    """One wheel per release (and variant) that `requirement` selects and the target accepts,
    newest first."""
    from abifit.remote.packageindex import no_matching_wheel, select

    files = ctx.index.project_files(requirement.name)
    seen: dict[Version, IndexFile] = {}
    for candidate in select(files, requirement, ctx.target, prereleases=ctx.prereleases):
        seen.setdefault(candidate.version, candidate.file)
    if not seen:
        raise no_matching_wheel(files, requirement, ctx.target, prereleases=ctx.prereleases)
    return list(seen.values())


def host_wheels(against: str, ctx: RemoteContext) -> tuple[str, list[IndexFile]]:
    """The host project's name and one wheel per release and variant that fits the target,
    newest first."""
    requirement = _requirement(against)
    return requirement.name, release_wheels(requirement, ctx)


def extension_rows(extension: str, versions: str, ctx: RemoteContext,
                   ) -> tuple[str, list[IndexFile]]:
    """The extension's name and one wheel per release `versions` selects (with any specifier
    EXT gives), newest first."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    requirement = _requirement(extension)
    try:
        requirement.specifier &= SpecifierSet(versions)
    except InvalidSpecifier as e:
        raise UsageError(f"--versions {versions!r}: not a version specifier "
                         "(e.g. '>=0.3.16,<=0.3.21')") from e
    return requirement.name, release_wheels(requirement, ctx)


def _label(file: IndexFile) -> str:
    wheel = file.wheel()
    assert wheel is not None
    return str(wheel[1])


def matrix(extension: str, against: str, ctx: RemoteContext, target: Target,
           host: HostProfile, progress: Progress, jobs: int = 4,
           executable: str | None = None, versions: str | None = None,
           gpu: GpuTarget | None = None, clock: Clock | None = None,
           elsewhere: CellsElsewhere | None = None) -> MatrixReport:
    """Check `extension` (each release `versions` selects) against every host wheel `against`
    selects, `jobs` cells at a time, or each cell by `elsewhere` when it is given."""
    (report,) = _matrices([extension], against, ctx, [target], host, progress, jobs, executable,
                          versions, gpu, clock, elsewhere, alone=True)
    return report


def grid(extensions: Sequence[str], against: str, ctx: RemoteContext,
         targets: Sequence[Target], host: HostProfile, progress: Progress, jobs: int = 4,
         executable: str | None = None, versions: str | None = None,
         gpu: GpuTarget | None = None, clock: Clock | None = None,
         elsewhere: CellsElsewhere | None = None) -> GridReport:
    """`matrix` for each of `extensions` on each of `targets`, every cell of them checked in
    one batch. Each extension is checked first: a requirement that does not parse, or a project
    no index has, is the error of the whole grid (a `UsageError`, a `PackageNotFound`), as a
    host requirement that does not parse is."""
    _requirement(against)
    for text in extensions:
        if not _local_wheel(text):
            ctx.index.project_files(_requirement(text).name)
    reports = _matrices(extensions, against, ctx, targets, host, progress, jobs, executable,
                        versions, gpu, clock, elsewhere, alone=False)
    first = reports[0]
    return GridReport(tuple(reports), tuple(dict.fromkeys(r.extension for r in reports)),
                      tuple(dict.fromkeys(r.python for r in reports)), first.host, against,
                      versions, first.checked_at, first.abifit_version)


def _local_wheel(text: str) -> bool:
    return text.endswith(".whl") and os.path.isfile(text)


def _package(text: str) -> str:
    """The project an extension names: a requirement's name, a local wheel's."""
    from packaging.requirements import InvalidRequirement, Requirement

    if _local_wheel(text):
        found = wheel_name(os.path.basename(text))
        return text if found is None else str(found[0])
    try:
        return Requirement(text).name
    except InvalidRequirement:
        return text


@dataclass(frozen=True, slots=True)
class _Plan:
    """One matrix's work: its extension and target, its rows and the pairs to check; or why
    it cannot be made (`error`)."""

    extension: str  # as given, or its name with --versions
    target: Target
    host: str  # the host project's name
    rows: tuple[tuple[str, str | IndexFile], ...] = ()
    pairs: tuple[Pair, ...] = ()
    error: str | None = None


def _for(ctx: RemoteContext, target: Target) -> RemoteContext:
    """`ctx` reading for `target`, its run's state shared (the wheels being read)."""
    return ctx if ctx.target == target else replace(ctx, target=target)


def _plans(extensions: Sequence[str], against: str, ctx: RemoteContext,
           targets: Sequence[Target], versions: str | None, alone: bool) -> list[_Plan]:
    """The work of each matrix: each extension for each target. What a lone matrix cannot
    make is raised; in a grid, a target without a wheel of the host, or an extension without
    one, is that matrix's error."""
    from abifit.remote.packageindex import NoMatchingWheel

    host_name = _requirement(against).name
    hosts: dict[Target, list[IndexFile] | str] = {}
    for target in targets:
        try:
            hosts[target] = host_wheels(against, _for(ctx, target))[1]
        except NoMatchingWheel as e:
            if alone:
                raise
            hosts[target] = first_line(e)
    plans = []
    for extension, target in ((e, t) for e in extensions for t in targets):
        unmade = _Plan(extension if versions is None else _package(extension), target,
                       host_name)
        files = hosts[target]
        if isinstance(files, str):
            plans.append(replace(unmade, error=files))
            continue
        try:
            label, rows = _rows(extension, versions, _for(ctx, target))
        except NoMatchingWheel as e:
            if alone:
                raise
            plans.append(replace(unmade, error=first_line(e)))
            continue
        pairs = tuple(Pair(release, ext, f, target) for release, ext in rows for f in files)
        plans.append(_Plan(label, target, host_name, tuple(rows), pairs))
    return plans


def _rows(extension: str, versions: str | None, ctx: RemoteContext,
          ) -> tuple[str, list[tuple[str, str | IndexFile]]]:
    """A matrix's extension (as given, or its name with `versions`) and its rows: one, the
    extension as given, or a wheel per release `versions` selects."""
    if versions is None:
        return extension, [("", extension)]
    name, found = extension_rows(extension, versions, ctx)
    return name, [(_label(f), f) for f in found]


def _matrices(extensions: Sequence[str], against: str, ctx: RemoteContext,
              targets: Sequence[Target], host: HostProfile, progress: Progress, jobs: int,
              executable: str | None, versions: str | None, gpu: GpuTarget | None,
              clock: Clock | None, elsewhere: CellsElsewhere | None, *, alone: bool,
              ) -> list[MatrixReport]:
    """The matrix of each extension on each target, their cells checked in one batch: `jobs`
    at a time, or by `elsewhere`."""
    when = (clock or (lambda: datetime.datetime.now(datetime.timezone.utc)))()
    profile = replace(host, assume_driver=host.assume_driver or "assumed")
    plans = _plans(extensions, against, ctx, targets, versions, alone)
    pairs = [pair for plan in plans for pair in plan.pairs]
    counter = _Counter(len(pairs), ctx, progress)
    several = len(targets) > 1

    def one(pair: Pair) -> Cell:
        shown = f"{pair.release} " if pair.release else ""
        python = f" for {pair.target.interpreter}" if several else ""
        counter.say(f"checking {shown}with {pair.host.filename}{python}")
        cell = check_pair(pair.extension, pair.host, _for(ctx, pair.target), pair.target,
                          profile, executable, gpu, pair.release)
        counter.done()
        return cell

    if elsewhere is not None:
        cells = elsewhere(pairs, progress)
    else:
        rows = {_row_key(ext, plan.target): (ext, plan.target)
                for plan in plans for _release, ext in plan.rows}
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(lambda row: _prefetch(row[0], _for(ctx, row[1]), progress),
                          rows.values()))
            cells = list(pool.map(one, pairs))
    reports = []
    start = 0
    for plan in plans:
        mine = tuple(cells[start:start + len(plan.pairs)])
        start += len(plan.pairs)
        reports.append(MatrixReport(
            plan.extension, plan.host, str(plan.target), mine,
            tuple(r for r, _e in plan.rows if r), versions, against,
            when.strftime("%Y-%m-%d %H:%M UTC"), __version__,
            setting_of(plan.target, profile, gpu), _package(plan.extension),
            plan.target.python, plan.error))
    return reports


def _row_key(extension: str | IndexFile, target: Target) -> object:
    """A row's extension to read once: a wheel chosen on the index whatever the target (an
    abi3 wheel serves several Pythons), a requirement for each target."""
    return extension.url if not isinstance(extension, str) else (extension, target)


class _Counter:
    """The progress of the cells: how many are done out of how many, and the bytes fetched so
    far with their rate."""

    def __init__(self, total: int, ctx: RemoteContext, progress: Progress) -> None:
        import threading
        import time

        self._total, self._ctx, self._progress = total, ctx, progress
        self._done = 0
        self._lock = threading.Lock()
        self._clock = time.monotonic
        self._start = self._clock()

    def say(self, doing: str) -> None:
        with self._lock:
            done = self._done
        fetched = self._ctx.client.transfer.bytes_fetched if self._ctx.client else 0
        elapsed = max(self._clock() - self._start, 1e-6)
        self._progress(f"cell {done}/{self._total} done; {doing}; {fetched / 1e6:.1f} MB "
                       f"fetched, {fetched / 1e6 / elapsed:.1f} MB/s")

    def done(self) -> None:
        with self._lock:
            self._done += 1
        self.say("checked")


def _prefetch(extension: str | IndexFile, ctx: RemoteContext, progress: Progress) -> None:
    """Read the extension's views that the cache lacks, once, before the parallel checks share
    them (a wheel that cannot be opened is left to its cells, which say why)."""
    from abifit.engines.check import Gatherer, Role
    from abifit.errors import AbifitError

    try:
        wheel = Gatherer(ctx, progress).open(extension, Role.TARGET)
    except AbifitError:
        return
    source = wheel.source if wheel is not None else None
    if wheel is not None and source is not None:
        for member in source.members():
            progress(f"{wheel.filename}: {member.path}")
            source.prefetch_view(member)
