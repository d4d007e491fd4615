"""abifit.formats.datacodec and what reads it back: the on-disk cache (`remote.diskcache`) and host
profiles (`host.profile`). Real values round trip; pickles and crafted payloads that would run a
command are cache misses or one error line, and run nothing; damaged entries are misses, never
other values; a gzip bomb of a profile is refused within bounded memory."""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import importlib
import io
import json
import os
import pickle
import pkgutil
import random
import shutil
import struct
import sys
import time
import tracemalloc
import zipfile
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest

import abifit
from abifit.errors import AbifitError, ElfError, EnvironmentQueryError, FormatError, UsageError
from abifit.formats.datacodec import (
    HEADER,
    conforms,
    decode,
    encode,
    frame,
    type_hints,
)
from abifit.formats.elf import ElfClass, ElfImage, Section, parse_elf
from abifit.formats.pysource import read_module
from abifit.formats.sources import BytesSource, FileSource
from abifit.formats.wheel import WheelArchive
from abifit.host.ldconfig import probe_host
from abifit.host.localfs import ElfCache, LocalObjects
from abifit.host.profile import (
    MAX_PROFILE_BYTES,
    PROFILE_MAGIC,
    VERSION,
    HostSnapshot,
    dumps,
    host_profile,
    loads,
)
from abifit.remote.diskcache import (
    CHECKS_BUCKET,
    DIGESTS_BUCKET,
    ELF_BUCKET,
    ENTRY_FORMAT,
    ENTRY_MAGIC,
    INDEX_BUCKET,
    Cache,
    key_path,
    read_value,
    write_value,
)
from abifit.remote.http import HttpError
from abifit.remote.packageindex import IndexFile, parse_simple_json
from helpers import run_cli, wheels
from httpserver import Projects

LIBZ = Path("/lib/x86_64-linux-gnu/libz.so.1")
needs_libz = pytest.mark.skipif(not LIBZ.exists(), reason=f"needs {LIBZ}")
_DC, _ENUM, _ERR, _ARR = 7, 6, 8, 5  # the codec's tags (its module docstring)


def same(a: object, b: object) -> bool:
    """Structural equality that also compares exceptions (by type, arguments and attributes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseException):
        assert isinstance(b, BaseException)
        return a.args == b.args and same(vars(a), vars(b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
                   if f.compare)  # what equality leaves out (how names are held) is left out
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list))
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def libz() -> ElfImage:
    with FileSource(LIBZ) as source:
        return parse_elf(source)


def snapshot() -> HostSnapshot:
    """This machine's loader facts (its ld.so cache too) and libz as the one library."""
    image = libz()
    return HostSnapshot(probe_host({}), str(LIBZ), {str(LIBZ): ("1:2", image)},
                        "ELF64 x86-64", abifit.__version__)


def wheel_members() -> tuple[object, ...]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/__init__.py", "")
        zf.writestr("demo/_x.abi3.so", b"\x7fELF" + bytes(100))
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    archive = WheelArchive(BytesSource(buffer.getvalue(), "demo-1.0-py3-none-any.whl"))
    return tuple(archive.members)


def index_files() -> list[IndexFile]:
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": [
        {"filename": "demo-1.0-py3-none-any.whl", "url": "demo-1.0-py3-none-any.whl",
         "hashes": {"sha256": "ab" * 32}, "requires-python": ">=3.9", "yanked": "broken",
         "core-metadata": {"sha256": "cd" * 32}, "size": 1234},
        {"filename": "demo-1.0.tar.gz", "url": "demo-1.0.tar.gz", "hashes": {}}]}).encode()
    return parse_simple_json(body, "https://example.org/simple/demo/")


