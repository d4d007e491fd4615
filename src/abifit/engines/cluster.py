"""Work spread over a Ray cluster: each wheel to read, grid cell to check or pair direction to
judge is a Ray task.

The driver (this process) submits the tasks, a few more than the cluster has CPUs at a time
(`Cluster.map`), or one for each call of its threads (`Cluster.calls`: resolve's pair checks),
and takes each result as it comes: Ray retries a task whose worker or node died
(`RETRIES` times), so a task must be idempotent, and returns what it made as a value; the
driver alone writes (the symbol store, the report). Results are given back in the order of the
items, whatever order the tasks end in, so that a run records and reports exactly what a run
without the cluster does.

Ray is imported only here, and only when a cluster is asked for (`--ray ADDRESS`, or
`RAY_ADDRESS`): it is the optional extra `abifit[ray]`, and importing abifit never imports it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from abifit.errors import AbifitError, UsageError, first_line

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[str], None]

RAY_ADDRESS = "RAY_ADDRESS"  # the variable Ray itself reads
RETRIES = 3  # a task whose worker or node died runs again, up to this many times


class ClusterError(AbifitError):
    """A Ray cluster that could not be reached or that lost a task for good."""


@dataclass(frozen=True, slots=True)
class TaskFailed:
    """A task that raised, or whose retries ran out: why, in one line."""

    reason: str


@dataclass(frozen=True, slots=True)
class Tally:
    """How far the tasks are: for the progress line."""

    total: int
    done: int = 0
    failed: int = 0
    bytes: int = 0
    started: float = 0.0

    def line(self, what: str, now: float) -> str:
        elapsed = max(now - self.started, 1e-6)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta = f"ETA {left:.0f} s" if left != float("inf") else "ETA -"
        return (f"{self.done}/{self.total} {what} done, {rate:.2f}/s, "
                f"{self.bytes / 1e6:.1f} MB, {eta}, {self.failed} failed")


def cluster_address(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The cluster asked for: `--ray ADDRESS`, else `RAY_ADDRESS`; None: no cluster."""
    return given or environ.get(RAY_ADDRESS) or None


@contextlib.contextmanager
def cluster_asked(given: str | None, environ: Mapping[str, str]) -> Iterator[Cluster | None]:
    """The cluster asked for (`cluster_address`), connected for the block; None where none
    is asked for."""
    address = cluster_address(given, environ)
    if address is None:
        yield None
        return
    with Cluster(address) as cluster:
        yield cluster


def _answers(address: str, timeout: float = 10.0) -> None:
    """A `HOST:PORT` address whose port takes no connection is an error at once (Ray itself
    waits minutes for it); other forms (`auto`, `ray://...`) are left to Ray."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ClusterError(f"--ray {address}: no Ray cluster answers there "
                           f"({e.strerror or e})") from e


class Cluster:
    """A connection to a running Ray cluster (`ray start --head` and its worker nodes), as a
    context: it is made on entry and ended on exit. Meanwhile what Ray prints of its own (a
    task retried after its node died) goes to stderr: Ray prints it on stdout, where a
    command's report, or its JSON, goes."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._quiet = contextlib.redirect_stdout(sys.stderr)
        self._lock = threading.Lock()
        self._remotes: dict[Callable[..., Any], Any] = {}

    def __enter__(self) -> Cluster:
        self._quiet.__enter__()
        try:
            self._connect()
        except BaseException:
            self._quiet.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            self._ray.shutdown()
        finally:
            self._quiet.__exit__(None, None, None)

    def _connect(self) -> None:
        address = self.address
        try:
            import ray
        except ImportError as e:
            raise UsageError("--ray: Ray is not installed",
                             hint="pip install 'abifit[ray]'") from e
        self._ray = ray
        _answers(address)
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False,
                     ignore_reinit_error=True, include_dashboard=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterError(f"--ray {address}: no Ray cluster answers there "
                               f"({first_line(e)})"
                               ) from e

    @property
    def cpus(self) -> int:
        """The CPUs the cluster offers now (at least 1)."""
        resources: dict[str, float] = self._ray.cluster_resources()  # type: ignore[no-untyped-call, unused-ignore]
        return max(1, int(resources.get("CPU", 1)))

    def map(self, function: Callable[..., R], items: Sequence[T],
            arguments: Callable[[T], tuple[Any, ...]], shared: Sequence[Any], *,
            progress: Progress, what: str, size: Callable[[R], int] = lambda _r: 0,
            ) -> Iterator[tuple[T, R | TaskFailed]]:
        """`function(*shared, *arguments(item))` for each item as a Ray task, the results in
        the order of `items` (each as soon as it and those before it are done). `shared` is put
        in the object store once. A task that raised, or whose retries ran out, gives a
        `TaskFailed` in its place."""
        ray = self._ray
        remote = self._remote(function)
        refs = [ray.put(value) for value in shared]
        window = 2 * self.cpus
        tally = Tally(len(items), started=time.monotonic())
        pending: dict[Any, int] = {}
        finished: dict[int, R | TaskFailed] = {}
        submitted = given = 0
        while given < len(items):
            while submitted < len(items) and len(pending) < window:
                ref = remote.remote(*refs, *arguments(items[submitted]))
                pending[ref] = submitted
                submitted += 1
            ready, _rest = ray.wait(list(pending), num_returns=1, timeout=5.0)
            for ref in ready:
                index = pending.pop(ref)
                result = self._result(ref)
                finished[index] = result
                tally = Tally(tally.total, tally.done + 1,
                              tally.failed + isinstance(result, TaskFailed),
                              tally.bytes + (0 if isinstance(result, TaskFailed)
                                             else size(result)), tally.started)
            progress(tally.line(what, time.monotonic()))
            while given in finished:
                yield items[given], finished.pop(given)
                given += 1

    def calls(self, function: Callable[..., R], shared: Sequence[Any]
              ) -> Callable[..., R | TaskFailed]:
        """A call that runs `function(*shared, *args)` as one Ray task (retried as `map`'s
        are) and waits for it: its result, or a `TaskFailed`. `shared` is put in the object
        store once; many threads may call at once, each waiting for its own task."""
        ray = self._ray
        remote = self._remote(function)
        refs = [ray.put(value) for value in shared]

        def call(*args: Any) -> R | TaskFailed:
            try:
                ref = remote.remote(*refs, *args)
            except ray.exceptions.RayError as e:  # not submitted: the cluster went away
                return TaskFailed(f"not submitted: {first_line(e)}")
            result: R | TaskFailed = self._result(ref)
            return result

        return call

    def _remote(self, function: Callable[..., Any]) -> Any:
        """`function` as a Ray remote function with abifit's retries, made once (each made
        anew would be exported to the cluster anew)."""
        with self._lock:
            remote = self._remotes.get(function)
            if remote is None:
                remote = self._ray.remote(function).options(max_retries=RETRIES,
                                                            retry_exceptions=False)
                self._remotes[function] = remote
        return remote

    def _result(self, ref: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # the task raised: its own error, one line
            cause = e.cause if getattr(e, "cause", None) is not None else e
            return TaskFailed(first_line(cause))
        except ray.exceptions.RayError as e:  # its worker or node died past the retries
            return TaskFailed(f"lost after {RETRIES} retries: {first_line(e)}")
