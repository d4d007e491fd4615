"""What is read of an ELF member of a wheel besides the view its wheel reads itself: the view
of a large member of a wheel on this machine, inflated and parsed in a worker process
(`read_local_view`), whether the section headers of a member show fat binaries
(`shows_no_gpu_code`), its fat binaries (`read_gpu_member`) and its use of NumPy's C API
(`read_numpy_member`)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, parse_elf, parse_layout
from abifit.formats.sources import (
    ByteSource,
    BytesSource,
    FileSource,
    InflateSource,
    SliceSource,
)
from abifit.formats.wheel import (
    WHOLE_METHODS,
    Member,
    is_elf_member,
    member_data_start,
    whole_member,
)
from abifit.remote.memberbytes import open_member
from abifit.remote.readahead import ReadAhead

if TYPE_CHECKING:
    from abifit.formats.fatbin import GpuCode
    from abifit.formats.numpyapi import NumpyUse

R = TypeVar("R")

WHOLE_GPU_MEMBER = 64 << 20  # members read for their GPU code in one request up to this size


def _inflated(compressed: ByteSource, member: Member, where: str) -> ByteSource:
    """A member's bytes, inflated from its start, over a source of its stored bytes."""
    if member.method == zipfile.ZIP_STORED:
        return compressed
    if member.method in WHOLE_METHODS:
        return BytesSource(whole_member(compressed.read_at(0, compressed.size), member, where),
                           where)
    if member.method != zipfile.ZIP_DEFLATED:
        raise FormatError(where, f"unsupported zip compression method {member.method}")
    return InflateSource(compressed, member.size, where, crc=member.crc)


def shows_no_gpu_code(opened: ByteSource) -> bool:
    """Whether a member just inflated for its view has section headers that show no fat
    binaries (reading them costs little more then; False when they cannot be read:
    `RemoteWheel.gpu_code` then reads the member, and says why it cannot)."""
    from abifit.formats.fatbin import has_gpu_code

    try:
        layout = parse_layout(opened, sections=True)
    except FormatError:
        return False
    return not has_gpu_code(layout)


def read_local_view(path: str, member: Member, where: str, relocations: bool,
                    ) -> tuple[ElfImage | None, bool]:
    """The view of a member of a wheel on this machine (None: not ELF), inflated from its
    start as far as the reads go, and whether it shows no fat binaries (`shows_no_gpu_code`):
    one large member's inflating and parsing, for a worker process (`workers.run`)."""
    with FileSource(path, mapped=False) as archive:
        opened = open_member(archive, member, where, local=True)
        if not is_elf_member(opened):
            return None, False
        image = parse_elf(opened, relocations=relocations, sections=False)
        return image, shows_no_gpu_code(opened)


def read_gpu_member(archive: ByteSource, member: Member, where: str,
                     local: bool = False) -> GpuCode | None:
    """A member's fat binaries: a small member fetched in one request; a large one with its
    headers read from its ends, then inflated from its start up to its fat binaries' end; in a
    `local` archive, inflated from its start as far as the reads go."""
    from abifit.formats.fatbin import read_gpu_code

    return _read_member(archive, member, where, local, read_gpu_code)


def read_numpy_member(archive: ByteSource, member: Member, where: str,
                       local: bool = False) -> NumpyUse | None:
    """A member's use of NumPy's C API (`formats.numpyapi`), read from its `.rodata` as
    `read_gpu_member` reads fat binaries."""
    from abifit.formats.numpyapi import read_numpy_use

    return _read_member(archive, member, where, local,
                        lambda source, image: read_numpy_use(source, image.sections))


def _read_member(archive: ByteSource, member: Member, where: str, local: bool,
                 read: Callable[[ByteSource, ElfImage], R | None]) -> R | None:
    """`read` of an ELF member's bytes and headers (None: not ELF): a small member fetched in
    one request; a large one with its headers read from its ends, then inflated from its start
    as far as `read` reads; in a `local` archive, inflated from its start."""
    if local:
        opened = open_member(archive, member, where, local=True)
        if not is_elf_member(opened):
            return None
        return read(opened, parse_elf(opened, relocations=False))
    source = ReadAhead(archive, max_ahead=8 << 20)
    start = member_data_start(source, member, where)
    stored: ByteSource = SliceSource(source, start, member.compressed_size, where)
    if member.compressed_size <= WHOLE_GPU_MEMBER:
        stored = BytesSource(archive.read_at(start, member.compressed_size), where)
        opened = _inflated(stored, member, where)
        if not is_elf_member(opened):
            return None
        return read(opened, parse_elf(opened, relocations=False))
    headers = open_member(source, member, where)
    if not is_elf_member(headers):
        return None
    return read(_inflated(stored, member, where), parse_elf(headers, relocations=False))
