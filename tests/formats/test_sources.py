"""Byte sources: exact reads, bounds, and random access into DEFLATE streams."""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abifit.errors import FormatError, WheelRefused
from abifit.formats.sources import BytesSource, FileSource, InflateSource, SliceSource


def _deflate(data: bytes, level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _sample(size: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(200)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


DATA = _sample(3 << 20)
COMPRESSED = _deflate(DATA)


def test_bytes_source_reads_exactly_and_rejects_out_of_range() -> None:
    """A read inside the data returns those bytes; one past the end raises FormatError."""
    src = BytesSource(b"0123456789", "mem")
    assert src.read_at(2, 3) == b"234"
    assert src.read_at(10, 0) == b""
    with pytest.raises(FormatError, match="mem: cannot read 4 bytes at offset 0x8"):
        src.read_at(8, 4)
    with pytest.raises(FormatError):
        src.read_at(-1, 1)


def test_file_source_maps_file_and_handles_empty(tmp_path: Path) -> None:
    """A file source reads like the file; an empty file has size 0 and no readable bytes."""
    full = tmp_path / "full"
    full.write_bytes(DATA[:5000])
    with FileSource(full) as src:
        assert src.size == 5000
        assert src.read_at(4990, 10) == DATA[4990:5000]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with FileSource(empty) as src:
        assert src.size == 0
        assert src.read_at(0, 0) == b""
        with pytest.raises(FormatError):
            src.read_at(0, 1)


def test_slice_source_is_a_window() -> None:
    """A slice reads relative to its start and cannot read past its own end."""
    base = BytesSource(DATA[:100], "base")
    window = SliceSource(base, 10, 20, "win")
    assert window.read_at(0, 20) == DATA[10:30]
    with pytest.raises(FormatError, match="win"):
        window.read_at(15, 6)
    with pytest.raises(FormatError):
        SliceSource(base, 90, 20, "too-long")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 70_000)), max_size=12))
def test_inflate_source_random_reads_equal_the_data(reads: list[tuple[int, int]]) -> None:
    """Any sequence of reads, forward or backward, returns the same bytes as full decompression."""
    src = InflateSource(BytesSource(COMPRESSED, "z"), len(DATA), "z", checkpoint_every=256 << 10)
    for offset, length in reads:
        length = min(length, len(DATA) - offset)
        assert src.read_at(offset, length) == DATA[offset : offset + length]


def test_inflate_source_backward_read_uses_checkpoints() -> None:
    """After reading the end, a read near the end does not re-read the stream from the start."""
    counted = _CountingSource(BytesSource(COMPRESSED, "z"))
    src = InflateSource(counted, len(DATA), "z", checkpoint_every=256 << 10)
    assert src.read_at(len(DATA) - 10, 10) == DATA[-10:]
    first_pass = counted.bytes_read
    assert src.read_at(len(DATA) - 400_000, 10) == DATA[-400_000 : -400_000 + 10]
    assert counted.bytes_read - first_pass < len(COMPRESSED) // 4


def test_inflate_source_read_ahead_after_a_restart_resumes_from_a_checkpoint() -> None:
    """After the end was read and a read went back to the start, reading the end again resumes
    from the checkpoint before it, not from where the restart left off."""
    counted = _CountingSource(BytesSource(COMPRESSED, "z"))
    src = InflateSource(counted, len(DATA), "z", checkpoint_every=256 << 10, crc=zlib.crc32(DATA))
    assert src.read_at(len(DATA) - 10, 10) == DATA[-10:]
    assert src.read_at(0, 10) == DATA[:10]
    before = counted.bytes_read
    assert src.read_at(len(DATA) - 100, 100) == DATA[-100:]
    assert counted.bytes_read - before < len(COMPRESSED) // 4


def test_inflate_source_checks_the_crc_when_a_restart_straddles_what_was_summed() -> None:
    """Output summed for the CRC in a first pass that stopped short, then produced again from
    an earlier checkpoint in chunks that do not line up with it, is summed once: a right CRC
    passes at the end, a wrong one is refused."""
    for expected, fails in ((zlib.crc32(DATA), False), (zlib.crc32(DATA) ^ 1, True)):
        src = InflateSource(BytesSource(COMPRESSED, "z"), len(DATA), "z",
                            checkpoint_every=256 << 10, crc=expected)
        assert src.read_at(len(DATA) // 2, 10) == DATA[len(DATA) // 2 : len(DATA) // 2 + 10]
        assert src.read_at(300_001, 7) == DATA[300_001:300_008]
        if fails:
            with pytest.raises(WheelRefused, match="CRC-32 of the data is"):
                src.read_at(len(DATA) - 1, 1)
        else:
            assert src.read_at(len(DATA) - 1, 1) == DATA[-1:]


def test_inflate_source_reports_corrupt_and_short_streams() -> None:
    """Garbage or a cut stream raises FormatError naming the member, not zlib.error."""
    garbage = InflateSource(BytesSource(b"\xff" * 1000, "g"), 5000, "wheel.whl!lib.so")
    with pytest.raises(FormatError, match=r"wheel\.whl!lib\.so: corrupt compressed data"):
        garbage.read_at(0, 10)
    short = InflateSource(BytesSource(COMPRESSED[:5000], "s"), len(DATA), "cut.so")
    with pytest.raises(FormatError, match=r"cut\.so: compressed data ends early"):
        short.read_at(len(DATA) - 1, 1)


def test_inflate_source_stream_shorter_than_declared() -> None:
    """A stream that ends before the declared size raises instead of looping forever."""
    src = InflateSource(BytesSource(_deflate(b"abc"), "x"), 100, "x")
    with pytest.raises(FormatError, match="ends early"):
        src.read_at(50, 10)


class _CountingSource:
    def __init__(self, base: BytesSource) -> None:
        self.base = base
        self.bytes_read = 0
        self.reads = 0

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def size(self) -> int:
        return self.base.size

    def read_at(self, offset: int, length: int) -> bytes:
        self.bytes_read += length
        self.reads += 1
        return self.base.read_at(offset, length)


def test_file_source_rejects_missing_file(tmp_path: Path) -> None:
    """A missing path raises OSError (the caller turns it into a one-line error)."""
    with pytest.raises(OSError):
        FileSource(os.path.join(tmp_path, "nope"))


def test_inflate_source_reads_far_input_in_one_piece() -> None:
    """A read far ahead asks for the input the ratio so far says it needs in one read (with a
    margin), not 64 KiB at a time."""
    counted = _CountingSource(BytesSource(COMPRESSED, "z"))
    src = InflateSource(counted, len(DATA), "z")
    assert src.read_at(0, 100) == DATA[:100]
    before = counted.reads
    far = len(DATA) * 3 // 4
    assert src.read_at(far, 100) == DATA[far : far + 100]
    assert counted.reads - before <= 2
    assert counted.bytes_read <= len(COMPRESSED) * 3 // 4 * 1.15 + (64 << 10)
