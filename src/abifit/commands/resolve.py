"""`abifit resolve`: the options the command line and the API give, run by
`abifit.engines.resolve`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Session,
    host_and_index,
    linux_only,
    option_gpu,
    pin_files,
)
from abifit.engines.resolve import ResolveReport, resolve


@dataclass(frozen=True)
class ResolveOptions:
    """What `abifit resolve` is asked: the requirements (with those of each `-r` file), the
    packages to keep whatever their metadata says (`withs`), the CUDA major of the wheels
    (`cuda`), a GPU the set must run on (`gpu`), the host and the index; `jobs` pairs are
    checked at a time."""

    requirements: tuple[str, ...] = ()
    withs: tuple[str, ...] = ()
    requirement_files: tuple[str, ...] = ()
    cuda: int | None = None
    gpu: str | None = None
    jobs: int = 4
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


def run_resolve(options: ResolveOptions, session: Session) -> ResolveReport:
    """`abifit resolve` as the command line and `abifit.resolve` run it."""
    linux_only(options.index)
    host, remote = host_and_index(options.host, options.index, session)
    gpu = option_gpu(options.gpu, session.environ)
    files = pin_files(options.requirement_files, remote(), session.warn, "resolved")
    requirements = [*options.requirements, *(r for pins in files for r in pins.requirements)]
    report = resolve(requirements, options.withs, remote(), host, session.progress,
                     cuda=options.cuda, gpu=gpu,
                     executable=options.host.python, jobs=options.jobs)
    return replace(report, file_pins=tuple(pin for pins in files for pin in pins.pins))
