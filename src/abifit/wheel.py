"""Wheels read in place: the zip directory, member bytes as byte sources, and which members are ELF.

The central directory is read with the standard library's `zipfile` over a file-like view of any
`ByteSource`; member data is read by our own sources (`SliceSource` for STORED members,
`InflateSource` for DEFLATE ones), so nothing is extracted to disk and a member is only inflated as
far as the reads into it go.
"""

from __future__ import annotations

import io
import posixpath
import struct
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from .elf import is_elf, might_be_elf
from .errors import WheelError
from .sources import ByteSource, InflateSource, SliceSource

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"
ZIP_MAGIC = _LOCAL_MAGIC

@dataclass(frozen=True, slots=True)
class Member:
    """One file in a wheel, as its central directory entry describes it."""

    path: str
    size: int
    compressed_size: int
    crc: int
    method: int
    header_offset: int


class _SourceFile(io.RawIOBase):
    """A read-only, seekable file object over a ByteSource, for zipfile."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._source.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        length = min(len(view), max(0, self._source.size - self._pos))
        if length:
            view[:length] = self._source.read_at(self._pos, length)
            self._pos += length
        return length


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
        if not any(_is_wheel_file(m.path) for m in self.members):
            raise WheelError(source.name, "not a wheel: no *.dist-info/WHEEL member")

    def member(self, path: str) -> Member:
        for m in self.members:
            if m.path == path:
                return m
        raise WheelError(self.source.name, f"no member {path!r}")

    def open(self, member: Member) -> ByteSource:
        """The member's (uncompressed) bytes as a byte source."""
        where = f"{self.source.name}!{member.path}"
        start = member_data_start(self.source, member, where)
        data = SliceSource(self.source, start, member.compressed_size, where)
        if member.method == zipfile.ZIP_STORED:
            return data
        if member.method == zipfile.ZIP_DEFLATED:
            return InflateSource(data, member.size, where)
        raise WheelError(where, f"unsupported zip compression method {member.method}")

    def candidates(self) -> list[Member]:
        """Members that may be ELF files by their names; `is_elf_member` tells for sure."""
        return [m for m in self.members if m.size >= 4 and might_be_elf(m.path)]


def is_elf_member(source: ByteSource) -> bool:
    """Whether an opened member starts with the ELF magic."""
    return source.size >= 4 and is_elf(source.read_at(0, 4))


def member_data_start(source: ByteSource, member: Member, where: str) -> int:
    """Offset of a member's compressed bytes, from its local header (whose extra field may
    differ from the central directory's)."""
    head = source.read_at(member.header_offset, _LOCAL_HEADER.size)
    fields = _LOCAL_HEADER.unpack(head)
    if fields[0] != _LOCAL_MAGIC:
        raise WheelError(where, "corrupt zip: bad local file header", member.header_offset)
    start = member.header_offset + _LOCAL_HEADER.size + int(fields[9]) + int(fields[10])
    if start + member.compressed_size > source.size:
        raise WheelError(where, "corrupt zip: member data runs past the end of the archive",
                         start)
    return start


def _is_wheel_file(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "WHEEL"


def _read_directory(source: ByteSource) -> tuple[Member, ...]:
    try:
        with zipfile.ZipFile(_SourceFile(source)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, struct.error) as e:
        raise WheelError(source.name, f"not a valid zip file ({e})") from e
    return tuple(
        Member(i.filename, i.file_size, i.compress_size, i.CRC, i.compress_type, i.header_offset)
        for i in infos
        if not i.is_dir()
    )
