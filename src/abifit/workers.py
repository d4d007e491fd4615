"""CPU-bound work on the machine's other cores, in worker processes.

Reading a remote member spends most of its CPU in `abifit.formats.deflate`: the block-start
search is pure-Python arithmetic and holds the GIL, so the threads that read members at once
share one core. `run(function, *args)` hands such a call to an idle worker process, each a
plain interpreter that imports abifit and answers pickled calls on its standard streams, and waits
for the answer; the calling thread is free meanwhile, and other threads use other workers.

The workers are started on first use, one per core the process may run on (none on a single
core: calls then run in the calling thread), and end when abifit does: a worker reads its calls
from a pipe and exits when the pipe closes. A call whose worker cannot be started or dies runs
in the calling thread instead, and that worker is not used again. `ABIFIT_WORKERS` sets the
number of workers; 0 runs everything in-process.

Ctrl-C is the parent's business: a worker runs in a session of its own, so the signals of a
terminal (Ctrl-C, a hangup) never reach it, and it ignores SIGINT besides; `stop_workers` kills
the workers at once when abifit ends on an interrupt. A worker whose parent went away ends
quietly.

Workers are plain `subprocess` children, not `multiprocessing` ones: those re-import the main
module of the program that uses abifit, which is unsafe in a script without a
`__name__ == "__main__"` guard, and forking a process that has threads is unsafe too. The
`abifit` command itself knows its process: it asks (`fork_workers`) for workers that are forks
of it, made while it has one thread (else new interpreters, as above). A fork starts at once,
with abifit imported: a new interpreter spends about 0.13 CPU-seconds starting and importing,
which on two cores is time taken from the work itself.

`fork_call` is the other use of forks: one call computed by a fork made at that moment, which
holds everything the caller has built (doctor's parsed files and simulated processes) and so
needs nothing sent to it; `Tickets` shares work out between the caller and that fork as it is
done. The caller's threads that wait on workers are stopped first, so that it forks with one.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import heapq
import itertools
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Generic, TypeVar

from abifit.errors import AbifitError

R = TypeVar("R")

MAX_WORKERS = 16
_SERVE = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
          "sys.path.insert(0, sys.argv.pop(1)); from abifit.workers import serve; serve()")


class _WorkerDied(AbifitError):
    """The worker process ended or stopped answering in the middle of a call.

    Internal: `_Pool.run` catches it and runs the call in the calling thread."""


class _Forked:
    """A worker forked from this process: the part of `subprocess.Popen` that `_Worker` and
    its callers use (its pipes, signals, waiting)."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.002)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _fork(siblings: list[int]) -> _Forked:
    """A worker forked from this process; `siblings` are this process's ends of the other
    workers' pipes, closed in the new one so that each worker ends when this process does."""
    calls_in, calls_out = os.pipe()
    answers_in, answers_out = os.pipe()
    pid = _fork_or_close(calls_in, calls_out, answers_in, answers_out)  # the pool goes on
    if pid == 0:  # the worker: it never returns from here
        try:
            os.setsid()
            _detach((calls_out, answers_in, *siblings))
            serve(os.fdopen(calls_in, "rb"), os.fdopen(answers_out, "wb"))
        finally:
            os._exit(0)
    os.close(calls_in)
    os.close(answers_out)
    return _Forked(pid, os.fdopen(calls_out, "wb"), os.fdopen(answers_in, "rb"))


def _fork_or_close(*pipe_ends: int) -> int:
    """`os.fork()`; where no process can be made (a limit, memory), the pipe ends made for
    it are closed before its OSError is raised again."""
    try:
        return os.fork()
    except OSError:
        for fd in pipe_ends:
            os.close(fd)
        raise


