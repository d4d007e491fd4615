"""Wheels read in place: the zip directory, member bytes as byte sources, and which members are ELF.

The central directory is read from any `ByteSource` with two reads (its end record, then the
directory itself; the standard library's `zipfile` takes a read per entry and is slower on
torch's 12,000 entries); member data is read by our own sources (`SliceSource` for STORED members,
`InflateSource` for DEFLATE ones), so nothing is extracted to disk and a member is only inflated as
far as the reads into it go.
"""

from __future__ import annotations

import posixpath
import struct
import zipfile
import zlib
from dataclasses import dataclass, replace

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from abifit.errors import FormatError, WheelError, WheelRefused
from abifit.formats import inflate
from abifit.formats.elf import is_elf, might_be_elf
from abifit.formats.sources import (
    ByteSource,
    BytesSource,
    InflateSource,
    SliceSource,
    crc_refused,
)

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
WHOLE_MEMBER = 256 << 10  # members up to this many stored bytes are read and inflated at once
LOCAL_HEADER_SIZE = _LOCAL_HEADER.size  # a local file header's fixed part (name and extra follow)
_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_MAGIC = _LOCAL_MAGIC


@dataclass(frozen=True, slots=True)
class Member:
    """One file in a wheel, as its central directory entry describes it: `path` where an
    install puts it (the zip name normalized as pip normalizes it: `pkg/./_ext.so`,
    `pkg//_ext.so` and `pkg/x/../_ext.so` are all `pkg/_ext.so`), `zip_name` the name the
    archive gives it (`raw`, when that is another)."""

    path: str
    size: int
    compressed_size: int
    crc: int
    method: int
    header_offset: int
    raw: str | None = None

    @property
    def zip_name(self) -> str:
        return self.path if self.raw is None else self.raw


class WheelArchive:
    """A wheel's members, readable in place through any ByteSource."""

    def __init__(self, source: ByteSource, filename: str | None = None) -> None:
        self.source = source
        self.filename = filename or posixpath.basename(source.name)
        try:
            self.name, self.version, self.build, self.tags = parse_wheel_filename(self.filename)
        except InvalidWheelFilename as e:
            raise WheelError(source.name, f"not a wheel: {e}") from e
        self.members = _read_directory(source)
        refuse_escaping(self.members, source.name)
        if not any(m.path.endswith("/WHEEL") and _is_wheel_file(m.path) for m in self.members):
            raise WheelError(source.name, "not a wheel: no *.dist-info/WHEEL member")
        refuse_dist_info(self.members, self.name, source.name)

    def member(self, path: str) -> Member:
        for m in self.members:
            if m.path == path:
                return m
        raise WheelError(self.source.name, f"no member {path!r}")

    def open(self, member: Member) -> ByteSource:
        """The member's (uncompressed) bytes as a byte source: a small one inflated at once and
        checked against its CRC-32, a large one inflated as far as reads go (its CRC is checked
        when they reach its end)."""
        where = f"{self.source.name}!{member.path}"
        return member_bytes(self.source, member, member_data_start(self.source, member, where),
                            where)

    def candidates(self) -> list[Member]:
        """Members that may be ELF files by their names; `is_elf_member` tells for sure."""
        return [m for m in self.members if might_be_elf(m.path)]


def member_bytes(source: ByteSource, member: Member, start: int, where: str, *,
                 max_input: int | None = None) -> ByteSource:
    """A member's bytes, its stored bytes starting at `start` in `source`: a small one read at
    once, inflated and checked against its CRC-32; a larger one inflated as far as reads go
    (`max_input` compressed bytes read at most at once), its CRC checked when they reach its
    end."""
    if member.compressed_size <= WHOLE_MEMBER or member.method in WHOLE_METHODS:
        stored = source.read_at(start, member.compressed_size)
        return BytesSource(whole_member(stored, member, where), where)
    data = SliceSource(source, start, member.compressed_size, where)
    if member.method == zipfile.ZIP_STORED:
        return data
    if member.method == zipfile.ZIP_DEFLATED:
        return InflateSource(data, member.size, where, crc=member.crc, max_input=max_input)
    raise WheelError(where, f"unsupported zip compression method {member.method}")


