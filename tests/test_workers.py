"""`abifit.workers`: calls computed by worker processes answer as the calls themselves
would, errors come back as themselves, and a worker that dies costs nothing but its speed."""

from __future__ import annotations

import io
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

import abifit
from abifit import workers
from abifit.errors import ElfError, FormatError
from abifit.formats import deflate

SRC = Path(abifit.__file__).resolve().parents[1]


def _stream() -> tuple[bytes, bytes]:
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefghij_") for _ in range(rng.randint(3, 12)))
             for _ in range(2000)]
    plain = b"\0".join(rng.choice(words) for _ in range(150_000))
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    return plain, packer.compress(plain) + packer.flush()


def test_a_worker_decodes_as_this_process_does() -> None:
    plain, packed = _stream()
    tail = packed[-(len(packed) // 3):]
    pool = workers._Pool(1)
    try:
        assert pool.size == 1
        assert pool.run(os.getpid, (), 0) != os.getpid()  # another process answers
        remote = pool.run(deflate.decode_tail, (tail, len(plain), "m"), 0)
    finally:
        pool.close()
    local = deflate.decode_tail(tail, len(plain), "m")
    assert remote == local
    assert remote.start > 0 and plain.endswith(remote.data[len(remote.other):])


def test_errors_come_back_as_themselves() -> None:
    pool = workers._Pool(1)
    try:
        with pytest.raises(FormatError) as caught:
            pool.run(deflate.decode_tail, (b"\x00" * 5000, 9000, "lib.so"), 0)
        error = ElfError("lib.so", "truncated", 0x40)
        assert pickle.loads(pickle.dumps(error)).args == error.args
    finally:
        pool.close()
    assert caught.value.where == "lib.so"
    assert "no DEFLATE block start" in caught.value.problem or "consistent" in caught.value.problem


def test_a_dead_worker_leaves_its_calls_to_the_caller() -> None:
    pool = workers._Pool(1)
    try:
        worker = pool._workers[0]
        worker._process.kill()
        worker._process.wait()
        assert pool.run(sum, ([1, 2, 3],), 0) == 6  # answered here, not by the dead worker
        assert pool.run(divmod, (7, 2), 0) == (3, 1)
    finally:
        pool.close()


def test_ctrl_c_is_for_the_parent_to_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker is out of reach of the terminal's Ctrl-C (a session of its own) and ignores
    SIGINT besides; `stop_workers` kills and reaps every worker at once."""
    pool = workers._Pool(2)
    monkeypatch.setattr(workers, "_pool", pool)
    try:
        processes = [w._process for w in pool._workers]
        assert all(os.getsid(p.pid) == p.pid for p in processes)
        calls = [threading.Thread(target=pool.run, args=(time.sleep, (0.3,), 0))
                 for _ in processes]  # at once: each worker answers one, so it has started
        for call in calls:
            call.start()
        for call in calls:
            call.join()
        for process in processes:
            process.send_signal(signal.SIGINT)
        time.sleep(0.1)
        assert all(p.poll() is None for p in processes)  # alive
        assert pool.run(os.getpid, (), 0) in {p.pid for p in processes}  # and answering
        started = time.monotonic()
        workers.stop_workers()
        assert time.monotonic() - started < 1.0
        assert all(p.returncode == -signal.SIGKILL for p in processes)
        assert pool.run(divmod, (7, 2), 0) == (3, 1)  # the caller answers now
    finally:
        pool.close()


def test_no_workers_when_asked_for_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABIFIT_WORKERS", "0")
    assert workers.workers_wanted() == 0
    monkeypatch.setenv("ABIFIT_WORKERS", "3")
    assert workers.workers_wanted() == 3
    monkeypatch.setenv("ABIFIT_WORKERS", "many")  # not a number: the cores decide
    assert workers.workers_wanted() == (0 if len(os.sched_getaffinity(0)) == 1
                                      else min(workers.MAX_WORKERS, len(os.sched_getaffinity(0))))


def test_the_serve_loop_answers_each_call_then_ends() -> None:
    calls = io.BytesIO()
    for call in ((divmod, (17, 5)), (int, ("not a number",)), (len, (b"abc",))):
        pickle.dump(call, calls)
    calls.seek(0)
    answers = io.BytesIO()
    workers.serve(calls, answers)
    answers.seek(0)
    first, second, third = (pickle.load(answers) for _ in range(3))
    assert first == (True, (3, 2))
    assert second[0] is False and isinstance(second[1], ValueError)
    assert third == (True, 3)
    with pytest.raises(EOFError):
        pickle.load(answers)


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_waiting_calls_of_higher_priority_go_first() -> None:
    """With the one worker busy, calls queued with priorities 1, 3, 2 run as 3, 2, 1."""
    pool = workers._Pool(1)
    order: list[int] = []
    try:
        blocker = threading.Thread(target=pool.run, args=(time.sleep, (0.3,), 0))
        blocker.start()
        _until(lambda: not pool._free)  # the worker is busy
        waiting = []
        for n, priority in enumerate((1, 3, 2), 1):
            thread = threading.Thread(target=lambda p=priority: order.append(
                pool.run(abs, (-p,), p)))
            thread.start()
            waiting.append(thread)
            _until(lambda n=n: len(pool._waiting) == n)  # queued in this order
        for thread in (blocker, *waiting):
            thread.join(10)
    finally:
        pool.close()
    assert order == [3, 2, 1]


_FORKED = r'''
import os, signal, subprocess, threading, time
from abifit.host import observe
from abifit import workers



def recordings() -> int:
    return len(observe._recorders)


assert threading.active_count() == 1
workers.fork_workers()
with observe.recording():  # forked while this process records: the workers do not
    pool = workers._Pool(2)
    assert recordings() == 1 and {w.call(recordings, ()) for w in pool._workers} == {0}
first, second = (w._process for w in pool._workers)
assert isinstance(first, workers._Forked) and isinstance(second, workers._Forked)
# forks of this process, each in a session of its own, answering for it
assert [w.call(os.getpid, ()) for w in pool._workers] == [first.pid, second.pid]
assert {w.call(os.getppid, ()) for w in pool._workers} == {os.getpid()}
assert all(os.getsid(p.pid) == p.pid for p in (first, second))
try:
    pool.run(int, ("not a number",), 0)
except ValueError:
    pass
else:
    raise AssertionError("the error did not come back")
pool.run(print, ("printed by a worker",), 0)  # nowhere near this process's output
# the terminal's Ctrl-C does not reach them, and they ignore SIGINT besides
os.kill(first.pid, signal.SIGINT)
time.sleep(0.1)
assert first.poll() is None and pool.run(divmod, (7, 2), 0) == (3, 1)
# each ends when its own pipe closes: the second holds none of the first's
pool._workers[0].close()
assert first.wait(timeout=5) == 0 and second.poll() is None
# a dead worker leaves its calls to the caller; stop_workers kills and reaps at once
workers._pool = pool
workers.stop_workers()
assert second.returncode == -signal.SIGKILL
assert pool.run(divmod, (9, 4), 0) == (2, 1)
# with another thread running, workers are new interpreters again
threading.Thread(target=time.sleep, args=(0.5,)).start()
late = workers._Pool(1)
assert isinstance(late._workers[0]._process, subprocess.Popen)
late.close()
print("done")
'''


def _runs_to_the_end(script: Path, text: str) -> None:
    """The script `text`, run as `script` in a fresh interpreter, passes its asserts."""
    script.write_text(text)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"


def test_forked_workers_answer_like_new_interpreters(tmp_path: Path) -> None:
    """What the `abifit` command asks for (`fork_workers`), in a fresh process that has one
    thread: workers forked from it answer calls, send errors back, keep out of its output and
    its recordings, ignore Ctrl-C, each end when its own pipe closes, and are killed by
    `stop_workers`; a process with another thread gets new interpreters instead."""
    _runs_to_the_end(tmp_path / "forked.py", _FORKED)


_FORK_CALL = '''
import os, pickle, sys, threading, time
from abifit.host import observe
from abifit import workers

os.environ["ABIFIT_WORKERS"] = "2"
assert workers.fork_call(os.getpid) is None  # not asked for: a library does not fork
workers.fork_workers()
state = {"parent": os.getpid()}

def answer():
    print("from the fork")  # its stdout is not the caller's
    with observe.recording() as recorder:
        observe.isfile(__file__)
    return os.getpid(), state["parent"], workers.workers_wanted(), len(recorder.seen)

# a call submitted and running is waited for, so that the process forks with one thread
running = workers.submit(time.sleep, 0.3)
time.sleep(0.1)
fork = workers.fork_call(answer)
assert fork is not None and running.done()
pid, parent, wanted, seen = fork.result()
assert (parent, wanted, seen) == (os.getpid(), 0, 1) and pid != os.getpid()
assert workers.submit(divmod, 9, 4).result() == (2, 1)  # submitting again works

def fails():
    raise KeyError("raised in the fork")

try:
    workers.fork_call(fails).result()
except KeyError as e:
    assert "raised in the fork" in str(e)
else:
    raise AssertionError("the fork's error was not raised again")
try:
    workers.fork_call(lambda: os._exit(3)).result()
except workers.ForkFailed:
    pass
else:
    raise AssertionError("a fork that died answered")

# tickets: each number taken once, by this process or the fork, however they interleave
tickets = workers.Tickets(500)
def take():
    got = []
    while (t := tickets.take()) is not None:
        got.append(t)
        time.sleep(0.0005)
    return got
fork = workers.fork_call(take)
here = take()
there = fork.result()
tickets.close()
assert here and there, (len(here), len(there))
assert sorted(here + there) == list(range(500))
try:
    workers.Tickets(workers.Tickets.MAX + 1)
except ValueError:
    pass
else:
    raise AssertionError("more tickets than a pipe holds")

# another thread running: no fork
stop = threading.Event()
threading.Thread(target=stop.wait).start()
assert workers.fork_call(os.getpid) is None
stop.set()
print("done")
'''


def test_a_call_made_by_a_fork_of_this_process(tmp_path: Path) -> None:
    """`fork_call`, in a fresh process that asked for forks: the submitted calls are settled
    first (one running waited for), the fork answers with what it computed from this
    process's state, with recordings and no workers of its own, without printing into this
    process's output; its error is raised here, its death is ForkFailed. Tickets shared with
    a fork are each taken once. A library, or a process with another thread, gets no fork."""
    _runs_to_the_end(tmp_path / "fork_call.py", _FORK_CALL)


_APART = '''
import os, threading
from abifit import workers

os.environ["ABIFIT_WORKERS"] = "2"
here = os.getpid()
# a library does not fork: the call is made in a thread of this process
assert workers.Apart(os.getpid).result() == here and threading.active_count() == 1
workers.fork_workers()
apart = workers.Apart(divmod, 9, 4)
assert threading.active_count() == 1  # a fork, not a thread
assert apart.result() == (2, 1)
assert workers.Apart(os.getpid).result() != here  # computed by the fork

def only_here():  # a fork that dies leaves the call to the caller
    if os.getpid() != here:
        os._exit(3)
    return "here"

assert workers.Apart(only_here).result() == "here"

def fails():
    raise KeyError("raised apart")

try:
    workers.Apart(fails).result()
except KeyError as e:
    assert "raised apart" in str(e)
else:
    raise AssertionError("the error was not raised again")
# no process can be made: a thread
forking = os.fork
def refused():
    raise BlockingIOError(11, "Resource temporarily unavailable")
os.fork = refused
open_fds = len(os.listdir("/proc/self/fd"))
assert workers.fork_call(os.getpid) is None
assert workers.Apart(os.getpid).result() == here
assert workers._Pool(2).size == 0  # a pool of no worker: its calls run in the caller
assert len(os.listdir("/proc/self/fd")) == open_fds  # no pipe left open
os.fork = forking
# another thread running: no fork, a thread
stop = threading.Event()
threading.Thread(target=stop.wait).start()
assert workers.Apart(os.getpid).result() == here
stop.set()
print("done")
'''


def test_a_call_apart_is_made_by_a_fork_else_in_a_thread(tmp_path: Path) -> None:
    """`Apart` has a fork of this process make the call where `fork_call` makes one (no thread
    is started), else a thread (a library, another thread running, no process can be made:
    then a pool has no worker either, and no pipe is left open); its error is raised here,
    and where the fork dies the caller makes the call."""
    _runs_to_the_end(tmp_path / "apart.py", _APART)


def test_a_call_beside_answers_and_leaves_one_thread() -> None:
    """`Beside` runs its call in a thread of its own while the caller goes on; once its
    answer (or its exception) is taken, that thread has ended, as a fork needs."""
    before = threading.active_count()
    started = threading.Event()

    def slow(value: int) -> int:
        started.set()
        time.sleep(0.05)
        return value * 2

    beside = workers.Beside(slow, 21)
    assert started.wait(5) and threading.active_count() == before + 1
    assert beside.result() == 42
    assert threading.active_count() == before

    def fails() -> None:
        raise ValueError("probe failed")

    with pytest.raises(ValueError, match="probe failed"):
        workers.Beside(fails).result()
    assert threading.active_count() == before
