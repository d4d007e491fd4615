"""The file `abifit index export` writes and `abifit index import` reads: the symbol store's
wheels, their ELF members and the symbols of each, in a versioned, compressed, data-only format
(never SQLite, never pickle: reading it builds strings, integers and bytes, nothing else).

Layout (integers big-endian):

    offset  size  field
    0       8     magic b"abifit-s"
    8       2     format version (`STORE_FORMAT`, 1)
    10      1     codec of the body: 1 zstd, 2 zlib (written where zstd is not available)
    11      5     zero
    16      8     length of the body once decompressed
    24      32    sha256 of the (compressed) body
    56      ...   body

The body, decompressed, is a stream of MessagePack values:

    {"format": "abifit-symbols", "names": N, "versions": M, "wheels": W}
    [name, ...]                      N mangled symbol names, each once
    [version, ...]                   M symbol version nodes (GLIBC_2.17, ...), each once
    W wheel records, each:
    [key, package, version, wheel, [object, ...]]
        key      the wheel's store key (`abifit.remote.wheelcache.view_key`)
        package  canonical project name; version: the release as the wheel names it;
        wheel    the wheel's file name
        object:  [member, soname or nil, [name index, ...], [version number, ...], defined]
                 name index: into the names; version number: 0 unversioned, i the i-th
                 version (from 1); defined: bytes, one per symbol, 1 defined, 0 required

`decode_store` checks everything before anything is written: the magic, the version, the
codec, the checksum, the declared length, and each value's type, every index within its table;
a file that fails any of these is a `FormatError` naming the file.
"""

from __future__ import annotations

import hashlib
import importlib
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import msgpack

from abifit.errors import FormatError
from abifit.formats.datacodec import Budget

STORE_MAGIC = b"abifit-s"
STORE_FORMAT = 1
HEADER = struct.Struct(">8sHB5xQ32s")
CODEC_ZSTD = 1
CODEC_ZLIB = 2
FORMAT_NAME = "abifit-symbols"
MAX_EXPORT_BYTES = 1 << 30  # an export file larger than this is not read
MAX_BODY = 4 << 30  # a declared decompressed length above this is refused


def budget(size: int) -> tuple[int, int]:
    """What the body of an export file of `size` bytes may decompress to, and what decoding it
    may build (`datacodec.Budget`): an export decompresses to a few times its size and decodes
    to about 12 times that, so a small file that claims more is refused before it is built."""
    return min((64 << 20) + 64 * size, MAX_BODY), (64 << 20) + 256 * size


@dataclass(frozen=True, slots=True)
class DumpObject:
    """One ELF member of a wheel, its symbols as indexes into the dump's tables."""

    member: str
    soname: str | None
    names: tuple[int, ...]
    versions: tuple[int, ...]  # 0: unversioned; i: the dump's versions[i - 1]
    defined: bytes  # one byte per symbol: 1 defined, 0 required


@dataclass(frozen=True, slots=True)
class DumpWheel:
    key: str
    package: str
    version: str
    wheel: str
    objects: tuple[DumpObject, ...]


@dataclass(frozen=True, slots=True)
class StoreDump:
    """What an export file holds."""

    names: tuple[str, ...]
    versions: tuple[str, ...]
    wheels: tuple[DumpWheel, ...]


def _zstd() -> tuple[Callable[[bytes], bytes], type[Exception]] | None:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.compress, module.ZstdError
    return None


def encode_store(dump: StoreDump) -> bytes:
    """The file's bytes for `dump` (zstd-compressed where zstd is available, else zlib)."""
    pack = msgpack.Packer(use_bin_type=True)
    parts = [pack.pack({"format": FORMAT_NAME, "names": len(dump.names),
                        "versions": len(dump.versions), "wheels": len(dump.wheels)}),
             pack.pack(list(dump.names)), pack.pack(list(dump.versions))]
    for w in dump.wheels:
        objects = [[o.member, o.soname, list(o.names), list(o.versions), o.defined]
                   for o in w.objects]
        parts.append(pack.pack([w.key, w.package, w.version, w.wheel, objects]))
    raw = b"".join(parts)
    zstd = _zstd()
    codec, body = ((CODEC_ZSTD, zstd[0](raw)) if zstd is not None
                   else (CODEC_ZLIB, zlib.compress(raw, 6)))
    return HEADER.pack(STORE_MAGIC, STORE_FORMAT, codec, len(raw),
                       hashlib.sha256(body).digest()) + body


def decode_store(data: bytes, where: str) -> StoreDump:
    """The dump in a file's bytes; `FormatError` at `where` for anything else."""
    raw = _body(data, where)
    unpacker = msgpack.Unpacker(raw=False, use_list=True, strict_map_key=True,
                                max_buffer_size=max(len(raw), 1),
                                **Budget(budget(len(data))[1]).options())
    unpacker.feed(raw)
    try:
        values = list(unpacker)
    except FormatError as e:
        raise FormatError(where, e.problem) from e
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise FormatError(where, f"the body is not a MessagePack stream ({e})") from e
    return _dump(values, where)