def whole_member(stored: bytes, member: Member, where: str) -> bytes:
    """A member's bytes from all its stored bytes, inflated when DEFLATE, checked against the
    sizes and CRC-32 of the zip directory (`WheelRefused` for a CRC that does not match)."""
    if member.method == zipfile.ZIP_STORED:
        data = stored
    elif member.method == zipfile.ZIP_DEFLATED:
        inflater = inflate.decompressobj(-zlib.MAX_WBITS)
        try:
            data = inflater.decompress(stored, member.size + 1)  # one byte past: too long
        except inflate.error as e:
            raise FormatError(where, f"corrupt compressed data ({e})") from e
    elif member.method in WHOLE_METHODS:
        data = _decompressed(stored, member, where)
    else:
        raise FormatError(where, f"unsupported zip compression method {member.method}")
    if len(data) != member.size:
        held = f"more than {member.size:,}" if len(data) > member.size else f"{len(data):,}"
        raise FormatError(where, f"the member holds {held} bytes, the zip directory says "
                          f"{member.size:,}")
    crc = inflate.crc32(data)
    if crc != member.crc:
        raise crc_refused(where, crc, member.crc)
    return data


# methods `zipfile` (and so pip) reads besides STORED and DEFLATE: a member so compressed is read
# whole and decompressed at once (they are rare in wheels; its size is known from the directory)
WHOLE_METHODS = frozenset({zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})


def _decompressed(stored: bytes, member: Member, where: str) -> bytes:
    """A BZIP2 or LZMA member's bytes, at most one past the size the directory gives."""
    import bz2
    import lzma

    try:
        if member.method == zipfile.ZIP_BZIP2:
            return bz2.BZ2Decompressor().decompress(stored, member.size + 1)
        # a zip's LZMA: version (2 bytes), the size of the properties (2), the properties
        # (lc, lp and pb in one byte, the dictionary size in four), then raw LZMA1
        _version, length = struct.unpack_from("<HH", stored)
        if length != 5 or len(stored) < 9:
            raise FormatError(where, f"corrupt LZMA header (properties of {length} bytes)")
        packed, dict_size = stored[4], int.from_bytes(stored[5:9], "little")
        if packed >= 9 * 5 * 5:
            raise FormatError(where, f"corrupt LZMA properties ({packed})")
        lzma1 = {"id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": packed % 9,
                 "lp": packed // 9 % 5, "pb": packed // 45}
        decoder = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[lzma1])
        return decoder.decompress(stored[9:], member.size + 1)
    except (OSError, EOFError, ValueError, lzma.LZMAError, struct.error) as e:
        raise FormatError(where, f"corrupt compressed data ({e})") from e


def is_elf_member(source: ByteSource) -> bool:
    """Whether an opened member starts with the ELF magic."""
    return source.size >= 4 and is_elf(source.read_at(0, 4))


def refuse_escaping(members: tuple[Member, ...], where: str) -> None:
    """Raise `WheelRefused` for a member that would be installed outside the install tree (an
    absolute name, or one whose `..` parts climb out of it), as pip refuses such a wheel. The
    members' paths are normalized already (`_read_directory`), as pip normalizes them."""
    for member in members:
        path = member.path
        if path.startswith("/") or path == ".." or path.startswith("../"):
            raise WheelRefused(where, f"member {member.zip_name!r} would be installed outside "
                               "the target directory (pip refuses this wheel)")


def refuse_dist_info(members: tuple[Member, ...], project: str, where: str) -> None:
    """Raise `WheelRefused` for a wheel whose `.dist-info` directory pip does not accept: more
    than one at the top of the archive, or one whose name does not start with the project's
    (canonical names compared, as pip compares them)."""
    tops = sorted(top for top in {m.zip_name.split("/", 1)[0] for m in members}
                  if top.endswith(".dist-info"))
    if len(tops) > 1:
        raise WheelRefused(where, f"multiple .dist-info directories found: {', '.join(tops)} "
                           "(pip refuses this wheel)")
    if tops and not canonicalize_name(tops[0]).startswith(canonicalize_name(project)):
        raise WheelRefused(where, f".dist-info directory {tops[0]!r} does not start with "
                           f"{canonicalize_name(project)!r} (pip refuses this wheel)")


