"""DEFLATE tails: the end of a raw DEFLATE stream decoded from its last compressed bytes alone."""

from __future__ import annotations

import io
import os
import random
import struct
import zipfile
import zlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abifit.errors import FormatError
from abifit.formats import deflate
from abifit.formats.deflate import WINDOW_A, WINDOW_B, TailView, decode_tail

KiB = 1 << 10
MiB = 1 << 20
LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
LIBC = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
TORCH_PYTHON = CACHE / "torch-2.13.0/lib/python3.11/site-packages/torch/lib/libtorch_python.so"


@cache
def _original(path: Path) -> bytes:
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    return path.read_bytes()


@cache
def _deflated(path: Path, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(_original(path)) + compressor.flush()


@cache
def _zip_member(path: Path) -> bytes:
    """The compressed bytes of `path` stored as a ZIP_DEFLATED member, read back from the zip."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("member.so", _original(path))
    with zipfile.ZipFile(buffer) as archive:
        info = archive.getinfo("member.so")
    raw = buffer.getvalue()
    name_length, extra_length = struct.unpack_from("<HH", raw, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    return raw[start : start + info.compress_size]


def _mixed() -> bytes:
    """Library bytes with incompressible runs between them: stored blocks after dynamic ones."""
    library = _original(LIBC)
    noise = random.Random(7).randbytes(600 * KiB)
    return library[: 700 * KiB] + noise[: 300 * KiB] + library[700 * KiB : 1200 * KiB] + noise


def _known_ranges(view: TailView) -> Iterator[tuple[int, int]]:
    position = view.start
    for lo, hi in view.uncertain:
        yield position, lo
        position = hi
    yield position, view.start + len(view.data)


def _assert_certain_bytes_are_true(view: TailView, original: bytes) -> None:
    assert view.start + len(view.data) == len(original)
    assert view.start >= 0
    for lo, hi in _known_ranges(view):
        assert view.data[lo - view.start : hi - view.start] == original[lo:hi], (lo, hi)
    # the other decode ends at its last difference, where the uncertain bytes end
    other = view.other
    assert len(other) <= len(view.data)
    assert not other or other[-1] != view.data[len(other) - 1]
    assert not other or view.uncertain[-1][1] == view.start + len(other)


def _certain_fraction(view: TailView, lo: int = 0, hi: int | None = None) -> float:
    """The share of certain bytes among the view's bytes `lo` .. `hi` (relative to its start)."""
    first = view.start + lo
    last = view.start + (len(view.data) if hi is None else hi)
    unknown = sum(max(0, min(b, last) - max(a, first)) for a, b in view.uncertain)
    return 1 - unknown / (last - first)


def test_windows_differ_at_every_byte() -> None:
    """The two dummy windows differ at every byte, so no copy from the window looks certain."""
    assert len(WINDOW_A) == len(WINDOW_B) == 32 * KiB
    assert all(a != b for a, b in zip(WINDOW_A, WINDOW_B, strict=True))


@pytest.mark.parametrize("size", [64 * KiB, 256 * KiB, MiB, 4 * MiB], ids=lambda s: f"{s // KiB}K")
@pytest.mark.parametrize("level", [1, 6, 9], ids=lambda level: f"level{level}")
@pytest.mark.parametrize("path", [LIBSTDCXX, LIBC], ids=lambda p: p.name)
def test_raw_deflate_tail_certain_bytes_are_the_original(path: Path, level: int, size: int) -> None:
    """Every certain byte of a decoded tail is the original byte; tails of 256 KiB or more are
    mostly certain."""
    original = _original(path)
    view = decode_tail(_deflated(path, level)[-size:], len(original), path.name)
    _assert_certain_bytes_are_true(view, original)
    if size >= 256 * KiB:
        assert _certain_fraction(view) > (0.8 if size == 256 * KiB else 0.95)


@pytest.mark.parametrize("size", [64 * KiB, 256 * KiB, MiB], ids=lambda s: f"{s // KiB}K")
def test_zip_member_tail_certain_bytes_are_the_original(size: int) -> None:
    """A ZIP_DEFLATED member written by zipfile decodes from its tail like a raw stream."""
    original = _original(LIBSTDCXX)
    view = decode_tail(_zip_member(LIBSTDCXX)[-size:], len(original))
    _assert_certain_bytes_are_true(view, original)


@pytest.mark.parametrize(
    ("size", "certain"),
    [(256 * KiB, 0.7), (MiB, 0.95), (4 * MiB, 0.95)],
    ids=["256K", "1024K", "4096K"],
)
def test_big_library_tail_certain_bytes_are_the_original(size: int, certain: float) -> None:
    """A 30 MB library (torch's libtorch_python.so) decodes from tails up to 4 MiB; its last
    256 KiB (2.4 MB of output) are three quarters certain, wider tails nearly all."""
    original = _original(TORCH_PYTHON)
    view = decode_tail(_deflated(TORCH_PYTHON, 6)[-size:], len(original))
    _assert_certain_bytes_are_true(view, original)
    assert _certain_fraction(view) > certain


def test_certainty_grows_along_the_output() -> None:
    """Back-references into the unknown window die out: the first 32 KiB of the view are less
    certain than the rest."""
    original = _original(LIBSTDCXX)
    view = decode_tail(_deflated(LIBSTDCXX, 6)[-MiB:], len(original))
    first, rest = _certain_fraction(view, 0, 32 * KiB), _certain_fraction(view, 32 * KiB)
    assert first < rest
    assert rest > 0.95


@pytest.mark.parametrize("size", [64 * KiB, 256 * KiB, MiB], ids=lambda s: f"{s // KiB}K")
def test_stored_blocks_after_dynamic_ones_keep_their_byte_alignment(size: int) -> None:
    """Stored blocks (incompressible runs) after a block start at any bit offset decode right."""
    original = _mixed()
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    view = decode_tail((compressor.compress(original) + compressor.flush())[-size:], len(original))
    _assert_certain_bytes_are_true(view, original)


@pytest.mark.parametrize("size", [20_000, 64 * KiB, 256 * KiB], ids=lambda s: f"{s // KiB}K")
def test_incompressible_data_decodes_or_fails_cleanly(size: int) -> None:
    """Random data (all stored blocks) gives a fully certain view, or FormatError when the tail
    holds fewer than two block starts."""
    original = random.Random(3).randbytes(600 * KiB)
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    tail = (compressor.compress(original) + compressor.flush())[-size:]
    try:
        view = decode_tail(tail, len(original))
    except FormatError:
        assert size < 64 * KiB
        return
    _assert_certain_bytes_are_true(view, original)
    assert view.uncertain == ()


@pytest.mark.parametrize("size", [0, 1, 100, 4000], ids=lambda s: f"{s}B")
def test_tail_without_two_block_starts_raises(size: int) -> None:
    """A tail too small to hold two whole block starts raises FormatError naming the member."""
    tail = _deflated(LIBC, 6)[len(_deflated(LIBC, 6)) - size :]
    with pytest.raises(FormatError, match=r"^libc\.so\.6: no .* in the last \d+ compressed bytes"):
        decode_tail(tail, len(_original(LIBC)), "libc.so.6")


@pytest.mark.parametrize(
    "cut", [slice(-64 * KiB, -1), slice(-64 * KiB, None)], ids=["truncated", "trailing-byte"]
)
def test_tail_that_does_not_end_the_stream_raises(cut: slice) -> None:
    """The stream must end exactly at the end of the tail: a cut or padded tail is rejected."""
    tail = (_deflated(LIBC, 6) + (b"\0" if cut.stop is None else b""))[cut]
    with pytest.raises(FormatError):
        decode_tail(tail, len(_original(LIBC)))


def test_output_larger_than_the_member_raises() -> None:
    """Block starts whose output would exceed the member's uncompressed size are rejected."""
    with pytest.raises(FormatError):
        decode_tail(_deflated(LIBC, 6)[-256 * KiB :], 16)


def test_negative_size_is_a_usage_error() -> None:
    """A negative uncompressed size is a caller's mistake, not a format error."""
    with pytest.raises(ValueError):
        decode_tail(b"", -1)


@settings(max_examples=25, deadline=None)
@given(cut=st.integers(min_value=0, max_value=700 * KiB))
def test_any_cut_point_gives_true_bytes_or_format_error(cut: int) -> None:
    """Whatever the cut point, a tail gives no wrong certain byte, and fails only with
    FormatError."""
    original = _original(LIBC)
    compressed = _deflated(LIBC, 6)
    try:
        view = decode_tail(compressed[min(cut, len(compressed)) :], len(original))
    except FormatError:
        return
    _assert_certain_bytes_are_true(view, original)


# decoded with WINDOW_B, bytes 10-14 and 20 came out otherwise: those are uncertain
VIEW = TailView(start=100, data=bytes(range(50)),
                other=bytes(range(10)) + bytes(range(0x17, 0x1C)) + bytes(range(15, 20)) + b"\xff")


@pytest.mark.parametrize(
    ("offset", "length", "expected"),
    [
        (100, 10, bytes(range(10))),
        (115, 5, bytes(range(15, 20))),
        (121, 29, bytes(range(21, 50))),
        (112, 0, b""),
        (105, 6, None),
        (114, 1, None),
        (119, 2, None),
        (99, 2, None),
        (140, 11, None),
        (150, 0, b""),
        (151, 0, None),
    ],
)
def test_view_reads_only_known_bytes(offset: int, length: int, expected: bytes | None) -> None:
    """A read returns member bytes only when all of them are in the view and certain."""
    assert VIEW.read(offset, length) == expected
    assert VIEW.known(offset, length) is (expected is not None)


def test_view_lists_uncertain_ranges() -> None:
    """The bytes that differ from the other decode read back as merged member ranges."""
    assert VIEW.uncertain == ((110, 115), (120, 121))


def test_view_known_is_every_byte_agreeing() -> None:
    """`known` of a real view agrees with comparing its two decodes byte by byte, over reads
    of every length at many places, and `uncertain` lists the same bytes."""
    original = _original(LIBC)
    compressed = _deflated(LIBC, 6)
    view = decode_tail(compressed[-256 * KiB :], len(original))
    other = view.other
    assert len(other) > 4 * KiB  # the window's copies reach this far
    rng = random.Random(5)
    for _ in range(3000):
        lo = rng.randrange(0, len(other) + 64)
        hi = min(len(view.data), lo + rng.choice([0, 1, 2, 8, 100, 5000]))
        agree = all(view.data[i] == other[i] for i in range(lo, min(hi, len(other))))
        assert view.known(view.start + lo, hi - lo) is agree, (lo, hi)
    differing = {i for i in range(len(other)) if view.data[i] != other[i]}
    assert differing == {i - view.start for lo, hi in view.uncertain for i in range(lo, hi)}


def test_view_rejects_negative_length() -> None:
    """A negative length is a caller's mistake."""
    with pytest.raises(ValueError):
        VIEW.known(100, -1)


def _header_passes(value: int, bit: int) -> bool:
    """The dynamic-header check at one bit offset, field by field (the reference for the
    all-offsets-at-once filter)."""
    def bits(at: int, size: int) -> int:
        return (value >> (bit + at)) & ((1 << size) - 1)

    if bits(1, 2) != 2 or bits(3, 5) > 29 or bits(8, 5) > 29:
        return False
    lengths = [bits(17 + 3 * i, 3) for i in range(bits(13, 4) + 4)]
    return sum(1 << (7 - n) for n in lengths if n) == 128


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=40, max_size=700), st.integers(0, 3))
def test_the_header_filter_equals_a_field_by_field_check(data: bytes, skew: int) -> None:
    """Every bit offset the vectorised dynamic-header filter keeps, and only those, passes the
    check written out per offset (random bytes: about one offset in a thousand passes)."""
    data = bytes(skew) + data
    value = int.from_bytes(data + bytes(16), "little")
    hi = len(data) - 12
    found = list(deflate._dynamic_starts(data, 0, hi))
    assert found == [bit for bit in range(8 * hi) if _header_passes(value, bit)]


