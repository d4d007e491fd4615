"""`abifit matrix EXT --against HOST_SPEC`: which host versions does an extension fit?

One `check` per host release (and per wheel variant of a release, such as `+cu128`/`+cu130` on an
extra index), run in parallel within a limit over one shared cache. A cell fits when the
extension's modules would load; the NVIDIA driver is assumed present (the question is the ABI
between the wheels, not this machine). `abifit.report.matrix` renders the report as a text
table, JSON, or one self-contained HTML page.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from abifit.commands.check import check
from abifit.errors import AbifitError, UsageError
from abifit.formats.demangle import demangle
from abifit.host.profile import HostProfile
from abifit.sim.findings import FindingKind

if TYPE_CHECKING:
    from packaging.version import Version

    from abifit.commands.check import CheckReport
    from abifit.remote.index import IndexFile, Target
    from abifit.remote.wheels import RemoteContext

Progress = Callable[[str], None]

SYMBOL_KINDS = ("undefined-symbol", "missing-version")


@dataclass(frozen=True, slots=True)
class Cell:
    """The answer for one host wheel."""

    version: str
    variant: str  # the local label ("cu128"), or "" for none
    filename: str
    fits: bool
    failing_modules: int
    symbols: tuple[str, ...]  # failing symbols, demangled, in order found
    sonames: tuple[str, ...]  # missing libraries
    notes: tuple[str, ...]
    error: str | None = None

    @property
    def first(self) -> str | None:
        return (self.symbols or self.sonames or (None,))[0]


@dataclass(frozen=True, slots=True)
class MatrixReport:
    extension: str
    host: str
    target: str
    cells: tuple[Cell, ...]

    @property
    def fits(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.fits)


def host_wheels(against: str, ctx: RemoteContext) -> tuple[str, list[IndexFile]]:
    """The host project's name and one wheel per release and variant that fits the target,
    newest first."""
    from packaging.requirements import InvalidRequirement, Requirement

    from abifit.remote.index import no_matching_wheel, select

    try:
        requirement = Requirement(against)
    except InvalidRequirement as e:
        raise UsageError(f"invalid requirement {against!r}: {str(e).splitlines()[0]}") from e
    files = ctx.index.project_files(requirement.name)
    seen: dict[Version, IndexFile] = {}
    for candidate in select(files, requirement, ctx.target, prereleases=ctx.prereleases):
        seen.setdefault(candidate.version, candidate.file)
    if not seen:
        raise no_matching_wheel(files, requirement, ctx.target, prereleases=ctx.prereleases)
    return requirement.name, list(seen.values())


def cell_of(file: IndexFile, report: CheckReport | None, error: str | None) -> Cell:
    wheel = file.wheel()
    assert wheel is not None
    version = wheel[1]
    base = Cell(version.public, version.local or "", file.filename, False, 0, (), (), ())
    if report is None:
        return replace(base, error=error)
    symbols = tuple(dict.fromkeys(demangle(f.symbol) for f in report.findings
                                  if f.kind in SYMBOL_KINDS and f.symbol))
    sonames = tuple(dict.fromkeys(f.library for f in report.findings
                                  if f.kind == FindingKind.MISSING_LIBRARY and f.library))
    return replace(base, fits=report.verdict != "fails", failing_modules=report.failing,
                   symbols=symbols, sonames=sonames, notes=report.notes)


def matrix(extension: str, against: str, ctx: RemoteContext, target: Target,
           host: HostProfile, progress: Progress, jobs: int = 4,
           executable: str | None = None) -> MatrixReport:
    """Check `extension` against every host wheel `against` selects, `jobs` at a time."""
    name, files = host_wheels(against, ctx)
    profile = replace(host, assume_driver=host.assume_driver or "assumed")
    _prefetch(extension, ctx, progress)

    def one(file: IndexFile) -> Cell:
        progress(f"checking with {file.filename}")
        try:
            report = check([extension], [file], ctx, target, profile, lambda _m: None,
                           executable)
        except AbifitError as e:
            return cell_of(file, None, str(e).splitlines()[0])
        return cell_of(file, report, None)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        cells = list(pool.map(one, files))
    return MatrixReport(extension, name, str(target), tuple(cells))


def _prefetch(extension: str, ctx: RemoteContext, progress: Progress) -> None:
    """Read the extension's views once, before the parallel checks share them via the cache."""
    from abifit.commands.check import Gatherer, Role

    wheel = Gatherer(ctx, progress).open(extension, Role.TARGET)
    source = wheel.source if wheel is not None else None
    if wheel is not None and source is not None:
        for member in source.members():
            progress(f"{wheel.filename}: {member.path}")
            source.view(member)