def member_data_start(source: ByteSource, member: Member, where: str) -> int:
    """Offset of a member's compressed bytes, from its local header (whose extra field may
    differ from the central directory's). A local header that names another file than the
    central directory is refused, as pip (through `zipfile`) refuses it."""
    head = source.read_at(member.header_offset, _LOCAL_HEADER.size)
    fields = _LOCAL_HEADER.unpack(head)
    if fields[0] != _LOCAL_MAGIC:
        raise WheelError(where, "corrupt zip: bad local file header", member.header_offset)
    name_length = int(fields[9])
    if name_length > source.size - member.header_offset - _LOCAL_HEADER.size:
        raise WheelError(where, "corrupt zip: the local header runs past the end of the archive",
                         member.header_offset)
    raw = source.read_at(member.header_offset + _LOCAL_HEADER.size, name_length)
    try:
        local = _member_name(raw, int(fields[2]))
    except UnicodeDecodeError:
        local = raw.decode("utf-8", "replace")
    if local != member.zip_name:
        raise WheelRefused(where, f"the local header names {local!r}, the zip directory "
                           f"{member.zip_name!r} (pip refuses this wheel)", member.header_offset)
    start = member.header_offset + _LOCAL_HEADER.size + name_length + int(fields[10])
    if start + member.compressed_size > source.size:
        raise WheelError(where, "corrupt zip: member data runs past the end of the archive",
                         start)
    return start