def test_the_header_filter_keeps_a_real_block_start() -> None:
    """zlib's output begins with a dynamic block at bit 0: the filter keeps it, and few other
    offsets."""
    rng = random.Random(5)
    words = [rng.randbytes(rng.randint(2, 9)) for _ in range(300)]
    plain = b"".join(rng.choice(words) for _ in range(60_000))
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = packer.compress(plain) + packer.flush()
    starts = set(deflate._dynamic_starts(packed, 0, len(packed) - 12))
    assert 0 in starts  # the first block is dynamic and starts at bit 0
    assert len(starts) < len(packed) * 8 // 200  # and false starts are rare


def test_expansion_skips_a_stored_block_that_runs_past_the_sample() -> None:
    """A stored header whose LEN reaches past the end of the sample would pass any bytes as its
    content (ratio 1): `expansion` measures from the next start instead."""
    rng = random.Random(11)
    words = [rng.randbytes(rng.randint(2, 9)) for _ in range(400)]
    plain = b"".join(rng.choice(words) for _ in range(400_000))
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = packer.compress(plain) + packer.flush()
    middle = packed[len(packed) // 3 : len(packed) // 3 + (64 << 10)]
    honest = deflate.expansion(middle)
    assert honest is not None and honest > 1.5
    fake = b"\x01\xff\xff\x00\x00" + middle  # BFINAL 1, BTYPE 0, LEN 65535, NLEN 0
    assert deflate.expansion(fake) == pytest.approx(honest, rel=0.05)
    noise = zlib.compressobj(6, zlib.DEFLATED, -15)
    stored = noise.compress(random.Random(3).randbytes(1 << 20)) + noise.flush()
    assert deflate.expansion(stored[300_000 : 300_000 + (64 << 10)]) == pytest.approx(1, abs=0.01)
