"""`abifit matrix`: the options the command line and the API give, run by
`abifit.engines.matrix`."""

from __future__ import annotations

from dataclasses import dataclass, field

from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Session,
    host_and_index,
    linux_only,
    option_gpu,
)
from abifit.engines.matrix import Clock, MatrixReport, matrix


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
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


def run_matrix(options: MatrixOptions, session: Session,
               clock: Clock | None = None) -> MatrixReport:
    """`abifit matrix` as the command line and `abifit.matrix` run it."""
    linux_only(options.index)
    host, remote = host_and_index(options.host, options.index, session)
    gpu = option_gpu(options.gpu, session.environ)
    return matrix(options.extension, options.against, remote(), remote().target, host,
                  session.progress, options.jobs, options.host.python,
                  versions=options.versions, gpu=gpu, clock=clock)