VALUES: dict[str, Callable[[], object]] = {
    "scalars": lambda: (None, True, False, 0, -1, 1 << 63, (1 << 64) - 1, -(1 << 63), 1 << 200,
                        -(1 << 200), 1.5, float("inf"), "", "é\udcff", b"", b"\x00\xff"),
    "containers": lambda: ([1, (2, [3])], {"a": 1, 2: "b", None: b"c"}, {(1, "x"): [2]},
                           frozenset({1, "a", (2, 3)}), (), [], {}, frozenset()),
    "arrays": lambda: (array("I", [1, 2, 3]), array("Q", [1 << 63]), array("b", [-1]),
                       array("d", [0.5]), array("H")),
    "errors": lambda: (ElfError("lib.so", "truncated", 0x40), FormatError("w", "p"),
                       UsageError("bad", hint="try this"), EnvironmentQueryError("python3: no"),
                       AbifitError("any", 1)),
    "enum": lambda: (ElfClass.ELF64, {ElfClass.ELF32: "32"}),
    "module-code": lambda: read_module(
        b"import ctypes, os\n_lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "
        b"'libx.so'))\ntry:\n    import torch\nexcept ImportError:\n    torch = None\n",
        "demo", True),
    "wheel-directory": wheel_members,
    "index-files": index_files,
    "index-page": lambda: (time.time(), "application/vnd.pypi.simple.v1+json", b"{}"),
}
REAL: dict[str, Callable[[], object]] = {
    "libz-view": libz,
    "libz-entry": lambda: ((1, 2, 3, 4), str(LIBZ), libz()),
    "host-snapshot": snapshot,
}


@pytest.mark.parametrize("make", VALUES.values(), ids=VALUES.keys())
def test_values_round_trip(make: Callable[[], object]) -> None:
    """Each kind of value abifit stores decodes to an equal value of the same types."""
    value = make()
    assert same(decode(encode(value), "t"), value)


@needs_libz
@pytest.mark.parametrize("make", REAL.values(), ids=REAL.keys())
def test_real_values_round_trip(make: Callable[[], object]) -> None:
    """A parsed library (with its relocated symbols), an ELF cache entry and a host snapshot
    (this machine's ld.so cache included) round trip."""
    value = make()
    back = decode(encode(value), "t")
    assert same(back, value)
    if isinstance(value, HostSnapshot):
        assert isinstance(back, HostSnapshot) and back.facts.cache is not None
        entries = back.facts.cache.entries
        assert not entries or back.facts.cache.by_soname(entries[0].soname)  # rebuilt index


