"""The GPU code in a host ELF object: the fat binaries in `.nv_fatbin`, read from their headers.

A listing needs no decompression: every entry header says its kind, SM, variant and sizes. The
layout below was found by examining what nvcc 13.0 (`fatbinary`) produces for known inputs, and is
checked in tests/formats/test_fatbin.py against `cuobjdump` on nvcc-built fixtures and on the CUDA
libraries of a torch cu13 install. Little-endian throughout.

Section `.nv_fatbin` (or `__nv_relfatbin`, the pre-linked fat binaries of `-rdc` objects):
containers back to back, each 8-byte aligned.

Container header, 16 bytes:

    0  u32  magic 0xBA55ED50
    4  u16  version (1)
    6  u16  header size (16)
    8  u64  size of the entries that follow the header

Entry header (64 bytes, more when it carries an identifier or options), then the payload:

    0  u16  kind: 1 PTX, 2 ELF cubin (SASS), 8 NVVM IR (LTO)
    2  u16  entry format (0x0101)
    4  u32  header size
    8  u64  payload size in the container (padded to a multiple of 8)
   16  u32  compressed size (0 when the payload is stored as it is)
   20  u32  offset in this header of an options descriptor: u32 offset, u32 size (0: none)
   24  u16  code version, minor;  26  u16  major (cubin: ELF code version 1.8; PTX: ISA 9.0)
   28  u32  SM number: 90 for sm_90, sm_90a and compute_90
   32  u32  identifier offset in this header;  36  u32  its size (the source file, with -G)
   40  u64  flags: 0x1 64-bit, 0x2 debug info, 0x10 Linux host, 0x2000 LZ4 block, 0x8000 zstd
            frame, 0x100000 arch-specific (`sm_90a`), 0x200000 family-specific (`sm_100f`)
   48  u64  0 (a hash on NVVM entries)
   56  u64  uncompressed size (0 when not compressed)

The options are `ptxasOptions` for PTX, `nvvmOptions` for NVVM and, for sm_100+ cubins, a copy of
the cubin's `.nv.compat` attributes. CUDA 13 compresses with zstd by default (`-compress-mode=
default|size|balance`) and with LZ4 in `-compress-mode=speed`, as CUDA 11 and 12 did by default.

The arch-specific and family-specific variants are known only from the flags: a CUDA 13 cubin
(ELF ABI version 8) has the same `e_flags` for sm_90 and sm_90a. `check_images=True` still reads
the start of every payload (decompressing a few hundred bytes at most) and checks that a cubin is
an ELF file for the SM its entry names (`e_flags`: bits 0-7 up to ABI version 7, bits 8-15 from
version 8) and that PTX names the same `.version` and `.target`.

LZ4 is decoded here; zstd needs `compression.zstd` (Python 3.14) or the `backports.zstd` package.
Without either, zstd payloads are not checked and `GpuCode.notes` says so.

Every size and offset is checked against its container, section and file before it is used, so
corrupt data raises `FormatError` (file, problem, offset) and nothing else.

Bounds. A section may hold millions of tiny containers (a crafted file, or a zip member that
inflates a kilobyte into hundreds of megabytes); time and memory stay bounded by what differs:

- Identical containers that follow one another (byte for byte, the padding after them too) are
  one `FatbinContainer` with a `count`: after a small container is read, the bytes that follow
  are compared with it, in windows that double up to `_REPEAT_WINDOW`, so that a run of them
  costs a memory comparison, not a parse. Order is kept: the listing expands the counts.
- Containers read one by one (a run of repeats counts once) and entries are counted together:
  at most `READ_FLOOR`, plus one per `READ_BYTES` bytes of the sections read, so that what is
  kept (a few hundred bytes per entry) stays within the bytes read. Real libraries hold an image
  per tens or hundreds of KiB (libtorch_cuda.so: 2,789 images in 444 fat binaries, 1.5 GB;
  cuFFT: 23,983 fat binaries in its data). Past the limit, and past `STRAY_LIMIT` container
  magic numbers in data sections that start no fat binary, the read stops with a `FormatError`
  that names the limit.
- Notes about single images stop at `NOTE_LIMIT`, with a count of the rest.
"""

from __future__ import annotations

import importlib
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import Enum, IntEnum
from typing import Protocol

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, ElfLayout, Section
from abifit.formats.sources import ByteSource

EXECUTABLE_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"
CONTAINER_MAGIC = 0xBA55ED50
SHT_NOBITS = 8
EM_CUDA = 190

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_DESCRIPTOR = struct.Struct("<II")

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LINUX = 0x10
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