def _detach(fds: Iterable[int]) -> None:
    """In a fork: ignore SIGINT (Ctrl-C is the parent's), close `fds` (the parent's ends of
    pipes), print nowhere the parent does, and start no workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in fds:
        os.close(fd)
    null = os.open(os.devnull, os.O_WRONLY)  # whatever it prints is not the parent's
    os.dup2(null, 1)
    os.environ["ABIFIT_WORKERS"] = "0"  # it computes its calls itself


def _forget_pool() -> None:
    """In a forked child: the parent's pool, its lock and its threads are the parent's."""
    global _lock, _pool, _submitter
    _lock = threading.Lock()
    _pool = None
    _submitter = None


class _Worker:
    """One worker process and its two pipes; used by one thread at a time. `siblings`, given
    for a forked one, are the pipes of the workers made before it."""

    def __init__(self, siblings: list[int] | None = None) -> None:
        self._process: subprocess.Popen[bytes] | _Forked
        if siblings is not None:
            self._process = _fork(siblings)
            return
        # the worker imports the abifit this process runs, wherever that came from
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "ABIFIT_WORKERS": "0"}  # a worker computes its calls itself
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, package_root],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
            start_new_session=True)

    def pipes(self) -> list[int]:
        return [f.fileno() for f in (self._process.stdin, self._process.stdout)
                if f is not None]

    def call(self, function: Callable[..., R], args: tuple[object, ...]) -> R:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        try:
            pickle.dump((function, args), stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
            ok, value = pickle.load(stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            raise _WorkerDied(str(e)) from e
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()

    def kill(self) -> None:
        """End the worker now, in the middle of a call or not, and reap it."""
        with contextlib.suppress(OSError):
            self._process.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=1.0)


class _Pool:
    """A slot per worker: a call takes a free slot, the waiting call of highest priority first
    (then the earliest), and gives it back. The slot of a worker that died holds None, and its
    calls run in the caller."""

    def __init__(self, size: int) -> None:
        self._free: list[_Worker | None] = []
        self._workers: list[_Worker] = []
        self._ready = threading.Condition()
        self._waiting: list[tuple[float, int]] = []  # heap of (-priority, ticket)
        self._tickets = itertools.count()
        forks = _forks_wanted()
        for _ in range(size):
            try:
                worker = _Worker([fd for w in self._workers for fd in w.pipes()]
                                 if forks else None)
            except (OSError, ValueError):
                break
            self._workers.append(worker)
            self._free.append(worker)

    @property
    def size(self) -> int:
        return len(self._workers)

    def run(self, function: Callable[..., R], args: tuple[object, ...], priority: float) -> R:
        slot = self._take(priority)
        try:
            if slot is not None:
                try:
                    return slot.call(function, args)
                except _WorkerDied:
                    slot.close()
                    slot = None
            return function(*args)
        finally:
            with self._ready:
                self._free.append(slot)
                self._ready.notify_all()

    def _take(self, priority: float) -> _Worker | None:
        with self._ready:
            place = (-priority, next(self._tickets))
            heapq.heappush(self._waiting, place)
            while not (self._free and self._waiting[0] == place):
                self._ready.wait()
            heapq.heappop(self._waiting)
            slot = self._free.pop()
            self._ready.notify_all()  # the next in line may take another free slot
            return slot

    def close(self) -> None:
        for worker in self._workers:
            worker.close()

    def kill(self) -> None:
        for worker in self._workers:
            worker.kill()


_lock = threading.Lock()
_pool: _Pool | None = None
_forking = False


def fork_workers() -> None:
    """Make the workers started from now on forks of this process, while it has no other
    thread (see the module's notes): for a program that knows its process, as `abifit` does."""
    global _forking
    _forking = True


def _forks_wanted() -> bool:
    return (_forking and hasattr(os, "fork") and threading.active_count() == 1
            and threading.current_thread() is threading.main_thread())


def workers_wanted() -> int:
    """`ABIFIT_WORKERS`, else the cores this process may run on (none when that is one)."""
    text = os.environ.get("ABIFIT_WORKERS", "").strip()
    if text:
        try:
            return max(0, min(MAX_WORKERS, int(text)))
        except ValueError:
            pass
    cores = usable_cores()
    return 0 if cores <= 1 else min(MAX_WORKERS, cores)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _get_pool() -> _Pool | None:
    global _pool
    with _lock:
        if _pool is None:
            _pool = _Pool(workers_wanted())
            atexit.register(_pool.close)
        return _pool if _pool.size > 0 else None


def run(function: Callable[..., R], *args: object, priority: float = 0.0) -> R:
    """`function(*args)`, computed by a worker process when there are workers (the function
    and its arguments must pickle: a module-level function and plain data). While all workers
    are busy, calls of higher `priority` go first."""
    pool = _get_pool()
    if pool is None:
        return function(*args)
    return pool.run(function, args, priority)


_submitter: ThreadPoolExecutor | None = None
os.register_at_fork(after_in_child=_forget_pool)


def parallel() -> bool:
    """Whether there are worker processes to `submit` to."""
    return _get_pool() is not None


def submit(function: Callable[..., R], *args: object, priority: float = 0.0) -> Future[R]:
    """`run(function, *args)` from a thread of a pool as large as the workers' (a call queued
    while every worker is busy takes no core): the future of its answer."""
    global _submitter
    with _lock:
        if _submitter is None:
            _submitter = ThreadPoolExecutor(max(1, workers_wanted()),
                                            thread_name_prefix="abifit-cores")
        submitter = _submitter
    return submitter.submit(run, function, *args, priority=priority)


class Beside(Generic[R]):
    """`function(*args)` computed in a thread of its own from now on, while the caller goes on
    (a probe that waits on a driver or a process); `result` waits for the answer and for the
    thread's end, so that the process has one thread again, as `fork_call` needs."""

    def __init__(self, function: Callable[..., R], *args: object) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="abifit-beside")
        self._future = self._pool.submit(function, *args)

    def result(self) -> R:
        """The answer (the call's exception raised again)."""
        try:
            return self._future.result()
        finally:
            self._pool.shutdown(wait=True)