@pytest.fixture(scope="module")
def index_projects(binaries: dict[str, bytes]) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: the check world's wheels."""
    return wheels(binaries)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_check_result_round_trips(loopback_index: object, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The result a check stores (statuses, findings, import verdicts) decodes to an equal
    value, and a second run answers the same from it."""
    stored: list[object] = []
    put = Cache.put_result
    monkeypatch.setattr(Cache, "put_result",
                        lambda self, key, value: (stored.append(value), put(self, key, value)))
    url = loopback_index.url  # type: ignore[attr-defined]
    args = ("check", "extpkg==1.0", "--with", "hostpkg==2.0", "--index-url", url, "--json")
    code, first, _err = run_cli(capsys, monkeypatch, tmp_path, *args)
    assert code == 1 and len(stored) == 1
    value = stored[0]
    assert isinstance(value, tuple) and value[1]  # findings
    assert same(decode(encode(value), "t"), value)
    code, second, _err = run_cli(capsys, monkeypatch, tmp_path, *args)
    strip = lambda doc: {k: v for k, v in json.loads(doc).items() if k != "transfer"}  # noqa: E731
    assert code == 1 and strip(second) == strip(first) and len(stored) == 1


@dataclasses.dataclass(frozen=True)
class Foreign:
    """A dataclass outside abifit."""

    x: int


@pytest.mark.parametrize("value", [
    Path("/x"), {1, 2}, lambda: 0, Foreign(1), os.system, struct.Struct("I"),
    HttpError("https://x", "refused", 500), array("u", "x"), bytearray(b"x"),
], ids=["path", "set", "lambda", "foreign-dataclass", "function", "object", "error-with-state",
        "unicode-array", "bytearray"])
def test_what_is_not_data_is_not_encoded(value: object) -> None:
    """A value that is not data of the codec's kinds raises TypeError (a bug where it is
    stored), rather than being written in a form that reads back as something else."""
    with pytest.raises(TypeError):
        encode(value)


def test_every_dataclass_of_abifit_has_checkable_fields() -> None:
    """The type hints of every public dataclass in abifit evaluate, so that no field is left
    unchecked when a value is decoded."""
    unchecked = []
    for info in pkgutil.walk_packages(abifit.__path__, "abifit."):
        if info.name.rpartition(".")[2].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and obj.__module__ == info.name
                    and not obj.__name__.startswith("_") and dataclasses.is_dataclass(obj)
                    and dataclasses.fields(obj) and not type_hints(obj)):
                unchecked.append(f"{info.name}.{obj.__qualname__}")
    assert unchecked == []


@pytest.mark.parametrize(("value", "hint", "fits"), [
    ((1, 2), tuple[int, ...], True), ((1, "a"), tuple[int, ...], False),
    ((1, "a"), tuple[int, str], True), ((1,), tuple[int, str], False),
    ({"a": (1,)}, dict[str, tuple[int, ...]], True), ({1: 1}, dict[str, int], False),
    (None, int | None, True), (1.0, int | None, False), (3, float, True),
    (array("I"), array, True), ([1], list[int], True), ((1,), list[int], False),
    (frozenset({"a"}), frozenset[str], True), (ElfClass.ELF64, ElfClass | int, True),
    ("x", object, True),
], ids=lambda v: repr(v)[:30])
def test_conforms(value: object, hint: object, fits: bool) -> None:
    """The type check reads unions, variadic and fixed tuples, dicts, lists, frozensets,
    arrays, enums."""
    assert conforms(value, hint) is fits


# ---------------------------------------------------------------------------------------------
# Codec-level attacks


def tagged(code: int, name: str, *rest: object) -> bytes:
    packed: bytes = msgpack.packb([msgpack.ExtType(code, name.encode()), *rest],
                                  use_bin_type=True)
    return packed


SECTION = {"name": ".text", "type": 1, "flags": 6, "addr": 0, "offset": 64, "size": 10}
S = "abifit.formats.elf:Section"
ATTACKS = {
    "outside-abifit": (tagged(_DC, "os:system"), "does not name a class of abifit"),
    "builtins": (tagged(_ENUM, "builtins:eval", "1"), "does not name a class of abifit"),
    "dotted-name": (tagged(_DC, "abifit.remote.diskcache:os.system", {}),
                    "does not name a class of abifit"),
    "module-attribute": (tagged(_DC, "abifit.remote.diskcache:os", {}), "is not a class defined"),
    "function": (tagged(_DC, "abifit.remote.diskcache:read_value", {}), "is not a class defined"),
    "imported-class": (tagged(_DC, "abifit.remote.diskcache:Path", {}), "is not a class defined"),
    "main-module": (tagged(_DC, "abifit.__main__:main", {}), "does not name a class"),
    "no-module": (tagged(_DC, "abifit.nowhere:X", {}), "abifit has no module"),
    "not-a-dataclass": (tagged(_DC, "abifit.remote.diskcache:Cache", {}), "is not a dataclass"),
    "error-as-enum": (tagged(_ENUM, "abifit.errors:FormatError", 1), "is not an Enum"),
    "dataclass-as-error": (tagged(_ERR, S, "x"), "is not an AbifitError"),
    "unknown-field": (tagged(_DC, S, {**SECTION, "extra": 1}), "Section has no field 'extra'"),
    "missing-field": (tagged(_DC, S, {k: v for k, v in SECTION.items() if k != "size"}),
                      "Section lacks its field 'size'"),
    "wrong-type": (tagged(_DC, S, {**SECTION, "name": 1}), "Section.name: int, where str"),
    "wrong-element": (tagged(_DC, "abifit.formats.elf:VersionNeed",
                             {"file": "libc.so.6", "versions": ["GLIBC_2.2.5"]}),
                      "VersionNeed.versions: tuple, where"),
    "wrong-error-args": (tagged(_ERR, "abifit.errors:FormatError", 1, 2), "FormatError(where"),
    "too-many-args": (tagged(_ERR, "abifit.errors:FormatError", "a", "b", 1, 2),
                      "too many positional arguments"),
    "enum-value": (tagged(_ENUM, "abifit.formats.elf:ElfClass", 7), "not a valid ElfClass"),
    "array-bytes": (tagged(_ARR, "I", b"abc"), "an array of typecode 'I' of 3 bytes"),
    "array-typecode": (tagged(_ARR, "O", b""), "a malformed array"),
    "unknown-tag": (tagged(99, ""), "a malformed value of tag 99"),
    "bare-tag": (msgpack.packb(msgpack.ExtType(_DC, S.encode())), "of type ExtType where"),
    "timestamp": (msgpack.packb(msgpack.Timestamp(0)), "of type Timestamp where"),
    "map-key": (b"\x81\x92\x01\x02\x01", "a map key that is not a scalar"),
    "deep": (b"\x91" * 100_000 + b"\x00", "undecodable data"),
    "huge-claim": (b"\xdd\xff\xff\xff\xff", "undecodable data"),
    "trailing": (b"\x01\x02", "undecodable data"),
    "empty": (b"", "undecodable data"),
}


@pytest.mark.parametrize(("data", "problem"), ATTACKS.values(), ids=ATTACKS.keys())
def test_crafted_payloads_are_decode_errors(data: bytes, problem: str) -> None:
    """A name outside abifit, a dotted name, a module's attribute, a function, a class of the
    wrong kind, unknown, missing or mistyped fields: one FormatError naming the problem, and
    no module imported that was not already (abifit.__main__ would run the command line)."""
    before = set(sys.modules)
    with pytest.raises(FormatError) as raised:
        decode(data, "entry")
    assert problem in raised.value.problem and raised.value.where == "entry"
    assert "\n" not in str(raised.value)
    assert "abifit.__main__" not in set(sys.modules) - before


# ---------------------------------------------------------------------------------------------
# Pickles that would run a command


def evil_pickles(marker: Path, module: str = "abifit.cache") -> dict[str, bytes]:
    """Pickles that run `touch marker`: a plain __reduce__, and the three that passed the
    restricted unpickler host profiles had (names under `module`, which the old alias table
    mapped to abifit.remote.diskcache)."""
    command = f"touch {marker}".encode()

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return os.system, (command.decode(),)

    inner = pickle.dumps(Evil(), protocol=2)
    mod = module.encode()
    return {
        "reduce": pickle.dumps(Evil()),
        "getattr": (b"cbuiltins\ngetattr\n(c" + mod + b"\nos\nVsystem\ntR(V" + command
                    + b"\ntR."),
        "dotted": b"\x80\x04c" + mod + b"\nos.system\n(V" + command + b"\ntR.",
        "inner-pickle": (b"\x80\x04c" + mod + b"\npickle.loads\n(B"
                         + struct.pack("<I", len(inner)) + inner + b"tR."),
    }


@pytest.mark.parametrize("name", ["reduce", "getattr", "dotted", "inner-pickle"])
def test_the_evil_pickles_do_run_a_command(tmp_path: Path, name: str) -> None:
    """Control: under their module's real name, plain unpickling runs each payload."""
    marker = tmp_path / "MARKER"
    pickle.loads(evil_pickles(marker, "abifit.workers")[name])
    assert marker.exists()


