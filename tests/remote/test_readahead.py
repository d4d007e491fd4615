"""`ReadAhead`: a slow source read through it costs a handful of requests, fetched once even
when threads share it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from abifit.errors import FormatError
from abifit.remote.readahead import ReadAhead


class _CountingSource:
    """Bytes in memory that count the reads made of them (the requests a remote source makes)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.reads: list[tuple[int, int]] = []

    @property
    def name(self) -> str:
        return "<counted>"

    @property
    def size(self) -> int:
        return len(self._data)

    def read_at(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return self._data[offset:offset + length]


def test_read_ahead_widens_over_a_sequential_scan() -> None:
    """Reading 16 MiB front to back in 64 KiB pieces takes a few requests of up to 1 MiB each,
    not one per piece: a read that starts where the last fetch ended continues the scan."""
    data = bytes(range(256)) * (64 << 10)
    base = _CountingSource(data)
    source = ReadAhead(base)
    pieces = [source.read_at(offset, 64 << 10) for offset in range(0, len(data), 64 << 10)]
    assert b"".join(pieces) == data
    assert max(length for _offset, length in base.reads) == 1 << 20
    assert len(base.reads) <= 24, len(base.reads)
    base.reads.clear()
    assert source.read_at(0, 100) == data[:100]  # recent spans are kept: no request
    assert base.reads == []


def test_read_ahead_fetches_only_what_a_read_lacks() -> None:
    """A first fetch of `first` bytes; a read that runs past a held span fetches from the span's
    end, not the whole read again."""
    data = bytes(range(256)) * 4096
    base = _CountingSource(data)
    source = ReadAhead(base, granule=4096, first=10_000)
    assert source.read_at(100, 50) == data[100:150]
    assert base.reads == [(100, 10_000)]
    assert source.read_at(5000, 9000) == data[5000:14_000]
    assert base.reads[1][0] == 10_100  # the rest only
    assert sum(length for _offset, length in base.reads) < 10_000 + 9000


def test_threads_sharing_a_read_ahead_fetch_at_once() -> None:
    """Two threads that miss different spans of one read-ahead fetch them at the same time (the
    base only answers once both requests are in flight), and get their own bytes."""
    data = bytes(range(256)) * 4096
    gate = threading.Barrier(2, timeout=10)

    class Gated(_CountingSource):
        def read_at(self, offset: int, length: int) -> bytes:
            gate.wait()
            return super().read_at(offset, length)

    source = ReadAhead(Gated(data))
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda at: source.read_at(at, 100), [1000, 500_000]))
    assert got == [data[1000:1100], data[500_000:500_100]]


def test_a_read_waits_for_the_prefetch_that_holds_it() -> None:
    """A read inside a prefetch under way waits for it instead of fetching again; when the
    prefetch fails, the read fetches for itself."""
    data = bytes(range(256)) * 4096
    started = threading.Event()

    class Slow(_CountingSource):
        fail = False

        def read_at(self, offset: int, length: int) -> bytes:
            started.set()
            time.sleep(0.2)
            if self.fail:
                self.fail = False
                raise FormatError("slow", "dropped")
            return super().read_at(offset, length)

    base = Slow(data)
    source = ReadAhead(base)
    source.prefetch(600_000, 100_000)
    started.wait(5)
    assert source.read_at(650_000, 1000) == data[650_000:651_000]
    assert base.reads == [(600_000, 100_000)]
    base.fail = True
    source.prefetch(100_000, 50_000)
    assert source.read_at(120_000, 10) == data[120_000:120_010]
    assert base.reads[-1][0] == 120_000  # fetched by the read itself