STUB_LIMIT = 16 << 10  # containers of cubins up to this size are opened to look for kernels
DATA_SECTIONS = (".rodata", ".lrodata", ".ldata", ".data", ".data.rel.ro", ".nvFatBinSegment")
_MAGIC_BYTES = struct.pack("<I", CONTAINER_MAGIC)
_SCAN_CHUNK = 16 << 20

READ_FLOOR = 1 << 16  # containers and entries read one by one in any object (repeats aside)...
READ_BYTES = 2 << 10  # ... and one more per this many bytes of the sections read
STRAY_LIMIT = 1 << 16  # container magic numbers in data sections that start no fat binary
NOTE_LIMIT = 16  # notes about single images; the rest are counted
_REPEAT_UNIT = 16 << 10  # containers (with their padding) up to this size are looked for repeats
_REPEAT_WINDOW = 1 << 20  # bytes compared at once when looking for repeats

ELF_HEAD_SIZE = 64
PTX_HEAD_SIZE = 4096
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_CHUNK = 1 << 16


class EntryKind(IntEnum):
    PTX = 1
    ELF = 2
    NVVM = 8


class Compression(Enum):
    NONE = "none"
    LZ4 = "lz4"
    ZSTD = "zstd"


class Variant(Enum):
    """The suffix of an architecture name: `sm_90`, `sm_90a`, `sm_100f`."""

    PLAIN = ""
    ARCH_SPECIFIC = "a"
    FAMILY = "f"


@dataclass(frozen=True, slots=True)
class Arch:
    """A GPU architecture as code targets it: SM number and variant (`sm_90a` is 90, 'a')."""

    sm: int
    variant: Variant = Variant.PLAIN

    @property
    def major(self) -> int:
        return self.sm // 10

    @property
    def minor(self) -> int:
        return self.sm % 10

    def __str__(self) -> str:
        return f"sm_{self.sm}{self.variant.value}"

    @property
    def virtual(self) -> str:
        """The name of PTX for this architecture: `compute_90a`."""
        return f"compute_{self.sm}{self.variant.value}"


@dataclass(frozen=True, slots=True)
class CubinHead:
    """What the ELF header of a cubin says: its ABI version, `e_flags` and the SM they name."""

    abi_version: int
    flags: int
    sm: int


@dataclass(frozen=True, slots=True)
class PtxHead:
    """The `.version` and `.target` directives at the top of a PTX text."""

    version: tuple[int, int]
    target: str


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One code image in a container: its header, and the head of its payload when checked.

    `stored_size` is the payload as stored (compressed or not); `uncompressed_size` its size once
    decompressed (the same when not compressed). `options` are the ptxas or NVVM options of a PTX
    or NVVM entry ('' otherwise); `identifier` the source name nvcc -G records ('' otherwise).
    """

    offset: int
    kind: EntryKind | int
    arch: Arch
    code_version: tuple[int, int]
    flags: int
    header_size: int
    payload_size: int
    stored_size: int
    uncompressed_size: int
    compression: Compression
    identifier: str = ""
    options: str = ""
    head: CubinHead | PtxHead | None = None

    @property
    def is_sass(self) -> bool:
        return self.kind == EntryKind.ELF

    @property
    def is_ptx(self) -> bool:
        return self.kind == EntryKind.PTX

    @property
    def has_debug_info(self) -> bool:
        return bool(self.flags & FLAG_DEBUG)

    @property
    def listed_arch(self) -> str:
        """The architecture as `cuobjdump --list-elf/--list-ptx` names it (no `f` on cubins)."""
        if self.is_sass and self.arch.variant is Variant.FAMILY:
            return f"sm_{self.arch.sm}"
        return str(self.arch)


@dataclass(frozen=True, slots=True)
class FatbinContainer:
    """One fat binary (usually one translation unit, or one device link): its entries.

    `kernels` says whether its cubins define any kernel (a `.text.<kernel>` section): False for
    the small container nvcc's link step adds (registration only, no kernel), None when not
    examined (containers with a cubin over `STUB_LIMIT` bytes, or PTX, are assumed to hold
    kernels). `count` is how many times it occurs in a row: identical containers that follow one
    another (byte for byte, with the padding after them) are one value, whose `offset` is the
    first one's and `size` each one's.
    """

    section: str
    offset: int
    size: int
    version: int
    entries: tuple[FatbinEntry, ...]
    kernels: bool | None = None
    count: int = 1

    @property
    def sass_archs(self) -> frozenset[Arch]:
        return frozenset(e.arch for e in self.entries if e.is_sass)

    @property
    def ptx_archs(self) -> frozenset[Arch]:
        return frozenset(e.arch for e in self.entries if e.is_ptx)


@dataclass(frozen=True, slots=True)
class GpuCode:
    """All fat binaries of one object, in file order (a run of identical ones is one value with
    a `count`), and what could not be checked.

    `containers` are those of `.nv_fatbin` (or `__nv_relfatbin`), the ones the CUDA runtime
    registers and `cuobjdump` lists. `embedded` are fat binaries found inside data sections
    (`.ldata`, `.rodata`, ...), which a library loads itself (cuFFT keeps its kernels so); they
    are read only when asked for, and are not part of the listing.
    """

    name: str
    containers: tuple[FatbinContainer, ...]
    notes: tuple[str, ...] = ()
    embedded: tuple[FatbinContainer, ...] = ()

    @property
    def fat_binaries(self) -> int:
        """How many containers `containers` stand for (repeats counted)."""
        return sum(c.count for c in self.containers)

    @property
    def entries(self) -> tuple[FatbinEntry, ...]:
        """Every entry, in file order: a repeated container's entries once per repeat."""
        return tuple(e for c in self.containers for _ in range(c.count) for e in c.entries)

    @property
    def sass_archs(self) -> frozenset[Arch]:
        return frozenset(a for c in self.containers for a in c.sass_archs)

    @property
    def ptx_archs(self) -> frozenset[Arch]:
        return frozenset(a for c in self.containers for a in c.ptx_archs)

    def listing(self) -> tuple[tuple[str, str], ...]:
        """("ELF"|"PTX", arch) per cubin and PTX entry, in the order cuobjdump lists them."""
        listed: list[tuple[str, str]] = []
        for container in self.containers:
            once = [("ELF" if e.is_sass else "PTX", e.listed_arch)
                    for e in container.entries if e.is_sass or e.is_ptx]
            listed += once * container.count
        return tuple(listed)


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True, slots=True)
class Sections:
    """What reading an object's fat binaries needs of its parsed headers (an `ElfImage` has
    it too): its section headers, or why they could not be read."""

    sections: tuple[Section, ...]
    section_problem: str | None

    @classmethod
    def of(cls, image: ElfImage) -> Sections:
        return cls(image.sections, image.section_problem)