def framed(payload: bytes, magic: bytes, version: int) -> bytes:
    """`payload` behind a header that is right in every respect (magic, version, checksum)."""
    import hashlib

    return HEADER.pack(magic, version, hashlib.sha256(payload).digest()[:16]) + payload


@needs_libz
def test_evil_cache_entries_are_misses(tmp_path: Path) -> None:
    """Each pickle, bare or behind a valid header, as a check result and as the ELF cache's
    entry for libz: a miss, no command run; the view is parsed again and the entry rewritten.
    A pickle in an old bucket (`elf-v1`) is never opened."""
    marker = tmp_path / "MARKER"
    root = tmp_path / "cache"
    cache = Cache(root)
    elf_entry = key_path(root / ELF_BUCKET, str(LIBZ))
    for name, payload in evil_pickles(marker).items():
        for data in (payload, framed(payload, ENTRY_MAGIC, ENTRY_FORMAT)):
            write_raw(key_path(root / CHECKS_BUCKET, "key"), data)
            assert cache.get_result("key") is None, name
            write_raw(elf_entry, data)
            write_raw(key_path(root / "elf-v1", str(LIBZ)), payload)
            image = LocalObjects(ElfCache(root)).image(str(LIBZ))
            assert same(image, libz())
            stored = read_value(elf_entry)
            assert isinstance(stored, tuple) and same(stored[2], image)
    assert not marker.exists()


