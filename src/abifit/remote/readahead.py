"""A read-ahead over a slow `ByteSource` (an `HttpSource`, a wheel on this machine): small
reads are rounded up, sequential reads fetch ever larger spans ahead, recent spans are kept,
and threads that share one wait for a fetch under way rather than fetching again."""

from __future__ import annotations

import threading
from collections import OrderedDict

from abifit.errors import AbifitError
from abifit.formats.sources import ByteSource, Layered, check_range


class ReadAhead(Layered):
    """A ByteSource over a slow one: small reads are rounded up, sequential reads fetch ever
    larger spans ahead, and recent spans are kept, so a zip parse or a streaming inflate costs a
    handful of requests. Threads may share one: fetches run outside its lock, so they overlap,
    and a read that a fetch under way holds waits for that fetch instead of fetching again."""

    def __init__(self, base: ByteSource, granule: int = 16 << 10, max_ahead: int = 1 << 20,
                 keep: int = 32 << 20, first: int = 0) -> None:
        super().__init__(base)
        self._granule = granule
        self._first = first  # the first fetch, at least
        self.max_ahead = max_ahead
        self._keep = keep
        self._spans: OrderedDict[int, bytes] = OrderedDict()
        self._kept = 0
        self._last_end = -1
        self._ahead = granule
        self._lock = threading.Lock()
        self._fetching: list[tuple[int, int, threading.Event]] = []  # (offset, end, done)

    def prime(self, offset: int, data: bytes) -> None:
        """Remember bytes already fetched (a suffix read for the zip directory)."""
        with self._lock:
            self._remember(offset, data)

    def _remember(self, offset: int, data: bytes) -> None:
        self._spans[offset] = data
        self._kept += len(data)
        while self._kept > self._keep and len(self._spans) > 1:
            _, old = self._spans.popitem(last=False)
            self._kept -= len(old)

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in reversed(self._spans.items()):
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start : offset - start + length]
        return None

    def _head(self, offset: int) -> bytes:
        """The bytes from `offset` to the end of a span that holds it (empty: none does)."""
        for start, data in reversed(self._spans.items()):
            if start <= offset < start + len(data):
                return data[offset - start :]
        return b""

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        if length == 0:
            return b""
        while True:
            with self._lock:
                known = self._cached(offset, length)
                if known is not None:
                    return known
                coming = self._coming(offset, length)
                if coming is None:
                    head = self._head(offset)
                    if not head:
                        fetch = self._fetch_size(offset, length)
                        done = self._start(offset, fetch)
                    break
            coming.wait()  # a fetch under way holds it: wait for that one, then look again
        if head:  # a read that runs past what is held: fetch only the rest
            return head + self.read_at(offset + len(head), length - len(head))
        return self._fetch(offset, fetch, done)[:length]

    def prefetch(self, offset: int, length: int) -> None:
        """Fetch `[offset, offset + length)` in the background; reads it holds wait for it."""
        length = min(length, self.size - offset)
        if offset < 0 or length <= 0:
            return
        with self._lock:
            done = self._start(offset, length)
        threading.Thread(target=self._fetch, args=(offset, length, done, True),
                         daemon=True).start()

    def _coming(self, offset: int, length: int) -> threading.Event | None:
        for start, end, done in self._fetching:
            if start <= offset and offset + length <= end:
                return done
        return None

    def _start(self, offset: int, length: int) -> threading.Event:
        done = threading.Event()
        self._fetching.append((offset, offset + length, done))
        return done

    def _fetch(self, offset: int, length: int, done: threading.Event,
               quiet: bool = False) -> bytes:
        data = b""
        try:
            data = self._base.read_at(offset, length)
        except AbifitError:
            if not quiet:  # a failed prefetch is fetched again by the read that needs it
                raise
        finally:
            with self._lock:
                if data:
                    self._remember(offset, data)
                self._fetching.remove((offset, offset + length, done))
            done.set()
        return data

    def _fetch_size(self, offset: int, length: int) -> int:
        """How much to fetch from `offset`: a read that starts where the last fetch ended
        continues a sequential scan, and the fetches ahead double."""
        if offset == self._last_end:
            self._ahead = min(self._ahead * 2, self.max_ahead)
        else:
            self._ahead = self._granule
        fetch = max(length, self._ahead)
        fetch = min(self.size - offset, -(-fetch // self._granule) * self._granule)
        if self._last_end < 0:
            fetch = min(self.size - offset, max(fetch, self._first))
        self._last_end = offset + fetch
        return fetch
