"""Random-access byte sources: the one seam through which every format reader gets its bytes.

A `ByteSource` has a `name` (for error messages), a `size`, and `read_at(offset, length)`, which
returns exactly `length` bytes or raises `FormatError`. Format readers (ELF, zip) only ever see this
protocol, so the same code reads a local file, bytes in memory, a member inside a wheel, and later a
member of a remote wheel.

The same seam one level up, paths to parsed ELF images, is `abifit.formats.objects`.
"""

from __future__ import annotations

import mmap
import os
import weakref
import zlib
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeVar

from abifit.errors import FormatError, WheelRefused
from abifit.formats import inflate


class ByteSource(Protocol):
    """Bytes that can be read at any offset."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    def read_at(self, offset: int, length: int) -> bytes: ...


def check_range(source: ByteSource, offset: int, length: int) -> None:
    """Raise FormatError unless [offset, offset + length) lies inside the source."""
    if offset < 0 or length < 0 or offset + length > source.size:
        raise FormatError(
            source.name,
            f"cannot read {length} bytes at offset {offset:#x}: the data has {source.size} bytes",
        )


_C = TypeVar("_C", bound="Closing")


class Closing:
    """A context manager that calls `close()` on exit."""

    def close(self) -> None:
        """Release what the object holds."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Described:
    """The `name` and `size` every source has."""

    _name: str
    _size: int

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return self._size


class Layered:
    """A source over another one (a cache, a lock): its name and size are the base's."""

    def __init__(self, base: ByteSource) -> None:
        self._base = base

    @property
    def base(self) -> ByteSource:
        return self._base

    @property
    def name(self) -> str:
        return self._base.name

    @property
    def size(self) -> int:
        return self._base.size


class BytesSource(_Described):
    """Bytes already in memory."""

    def __init__(self, data: bytes, name: str = "<bytes>") -> None:
        self._data = data
        self._name = name
        self._size = len(data)

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        return self._data[offset : offset + length]


class FileSource(_Described, Closing):
    """A local file, memory-mapped (or, with `mapped=False`, read with `pread`: a large file
    read through once, such as a wheel, then leaves no pages of it in the process's memory);
    use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str], *, mapped: bool = True) -> None:
        self._name = os.fspath(path)
        self._map: mmap.mmap | None = None
        self._fd: int | None = None
        with open(path, "rb") as f:
            self._size = os.fstat(f.fileno()).st_size
            if mapped and self._size:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            elif not mapped:
                self._fd = os.dup(f.fileno())
                self._closer = weakref.finalize(self, os.close, self._fd)  # closed when dropped

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        if self._map is not None:
            return self._map[offset : offset + length]
        if self._fd is None or length == 0:
            return b""
        data = os.pread(self._fd, length, offset)
        if len(data) != length:  # the file shrank under us
            raise FormatError(self._name, f"file ended after {offset + len(data)} bytes", offset)
        return data

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd is not None:
            self._fd = None
            self._closer()


def crc_refused(where: str, found: int, expected: int) -> WheelRefused:
    """The error for member bytes whose CRC-32 is not the zip directory's."""
    return WheelRefused(where, f"CRC-32 of the data is {found:08x}, the zip directory says "
                        f"{expected:08x} (pip refuses this wheel)")


class SliceSource(_Described):
    """A contiguous range of another source, such as a STORED zip member."""

    def __init__(self, base: ByteSource, start: int, size: int, name: str) -> None:
        check_range(base, start, size)
        self._base = base
        self._start = start
        self._size = size
        self._name = name

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        return self._base.read_at(self._start + offset, length)


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """Inflater state at a known output position, so a backward read need not start over."""

    out_pos: int
    in_pos: int  # the input the state has consumed
    state: zlib._Decompress


