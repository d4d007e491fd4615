"""zlib-ng's inflater against the standard library's zlib, byte for byte, on real libraries.

Reading a member's tail (`abifit.formats.deflate`) enters a DEFLATE stream at every candidate
bit offset that passes the header filter and counts on the inflater to reject the false ones:
the two inflaters must agree on every candidate, on every decoded view, and on whole members
and their errors. zlib stays the fallback (`ABIFIT_INFLATE=zlib`, or zlib-ng not installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from abifit.errors import FormatError
from abifit.formats import deflate, inflate
from abifit.formats.sources import BytesSource, InflateSource

T = TypeVar("T")

LIBRARIES = [Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                               "/usr/lib/x86_64-linux-gnu/libc.so.6",
                               "/usr/lib/x86_64-linux-gnu/libcrypto.so.3")]
LIBRARIES = [p for p in LIBRARIES if p.exists()]
TAILS = (64 << 10, 256 << 10, 1 << 20)


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = inflate.name()
    yield
    inflate.use(before)


def _both(work: Callable[[], T]) -> tuple[T, T]:
    """`work` with zlib-ng's inflater, then with zlib's."""
    assert inflate.use("zlib-ng") == "zlib-ng", "zlib-ng (a dependency of abifit) is missing"
    first = work()
    assert inflate.use("zlib") == "zlib"
    return first, work()


def _outcome(work: Callable[[], T]) -> T | str:
    try:
        return work()
    except FormatError as e:
        return str(e)


def _streams() -> Iterator[tuple[str, bytes, bytes]]:
    """(label, original, raw DEFLATE) for each library at zlib levels 1, 6 and 9."""
    for path in LIBRARIES:
        original = path.read_bytes()
        for level in (1, 6, 9):
            compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
            yield (f"{path.name}@{level}", original,
                   compressor.compress(original) + compressor.flush())


def test_the_inflaters_make_the_same_tail_views_on_real_libraries() -> None:
    assert LIBRARIES, "no system library to compress"
    compared = 0
    for label, original, stream in _streams():
        for size in TAILS:
            tail = stream[-size:]

            def view(tail: bytes = tail, total: int = len(original)) -> object:
                found = _outcome(lambda: deflate.decode_tail(tail, total))
                return found if isinstance(found, str) else (found.start, found.data, found.other)

            with_ng, with_zlib = _both(view)
            assert with_ng == with_zlib, f"{label}, tail of {size} bytes"
            compared += 1
            if not isinstance(with_ng, str):  # a view's certain bytes are the original's
                start, data, mask = with_ng
                assert all(data[i] == original[start + i] for i in range(0, len(data), 997)
                           if i >= len(mask) or not mask[i])
    assert compared == len(LIBRARIES) * 3 * len(TAILS)


def test_the_inflaters_accept_and_reject_the_same_candidate_starts() -> None:
    """Every bit offset of the first 32 KiB of each tail that passes the header filter, probed
    as the witness is (128 KiB of input): the false starts zlib rejects, zlib-ng rejects."""
    candidates = accepted = 0
    for label, _original, stream in _streams():
        tail = stream[-(512 << 10):]
        for bit in deflate._block_starts(tail[: 32 << 10]):
            ng, plain = _both(lambda bit=bit, tail=tail: deflate._probe(tail, bit,
                                                                      deflate._WITNESS_BYTES))
            assert ng == plain, f"{label}: bit {bit}"
            candidates += 1
            accepted += ng
    assert candidates > 1000 and 0 < accepted < candidates


def test_the_inflaters_agree_on_windows_and_expansions() -> None:
    for label, original, stream in _streams():
        middle = stream[len(stream) // 3: len(stream) // 3 + (256 << 10)]

        def window(middle: bytes = middle, size: int = len(original)) -> object:
            found = _outcome(lambda: deflate.decode_window(middle, size))
            return found if isinstance(found, str) else (found.bit, found.data, found.other)

        assert _both(window)[0] == _both(window)[1], label
        assert _both(lambda middle=middle: deflate.expansion(middle))[0] == \
            _both(lambda middle=middle: deflate.expansion(middle))[1], label


def test_the_inflaters_read_whole_members_and_their_errors_alike() -> None:
    label, original, stream = next(_streams())
    crc = zlib.crc32(original)

    def read(data: bytes) -> bytes | str:
        source = InflateSource(BytesSource(data, label), len(original), label, crc=crc)
        return _outcome(lambda: source.read_at(len(original) - 4096, 4096)
                        + source.read_at(0, 4096))

    assert _both(lambda: read(stream)) == (original[-4096:] + original[:4096],) * 2
    broken = bytearray(stream)
    broken[len(broken) // 2: len(broken) // 2 + 64] = bytes(64)  # zeroes mid-stream
    with_ng, with_zlib = _both(lambda: read(bytes(broken)))
    assert isinstance(with_ng, str) and with_ng == with_zlib
    assert _both(lambda: inflate.crc32(original)) == (crc, crc)


def test_the_environment_picks_zlib(tmp_path: Path) -> None:
    def chosen(value: str | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "ABIFIT_INFLATE"}
        if value is not None:
            env["ABIFIT_INFLATE"] = value
        return subprocess.run(
            [sys.executable, "-c", "from abifit.formats import inflate; print(inflate.name())"],
            env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()

    assert chosen(None) == "zlib-ng"
    assert chosen("zlib") == "zlib"
    assert chosen("ZLIB ") == "zlib"


def test_an_unknown_inflater_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown inflater 'gzip'"):
        inflate.use("gzip")
