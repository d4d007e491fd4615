"""`abifit resolve`: the options the command line and the API give, run by
`abifit.engines.resolve`, and the library function `abifit.resolve`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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
    pin_files,
    run_as_library,
)
from abifit.engines import resolve as engine
from abifit.engines.cluster import cluster_asked
from abifit.engines.resolve import ResolveReport


@dataclass(frozen=True)
class ResolveOptions:
    """What `abifit resolve` is asked: the requirements (with those of each `-r` file), the
    packages to keep whatever their metadata says (`withs`), the CUDA major of the wheels
    (`cuda`), a GPU the set must run on (`gpu`), the host and the index; `jobs` pairs are
    checked at a time, or with `ray` (a Ray cluster's address) each a task there, as many at
    once as it has CPUs."""

    requirements: tuple[str, ...] = ()
    withs: tuple[str, ...] = ()
    requirement_files: tuple[str, ...] = ()
    cuda: int | None = None
    gpu: str | None = None
    jobs: int = 4
    ray: str | None = None  # a Ray cluster's address: each pair direction a task there
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


def run_resolve(options: ResolveOptions, session: Session) -> ResolveReport:
    """`abifit resolve` as the command line and `abifit.resolve` run it."""
    linux_only(options.index)
    host, remote = host_and_index(options.host, options.index, session)
    gpu = option_gpu(options.gpu, session.environ)
    files = pin_files(options.requirement_files, remote(), session.warn, "resolved")
    requirements = [*options.requirements, *(r for pins in files for r in pins.requirements)]
    with cluster_asked(options.ray, session.environ) as cluster:
        elsewhere = None
        if cluster is not None:
            from abifit.commands.cluster import directions_on

            elsewhere = directions_on(cluster, options.index, session.environ, host,
                                      options.host.python, remote().target)
        report = engine.resolve(requirements, options.withs, remote(), host, session.progress,
                                cuda=options.cuda, gpu=gpu, executable=options.host.python,
                                jobs=options.jobs, elsewhere=elsewhere)
    return replace(report, file_pins=tuple(pin for pins in files for pin in pins.pins))


def resolve(
    requirements: str | Sequence[str] = (),
    *,
    with_: str | Sequence[str] = (),
    requirement_files: str | Sequence[str] = (),
    cuda: int | None = None,
    gpu: str | None = None,
    jobs: int = 4,
    ray: str | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> ResolveReport:
    """The newest set of releases whose metadata agrees and whose binaries load together:
    what `abifit resolve` prints, as a report (`report.found`, `report.pins`, each pin's
    `newer` releases with why they were not chosen, or `report.conflict`).

    The arguments are `check`'s; `cuda` keeps only wheels built for that CUDA major (or none),
    and the host's driver (`assume_driver`, or the profile's) rejects CUDA builds it cannot
    run. `ray` (or RAY_ADDRESS) is a Ray cluster's address: each pair direction a task
    there, the search reading ahead as far as the cluster's CPUs.
    """
    return run_as_library(run_resolve, ResolveOptions(
        names(requirements), names(with_), names(requirement_files), cuda, gpu, jobs, ray,
        HostOptions(host, assume_driver, python), index_keywords("resolve", index)), progress)