def _body(data: bytes, where: str) -> bytes:
    if len(data) < HEADER.size or data[:8] != STORE_MAGIC:
        raise FormatError(where, "not an abifit symbol store export (no abifit-s header)")
    _magic, version, codec, length, checksum = HEADER.unpack_from(data)
    if version != STORE_FORMAT:
        raise FormatError(where, f"format version {version}; this abifit reads version "
                          f"{STORE_FORMAT}")
    body = data[HEADER.size:]
    if hashlib.sha256(body).digest() != checksum:
        raise FormatError(where, "the checksum does not match: the file is damaged or "
                          "truncated")
    most = budget(len(data))[0]
    if length > most:
        raise FormatError(where, f"declares {length:,} bytes of data, more than {most:,} (what "
                          f"an export of {len(data):,} bytes may hold)")
    raw = _decompress(body, codec, length, where)
    if len(raw) != length:
        raise FormatError(where, f"holds {len(raw):,} bytes of data, its header says "
                          f"{length:,}")
    return raw


def _decompress(body: bytes, codec: int, length: int, where: str) -> bytes:
    if codec == CODEC_ZLIB:
        try:
            inflater = zlib.decompressobj()
            return inflater.decompress(body, length + 1)
        except zlib.error as e:
            raise FormatError(where, f"the body does not decompress ({e})") from e
    if codec != CODEC_ZSTD:
        raise FormatError(where, f"unknown codec {codec}")
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        try:
            out: bytes = module.ZstdDecompressor().decompress(body, length + 1)
        except module.ZstdError as e:
            raise FormatError(where, f"the body does not decompress ({e})") from e
        return out
    raise FormatError(where, "zstd-compressed, and no zstd decoder is installed "
                      "(pip install backports.zstd)")


def _dump(values: list[object], where: str) -> StoreDump:
    def bad(what: str) -> FormatError:
        return FormatError(where, f"malformed: {what}")

    if len(values) < 3 or not isinstance(values[0], dict):
        raise bad("no header record")
    head = values[0]
    if head.get("format") != FORMAT_NAME:
        raise bad(f"the header names format {head.get('format')!r}, not {FORMAT_NAME!r}")
    counts = [head.get(k) for k in ("names", "versions", "wheels")]
    if not all(type(c) is int for c in counts):
        raise bad("the header's counts are not integers")
    names, versions = values[1], values[2]
    if not isinstance(names, list) or not _strings(names) or len(names) != counts[0]:
        raise bad(f"the names are not {counts[0]} strings")
    if not isinstance(versions, list) or not _strings(versions) or len(versions) != counts[1]:
        raise bad(f"the versions are not {counts[1]} strings")
    wheels = values[3:]
    if len(wheels) != counts[2]:
        raise bad(f"{len(wheels)} wheel records, the header says {counts[2]}")
    read = tuple(_wheel(w, len(names), len(versions), bad) for w in wheels)
    return StoreDump(tuple(names), tuple(versions), read)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(type(v) is str for v in value)


def _wheel(value: object, names: int, versions: int,
           bad: Callable[[str], FormatError]) -> DumpWheel:
    if not (isinstance(value, list) and len(value) == 5 and all(type(v) is str for v in value[:4])
            and isinstance(value[4], list)):
        raise bad("a wheel record is not [key, package, version, wheel, objects]")
    key, package, version, wheel, objects = value
    return DumpWheel(key, package, version, wheel,
                     tuple(_object(o, wheel, names, versions, bad) for o in objects))


def _object(value: object, wheel: str, names: int, versions: int,
            bad: Callable[[str], FormatError]) -> DumpObject:
    if not (isinstance(value, list) and len(value) == 5 and type(value[0]) is str
            and (value[1] is None or type(value[1]) is str)):
        raise bad(f"an object of {wheel} is not [member, soname, names, versions, defined]")
    member, soname, name_ids, version_ids, defined = value
    if not (_indexes(name_ids, names) and _indexes(version_ids, versions + 1)
            and type(defined) is bytes and len(name_ids) == len(version_ids) == len(defined)
            and defined.translate(None, b"\x00\x01") == b""):
        raise bad(f"the symbols of {wheel}!{member} do not fit the tables")
    return DumpObject(member, soname, tuple(name_ids), tuple(version_ids), defined)


def _indexes(value: object, size: int) -> bool:
    return (isinstance(value, list) and all(type(i) is int for i in value)
            and (not value or (min(value) >= 0 and max(value) < size)))

