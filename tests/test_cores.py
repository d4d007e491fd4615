"""`abifit.remote.cores`: calls computed by worker processes answer as the calls themselves
would, errors come back as themselves, and a worker that dies costs nothing but its speed."""

from __future__ import annotations

import io
import os
import pickle
import random
import signal
import threading
import time
import zlib
from collections.abc import Callable

import pytest

from abifit.errors import ElfError, FormatError
from abifit.remote import cores, deflate


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
    pool = cores._Pool(1)
    try:
        assert pool.size == 1
        assert pool.run(os.getpid, (), 0) != os.getpid()  # another process answers
        remote = pool.run(deflate.decode_tail, (tail, len(plain), "m"), 0)
    finally:
        pool.close()
    local = deflate.decode_tail(tail, len(plain), "m")
    assert remote == local
    assert remote.start > 0 and plain.endswith(remote.data[len(remote.mask):])


def test_errors_come_back_as_themselves() -> None:
    pool = cores._Pool(1)
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
    pool = cores._Pool(1)
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
    pool = cores._Pool(2)
    monkeypatch.setattr(cores, "_pool", pool)
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
        cores.stop_workers()
        assert time.monotonic() - started < 1.0
        assert all(p.returncode == -signal.SIGKILL for p in processes)
        assert pool.run(divmod, (7, 2), 0) == (3, 1)  # the caller answers now
    finally:
        pool.close()


def test_no_workers_when_asked_for_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ABIFIT_WORKERS", "0")
    assert cores.workers_wanted() == 0
    monkeypatch.setenv("ABIFIT_WORKERS", "3")
    assert cores.workers_wanted() == 3
    monkeypatch.setenv("ABIFIT_WORKERS", "many")  # not a number: the cores decide
    assert cores.workers_wanted() == (0 if len(os.sched_getaffinity(0)) == 1
                                      else min(cores.MAX_WORKERS, len(os.sched_getaffinity(0))))


def test_the_serve_loop_answers_each_call_then_ends() -> None:
    calls = io.BytesIO()
    for call in ((divmod, (17, 5)), (int, ("not a number",)), (len, (b"abc",))):
        pickle.dump(call, calls)
    calls.seek(0)
    answers = io.BytesIO()
    cores.serve(calls, answers)
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
    pool = cores._Pool(1)
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