@needs_libz
def test_entries_of_another_shape_are_misses(tmp_path: Path) -> None:
    """Well-formed entries holding other values than their readers expect (a page whose time is
    a string, an ELF entry that holds no image, a digest that is no string): misses, not
    errors."""
    cache = Cache(tmp_path)
    url = "https://example.org/simple/demo/"
    write_value(key_path(tmp_path / INDEX_BUCKET, url), ("yesterday", "text/html", b""))
    assert cache.page_entry(url) is None
    write_value(key_path(tmp_path / ELF_BUCKET, str(LIBZ)), ((1, 2, 3, 4), str(LIBZ), "image"))
    assert ElfCache(tmp_path).get(str(LIBZ), LIBZ.stat()) is None
    write_value(key_path(tmp_path / DIGESTS_BUCKET, "p", "s"), 123)
    assert cache.get_digest("p", "s") is None
    cache.put_result("k", (1, 2))
    assert cache.get_result("k", tuple[str, ...]) is None and cache.get_result("k") == (1, 2)


def write_raw(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_evil_host_profiles_are_one_error_line(tmp_path: Path) -> None:
    """Each pickle, gzipped bare (as profiles of format 1 were) or behind a valid profile
    header: one FormatError line, no command run."""
    marker = tmp_path / "MARKER"
    for name, payload in evil_pickles(marker).items():
        bare = ("a pickle, as abifit saved host profiles before" if payload[:1] == b"\x80"
                else "not an abifit host profile: does not start with")  # protocol 0
        for data, problem in ((payload, bare),
                              (framed(payload, PROFILE_MAGIC, VERSION),
                               "not an abifit host profile: undecodable data")):
            path = tmp_path / f"{name}.profile"
            path.write_bytes(gzip.compress(data))
            with pytest.raises(FormatError) as raised:
                host_profile(str(path), None, {})
            assert str(raised.value).startswith(f"{path}: {problem}"), str(raised.value)
            assert "\n" not in str(raised.value)
    assert not marker.exists()


@pytest.mark.parametrize(("value", "problem"), [
    ("just a string", "not an abifit host profile: it holds a str, not a host snapshot"),
    (ElfError("x", "y"), "it holds a ElfError"),
], ids=["str", "error"])
def test_a_profile_of_other_data_is_refused(value: object, problem: str) -> None:
    """A well-formed profile holding something else than a snapshot: one error."""
    with pytest.raises(FormatError, match=problem):
        loads(gzip.compress(frame(value, PROFILE_MAGIC, VERSION)), "p")


@needs_libz
def test_a_profile_with_wrong_fields_is_refused() -> None:
    """A snapshot whose fields are of the wrong types, or that lacks one: one error that names
    the field."""
    good = gzip.decompress(dumps(snapshot()))
    wire = msgpack.unpackb(good[HEADER.size:], strict_map_key=False)
    machine, wire[1]["machine"] = wire[1]["machine"], 64
    with pytest.raises(FormatError, match=r"p: not an abifit host profile: HostSnapshot\.machine:"
                                          r" int, where str is expected"):
        loads(gzip.compress(framed(msgpack.packb(wire), PROFILE_MAGIC, VERSION)), "p")
    wire[1]["machine"] = machine
    del wire[1]["facts"]
    with pytest.raises(FormatError, match="HostSnapshot lacks its field 'facts'"):
        loads(gzip.compress(framed(msgpack.packb(wire), PROFILE_MAGIC, VERSION)), "p")


@pytest.mark.parametrize(("data", "problem"), [
    (b"", "the gzip data is truncated"),
    (b"hello", "not gzip data"),
    (gzip.compress(b"hello"), "not an abifit host profile: does not start with"),
    (gzip.compress(b"abifit-h\x00\x01" + bytes(16)), "host profile format 1 (this abifit "
                                                      "reads 3): save it again"),
    (gzip.compress(b"abifit-h\x00\x02" + bytes(16)), "host profile format 2 (this abifit "
                                                      "reads 3): save it again"),
    (gzip.compress(b"abifit-h\x00\x03" + bytes(16) + b"\x01"), "the checksum does not match"),
    (gzip.compress(b"x")[:-4], "the gzip data is truncated"),
    (gzip.compress(b"x") + b"junk", "data after the gzip stream"),
], ids=["empty", "not-gzip", "no-header", "old-format", "format-2", "damaged", "truncated",
        "trailing"])
def test_profiles_that_are_not_ones(data: bytes, problem: str) -> None:
    """Files that are not profiles of this format are one FormatError each."""
    with pytest.raises(FormatError) as raised:
        loads(data, "p")
    assert problem in str(raised.value) and "\n" not in str(raised.value)


def test_a_gzip_bomb_profile_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 2 MB profile that inflates to 512 MiB (twice the cap): refused once it passes
    what its size allows (64 MiB and 32 times it), while decompressing, with Python's
    allocations well under 1 GB."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(64 << 20)
    parts = [deflate.compress(PROFILE_MAGIC + b"\x00\x02" + bytes(16))]
    parts += [deflate.compress(chunk) for _ in range((2 * MAX_PROFILE_BYTES) // len(chunk))]
    bomb = b"".join([*parts, deflate.flush()])
    del chunk, parts
    assert len(bomb) < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="MiB uncompressed from a file of"):
            loads(bomb, "bomb.profile")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 700 << 20, peak


# ---------------------------------------------------------------------------------------------
# Damaged entries


def fuzz_entries() -> dict[str, object]:
    entries: dict[str, object] = {"index-page": (1700000000.5, "text/html", b"<html></html>"),
                                  "index-files": index_files(), "errors": VALUES["errors"]()}
    if LIBZ.exists():
        entries["libz-view"] = libz()
    return entries


@pytest.mark.parametrize("name", list(fuzz_entries()))
def test_damaged_cache_entries_are_misses(tmp_path: Path, name: str) -> None:
    """Single-bit flips anywhere in an entry and truncations of it (seeded): every read is a
    miss or the original value, and nothing but a miss or that value comes out; undecodable
    payloads (without the header's checksum) raise FormatError and nothing else."""
    value = fuzz_entries()[name]
    path = tmp_path / "entry"
    write_value(path, value)
    good = path.read_bytes()
    rng = random.Random(f"datacodec-{name}")
    payload = good[HEADER.size:]
    for _ in range(150):
        bit = rng.randrange(len(good) * 8)
        flipped = bytearray(good)
        flipped[bit // 8] ^= 1 << (bit % 8)
        cut = good[:rng.randrange(len(good))]
        for data in (bytes(flipped), cut):
            path.write_bytes(data)
            back = read_value(path)
            assert back is None or same(back, value)
        bit = rng.randrange(len(payload) * 8)
        raw = bytearray(payload)
        raw[bit // 8] ^= 1 << (bit % 8)
        with contextlib.suppress(FormatError):
            decode(bytes(raw), "entry")  # a value, maybe another one: the checksum is the guard
    path.write_bytes(good)
    assert same(read_value(path), value)


def test_fuzzed_bytes_decode_or_raise_format_error() -> None:
    """Random bytes, and random MessagePack around the codec's tags: FormatError or a value,
    never another exception."""
    rng = random.Random("datacodec-random")
    names = [b"abifit.formats.elf:Section", b"abifit.formats.elf:ElfClass",
             b"abifit.errors:FormatError", b"I", b"Q", b""]
    for _ in range(3000):
        if rng.random() < 0.5:
            data = rng.randbytes(rng.randrange(1, 64))
        else:
            parts = [msgpack.ExtType(rng.randrange(0, 10), rng.choice(names)),
                     *(rng.choice([1, -1, "x", b"\x00" * rng.randrange(9), None, 1.5, {"name": 1},
                                   SECTION, [1, 2], {"a": [msgpack.ExtType(7, names[0]), {}]}])
                       for _ in range(rng.randrange(3)))]
            data = msgpack.packb(parts, use_bin_type=True)
        with contextlib.suppress(FormatError):
            decode(data, "x")


def test_a_section_fits_its_hints() -> None:
    """Sanity: a real dataclass's own values conform to its hints."""
    section = Section(".text", 1, 6, 0, 64, 10)
    hints = type_hints(Section)
    assert all(conforms(getattr(section, f), hint) for f, hint in hints.items())