class Apart(Generic[R]):
    """`function(*args)` computed beside the caller from now on, by a fork of this process
    where `fork_call` makes one, else in a thread (`Beside`). For a call of many system calls
    (a warm `doctor`'s check of the paths its kept run observed): in a thread, each of them
    waits for the interpreter's lock again while the caller runs Python (up to the switch
    interval, 5 ms), and a fork has a lock of its own. `result` waits for the answer (the
    call's exception raised again); where the fork ended without one, the caller computes it.
    The function's answer must pickle."""

    def __init__(self, function: Callable[..., R], *args: object) -> None:
        self._call = functools.partial(function, *args)
        self._forked = fork_call(self._call)
        self._beside = Beside(self._call) if self._forked is None else None

    def result(self) -> R:
        if self._beside is not None:
            return self._beside.result()
        assert self._forked is not None
        try:
            return self._forked.result()
        except ForkFailed:
            return self._call()


class ForkFailed(AbifitError):
    """A `fork_call` fork ended without its answer (killed, or its answer unreadable).

    Internal: the caller computes what the fork would have."""


class ForkedCall(Generic[R]):
    """A call a fork of this process computes (`fork_call`); `result` waits for its answer."""

    def __init__(self, pid: int, answers: IO[bytes]) -> None:
        self._pid = pid
        self._answers = answers

    def result(self) -> R:
        """The answer (the fork's exception raised again); ForkFailed when there is none."""
        try:
            data = self._answers.read()
        finally:
            self._answers.close()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
        try:
            ok, value = pickle.loads(data)
        except Exception as e:  # it died before answering, or in the middle of it
            raise ForkFailed(f"the fork ended without an answer ({len(data)} bytes)") from e
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]


def fork_call(function: Callable[[], R]) -> ForkedCall[R] | None:
    """`function()` computed by a fork of this process made now, beside the caller: the fork
    holds everything the caller does, so nothing is sent to it, and its answer is pickled
    back. For the `abifit` command only (`fork_workers`): None in a library, on one core,
    while another thread runs a call (`submit`), or when no process can be made: the caller
    computes it then. The calls submitted are waited for first, those not started yet
    cancelled (their callers take them back), so that the process has one thread when it
    forks. The fork runs no workers of its own, prints nothing, ignores SIGINT, and its reads
    are its own (`abifit.host.observe` forgets the caller's recordings in it)."""
    global _submitter
    if not _forking or workers_wanted() == 0:
        return None
    with _lock:
        submitter, _submitter = _submitter, None
    if submitter is not None:
        submitter.shutdown(wait=True, cancel_futures=True)
    if not _forks_wanted():
        return None
    answers_in, answers_out = os.pipe()
    gc.freeze()  # the collector of neither process walks (and so copies) what both hold
    try:
        pid = _fork_or_close(answers_in, answers_out)
    except OSError:  # the caller computes it
        gc.unfreeze()
        return None
    if pid == 0:  # the fork: it never returns from here
        try:
            _detach((answers_in,))
            try:
                answer: tuple[bool, object] = (True, function())
            except Exception as e:  # raised again in the caller
                answer = (False, e)
            with os.fdopen(answers_out, "wb") as out:
                out.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        finally:
            os._exit(0)
    os.close(answers_out)
    return ForkedCall(pid, os.fdopen(answers_in, "rb"))


class Tickets:
    """The numbers 0 to `count` - 1, taken one at a time, each once, by this process and the
    forks it makes after (`fork_call`): work shared out as it is done, not in parts fixed
    beforehand. They wait in a pipe, read four bytes at a time (a read that size is atomic)."""

    SIZE = 4
    MAX = 65536 // SIZE  # what a pipe holds unread

    def __init__(self, count: int) -> None:
        if count > self.MAX:
            raise ValueError(f"at most {self.MAX} tickets, not {count}")
        self._in, out = os.pipe()
        try:
            os.write(out, b"".join(i.to_bytes(self.SIZE, "little") for i in range(count)))
        finally:
            os.close(out)

    def take(self) -> int | None:
        """The next number; None when all are taken."""
        data = os.read(self._in, self.SIZE)
        return int.from_bytes(data, "little") if data else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._in)


def stop_workers() -> None:
    """Kill the worker processes now (abifit is ending on Ctrl-C), and reap them: nothing is
    left running. A call in flight then runs in its caller's thread, as after any worker's
    death. Safe in a signal handler: it takes no lock."""
    pool = _pool
    if pool is not None:
        pool.kill()


def serve(reader: IO[bytes] | None = None, writer: IO[bytes] | None = None) -> None:
    """A worker's loop: answer pickled `(function, args)` calls with `(True, result)` or
    `(False, exception)` until the input ends or nobody reads the answers."""
    reader = reader or sys.stdin.buffer
    writer = writer or sys.stdout.buffer
    while True:
        try:
            function, args = pickle.load(reader)
        except (EOFError, OSError):
            return
        try:
            answer: tuple[bool, object] = (True, function(*args))
        except Exception as e:  # sent back, raised in the caller
            answer = (False, e)
        try:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # an answer that does not pickle
            data = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
        try:
            writer.write(data)
            writer.flush()
        except OSError:  # the parent went away
            return
