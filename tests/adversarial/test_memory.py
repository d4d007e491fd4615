"""Small files that would build a great deal: a host profile, cache entries and an `index
import` file whose few bytes decode to millions of tiny values (a one-byte empty map becomes a
64-byte dict), and `index import /dev/zero`. Each is refused (or a cache miss) in bounded memory
and time, measured here on the abifit process itself (`wait4`: its peak resident size, which
takes in its worker processes)."""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from abifit.formats.datacodec import HEADER
from abifit.formats.storefile import CODEC_ZLIB, STORE_FORMAT, STORE_MAGIC
from abifit.formats.storefile import HEADER as STORE_HEADER
from abifit.host.profile import PROFILE_MAGIC, VERSION
from abifit.remote.diskcache import ENTRY_FORMAT, ENTRY_MAGIC
from helpers import make_wheel, wheels
from httpserver import LoopbackServer, publish_index

# what these commands take with honest inputs is well under 200 MB; unbounded, each of the
# inputs below took gigabytes
PEAK_BOUND = 400 << 20
TIME_BOUND = 60


@dataclass(frozen=True)
class Measured:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak: int  # bytes


def measured(argv: list[str], cwd: Path) -> Measured:
    """Run abifit with `argv`, its peak resident size (with its reaped children) and time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    out, err = cwd / "stdout", cwd / "stderr"
    started = time.monotonic()
    with out.open("wb") as o, err.open("wb") as e:
        process = subprocess.Popen([sys.executable, "-m", "abifit", *argv], stdout=o, stderr=e,
                                   stdin=subprocess.DEVNULL, env=env)
        _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return Measured(process.returncode, out.read_text(), err.read_text(),
                    time.monotonic() - started, usage.ru_maxrss * 1024)


def tiny_values(kind: str, count: int) -> Iterator[bytes]:
    """MessagePack of arrays of `count` tiny values in all, in pieces: empty maps (one byte
    each), 2-character strings (three), or one-byte tags (three: an ExtType each)."""
    one = {"maps": b"\x80", "strings": b"\xa2ab", "tags": b"\xd4\x05x"}[kind]
    per = 65535
    arrays = -(-count // per)
    yield b"\xdd" + struct.pack(">I", arrays)
    for _ in range(arrays):
        yield b"\xdc" + struct.pack(">H", per) + one * per


def framed(magic: bytes, version: int, payload: bytes) -> bytes:
    return HEADER.pack(magic, version, hashlib.sha256(payload).digest()[:16]) + payload


@pytest.mark.parametrize("kind", ["maps", "strings", "tags"])
def test_a_small_host_profile_cannot_take_gigabytes(kind: str, tmp_path: Path) -> None:
    """A profile of well under 300 KB whose 40 MiB of data decode to millions of values (4 GB
    and more unbounded): refused, exit 2, in bounded memory and time."""
    payload = b"".join(tiny_values(kind, (40 << 20) // 3 if kind != "maps" else 40 << 20))
    profile = tmp_path / "host.profile"
    profile.write_bytes(gzip.compress(framed(PROFILE_MAGIC, VERSION, payload), 9, mtime=0))
    assert profile.stat().st_size < 300_000
    name, data = make_wheel("purepkg", "1.0", {"purepkg/__init__.py": b""})
    (tmp_path / name).write_bytes(data)
    run = measured(["check", str(tmp_path / name), "--host", str(profile), "--no-cache"],
                   tmp_path)
    assert run.code == 2, run.stderr
    assert "it would take more than" in run.stderr and "internal error" not in run.stderr
    assert run.peak < PEAK_BOUND and run.seconds < TIME_BOUND, run


def test_planted_cache_entries_that_decode_to_millions_are_misses(
        binaries: dict[str, bytes], tmp_path: Path) -> None:
    """Every entry a check wrote replaced by a valid entry of 8 MiB of empty maps (each took
    over 600 MB unbounded): the check runs again with the same verdict, in bounded memory."""
    cache = tmp_path / "cache"
    bomb = framed(ENTRY_MAGIC, ENTRY_FORMAT, b"".join(tiny_values("maps", 8 << 20)))
    with LoopbackServer() as server:
        index = publish_index(server, wheels(binaries))
        argv = ["check", "extpkg==1.0", "--python-version", "3.11", "--platform",
                "linux_x86_64", "--index-url", index.url, "--cache-dir", str(cache), "--json"]
        first = measured(argv, tmp_path)
        entries = [p for p in cache.rglob("*") if p.is_file() and "sqlite" not in p.name]
        assert first.code == 0 and entries, first.stderr
        for entry in entries:
            entry.write_bytes(bomb)
        again = measured(argv, tmp_path)
    assert again.code == 0 and '"verdict": "fits"' in again.stdout, again.stderr
    assert again.peak < PEAK_BOUND and again.seconds < TIME_BOUND, again


def export_file(raw: Iterator[bytes], declared: int | None = None) -> bytes:
    """An `index export` file of the MessagePack stream `raw`, zlib-compressed."""
    deflate = zlib.compressobj(9)
    length = 0
    parts = []
    for piece in raw:
        length += len(piece)
        parts.append(deflate.compress(piece))
    body = b"".join([*parts, deflate.flush()])
    return STORE_HEADER.pack(STORE_MAGIC, STORE_FORMAT, CODEC_ZLIB,
                             length if declared is None else declared,
                             hashlib.sha256(body).digest()) + body


def test_a_small_export_cannot_take_gigabytes_to_import(tmp_path: Path) -> None:
    """An export of under 100 KB whose names table is 60 MiB of empty maps (about 4 GB
    unbounded): refused, exit 2, nothing recorded, in bounded memory and time."""
    head = b"\x84\xa6format\xaeabifit-symbols\xa5names\x01\xa8versions\x00\xa6wheels\x00"
    export = tmp_path / "store.export"
    export.write_bytes(export_file(iter([head, *tiny_values("maps", 60 << 20)])))
    assert export.stat().st_size < 100_000
    run = measured(["index", "import", str(export), "--cache-dir", str(tmp_path / "c")],
                   tmp_path)
    assert run.code == 2, run.stderr
    assert "it would take more than" in run.stderr and "internal error" not in run.stderr
    assert run.peak < PEAK_BOUND and run.seconds < TIME_BOUND, run


def test_an_export_that_claims_gigabytes_is_refused_before_decompressing(tmp_path: Path
                                                                       ) -> None:
    head = b"\x84\xa6format\xaeabifit-symbols\xa5names\x00\xa8versions\x00\xa6wheels\x00"
    export = tmp_path / "store.export"
    export.write_bytes(export_file(iter([head, b"\x90\x90"]), declared=3 << 30))
    run = measured(["index", "import", str(export), "--cache-dir", str(tmp_path / "c")],
                   tmp_path)
    assert run.code == 2 and "declares 3,221,225,472 bytes of data" in run.stderr, run.stderr
    assert run.peak < PEAK_BOUND, run


@pytest.mark.parametrize("command", [["index", "import", "/dev/zero"],
                                     ["check", "purepkg==1.0", "--host", "/dev/zero"]])
def test_a_device_named_as_a_file_is_refused(command: list[str], tmp_path: Path) -> None:
    """`/dev/zero` never ends (a MemoryError before): refused as a device, exit 2."""
    run = measured([*command, "--offline", "--cache-dir", str(tmp_path / "c")]
                   if command[0] == "check" else [*command, "--cache-dir", str(tmp_path / "c")],
                   tmp_path)
    assert run.code == 2 and "/dev/zero: a character device, not a file" in run.stderr, run
    assert run.peak < PEAK_BOUND and run.seconds < TIME_BOUND, run
