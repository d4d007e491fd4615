"""The tasks a Ray cluster runs for `index add --ray`, `matrix --ray` and `resolve --ray`, and
how they are given out (`abifit.engines.cluster`).

A task runs in a Ray worker process on any node: it opens the index as the driver's options
and environment say (the `PIP_*`, `UV_*` and proxy variables of the driver travel with it, so
that every node asks the same index), reads through the node's own cache (the driver's
`--cache-dir` where one is given, which suits one machine or a shared file system), for the
driver's target (a matrix cell: its own, one of the grid's Pythons), and returns a value: the
driver is the only writer (of the symbol store, and of resolve's pair verdicts in its cache).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from abifit.commands.contexts import IndexOptions, Session
from abifit.engines.cluster import Cluster, TaskFailed
from abifit.engines.index import ReadElsewhere, WheelRead, read_for_store
from abifit.engines.pairs import Cell, cell_of, check_pair
from abifit.engines.pairwise import Elsewhere, PairJudge, PairVerdict, label

if TYPE_CHECKING:
    from abifit.engines.cluster import Progress
    from abifit.engines.matrix import CellsElsewhere, Pair
    from abifit.host.profile import HostProfile
    from abifit.remote.packageindex import IndexFile, Target
    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gputarget import GpuTarget

TRAVELS = ("PIP_", "UV_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy",
           "https_proxy", "all_proxy", "no_proxy", "NETRC", "ABIFIT_CACHE_DIR")


def travelling(environ: Mapping[str, str]) -> dict[str, str]:
    """The driver's variables that say which index a task asks, and how."""
    return {k: v for k, v in environ.items() if k.startswith(TRAVELS)}


def _session(environ: Mapping[str, str]) -> Session:
    """The task's session: the worker's environment with the driver's variables over it."""
    return Session({**os.environ, **environ})


def _context(index: IndexOptions, target: Target, session: Session) -> RemoteContext:
    return replace(session.index(index)(), target=target)


def read_wheel_task(index: IndexOptions, environ: Mapping[str, str], target: Target,
                    file: IndexFile) -> WheelRead:
    """A Ray task: one wheel read for the store (`engines.index.read_for_store`)."""
    session = _session(environ)
    try:
        return read_for_store(file, _context(index, target, session), lambda _m: None)
    finally:
        session.close()


def check_cell_task(index: IndexOptions, environ: Mapping[str, str], host: HostProfile,
                    executable: str | None, gpu: GpuTarget | None, target: Target,
                    extension: str | IndexFile, file: IndexFile, release: str) -> Cell:
    """A Ray task: one cell of a matrix (`engines.pairs.check_pair`), for its own target (the
    cells of a grid are for several Pythons)."""
    session = _session(environ)
    try:
        return check_pair(extension, file, _context(index, target, session), target,
                          host, executable, gpu, release)
    finally:
        session.close()


def judge_direction_task(index: IndexOptions, environ: Mapping[str, str], host: HostProfile,
                         executable: str | None, target: Target, extension: IndexFile,
                         other: IndexFile) -> PairVerdict:
    """A Ray task: one direction of a pair of resolve (`PairJudge.judged`: whether the
    extension binds to the other wheel, and if so the check of the two)."""
    session = _session(environ)
    try:
        judge = PairJudge(_context(index, target, session), host, lambda _m: None, executable,
                          jobs=1)
        try:
            return judge.judged(extension, other)
        finally:
            judge.close()
    finally:
        session.close()


def wheels_on(cluster: Cluster, index: IndexOptions, environ: Mapping[str, str],
              target: Target) -> ReadElsewhere:
    """`index add`'s reading of wheels, a task each on `cluster`."""

    def read(files: Sequence[IndexFile],
             progress: Progress) -> Iterator[tuple[IndexFile, WheelRead | TaskFailed]]:
        return cluster.map(read_wheel_task, files, lambda f: (f,),
                           (index, travelling(environ), target), progress=progress,
                           what="wheels", size=lambda r: r.wheel.bytes_fetched)

    return read


def cells_on(cluster: Cluster, index: IndexOptions, environ: Mapping[str, str],
             host: HostProfile, executable: str | None,
             gpu: GpuTarget | None) -> CellsElsewhere:
    """`matrix`'s cells, a task each on `cluster`: every cell of a grid in one map, each
    with its pair's target, so that the cluster is kept busy across the grid's matrices."""

    def check(pairs: Sequence[Pair], progress: Progress) -> list[Cell]:
        found = cluster.map(check_cell_task, pairs,
                            lambda p: (p.target, p.extension, p.host, p.release),
                            (index, travelling(environ), host, executable, gpu),
                            progress=progress, what="cells")
        return [_cell(pair, result) for pair, result in found]

    return check


def directions_on(cluster: Cluster, index: IndexOptions, environ: Mapping[str, str],
                  host: HostProfile, executable: str | None, target: Target) -> Elsewhere:
    """`resolve`'s pair directions, a task each on `cluster`, judged as many at once as it has
    CPUs; a task that failed is a verdict with its reason as the error."""
    call = cluster.calls(judge_direction_task,
                         (index, travelling(environ), host, executable, target))

    def judge(extension: IndexFile, other: IndexFile) -> PairVerdict:
        found = call(extension, other)
        if isinstance(found, TaskFailed):
            return PairVerdict(label(extension), label(other), True, False, error=found.reason)
        return found

    return Elsewhere(judge, cluster.cpus)


def _cell(pair: Pair, result: Cell | TaskFailed) -> Cell:
    if not isinstance(result, TaskFailed):
        return result
    extension = pair.extension
    filename = extension if isinstance(extension, str) else extension.filename
    return cell_of(pair.host, None, result.reason, pair.release, filename)