def _is_wheel_file(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "WHEEL"


def _read_directory(source: ByteSource) -> tuple[Member, ...]:
    """The files of a zip archive, from its central directory (ZIP64 too; directories left
    out; of names installed to the same path, the last entry), read with one request for the
    directory where a request costs a round trip."""
    try:
        offset, size, count, shift = _directory_place(source)
        if size < count * _CENTRAL.size or offset < 0 or offset + size > source.size:
            raise ValueError("the central directory lies outside the archive")
        entries = _central_entries(source.read_at(offset, size), count, shift, source.name)
        # names installed to one path are one file, the last one: pip writes the members in
        # the directory's order, each over the one before
        last: dict[str, Member] = {}
        for m in entries:
            if not m.path.endswith("/"):
                installed = posixpath.normpath(m.path)
                last[installed] = m if installed == m.path else replace(m, path=installed,
                                                                      raw=m.path)
        return tuple(last.values())
    except (ValueError, struct.error, UnicodeDecodeError) as e:
        raise WheelError(source.name, f"not a valid zip file ({e})") from e


_EOCD = struct.Struct("<4s4H2LH")  # the end of central directory record
_EOCD_MAGIC = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")  # the ZIP64 record is taken to sit just before it
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # a central directory entry's fixed part
# the fields of it that are read: signature, flags, method, CRC-32, sizes, the lengths of the
# name, extra field and comment, the local header's offset
_CENTRAL_FIELDS = struct.Struct("<4s4xHH4x3L3H8xL")
_CENTRAL_MAGIC = b"PK\x01\x02"
_MAX_COMMENT = 0xFFFF
_ENCRYPTED = 0x1  # general purpose flag bit 0


def _directory_place(source: ByteSource) -> tuple[int, int, int, int]:
    """Where the central directory starts, its size, its entry count, and by how much the
    archive's offsets are shifted (bytes prepended to the archive, as zipfile allows)."""
    # an archive without a comment: the record, and the ZIP64 locator that may sit before it
    span = min(source.size, _ZIP64_LOCATOR.size + _EOCD.size)
    tail = source.read_at(source.size - span, span)
    record = tail[-_EOCD.size:]
    if not (record.startswith(_EOCD_MAGIC) and record.endswith(b"\x00\x00")):
        span = min(source.size, _EOCD.size + _MAX_COMMENT)
        tail = source.read_at(source.size - span, span)
    at = _end_record(tail)
    _, _, _, _, count, size, offset, _ = _EOCD.unpack_from(tail, at)
    eocd = source.size - span + at
    locator_at = at - _ZIP64_LOCATOR.size
    if locator_at >= 0 and tail[locator_at : locator_at + 4] == b"PK\x06\x07":
        record_at = eocd - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size
        fields = _ZIP64_EOCD.unpack(source.read_at(record_at, _ZIP64_EOCD.size))
        if fields[0] != b"PK\x06\x06":
            raise ValueError("a ZIP64 locator without its end of central directory record")
        count, size, offset = fields[7], fields[8], fields[9]
        return record_at - size, size, count, record_at - size - offset
    return eocd - size, size, count, eocd - size - offset


def _end_record(tail: bytes) -> int:
    """Where the end of central directory record starts in the archive's last bytes: the last
    signature whose comment reaches exactly to the end (a comment may hold the signature too),
    else the last signature."""
    last = at = tail.rfind(_EOCD_MAGIC, 0, max(0, len(tail) - _EOCD.size + 4))
    if at < 0:
        raise ValueError("no end of central directory record")
    while at >= 0:
        comment = int.from_bytes(tail[at + _EOCD.size - 2 : at + _EOCD.size], "little")
        if at + _EOCD.size + comment == len(tail):
            return at
        at = tail.rfind(_EOCD_MAGIC, 0, at)
    return last


def _central_entries(directory: bytes, count: int, shift: int, where: str) -> list[Member]:
    """The entries of a central directory; `WheelRefused` for an encrypted file, which pip
    cannot install."""
    entries = []
    at = 0
    unpack = _CENTRAL_FIELDS.unpack_from
    for _ in range(count):
        (magic, flags, method, crc, csize, usize, name_length, extra_length, comment_length,
         offset) = unpack(directory, at)
        if magic != _CENTRAL_MAGIC:
            raise ValueError("bad magic number for central directory")
        start = at + _CENTRAL.size
        raw = directory[start : start + name_length]
        name = raw.decode("ascii") if raw.isascii() and b"\x00" not in raw \
            else _member_name(raw, flags)
        if 0xFFFFFFFF in (usize, csize, offset):
            extra = directory[start + name_length : start + name_length + extra_length]
            usize, csize, offset = _zip64_sizes(extra, usize, csize, offset)
        if flags & _ENCRYPTED and not name.endswith("/"):
            raise WheelRefused(where, f"member {name!r} is encrypted: pip cannot install this "
                               "wheel (a password is required for extraction)")
        entries.append(Member(name, usize, csize, crc, method, offset + shift))
        at = start + name_length + extra_length + comment_length
    return entries



def _member_name(raw: bytes, flags: int) -> str:
    """A member's name as `zipfile` reads it: UTF-8 when flag bit 11 says so, else cp437, up
    to a NUL."""
    try:
        name = raw.decode("ascii")  # the same in UTF-8 and in cp437, and fast
    except UnicodeDecodeError:
        name = raw.decode("utf-8" if flags & 0x800 else "cp437")
    return name.split("\x00", 1)[0] if "\x00" in name else name


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset that a ZIP64 extra field holds for those saturated at 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == 1:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            saturated = [v == 0xFFFFFFFF for v in (usize, csize, offset)]
            if sum(saturated) > len(values):
                raise ValueError("a ZIP64 extra field shorter than its saturated sizes")
            usize = values.pop(0) if saturated[0] else usize
            csize = values.pop(0) if saturated[1] else csize
            offset = values.pop(0) if saturated[2] else offset
            return usize, csize, offset
        at += 4 + length
    raise ValueError("a saturated size without a ZIP64 extra field")


MAX_PYTHON_MEMBER = 4 << 20  # a Python member larger than this is not read for its imports


def python_members(archive: WheelArchive) -> dict[str, bytes]:
    """The `.py` members of a wheel (each up to `MAX_PYTHON_MEMBER`) and its `top_level.txt`,
    read whole, by member path: what package code does when imported. A member that cannot be
    read is left out."""
    out: dict[str, bytes] = {}
    for member in archive.members:
        path = member.path
        if not (path.endswith(".py") or path.endswith(".dist-info/top_level.txt")):
            continue
        if member.size > MAX_PYTHON_MEMBER:
            continue
        try:
            source = archive.open(member)
            out[path] = source.read_at(0, source.size)
        except FormatError:
            continue
    return out