Sectioned = ElfImage | Sections


def read_fatbins(
    source: ByteSource, image: Sectioned, *, all_sections: bool = False,
    check_images: bool = False, embedded: bool = False,
) -> GpuCode:
    """The fat binaries of the ELF object in `source`, whose parsed headers are `image`.

    As `cuobjdump` does, reads `.nv_fatbin` when there is one, else `__nv_relfatbin`;
    `all_sections=True` reads both (`cuobjdump -all`). `check_images=True` also reads the head
    of every payload (see the module docstring). Small containers are opened to see whether
    they hold kernels (`FatbinContainer.kernels`). `embedded=True` also looks for fat binaries
    in the data sections (`GpuCode.embedded`). Raises FormatError on corrupt data, and past
    the limits on what is read one by one (see the module docstring).
    """
    if not image.sections and image.section_problem is not None:
        raise FormatError(source.name, "cannot locate the fat binaries: the section headers are "
                          f"unreadable ({image.section_problem})")
    reader = _Reader(source, check_images, _zstd_codec())
    containers: list[FatbinContainer] = []
    for section in _fatbin_sections(image, all_sections):
        containers.extend(reader.section(section))
    found: list[FatbinContainer] = []
    if embedded:
        for section in image.sections:
            if section.name in DATA_SECTIONS and section.type != SHT_NOBITS:
                found.extend(reader.embedded(section))
    return GpuCode(source.name, tuple(containers), tuple(reader.notes()), tuple(found))


def _fatbin_sections(image: Sectioned, all_sections: bool) -> list[Section]:
    found = [s for s in image.sections if s.name in (EXECUTABLE_SECTION, RELOCATABLE_SECTION)]
    if all_sections:
        return found
    executable = [s for s in found if s.name == EXECUTABLE_SECTION]
    return executable or found


