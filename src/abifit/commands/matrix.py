"""`abifit matrix`: the options the command line and the API give, run by
`abifit.engines.matrix`, and the library function `abifit.matrix`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Progress,
    Session,
    host_and_index,
    index_keywords,
    linux_only,
    option_gpu,
    run_as_library,
)
from abifit.engines import matrix as engine
from abifit.engines.cluster import cluster_asked
from abifit.engines.matrix import Clock, MatrixReport


@dataclass(frozen=True)
class MatrixOptions:
    """What `abifit matrix` is asked: the extension (a requirement; each release `versions`
    selects), the host package whose releases it is checked against (`against`), a GPU, the
    host and the index; `jobs` cells are checked at a time."""

    extension: str
    against: str
    versions: str | None = None
    gpu: str | None = None
    jobs: int = 4
    ray: str | None = None  # a Ray cluster's address: each cell a task there (RAY_ADDRESS too)
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


def run_matrix(options: MatrixOptions, session: Session,
               clock: Clock | None = None) -> MatrixReport:
    """`abifit matrix` as the command line and `abifit.matrix` run it."""
    linux_only(options.index)
    host, remote = host_and_index(options.host, options.index, session)
    gpu = option_gpu(options.gpu, session.environ)
    with cluster_asked(options.ray, session.environ) as cluster:
        elsewhere = None
        if cluster is not None:
            from abifit.commands.cluster import cells_on

            elsewhere = cells_on(cluster, options.index, session.environ, remote().target, host,
                                 options.host.python, gpu)
        return engine.matrix(options.extension, options.against, remote(), remote().target,
                             host, session.progress, options.jobs, options.host.python,
                             versions=options.versions, gpu=gpu, clock=clock,
                             elsewhere=elsewhere)


def matrix(
    extension: str,
    against: str,
    *,
    versions: str | None = None,
    gpu: str | None = None,
    jobs: int = 4,
    ray: str | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> MatrixReport:
    """Which releases of the host package `against` ("torch>=2.8") the `extension` (each of its
    releases `versions` selects) loads with: what `abifit matrix` prints, as a report. `ray`
    (or RAY_ADDRESS) is a Ray cluster's address, each cell a task there. The other arguments
    are `check`'s."""
    return run_as_library(run_matrix, MatrixOptions(
        extension, against, versions, gpu, jobs, ray, HostOptions(host, assume_driver, python),
        index_keywords("matrix", index)), progress)
