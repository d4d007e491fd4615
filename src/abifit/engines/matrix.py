"""`abifit matrix EXT [--versions SPEC] --against HOST_SPEC`: which host versions does an
extension fit, and which of its releases?

A grid of pairwise verdicts (`commands.pairs.check_pair`): a row per extension release that
`--versions` selects (newest first, one wheel each that the target accepts; without it, one row:
the extension as given), a column per host release, and a sub-column per wheel variant of a
release (`+cu128`/`+cu130` on an extra index). Each cell is one `check`, run in parallel within
a limit over one shared cache: the check's stored result is the pair's verdict, so a cell asked
again costs no fetch and no simulation. A cell fits when the extension's modules would load; the
NVIDIA driver is assumed present (the question is the ABI between the wheels, not this
machine). `abifit.report.matrix` renders the report as a text grid, JSON, or one self-contained
HTML page.
"""

from __future__ import annotations

import datetime
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
from abifit.errors import UsageError
from abifit.host.profile import HostProfile
from abifit.version import __version__

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version

    from abifit.remote.packageindex import IndexFile, Target
    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gpu import GpuTarget

__all__ = ["SYMBOL_KINDS", "Cell", "MatrixReport", "MissingSymbol", "OtherForm", "Setting",
           "cell_of", "host_wheels", "matrix", "release_wheels"]

Progress = Callable[[str], None]
Clock = Callable[[], datetime.datetime]
# a cell to check: (its row: the extension's release label and the extension), the host wheel
Pair = tuple[tuple[str, "str | IndexFile"], "IndexFile"]
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

    @property
    def fits(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.fits)

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
    when = (clock or (lambda: datetime.datetime.now(datetime.timezone.utc)))()
    name, files = host_wheels(against, ctx)
    profile = replace(host, assume_driver=host.assume_driver or "assumed")
    rows: list[tuple[str, str | IndexFile]]
    if versions is None:
        rows = [("", extension)]
    else:
        extension, found = extension_rows(extension, versions, ctx)
        rows = [(_label(f), f) for f in found]

    pairs: list[Pair] = [(row, f) for row in rows for f in files]
    counter = _Counter(len(pairs), ctx, progress)

    def one(pair: Pair) -> Cell:
        (release, ext), file = pair
        shown = f"{release} " if release else ""
        counter.say(f"checking {shown}with {file.filename}")
        cell = check_pair(ext, file, ctx, target, profile, executable, gpu, release)
        counter.done()
        return cell

    if elsewhere is not None:
        cells = elsewhere(pairs, progress)
    else:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(lambda row: _prefetch(row[1], ctx, progress), rows))
            cells = list(pool.map(one, pairs))
    return MatrixReport(extension, name, str(target), tuple(cells),
                        tuple(r for r, _e in rows if r), versions, against,
                        when.strftime("%Y-%m-%d %H:%M UTC"), __version__,
                        setting_of(target, profile, gpu))


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
