"""`abifit matrix`: the options the command line and the API give, run by
`abifit.engines.matrix`, and the library function `abifit.matrix`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

from abifit import workers
from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Progress,
    Session,
    host_and_index,
    index_keywords,
    linux_only,
    names,
    option_gpu,
    run_as_library,
)
from abifit.engines import matrix as engine
from abifit.engines.cluster import cluster_asked
from abifit.engines.matrix import Clock, GridReport, MatrixReport
from abifit.errors import UsageError

if TYPE_CHECKING:
    from abifit.remote.packageindex import Target


@dataclass(frozen=True)
class MatrixOptions:
    """What `abifit matrix` is asked: the extensions (requirements; each release `versions`
    selects), the host package whose releases they are checked against (`against`), the
    target Pythons (`pythons`; none: the index options' one), a GPU, the host and the index;
    `jobs` cells are checked at a time (None: `cells_at_once`). One extension on one Python is
    a matrix; more make a grid of matrices."""

    extensions: tuple[str, ...]
    against: str
    versions: str | None = None
    gpu: str | None = None
    jobs: int | None = None
    ray: str | None = None  # a Ray cluster's address: each cell a task there (RAY_ADDRESS too)
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)
    pythons: tuple[str, ...] = ()  # X.Y each: a matrix per extension and Python


def cells_at_once() -> int:
    """The cells a matrix checks at once unless told: this machine's cores, 2 to 4. A cell is
    checked in this process (its members decoded in the worker processes), so more cells than
    cores take as long and hold more releases' views at once (docs/benchmarks.md: on two
    cores, 4 cells at once peaked 15-20 % higher than 2, in the same time)."""
    return max(2, min(4, workers.usable_cores()))


def run_matrix(options: MatrixOptions, session: Session,
               clock: Clock | None = None) -> MatrixReport | GridReport:
    """`abifit matrix` as the command line and `abifit.matrix` run it: a `MatrixReport` for
    one extension on one Python, else a `GridReport`."""
    extensions, pythons = _asked(options)
    index = options.index if not pythons else replace(options.index, python_version=pythons[0])
    linux_only(index)
    host, remote = host_and_index(options.host, index, session)
    gpu = option_gpu(options.gpu, session.environ)
    jobs = options.jobs or cells_at_once()
    with cluster_asked(options.ray, session.environ) as cluster:
        elsewhere = None
        if cluster is not None:
            from abifit.commands.cluster import cells_on

            elsewhere = cells_on(cluster, index, session.environ, host, options.host.python,
                                 gpu)
        if len(extensions) == 1 and len(pythons) <= 1:
            return engine.matrix(extensions[0], options.against, remote(), remote().target,
                                 host, session.progress, jobs, options.host.python,
                                 versions=options.versions, gpu=gpu, clock=clock,
                                 elsewhere=elsewhere)
        return engine.grid(extensions, options.against, remote(),
                           _targets(remote().target, pythons), host, session.progress,
                           jobs, options.host.python, versions=options.versions,
                           gpu=gpu, clock=clock, elsewhere=elsewhere)


def _asked(options: MatrixOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The extensions and the Pythons asked for, each once in the order given; a `UsageError`
    for none, for a Python that is not X.Y, or for --pythons beside --python-version."""
    from abifit.remote.packageindex import parse_python_version

    extensions = tuple(dict.fromkeys(e.strip() for e in options.extensions))
    if not extensions or not all(extensions):
        raise UsageError("matrix: no extension given (EXT_REQ, e.g. sgl-kernel==0.3.21)")
    pythons = tuple(dict.fromkeys(p.strip() for p in options.pythons))
    for python in pythons:
        parse_python_version(python)
    if pythons and options.index.python_version:
        raise UsageError("--pythons and --python-version: give the target Pythons with one of "
                         "them, not both")
    return extensions, pythons


def _targets(first: Target, pythons: Sequence[str]) -> list[Target]:
    """The target of each Python: `first` (the index's, made for the first Python) with the
    Python changed; none asked: `first` alone."""
    from abifit.remote.packageindex import Target

    if not pythons:
        return [first]
    return [first, *(Target.for_python(p, first.platforms, first.implementation)
                     for p in pythons[1:])]


@overload
def matrix(extension: str, against: str, *, versions: str | None = ..., gpu: str | None = ...,
           jobs: int | None = ..., ray: str | None = ..., host: str | None = ...,
           assume_driver: str | None = ..., python: str | None = ..., pythons: None = ...,
           progress: Progress | None = ..., **index: Any) -> MatrixReport: ...


@overload
def matrix(extension: str | Sequence[str], against: str, *, versions: str | None = ...,
           gpu: str | None = ..., jobs: int | None = ..., ray: str | None = ...,
           host: str | None = ..., assume_driver: str | None = ..., python: str | None = ...,
           pythons: Sequence[str] | None = ..., progress: Progress | None = ...,
           **index: Any) -> MatrixReport | GridReport: ...


def matrix(
    extension: str | Sequence[str],
    against: str,
    *,
    versions: str | None = None,
    gpu: str | None = None,
    jobs: int | None = None,
    ray: str | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    pythons: Sequence[str] | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> MatrixReport | GridReport:
    """Which releases of the host package `against` ("torch>=2.8") the `extension` (each of its
    releases `versions` selects) loads with: what `abifit matrix` prints, as a report. Several
    extensions (a sequence), or several target `pythons` (["3.11", "3.12"], in place of
    `python_version`), give a `GridReport`: a `MatrixReport` for each extension on each
    Python. `ray` (or RAY_ADDRESS) is a Ray cluster's address, each cell a task there. The
    other arguments are `check`'s."""
    if pythons is not None and not names(pythons):
        raise UsageError("matrix: pythons=[] names no Python (leave it out for one)")
    return run_as_library(run_matrix, MatrixOptions(
        names(extension), against, versions, gpu, jobs, ray,
        HostOptions(host, assume_driver, python), index_keywords("matrix", index),
        names(pythons or ())), progress)