class InflateSource(_Described):
    """The decompressed bytes of a raw DEFLATE stream, readable at any offset.

    Output is produced forward in chunks; every `checkpoint_every` bytes a copy of the inflater
    state is kept, so a read behind the current position restarts from the nearest checkpoint
    instead of from the beginning, and a read far ahead of it after such a restart resumes from
    the nearest checkpoint before it (reading the headers at the start of a member, then its
    section headers at the end, inflates the member once, not twice). Only the most recent
    chunk is kept in memory. Given the
    `crc` of a zip member, output that reaches the end is checked against it (`WheelRefused`).
    """

    _INPUT_CHUNK = 1 << 16
    _OUTPUT_CHUNK = 1 << 20
    _MAX_INPUT = 32 << 20  # input read at once for a far read, at most (unless `max_input`)
    _MARGIN = 1.1  # on the input a read is estimated to need

    def __init__(
        self,
        compressed: ByteSource,
        size: int,
        name: str,
        checkpoint_every: int = 8 << 20,
        crc: int | None = None,
        max_input: int | None = None,
    ) -> None:
        self._compressed = compressed
        self._size = size
        self._name = name
        self._every = checkpoint_every
        self._max_input = self._MAX_INPUT if max_input is None else max_input
        self._crc = crc  # the CRC-32 the whole output must have (a zip member's), if known
        self._crc_end = 0  # the output [0, _crc_end) has been summed into _crc_sum
        self._crc_sum = 0
        self._checkpoints = [_Checkpoint(0, 0, inflate.decompressobj(-zlib.MAX_WBITS))]
        self._resume(self._checkpoints[0])

    def _resume(self, checkpoint: _Checkpoint) -> None:
        self._inflater = checkpoint.state.copy()
        self._in_pos = checkpoint.in_pos  # where the input read next starts
        self._input = b""  # input read, consumed up to _used
        self._used = 0
        self._out_pos = checkpoint.out_pos
        self._chunk = b""
        self._chunk_start = checkpoint.out_pos

    def _advance(self, end: int) -> None:
        """Decompress the next chunk of output into self._chunk, reading input for output up to
        `end` in one read: as much as the compression ratio so far says it needs, with a margin
        (a slow source then gets one request, not one per input chunk). The input goes to the
        inflater `_INPUT_CHUNK` at a time: what it leaves unconsumed is copied, and copying
        the rest of a large read at every chunk of output would be quadratic."""
        if self._used >= len(self._input):
            remaining = self._compressed.size - self._in_pos
            if remaining <= 0:
                raise FormatError(self._name, "compressed data ends early", self._out_pos)
            take = min(max(self._INPUT_CHUNK, self._input_for(end)), self._max_input, remaining)
            self._input = self._compressed.read_at(self._in_pos, take)
            self._used = 0
            self._in_pos += take
        piece = memoryview(self._input)[self._used : self._used + self._INPUT_CHUNK]
        try:
            out = self._inflater.decompress(piece, self._OUTPUT_CHUNK)
        except inflate.error as e:
            raise FormatError(self._name, f"corrupt compressed data ({e})", self._out_pos) from e
        self._used += len(piece) - len(self._inflater.unconsumed_tail)
        if not out and self._inflater.eof:
            raise FormatError(self._name, "compressed data ends early", self._out_pos)
        self._chunk_start = self._out_pos
        self._chunk = out
        self._out_pos += len(out)
        self._check_crc(out)
        if self._out_pos >= len(self._checkpoints) * self._every:
            # the input not yet consumed is read again on a resume, not held by the checkpoint
            consumed = self._in_pos - (len(self._input) - self._used)
            self._checkpoints.append(_Checkpoint(self._out_pos, consumed, self._inflater.copy()))

    def _check_crc(self, out: bytes) -> None:
        """Sum output seen for the first time; once all `size` bytes are out, the sum must be
        the member's CRC-32 (output produced again after a restart is not summed twice, and a
        chunk that straddles the end of what was summed adds its new part)."""
        if self._crc is None or not self._chunk_start <= self._crc_end < self._out_pos:
            return
        self._crc_sum = inflate.crc32(memoryview(out)[self._crc_end - self._chunk_start :],
                                   self._crc_sum)
        self._crc_end = self._out_pos
        if self._crc_end == self._size and self._crc_sum != self._crc:
            raise crc_refused(self._name, self._crc_sum, self._crc)

    def _input_for(self, end: int) -> int:
        """Compressed bytes estimated to produce the output up to `end` (0: no estimate yet)."""
        if self._out_pos <= 0 or end <= self._out_pos:
            return 0
        return int((end - self._out_pos) * self._in_pos / self._out_pos * self._MARGIN)

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        if offset < self._chunk_start or offset >= self._out_pos:
            best = max(
                (c for c in self._checkpoints if c.out_pos <= offset), key=lambda c: c.out_pos
            )
            if offset < self._chunk_start or best.out_pos > self._out_pos:
                self._resume(best)  # back, or ahead to output already produced once
        parts: list[bytes] = []
        end = offset + length
        while True:
            lo = max(offset, self._chunk_start)
            hi = min(end, self._chunk_start + len(self._chunk))
            if lo < hi:
                parts.append(self._chunk[lo - self._chunk_start : hi - self._chunk_start])
            if self._chunk_start + len(self._chunk) >= end:
                return b"".join(parts)
            self._advance(end)