class _Reader:
    """Bounds-checked reads of one source's fat binaries, raising FormatError that names it.

    The bytes last read ahead (a window of a data section, or repeats looked for) are kept, and
    reads inside them are answered from memory: an inflating source reads backwards only by
    inflating again. It counts what it reads against the limits (see the module docstring).
    """

    def __init__(self, source: ByteSource, checking: bool, zstd: _ZstdCodec | None) -> None:
        self.source = source
        self.size = source.size
        self.checking = checking
        self.zstd = zstd
        self.unchecked = 0
        self.skipped: list[str] = []
        self.unnoted = 0
        self.items = 0  # containers and entries read
        self.allowed = READ_FLOOR  # grows with the sections read
        self.strays = 0
        self.limit: FormatError | None = None  # the limit error raised, never taken for data
        self._window_start = 0
        self._window = b""

    def fail(self, problem: str, offset: int | None = None) -> FormatError:
        return FormatError(self.source.name, problem, offset)

    def exceeded(self, problem: str, offset: int) -> FormatError:
        self.limit = self.fail(f"{problem}; abifit reads no further", offset)
        return self.limit

    def count(self, section: str, offset: int) -> None:
        """Count one container or entry read; past the limit, raise the limit error."""
        if self.items >= self.allowed:
            raise self.exceeded(
                f"more than {self.allowed} fat binary containers and entries to read in "
                f"{section} (at most {READ_FLOOR}, and one more per {READ_BYTES} bytes of the "
                "sections read; containers repeated back to back count once)", offset)
        self.items += 1

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(f"truncated: {what} ({length} bytes) extends past the end of the "
                            f"file ({self.size} bytes)", offset)
        at = offset - self._window_start
        if at >= 0 and at + length <= len(self._window):
            return self._window[at:at + length]
        return self.source.read_at(offset, length)

    def read_ahead(self, offset: int, length: int, what: str) -> bytes:
        """`read`, keeping the bytes for the reads that follow (unless already kept)."""
        data = self.read(offset, length, what)
        if self._kept_at(offset, length) is None:
            self._window_start, self._window = offset, data
        return data

    def _kept_at(self, offset: int, length: int) -> int | None:
        """Where the kept bytes hold the `length` bytes at `offset`, or None."""
        at = offset - self._window_start
        return at if at >= 0 and at + length <= len(self._window) else None

    def note(self, text: str) -> None:
        if len(self.skipped) < NOTE_LIMIT:
            self.skipped.append(text)
        else:
            self.unnoted += 1

    def notes(self) -> list[str]:
        found = list(self.skipped)
        if self.unnoted:
            found.append(f"{self.unnoted} more notes like these were left out")
        if self.unchecked:
            found.append(f"{self.unchecked} zstd-compressed images were not checked: no zstd "
                         "decoder (compression.zstd in Python 3.14, or the backports.zstd package)")
        return found

    def section(self, section: Section) -> Iterator[FatbinContainer]:
        if section.type == SHT_NOBITS:
            self.note(f"section {section.name} has no bytes in the file (SHT_NOBITS)")
            return
        end = section.offset + section.size
        if end > self.source.size:
            raise self.fail(f"section {section.name} ({section.size} bytes) extends past the end "
                            f"of the file ({self.source.size} bytes)", section.offset)
        self.allowed += section.size // READ_BYTES
        pos = self._skip_padding(section.offset, end)
        while pos < end:
            unchecked = self.unchecked
            first = self.container(section.name, pos, end)
            after = self._skip_padding(pos + first.size, end)
            repeats = self._repeats(pos, after - pos, end)
            if repeats:
                after = self._skip_padding(pos + repeats * (after - pos) + first.size, end)
            yield self._counted(first, repeats, unchecked)
            pos = after

    def _skip_padding(self, pos: int, end: int) -> int:
        """The next offset at or after `pos` that is not zero padding (or `end`); read in chunks
        that double from 4 KiB (padding is short, but a crafted file may have megabytes)."""
        if pos < end and self.read(pos, 1, "fat binary container") != b"\0":
            return pos
        size = 4096
        while pos < end:
            chunk = self.read(pos, min(size, end - pos), "padding between fat binaries")
            if chunk != bytes(len(chunk)):  # a comparison: lstrip alone reads 300 MB/s
                stripped = len(chunk) - len(chunk.lstrip(b"\0"))
                return pos + stripped - stripped % 8
            pos += len(chunk)
            size = min(2 * size, _REPEAT_WINDOW)
        return end

    def _repeats(self, start: int, unit: int, end: int) -> int:
        """How many copies of the `unit` bytes at `start` follow them, back to back, before `end`.

        Compared in windows that double, from one unit up to `_REPEAT_WINDOW` bytes. Units over
        `_REPEAT_UNIT` bytes are not compared (0): large containers are few.
        """
        if unit > _REPEAT_UNIT or start + 2 * unit > end:
            return 0
        pair = self.read_ahead(start, 2 * unit, "fat binary container")
        if pair[:unit] != pair[unit:]:  # the usual answer, from one read
            return 0
        pattern = pair[:unit]
        found, pos, step = 1, start + 2 * unit, 2
        while pos + unit <= end:
            n = min(step, (end - pos) // unit, max(1, _REPEAT_WINDOW // unit))
            same = _copies(self.read_ahead(pos, n * unit, "fat binary container"), pattern)
            found += same
            if same < n:
                break
            pos += n * unit
            step = 2 * n
        return found

    def _counted(self, first: FatbinContainer, repeats: int, unchecked: int) -> FatbinContainer:
        """`first` standing for itself and `repeats` copies; their unchecked images counted."""
        if not repeats:
            return first
        self.unchecked += (self.unchecked - unchecked) * repeats
        return replace(first, count=1 + repeats)

    def container(self, section: str, pos: int, end: int,
                  examine: bool = True) -> FatbinContainer:
        self.count(section, pos)
        if end - pos < _CONTAINER.size:
            raise self.fail(f"fat binary container header ({_CONTAINER.size} bytes) extends past "
                            f"the end of section {section} ({end - pos} bytes left)", pos)
        raw = self.read(pos, _CONTAINER.size, "fat binary container header")
        magic, version, header_size, size = _CONTAINER.unpack(raw)
        if magic != CONTAINER_MAGIC:
            raise self.fail(f"fat binary container: bad magic {magic:#010x} (expected "
                            f"{CONTAINER_MAGIC:#010x})", pos)
        if header_size < _CONTAINER.size:
            raise self.fail(f"fat binary container: header size {header_size} is smaller "
                            f"than {_CONTAINER.size}", pos)
        total = header_size + size
        if total > end - pos:
            raise self.fail(f"fat binary container of {total} bytes extends past the end of "
                            f"section {section} ({end - pos} bytes left)", pos)
        entries = tuple(self._entries(section, pos + header_size, pos + total))
        kernels = self._kernels(entries) if examine else None
        return FatbinContainer(section, pos, total, version, entries, kernels)

    def _kernels(self, entries: tuple[FatbinEntry, ...]) -> bool | None:
        """Whether a container of small cubins defines kernels; None when not examined."""
        images = [e for e in entries if e.is_sass or e.is_ptx]
        if not images or any(e.uncompressed_size > STUB_LIMIT for e in images):
            return None
        first = next((e for e in images if e.is_sass), images[0])
        if first.compression is Compression.ZSTD and self.zstd is None:
            return None
        data = self.payload_prefix(first, first.uncompressed_size)
        if data is None:
            return None
        return cubin_has_kernels(data) if first.is_sass else ptx_has_kernels(data)

    def embedded(self, section: Section) -> Iterator[FatbinContainer]:
        """Fat binaries inside a data section: each 8-byte aligned container magic whose
        container parses (anything else there is data, not an error, up to `STRAY_LIMIT`)."""
        end = min(section.offset + section.size, self.source.size)
        self.allowed += section.size // READ_BYTES
        pos = self._find_magic(section, section.offset, end)
        while pos < end:
            unchecked = self.unchecked
            try:
                first = self.container(section.name, pos, end, examine=False)
            except FormatError as e:
                if e is self.limit:
                    raise
                self._stray(section.name, pos)
                pos = self._find_magic(section, pos + 8, end)
                continue
            unit = first.size + (-first.size) % 8  # up to the next aligned offset
            repeats = self._repeats(pos, unit, end)
            yield self._counted(first, repeats, unchecked)
            pos = self._find_magic(section, pos + repeats * unit + first.size, end)

    def _find_magic(self, section: Section, pos: int, end: int) -> int:
        """The first container magic at or after `pos` at an 8-byte aligned address, or `end`;
        the data is read in windows of `_SCAN_CHUNK` bytes."""
        while end - pos >= len(_MAGIC_BYTES):
            at = self._kept_at(pos, len(_MAGIC_BYTES))
            if at is None:
                self.read_ahead(pos, min(_SCAN_CHUNK, end - pos), "data section")
                at = 0
            found = self._window.find(_MAGIC_BYTES, at)
            if found < 0:
                pos = self._window_start + len(self._window) - len(_MAGIC_BYTES) + 1
                continue
            pos = self._window_start + found
            misaligned = (section.addr + pos - section.offset) % 8
            if not misaligned:
                return pos
            self._stray(section.name, pos)
            pos += 8 - misaligned
        return end

    def _stray(self, section: str, pos: int) -> None:
        """Count a container magic that starts no fat binary."""
        self.strays += 1
        if self.strays > STRAY_LIMIT:
            raise self.exceeded(f"more than {STRAY_LIMIT} fat binary magic numbers in {section} "
                                "that start no fat binary", pos)

    def _entries(self, section: str, pos: int, end: int) -> Iterator[FatbinEntry]:
        while pos < end:
            self.count(section, pos)
            entry = self.entry(pos, end)
            yield entry
            pos += entry.header_size + entry.payload_size

    def entry(self, pos: int, end: int) -> FatbinEntry:
        if end - pos < _ENTRY.size:
            raise self.fail(f"fat binary entry header ({_ENTRY.size} bytes) extends past the end "
                            f"of its container ({end - pos} bytes left)", pos)
        header = self.read(pos, _ENTRY.size, "fat binary entry header")
        fields = _ENTRY.unpack(header)
        header_size, payload_size = fields[2], fields[3]
        if header_size < _ENTRY.size:
            raise self.fail(f"fat binary entry: header size {header_size} is smaller than "
                            f"{_ENTRY.size}", pos)
        if header_size + payload_size > end - pos:
            raise self.fail(f"fat binary entry of {header_size + payload_size} bytes extends past "
                            f"the end of its container ({end - pos} bytes left)", pos)
        if header_size > _ENTRY.size:
            header = self.read(pos, header_size, "fat binary entry header")
        entry = _build_entry(self, pos, fields, header)
        return self._checked(entry) if self.checking else entry

    def _checked(self, entry: FatbinEntry) -> FatbinEntry:
        if not (entry.is_sass or entry.is_ptx):
            return entry
        limit = ELF_HEAD_SIZE if entry.is_sass else PTX_HEAD_SIZE
        data = self.payload_prefix(entry, limit)
        if data is None:
            return entry
        head = _cubin_head(self, entry, data) if entry.is_sass else _ptx_head(self, entry, data)
        return replace(entry, head=head)

    def payload_prefix(self, entry: FatbinEntry, limit: int) -> bytes | None:
        """The first `limit` bytes of the decompressed payload (fewer if it is shorter)."""
        start = entry.offset + entry.header_size
        if entry.compression is Compression.NONE:
            return self.read(start, min(limit, entry.stored_size), "fat binary payload")
        if entry.compression is Compression.LZ4:
            data = self.read(start, min(entry.stored_size, 2 * limit + 64), "LZ4 payload")
            try:
                return lz4_block_prefix(data, min(limit, entry.uncompressed_size))
            except ValueError as e:
                raise self.fail(f"fat binary entry ({entry.listed_arch}): corrupt LZ4 data "
                                f"({e})", entry.offset) from e
        return self._zstd_prefix(entry, start, limit)

    def _zstd_prefix(self, entry: FatbinEntry, start: int, limit: int) -> bytes | None:
        if self.zstd is None:
            self.unchecked += 1
            return None
        if self.read(start, min(4, entry.stored_size), "zstd payload") != _ZSTD_MAGIC:
            raise self.fail(f"fat binary entry ({entry.listed_arch}): the payload is flagged "
                            "zstd but does not start with the zstd magic", entry.offset)

        def read(offset: int, length: int) -> bytes:
            return self.read(start + offset, length, "zstd payload")

        try:
            return _zstd_read_prefix(self.zstd, read, entry.stored_size,
                                     min(limit, entry.uncompressed_size))
        except self.zstd.error as e:
            raise self.fail(f"fat binary entry ({entry.listed_arch}): corrupt zstd data ({e})",
                            entry.offset) from e


def _copies(data: bytes, pattern: bytes) -> int:
    """How many copies of `pattern` `data` starts with (its length a multiple of the pattern's)."""
    unit = len(pattern)
    whole = len(data) // unit
    if data == pattern * whole:
        return whole
    same, differ = 0, whole  # data starts with `same` copies, not with `differ`
    while differ - same > 1:
        mid = (same + differ) // 2
        if data[:mid * unit] == pattern * mid:
            same = mid
        else:
            differ = mid
    return same


def cubin_has_kernels(data: bytes) -> bool | None:
    """Whether a 64-bit little-endian cubin has a `.text.<name>` section (a kernel or device
    function); None when its section headers cannot be read."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    if entsize < 64 or names_index >= count or shoff + count * entsize > len(data):
        return None
    names_at = struct.unpack_from("<Q", data, shoff + names_index * entsize + 24)[0]
    for i in range(count):
        name_offset = struct.unpack_from("<I", data, shoff + i * entsize)[0]
        start = names_at + name_offset
        if data.startswith(b".text.", start):
            return True
    return False


_PTX_ENTRY = re.compile(rb"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s", re.M)


def ptx_has_kernels(text: bytes) -> bool:
    """Whether PTX text declares a kernel (an `.entry`)."""
    return _PTX_ENTRY.search(text) is not None


def _build_entry(r: _Reader, pos: int, fields: tuple[int, ...], header: bytes) -> FatbinEntry:
    (kind, _fmt, header_size, payload_size, compressed, options_at, minor, major, sm,
     ident_at, ident_size, flags, _reserved, uncompressed) = fields
    compression = _compression(r, pos, flags)
    if compression is Compression.NONE:
        stored, uncompressed = payload_size, payload_size
    elif compressed > payload_size:
        raise r.fail(f"fat binary entry: compressed size {compressed} exceeds its payload of "
                     f"{payload_size} bytes", pos)
    else:
        stored = compressed
    entry_kind = _kind(kind)
    identifier = _header_text(r, pos, header, ident_at, ident_size, "identifier")
    options = _options(r, pos, header, options_at) if entry_kind in _OPTION_KINDS else ""
    return FatbinEntry(pos, entry_kind, Arch(sm, _variant(flags)), (major, minor), flags,
                       header_size, payload_size, stored, uncompressed, compression,
                       identifier, options)


_OPTION_KINDS = (EntryKind.PTX, EntryKind.NVVM)


_KINDS: dict[int, EntryKind] = {kind.value: kind for kind in EntryKind}


def _kind(value: int) -> EntryKind | int:
    return _KINDS.get(value, value)


def _variant(flags: int) -> Variant:
    if flags & FLAG_ARCH_SPECIFIC:
        return Variant.ARCH_SPECIFIC
    if flags & FLAG_FAMILY:
        return Variant.FAMILY
    return Variant.PLAIN


def _compression(r: _Reader, pos: int, flags: int) -> Compression:
    both = FLAG_LZ4 | FLAG_ZSTD
    if flags & both == both:
        raise r.fail(f"fat binary entry: flags {flags:#x} say both LZ4 and zstd", pos)
    if flags & FLAG_LZ4:
        return Compression.LZ4
    return Compression.ZSTD if flags & FLAG_ZSTD else Compression.NONE


def _header_text(r: _Reader, pos: int, header: bytes, at: int, size: int, what: str) -> str:
    """A string stored inside the entry header, without trailing NULs ('' when absent)."""
    if size == 0:
        return ""
    if at < _ENTRY.size or at + size > len(header):
        raise r.fail(f"fat binary entry: {what} ({size} bytes at {at:#x}) lies outside its "
                     f"{len(header)}-byte header", pos)
    return header[at:at + size].rstrip(b"\0").decode("utf-8", "replace")


def _options(r: _Reader, pos: int, header: bytes, at: int) -> str:
    if at == 0:
        return ""
    if at < _ENTRY.size or at + _DESCRIPTOR.size > len(header):
        raise r.fail(f"fat binary entry: options descriptor at {at:#x} lies outside its "
                     f"{len(header)}-byte header", pos)
    offset, size = _DESCRIPTOR.unpack_from(header, at)
    return _header_text(r, pos, header, offset, size, "options")


# ---------------------------------------------------------------------------------------------
# Payload heads


_ELF_HEAD = struct.Struct("<4sBBBBB7xHHIQQQI")


def _cubin_head(r: _Reader, entry: FatbinEntry, data: bytes) -> CubinHead:
    what = f"fat binary entry ({entry.listed_arch} cubin)"
    if len(data) < _ELF_HEAD.size:
        raise r.fail(f"{what}: payload of {len(data)} bytes is too short for an ELF header",
                     entry.offset)
    magic, elf_class, order, _v, _osabi, abi, _type, machine, *_rest, flags = _ELF_HEAD.unpack_from(
        data)
    if magic != b"\x7fELF" or elf_class != 2 or order != 1:
        raise r.fail(f"{what}: payload is not a 64-bit little-endian ELF file", entry.offset)
    if machine != EM_CUDA:
        raise r.fail(f"{what}: ELF machine {machine} is not EM_CUDA ({EM_CUDA})", entry.offset)
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    if sm != entry.arch.sm:
        raise r.fail(f"{what}: the cubin's e_flags {flags:#x} name sm_{sm}", entry.offset)
    return CubinHead(abi, flags, sm)


def _ptx_head(r: _Reader, entry: FatbinEntry, data: bytes) -> PtxHead | None:
    version: tuple[int, int] | None = None
    target: str | None = None
    for raw in data.split(b"\n"):
        line = raw.strip()
        if line.startswith(b".version"):
            version = _ptx_version(line)
        elif line.startswith(b".target"):
            target = line[len(b".target"):].split(b",")[0].strip().decode("ascii", "replace")
            break
    if version is None or target is None:
        r.note(f"PTX at offset {entry.offset:#x}: no .version and .target in its first "
               f"{len(data)} bytes")
        return None
    if target != str(entry.arch) or version != entry.code_version:
        raise r.fail(f"fat binary entry ({entry.arch} PTX {_dotted(entry.code_version)}): the "
                     f"PTX says .version {_dotted(version)} .target {target}", entry.offset)
    return PtxHead(version, target)


def _ptx_version(line: bytes) -> tuple[int, int] | None:
    major, dot, minor = line[len(b".version"):].strip().partition(b".")
    if not (dot and major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# ---------------------------------------------------------------------------------------------
# Decompression: LZ4 blocks here, zstd through the standard library or backports.zstd


def lz4_block_prefix(data: bytes, limit: int) -> bytes:
    """The first `limit` bytes an LZ4 block decodes to (fewer when `data` ends first).

    `data` may be a prefix of the block. Raises ValueError on a match that reaches before the
    start of the output.
    """
    out = bytearray()
    pos, end = 0, len(data)
    while len(out) < limit and pos < end:
        token = data[pos]
        literals, pos = _lz4_length(data, pos + 1, token >> 4)
        out += data[pos:pos + literals]
        pos += literals
        if pos + 2 > end or len(out) >= limit:
            break
        distance = data[pos] | data[pos + 1] << 8
        length, pos = _lz4_length(data, pos + 2, token & 0xF)
        _lz4_copy(out, distance, min(length + 4, limit - len(out)))
    return bytes(out[:limit])


def _lz4_length(data: bytes, pos: int, nibble: int) -> tuple[int, int]:
    """A length that starts as a token nibble and goes on in 255-bytes while the nibble is 15."""
    length = nibble
    if nibble == 15:
        while pos < len(data):
            length += data[pos]
            pos += 1
            if data[pos - 1] != 255:
                break
    return length, pos


def _lz4_copy(out: bytearray, distance: int, length: int) -> None:
    if distance == 0 or distance > len(out):
        raise ValueError(f"match distance {distance} with {len(out)} bytes decoded")
    start = len(out) - distance
    while length > 0:
        chunk = out[start:start + min(length, distance)]
        out += chunk
        start += len(chunk)
        length -= len(chunk)


class _ZstdDecompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def needs_input(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


@dataclass(frozen=True, slots=True)
class _ZstdCodec:
    decompressor: Callable[[], _ZstdDecompressor]
    error: type[Exception]


def zstd_available() -> bool:
    """Whether zstd-compressed images can be checked here (what a reading depends on besides
    the bytes)."""
    return _zstd_codec() is not None


def _zstd_codec() -> _ZstdCodec | None:
    """The zstd decoder of Python 3.14, else of backports.zstd, else None (tests replace it)."""
    for name in ("compression.zstd", "backports.zstd"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return _ZstdCodec(module.ZstdDecompressor, module.ZstdError)
    return None


def _zstd_read_prefix(
    codec: _ZstdCodec, read: Callable[[int, int], bytes], size: int, limit: int
) -> bytes:
    """The first `limit` bytes of a zstd frame of `size` bytes, reading it in chunks."""
    decompressor = codec.decompressor()
    out = bytearray()
    pos = 0
    while len(out) < limit and not decompressor.eof:
        chunk = b""
        if decompressor.needs_input:
            if pos >= size:
                break
            chunk = read(pos, min(_ZSTD_CHUNK, size - pos))
            pos += len(chunk)
        produced = decompressor.decompress(chunk, limit - len(out))
        if not produced and not chunk:
            break
        out += produced
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# An object's GPU code


def has_gpu_code(image: ElfImage | ElfLayout | Sections) -> bool:
    """Whether the object has a fat-binary section (read from its section headers)."""
    return any(s.name in (EXECUTABLE_SECTION, RELOCATABLE_SECTION) for s in image.sections)


def read_gpu_code(source: ByteSource, image: Sectioned) -> GpuCode | None:
    """The object's fat binaries, or None when it has none. When none of them holds a kernel,
    the data sections are searched for fat binaries the library loads itself (cuFFT's are in
    `.ldata`). Raises FormatError."""
    if not has_gpu_code(image):
        return None
    code = read_fatbins(source, image)
    if any(c.kernels is not False and (c.sass_archs or c.ptx_archs) for c in code.containers):
        return code
    return read_fatbins(source, image, embedded=True)


def code_or_error(source: ByteSource, image: Sectioned) -> GpuCode | FormatError | None:
    """`read_gpu_code`, with a corrupt fat binary as a value (a scan goes on)."""
    try:
        return read_gpu_code(source, image)
    except FormatError as e:
        return e
