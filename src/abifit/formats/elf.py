"""The ELF dynamic view: what a shared object needs and provides, read the way the loader reads it.

The loader never looks at section headers: ELF header -> program headers -> PT_DYNAMIC -> the tables
the dynamic entries point at (DT_SYMTAB, DT_STRTAB/DT_STRSZ, DT_GNU_HASH or DT_HASH for the symbol
count, DT_VERSYM, DT_VERNEED, DT_VERDEF), with virtual addresses mapped to file offsets through
PT_LOAD. `parse_elf` reads exactly that through a `ByteSource`, plus the section headers when they
are present and readable (they locate `.nv_fatbin`; the dynamic view never depends on them).

Tables are read in bulk: one read per table, columns sliced out of it with `array`, symbol names cut
from the string table in one pass. A `Symbol` object is made only when one symbol is looked at.

Every count and offset is checked against the size of the data before anything is read or
allocated, so a corrupt file raises `ElfError` (one line: file, problem, offset) rather than
crashing, hanging or allocating by a bogus count.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from itertools import compress
from typing import Literal, TypeVar

from abifit.errors import ElfError, FormatError
from abifit.formats.sources import ByteSource

ELF_MAGIC = b"\x7fELF"


class ElfClass(IntEnum):
    ELF32 = 1
    ELF64 = 2


class ByteOrder(IntEnum):
    LITTLE = 1
    BIG = 2


class FileType(IntEnum):
    NONE = 0
    REL = 1
    EXEC = 2
    DYN = 3
    CORE = 4


class Binding(IntEnum):
    LOCAL = 0
    GLOBAL = 1
    WEAK = 2
    GNU_UNIQUE = 10


class SymbolType(IntEnum):
    NOTYPE = 0
    OBJECT = 1
    FUNC = 2
    SECTION = 3
    FILE = 4
    COMMON = 5
    TLS = 6
    GNU_IFUNC = 10


class Visibility(IntEnum):
    DEFAULT = 0
    INTERNAL = 1
    HIDDEN = 2
    PROTECTED = 3


MACHINE_NAMES: Mapping[int, str] = {
    2: "sparc",
    3: "i386",
    8: "mips",
    20: "ppc",
    21: "ppc64",
    22: "s390",
    40: "arm",
    43: "sparcv9",
    62: "x86-64",
    183: "aarch64",
    190: "cuda",
    243: "riscv",
    258: "loongarch",
}

PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3

DT_NULL = 0
DT_NEEDED = 1
DT_PLTGOT = 3
DT_HASH = 4
SHT_DYNSYM = 11
DT_STRTAB = 5
DT_SYMTAB = 6
DT_RELA = 7
DT_RELASZ = 8
DT_RELAENT = 9
DT_RELENT = 19
DT_RELACOUNT = 0x6FFFFFF9
DT_RELCOUNT = 0x6FFFFFFA
DT_STRSZ = 10
DT_SYMENT = 11
DT_SONAME = 14
DT_RPATH = 15
DT_SYMBOLIC = 16
DT_REL = 17
DT_RELSZ = 18
DT_PLTREL = 20
DT_JMPREL = 23
DT_PLTRELSZ = 2
DT_RUNPATH = 29
DT_FLAGS = 30
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_PIE = 0x08000000  # DT_FLAGS_1: a position-independent executable
DT_VERDEF = 0x6FFFFFFC
DT_VERDEFNUM = 0x6FFFFFFD
DT_VERNEED = 0x6FFFFFFE
DT_VERNEEDNUM = 0x6FFFFFFF

VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2
VERSYM_HIDDEN = 0x8000
VERSYM_INDEX = 0x7FFF
VER_NDX_LOCAL = 0
VER_NDX_GLOBAL = 1

SHN_UNDEF = 0
SHN_ABS = 0xFFF1
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

# Version indexes have 15 bits, so no object can use more version entries than this.
_MAX_VERSION_ENTRIES = 1 << 15
# Names of the dynamic symbols may add up to this much more than their string table.
_MAX_NAME_BYTES = 64 << 20
# No library name, search path or version name is longer than this.
_MAX_NAME = 1 << 16


def enum_or_int(kind: type[IntEnum], value: int) -> IntEnum | int:
    """The enum member for `value`, or the plain number when the value is OS- or CPU-specific."""
    try:
        return kind(value)
    except ValueError:
        return value


_T = TypeVar("_T")


def _pickled_as_arguments(cls: type[_T]) -> type[_T]:
    """Pickle instances of a frozen dataclass as the arguments of its constructor. The state
    that dataclasses pickle otherwise is set again field by field, looking the fields up for
    each object: taking in the 479 views a cold doctor's workers parse went from 0.275 s to
    0.25 s without it."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def reduce(self: _T) -> tuple[type[_T], tuple[object, ...]]:
        return cls, tuple([getattr(self, name) for name in names])

    cls.__reduce__ = reduce  # type: ignore[method-assign,assignment]
    return cls


@dataclass(frozen=True, slots=True)
class _Layout:
    """Struct formats of one ELF class in one byte order."""

    prefix: str
    header: struct.Struct
    phdr: struct.Struct
    shdr: struct.Struct
    dyn: struct.Struct
    sym_size: int
    word: int  # bytes in a class-sized word (GNU hash bloom words)


def _layout(elf_class: ElfClass, order: ByteOrder) -> _Layout:
    p = "<" if order is ByteOrder.LITTLE else ">"
    if elf_class is ElfClass.ELF64:
        return _Layout(
            p,
            struct.Struct(p + "HHIQQQIHHHHHH"),
            struct.Struct(p + "IIQQQQQQ"),
            struct.Struct(p + "IIQQQQIIQQ"),
            struct.Struct(p + "QQ"),
            24,
            8,
        )
    return _Layout(
        p,
        struct.Struct(p + "HHIIIIIHHHHHH"),
        struct.Struct(p + "IIIIIIII"),
        struct.Struct(p + "IIIIIIIIII"),
        struct.Struct(p + "II"),
        16,
        4,
    )


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Segment:
    """A program header of interest (PT_LOAD, PT_DYNAMIC, PT_INTERP)."""

    type: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    flags: int


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Section:
    """A section header, with its name from the section name string table."""

    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class NeededVersion:
    """One version an object requires from a library (an entry of DT_VERNEED's aux chain)."""

    name: str
    index: int
    weak: bool
    hash: int


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class VersionNeed:
    """The versions an object requires from one library (`file` is the library's soname)."""

    file: str
    versions: tuple[NeededVersion, ...]


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class VersionDef:
    """One version the object defines; the BASE entry names the object itself."""

    index: int
    name: str
    flags: int
    parents: tuple[str, ...]

    @property
    def is_base(self) -> bool:
        return bool(self.flags & VER_FLG_BASE)


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class VersionName:
    """What a version index means: the version's name and, for a requirement, the library."""

    name: str
    file: str | None


@dataclass(frozen=True, slots=True)
class Symbol:
    """One dynamic symbol, made on demand from a SymbolTable."""

    name: str
    type: SymbolType | int
    binding: Binding | int
    visibility: Visibility | int
    defined: bool
    section_index: int
    value: int
    size: int
    version: str | None
    version_file: str | None
    hidden: bool

    @property
    def versioned_name(self) -> str:
        """The name as `nm -D` prints it: `name@@VER` for a default definition, `name@VER` else.

        A definition carrying a version it requires from another library (a copy relocation in an
        executable) is not a default definition of its own.
        """
        return versioned_name(self.name, self.version, self.version_file, self.hidden,
                              self.section_index)


def versioned_name(name: str, version: str | None, version_file: str | None, hidden: bool,
                   section_index: int) -> str:
    """`Symbol.versioned_name` of a symbol's fields."""
    if version is None or (section_index == SHN_ABS and version == name):
        return name  # a version's own marker symbol prints bare, as binutils does
    defined = section_index != SHN_UNDEF
    sep = "@@" if defined and not hidden and version_file is None else "@"
    return f"{name}{sep}{version}"


@dataclass(frozen=True, slots=True)
class SymbolTable:
    """The dynamic symbol table in columns, without the null symbol at index 0.

    Entry `i` here is dynamic symbol `i + 1`. `versym` is None when the object has no DT_VERSYM.
    With `intern` (the default) the names are interned: one string per name, however many
    tables of the process hold it. A process that holds one table per file, with few names in
    common (a scan of an environment), leaves that out: it costs more time than it saves memory.
    """

    names: tuple[str, ...]
    info: bytes
    other: bytes
    section_indexes: array[int]
    values: array[int]
    sizes: array[int]
    versym: array[int] | None
    version_names: Mapping[int, VersionName]
    intern: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        # one string per name, however many tables hold it: a library's exports are its users'
        # imports, and the releases of a package share most of their names (a matrix of three
        # torch releases held 1.4 million name strings)
        if self.intern:
            object.__setattr__(self, "names", tuple(map(sys.intern, self.names)))

    def __reduce__(self) -> tuple[type[SymbolTable], tuple[object, ...]]:
        # built again where it is unpickled, so that its names are interned there too
        return (SymbolTable, (self.names, self.info, self.other, self.section_indexes,
                              self.values, self.sizes, self.versym, self.version_names,
                              self.intern))

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[Symbol]:
        return (self[i] for i in range(len(self.names)))

    def __getitem__(self, i: int) -> Symbol:
        info = self.info[i]
        version, file, hidden = self.version_of(i)
        return Symbol(
            name=self.names[i],
            type=enum_or_int(SymbolType, info & 0xF),
            binding=enum_or_int(Binding, info >> 4),
            visibility=enum_or_int(Visibility, self.other[i] & 0x3),
            defined=self.section_indexes[i] != SHN_UNDEF,
            section_index=self.section_indexes[i],
            value=self.values[i],
            size=self.sizes[i],
            version=version,
            version_file=file,
            hidden=hidden,
        )

    def positions(self, name: str) -> Iterator[int]:
        """The index of every symbol named `name`, in order (each found by a search in C, not
        by a Python loop over the names)."""
        at = -1
        while True:
            try:
                at = self.names.index(name, at + 1)
            except ValueError:
                return
            yield at

    def is_defined(self, i: int) -> bool:
        return self.section_indexes[i] != SHN_UNDEF

    def binding(self, i: int) -> int:
        return self.info[i] >> 4

    def version_of(self, i: int) -> tuple[str | None, str | None, bool]:
        """(version name, library it is required from, hidden) of entry i."""
        if self.versym is None:
            return None, None, False
        return self.version_of_raw(self.versym[i])

    def versions(self, mask: bytes | None = None) -> list[str | None]:
        """The version name of every entry (None where unversioned), in bulk; with `mask` (a
        byte per entry, 0 or 1), of the entries it picks only."""
        if self.versym is None:
            return [None] * (len(self.names) if mask is None else mask.count(1))
        raw = self.versym if mask is None else list(compress(self.versym, mask))
        lookup = {value: self.version_of_raw(value)[0] for value in set(raw)}
        return list(map(lookup.__getitem__, raw))

    def bindings(self) -> bytes:
        """The binding (STB_* value) of every entry, in bulk."""
        return self.info.translate(_BINDING_TABLE)

    def version_of_raw(self, raw: int) -> tuple[str | None, str | None, bool]:
        index = raw & VERSYM_INDEX
        if index in (VER_NDX_LOCAL, VER_NDX_GLOBAL):
            return None, None, False
        known = self.version_names.get(index)
        if known is None:
            return None, None, bool(raw & VERSYM_HIDDEN)
        return known.name, known.file, bool(raw & VERSYM_HIDDEN)

    def counts(self) -> tuple[int, int, int]:
        """(defined, undefined, weak) counts, computed in bulk."""
        undefined = sum(1 for s in self.section_indexes if s == SHN_UNDEF)
        weak = self.info.translate(_WEAK_TABLE).count(1)
        return len(self.names) - undefined, undefined, weak


_BINDING_TABLE = bytes(b >> 4 for b in range(256))
_WEAK_TABLE = bytes(1 if (b >> 4) == Binding.WEAK else 0 for b in range(256))


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class DynamicInfo:
    """The dynamic entries that name things: needed libraries, own name, search paths, flags."""

    needed: tuple[str, ...]
    soname: str | None
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    flags: int
    flags_1: int


@_pickled_as_arguments
@dataclass(frozen=True, slots=True)
class ElfImage:
    """The loader's view of one ELF file, plus its section headers when readable."""

    name: str
    elf_class: ElfClass
    byte_order: ByteOrder
    machine: int
    file_type: FileType | int
    osabi: int
    interpreter: str | None
    loads: tuple[Segment, ...]
    dynamic: DynamicInfo | None
    symbols: SymbolTable
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[VersionDef, ...]
    sections: tuple[Section, ...]
    section_problem: str | None
    relocated_symbols: array[int] | None = None
    # what the view had to assume (a zeroed string table: symbols without names)
    warnings: tuple[str, ...] = ()
    # what glibc's loader says when it refuses the headers before mapping the file, once its
    # class and machine fit ("nonzero padding in e_ident", ...); None when it maps it
    refusal: str | None = None
    # where the file ends when it ends inside what the loader maps (`cut_short`): touching a
    # page wholly past the end kills the process (SIGBUS); None for a whole file
    cut: str | None = None

    @property
    def machine_name(self) -> str:
        return machine_name(self.machine)

    @property
    def needed(self) -> tuple[str, ...]:
        return self.dynamic.needed if self.dynamic else ()

    @property
    def soname(self) -> str | None:
        return self.dynamic.soname if self.dynamic else None

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def machine_name(machine: int) -> str:
    """The name of an `e_machine` value (`x86-64`), or `machine N`."""
    return MACHINE_NAMES.get(machine, f"machine {machine}")


@dataclass(frozen=True, slots=True)
class ImageSummary:
    """An image with its symbols counted, not listed: its header, dynamic entries, versions and
    warnings, what `abifit inspect` shows of an object without --symbols. A few hundred bytes
    where the image of a large C++ library holds tens of MB of symbol names."""

    elf_class: ElfClass
    byte_order: ByteOrder
    machine: int
    file_type: FileType | int
    interpreter: str | None
    dynamic: DynamicInfo | None
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[VersionDef, ...]
    warnings: tuple[str, ...]
    defined: int
    undefined: int
    weak: int


def summarize_image(image: ElfImage) -> ImageSummary:
    """The summary of an image (`ElfImage.symbols.counts` for its symbols); what keeps the
    loader from loading it (`refusal`, `cut`) is among its warnings."""
    defined, undefined, weak = image.symbols.counts()
    warnings = image.warnings
    if image.refusal is not None:
        warnings += (f"glibc's loader refuses it: {image.refusal}",)
    if image.cut is not None:
        warnings += (f"cut short: {image.cut}; loading it kills the process (SIGBUS)",)
    return ImageSummary(image.elf_class, image.byte_order, image.machine, image.file_type,
                        image.interpreter, image.dynamic, image.version_needs,
                        image.version_defs, warnings, defined, undefined, weak)


# Members worth checking for ELF magic: shared objects (`x.so`, `x.so.1.2`, `x.cpython-311-...so`)
# and files without an extension (executables such as `bin/torch_shm_manager`).
_SO_NAME = re.compile(r"\.so(\.[0-9]+)*$|\.so\.")
_NOT_BINARY = frozenset(
    (
        ".py .pyi .pyc .txt .md .rst .json .yaml .yml .toml .cfg .ini .h .hpp .hh .cuh .c .cc "
        ".cpp .cu .typed .html .css .js .csv .pem .pxd .pyx .inl .inc .ipp .tcc .hxx .cxx .cmake "
        ".sh .xml .svg .png .jpg .jpeg .gif .ico .ptx .fatbin .ll .bc .mlir .td .proto .a .pkl "
        ".pt .pth .npy .npz .safetensors .zip .gz .tar .whl .pc .la"
    ).split()
)


def might_be_elf(path: str) -> bool:
    """Whether a file name could be an ELF object worth reading the magic of."""
    base = path.rpartition("/")[2]
    if not base or ".dist-info/" in path:
        return False
    if ".so" in base and _SO_NAME.search(base):
        return True
    stem, dot, ext = base.rpartition(".")
    return not dot or not stem or "." + ext not in _NOT_BINARY


def is_library_name(path: str) -> bool:
    """Whether a file name is a shared library's or an extension module's (`.so`, `.so.N`):
    what a process loads, as opposed to an executable."""
    base = path.rpartition("/")[2]
    return ".so" in base and _SO_NAME.search(base) is not None


def is_elf(head: bytes) -> bool:
    """Whether bytes start like an ELF file."""
    return head[:4] == ELF_MAGIC


class _Reader:
    """Bounds-checked reads from one source, raising ElfError that names the source."""

    def __init__(self, source: ByteSource) -> None:
        self.source = source
        self.size = source.size

    def fail(self, problem: str, offset: int | None = None) -> ElfError:
        return ElfError(self.source.name, problem, offset, self.size)

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.fail(
                f"truncated: {what} ({length} bytes) extends past the end of the file "
                f"({self.size} bytes)",
                offset,
            )
        try:
            return self.source.read_at(offset, length)
        except FormatError as e:
            raise self.fail(f"cannot read {what}: {e.problem}", offset) from e


@dataclass(frozen=True, slots=True)
class _Header:
    elf_class: ElfClass
    order: ByteOrder
    osabi: int
    file_type: int
    machine: int
    phoff: int
    shoff: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int
    ident: bytes
    version: int  # e_version


def _parse_header(r: _Reader) -> tuple[_Header, _Layout]:
    if r.size < 16:
        head = r.read(0, r.size, "file")
        if not is_elf(head):
            raise r.fail(f"not an ELF file (starts with {head[:4]!r})")
        raise r.fail("truncated: ELF identification needs 16 bytes", 0)
    ident = r.read(0, 16, "ELF identification")
    if not is_elf(ident):
        raise r.fail(f"not an ELF file (starts with {ident[:4]!r})")
    if ident[4] not in (1, 2):
        raise r.fail(f"unknown ELF class {ident[4]}", 4)
    if ident[5] not in (1, 2):
        raise r.fail(f"unknown ELF data encoding {ident[5]}", 5)
    elf_class, order = ElfClass(ident[4]), ByteOrder(ident[5])
    lay = _layout(elf_class, order)
    raw = r.read(16, lay.header.size, "ELF header")
    (ftype, machine, version, _entry, phoff, shoff, _flags, _ehsize, phentsize, phnum,
     shentsize, shnum, shstrndx) = lay.header.unpack(raw)
    header = _Header(elf_class, order, ident[7], ftype, machine, phoff, shoff, phentsize, phnum,
                     shentsize, shnum, shstrndx, ident, version)
    return header, lay


# glibc's `open_verify` (elf/dl-load.c) on Linux: the OS ABIs it takes (SYSV, GNU), and one past
# the last ABI version of GNU objects it takes (LIBC_ABI_MAX: unique, ifunc and absolute symbols,
# glibc 2.28 and later on x86-64; checked against 2.36 there: 3 loads, 4 is refused)
_LOADER_OSABIS = (0, 3)
_LOADER_ABI_MAX = 4


def _refusal(h: _Header, lay: _Layout) -> str | None:
    """What glibc's loader says of a file whose headers it refuses before mapping anything, in
    the order it checks them, once the class and the machine fit (the caller's to check: a file
    of another class or machine is passed over, not refused): None when it goes on."""
    ident = h.ident
    if ident[6] != 1:
        return "ELF file version ident does not match current one"
    if ident[7] not in _LOADER_OSABIS:
        return "ELF file OS ABI invalid"
    if ident[8] != 0 and not (ident[7] == 3 and ident[8] < _LOADER_ABI_MAX):
        return "ELF file ABI version invalid"
    if any(ident[9:16]):
        return "nonzero padding in e_ident"
    if h.version != 1:
        return "ELF file version does not match current one"
    if h.file_type not in (FileType.DYN, FileType.EXEC):
        return "only ET_DYN and ET_EXEC can be loaded"
    if h.phentsize != lay.phdr.size:
        return "ELF file's phentsize not the expected size"
    return None


def _parse_headers(r: _Reader) -> tuple[_Header, _Layout, list[Segment], str | None]:
    """The ELF header, the program headers and glibc's refusal of them (`_refusal`): what its
    loader reads before it maps the file. An ElfError here carries what the loader says
    (`ElfError.refusal`): its refusal of the header; else "invalid ELF header" without the ELF
    magic, "cannot read file data" for program headers past the end of the file."""
    try:
        h, lay = _parse_header(r)
    except ElfError as e:
        said = "invalid ELF header" if e.problem.startswith("not an ELF file") else None
        encoding = r.read(5, 1, "EI_DATA")[0] if r.size > 5 and said is None else None
        raise ElfError(e.where, e.problem, e.offset, r.size, said, encoding) from None
    refusal = _refusal(h, lay)
    try:
        return h, lay, _parse_segments(r, h, lay), refusal
    except ElfError as e:
        said = refusal or ("cannot read file data" if e.problem.startswith("truncated")
                           else None)
        raise ElfError(e.where, e.problem, e.offset, r.size, said, int(h.order)) from None


def _first_section_header(r: _Reader, h: _Header, lay: _Layout) -> tuple[int, ...] | None:
    """Section header 0, which holds the real counts when they overflow the ELF header."""
    if h.shoff == 0 or h.shentsize < lay.shdr.size:
        return None
    return lay.shdr.unpack(r.read(h.shoff, lay.shdr.size, "section header 0"))


def _parse_segments(r: _Reader, h: _Header, lay: _Layout) -> list[Segment]:
    phnum = h.phnum
    if phnum == PN_XNUM:
        first = _first_section_header(r, h, lay)
        phnum = first[7] if first else 0
    if phnum == 0:
        return []
    if h.phentsize < lay.phdr.size:
        raise r.fail(f"program header entry size {h.phentsize} is smaller than {lay.phdr.size}")
    table = r.read(h.phoff, phnum * h.phentsize, f"program header table ({phnum} entries)")
    segments = []
    for i in range(phnum):
        fields = lay.phdr.unpack_from(table, i * h.phentsize)
        if h.elf_class is ElfClass.ELF64:
            ptype, flags, offset, vaddr, _paddr, filesz, memsz, _align = fields
        else:
            ptype, offset, vaddr, _paddr, filesz, memsz, flags, _align = fields
        segments.append(Segment(ptype, offset, vaddr, filesz, memsz, flags))
    return segments


class _AddressMap:
    """Virtual address -> file offset through the PT_LOAD segments."""

    def __init__(self, r: _Reader, loads: list[Segment]) -> None:
        self._r = r
        self._loads = loads

    def offset(self, vaddr: int, what: str) -> int:
        for seg in self._loads:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return vaddr - seg.vaddr + seg.offset
        raise self._r.fail(f"{what} address {vaddr:#x} is not inside any PT_LOAD segment")

    def read(self, vaddr: int, length: int, what: str) -> bytes:
        return self._r.read(self.offset(vaddr, what), length, what)


def _parse_dynamic_entries(r: _Reader, seg: Segment, lay: _Layout) -> list[tuple[int, int]]:
    count = seg.filesz // lay.dyn.size
    raw = r.read(seg.offset, count * lay.dyn.size, f"dynamic section ({count} entries)")
    entries = []
    for tag, value in lay.dyn.iter_unpack(raw):
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    return entries


class _Strings:
    """The dynamic string table; unterminated names and offsets outside it are errors.

    An ASCII table (every real one seen) is decoded once, so byte offsets are text offsets and a
    name is one `find` and one slice; any other table is decoded name by name (UTF-8, with
    undecodable bytes kept as surrogates).
    """

    def __init__(self, r: _Reader, data: bytes, offset: int) -> None:
        self._r = r
        self._offset = offset
        self._size = len(data)
        self._last_nul = data.rfind(b"\0")
        self._text: str | None = None
        self._data = b""
        try:
            self._text = data.decode("ascii")
        except UnicodeDecodeError:
            self._data = data

    def _check(self, index: int, what: str) -> None:
        if index >= self._size:
            raise self._r.fail(
                f"{what}: name offset {index} is outside the string table ({self._size} bytes)",
                self._offset,
            )
        if index > self._last_nul:
            raise self._r.fail(
                f"{what}: string table without terminator (name at {index} runs past its "
                f"{self._size} bytes)",
                self._offset + index,
            )

    def get(self, index: int, what: str) -> str:
        """One name that is not a symbol's (a library, a path, a version): at most 64 KiB."""
        self._check(index, what)
        (end,) = self._ends((index,))
        if end - index > _MAX_NAME:
            raise self._r.fail(f"{what}: name at {index} is {end - index} bytes long",
                               self._offset + index)
        return self._cut(index, end)

    def _cut(self, start: int, end: int) -> str:
        if self._text is not None:
            return self._text[start:end]
        return self._data[start:end].decode("utf-8", "surrogateescape")

    def _ends(self, indexes: Iterable[int]) -> list[int]:
        """Where each name ends (its terminator); ValueError if one has none."""
        if self._text is not None:
            index = self._text.index
            return [index("\0", i) for i in indexes]
        find = self._data.index
        return [find(b"\0", i) for i in indexes]

    def many(self, indexes: array[int], what: str) -> tuple[str, ...]:
        """Every symbol name, made in bulk."""
        text = self._text
        try:
            ends = self._ends(indexes)
        except ValueError:  # an offset past the table or past its last terminator
            self._check(max(indexes), what)
            raise  # not reached: _check raised ElfError
        # Names may overlap (a shared suffix); a table whose names add up to far more than its own
        # size is made to exhaust memory, not by a linker.
        total = sum(ends) - sum(indexes)
        if total > max(4 * self._size, _MAX_NAME_BYTES):
            raise self._r.fail(
                f"{what}s: {len(indexes)} names add up to {total} bytes from a string table of "
                f"{self._size} bytes",
                self._offset,
            )
        if text is None:
            return tuple(map(self._cut, indexes, ends))
        return tuple([text[i:e] for i, e in zip(indexes, ends, strict=True)])


def _symbol_count_hash(amap: _AddressMap, vaddr: int, lay: _Layout) -> int:
    _nbucket, nchain = struct.unpack(lay.prefix + "II", amap.read(vaddr, 8, "DT_HASH header"))
    return int(nchain)


def _symbol_count_gnu_hash(r: _Reader, amap: _AddressMap, vaddr: int, lay: _Layout
                           ) -> tuple[int, bool]:
    """The symbol count DT_GNU_HASH implies (one past the last hashed symbol), and whether every
    bucket is empty (the count is then only the symbol offset, which older GNU ld sets to 1)."""
    offset = amap.offset(vaddr, "DT_GNU_HASH")
    nbuckets, symoffset, bloom_size, _shift = struct.unpack(
        lay.prefix + "IIII", r.read(offset, 16, "DT_GNU_HASH header")
    )
    buckets_at = offset + 16 + bloom_size * lay.word
    buckets = array("I", r.read(buckets_at, nbuckets * 4, f"DT_GNU_HASH buckets ({nbuckets})"))
    if lay.prefix != _NATIVE:
        buckets.byteswap()
    last = max(buckets, default=0)
    if last == 0:
        return int(symoffset), True
    if last < symoffset:
        raise r.fail(f"DT_GNU_HASH bucket {last} is below the symbol offset {symoffset}", offset)
    chain_at = buckets_at + nbuckets * 4 + (last - symoffset) * 4
    index = last
    while True:
        block = min(256, (r.size - chain_at) // 4)
        if block <= 0:
            raise r.fail("truncated: DT_GNU_HASH chain runs past the end of the file", chain_at)
        chain = array("I", r.read(chain_at, block * 4, "DT_GNU_HASH chain"))
        if lay.prefix != _NATIVE:
            chain.byteswap()
        for value in chain:
            if value & 1:
                return index + 1, False
            index += 1
        chain_at += block * 4


_NATIVE = "<" if sys.byteorder == "little" else ">"


def _column(
    data: bytes, code: Literal["H", "I", "Q"], native: bool, start: int, step: int
) -> array[int]:
    """Every `step`-th item of type `code` from item `start` on, in native byte order."""
    column = array(code, memoryview(data).cast(code)[start::step].tobytes())
    if not native:
        column.byteswap()
    return column


def _parse_symbols(
    r: _Reader, amap: _AddressMap, lay: _Layout, elf_class: ElfClass, symtab: int, count: int,
    strings: _Strings,
) -> tuple[bytes, bytes, array[int], array[int], array[int], tuple[str, ...]]:
    entry = lay.sym_size
    # the null symbol at index 0 is not read
    table_offset = amap.offset(symtab, "dynamic symbol table") + entry
    raw = r.read(table_offset, (count - 1) * entry, f"dynamic symbol table ({count} symbols)")
    native = lay.prefix == _NATIVE
    if elf_class is ElfClass.ELF64:
        names = _column(raw, "I", native, 0, 6)
        info, other = raw[4::entry], raw[5::entry]
        shndx = _column(raw, "H", native, 3, 12)
        values = _column(raw, "Q", native, 1, 3)
        sizes = _column(raw, "Q", native, 2, 3)
    else:
        names = _column(raw, "I", native, 0, 4)
        values = _column(raw, "I", native, 1, 4)
        sizes = _column(raw, "I", native, 2, 4)
        info, other = raw[12::entry], raw[13::entry]
        shndx = _column(raw, "H", native, 7, 8)
    del raw  # the columns are copies; free the table before the names are made
    return info, other, shndx, values, sizes, strings.many(names, "dynamic symbol")


class _Budget:
    """Counts entries of a chain; a chain with more than any object can use is corrupt.

    Chains may overlap or loop, so neither the file size nor the counts in the entries bound them.
    """

    def __init__(self, r: _Reader, what: str) -> None:
        self._r = r
        self._what = what
        self._left = _MAX_VERSION_ENTRIES

    def take(self, offset: int) -> None:
        self._left -= 1
        if self._left < 0:
            raise self._r.fail(f"more than {_MAX_VERSION_ENTRIES} {self._what}", offset)


def _parse_verneed(
    r: _Reader, amap: _AddressMap, lay: _Layout, vaddr: int, num: int | None, strings: _Strings
) -> list[VersionNeed]:
    p = lay.prefix
    offset = amap.offset(vaddr, "DT_VERNEED")
    needs = []
    budget = _Budget(r, "version requirement entries")
    for _ in range(num if num is not None else _MAX_VERSION_ENTRIES):
        budget.take(offset)
        _ver, cnt, file_idx, aux, nxt = struct.unpack(p + "HHIII", r.read(offset, 16, "verneed"))
        versions = []
        aux_at = offset + aux
        for _ in range(cnt):
            budget.take(aux_at)
            vhash, vflags, other, name_idx, vnext = struct.unpack(
                p + "IHHII", r.read(aux_at, 16, "vernaux")
            )
            versions.append(NeededVersion(strings.get(name_idx, "version requirement"), other,
                                          bool(vflags & VER_FLG_WEAK), vhash))
            if vnext == 0:
                break
            aux_at += vnext
        needs.append(VersionNeed(strings.get(file_idx, "version requirement file"),
                                 tuple(versions)))
        if nxt == 0:
            break
        offset += nxt
    return needs


def _parse_verdef(
    r: _Reader, amap: _AddressMap, lay: _Layout, vaddr: int, num: int | None, strings: _Strings
) -> list[VersionDef]:
    p = lay.prefix
    offset = amap.offset(vaddr, "DT_VERDEF")
    defs = []
    budget = _Budget(r, "version definition entries")
    for _ in range(num if num is not None else _MAX_VERSION_ENTRIES):
        budget.take(offset)
        _ver, flags, ndx, cnt, _hash, aux, nxt = struct.unpack(
            p + "HHHHIII", r.read(offset, 20, "verdef")
        )
        names = []
        aux_at = offset + aux
        for _ in range(cnt):
            budget.take(aux_at)
            name_idx, anext = struct.unpack(p + "II", r.read(aux_at, 8, "verdaux"))
            names.append(strings.get(name_idx, "version definition"))
            if anext == 0:
                break
            aux_at += anext
        if not names:
            raise r.fail("version definition without a name", offset)
        defs.append(VersionDef(ndx, names[0], flags, tuple(names[1:])))
        if nxt == 0:
            break
        offset += nxt
    return defs


def _parse_sections(r: _Reader, h: _Header, lay: _Layout, names: bool = True
                    ) -> tuple[Section, ...]:
    if h.shoff == 0:
        return ()
    if h.shentsize < lay.shdr.size:
        raise r.fail(f"section header entry size {h.shentsize} is smaller than {lay.shdr.size}")
    shnum, shstrndx = h.shnum, h.shstrndx
    if shnum == 0 or shstrndx == SHN_XINDEX:
        first = _first_section_header(r, h, lay)
        if first is not None:
            shnum = shnum or first[5]
            shstrndx = first[6] if shstrndx == SHN_XINDEX else shstrndx
    table = r.read(h.shoff, shnum * h.shentsize, f"section header table ({shnum} entries)")
    rows = [lay.shdr.unpack_from(table, i * h.shentsize) for i in range(shnum)]
    table_names = b""
    if names and 0 < shstrndx < shnum:
        _n, stype, _f, _a, s_off, s_size, *_ = rows[shstrndx]
        if stype != 8:  # SHT_NOBITS has no bytes in the file
            table_names = r.read(s_off, s_size, "section name string table")
    sections = []
    for name_idx, stype, flags, addr, offset, size, *_ in rows:
        end = table_names.find(b"\0", name_idx) if name_idx < len(table_names) else -1
        name = table_names[name_idx:end].decode("utf-8", "replace") if end >= 0 else ""
        sections.append(Section(name, stype, flags, addr, offset, size))
    return tuple(sections)


def _version_names(
    needs: list[VersionNeed], defs: list[VersionDef]
) -> dict[int, VersionName]:
    names = {d.index: VersionName(d.name, None) for d in defs if not d.is_base}
    for need in needs:
        for v in need.versions:
            names[v.index & VERSYM_INDEX] = VersionName(v.name, need.file)
    return names


_EMPTY_TABLE = SymbolTable((), b"", b"", array("H"), array("Q"), array("Q"), None, {})


def parse_elf(
    source: ByteSource, *, relocations: bool = True, sections: bool = True,
    symbols: bool = True, intern: bool = True,
) -> ElfImage:
    """Read the dynamic view of the ELF file in `source`; raises ElfError if it is not readable.

    `relocations=False` skips the relocation tables (the order in which ld.so binds symbols) and
    `sections=False` the section headers: a remote reader need not fetch either.
    `symbols=False` reads a head only: the headers, the dynamic entries and the version tables,
    with an empty symbol table (and no relocations): what a file is and what it links to, not
    what it defines or binds; never a view to bind symbols with. `intern` is the symbol table's
    (`SymbolTable`).
    """
    r = _Reader(source)
    h, lay, segments, refusal = _parse_headers(r)
    cut = cut_short(segments, r.size)
    try:
        image = _parse_rest(r, source, h, lay, segments, relocations=relocations,
                            sections=sections, symbols=symbols, intern=intern)
    except ElfError as e:  # glibc refuses the headers before it reads any of the rest
        raise ElfError(e.where, e.problem, e.offset, r.size, refusal, int(h.order),
                       cut) from None
    return replace(image, refusal=refusal, cut=cut) if refusal or cut else image


LOADER_PAGE = 4096  # the page size of x86-64 (and of most aarch64 kernels)


def cut_short(segments: Sequence[Segment], size: int) -> str | None:
    """Where a file of `size` bytes ends when it ends inside what the loader maps of it: the
    loader maps each PT_LOAD segment's bytes page by page, and reading a page that lies wholly
    past the end of the file raises SIGBUS. The loader reads the dynamic section, fills the
    end of the last page of a segment with zeros (its .bss) and relocates the data segment:
    in a file cut anywhere before the last page of its data, it touches such a page, and the
    process dies. None when every mapped page holds some of the file."""
    end = max((s.offset + s.filesz for s in segments if s.type == PT_LOAD and s.filesz),
              default=0)
    held = -(-size // LOADER_PAGE) * LOADER_PAGE
    if end <= held:
        return None
    return (f"the file ends at byte {size:,}, and the loader maps its bytes up to {end:,} "
            f"(pages past {held:,} are past its end)")


def _parse_rest(r: _Reader, source: ByteSource, h: _Header, lay: _Layout,
                segments: list[Segment], *, relocations: bool, sections: bool, symbols: bool,
                intern: bool) -> ElfImage:
    loads = [s for s in segments if s.type == PT_LOAD]
    amap = _AddressMap(r, loads)
    interp = next((s for s in segments if s.type == PT_INTERP), None)
    interpreter = None
    if interp is not None:
        interpreter = r.read(interp.offset, interp.filesz, "PT_INTERP").split(b"\0", 1)[0].decode(
            "utf-8", "surrogateescape"
        )
    section_problem: str | None = None
    try:
        table = _parse_sections(r, h, lay) if sections else ()
    except ElfError as e:
        table, section_problem = (), e.problem
    dyn_seg = next((s for s in segments if s.type == PT_DYNAMIC), None)
    dynamic: DynamicInfo | None = None
    table_read, needs, defs = _EMPTY_TABLE, list[VersionNeed](), list[VersionDef]()
    relocated: array[int] | None = None
    if dyn_seg is not None:
        dynamic, table_read, needs, defs, relocated = _parse_dynamic(
            r, amap, lay, h, dyn_seg, relocations and symbols, table, symbols, intern)
    warnings = _name_warnings(table_read)
    return ElfImage(
        name=source.name,
        elf_class=h.elf_class,
        byte_order=h.order,
        machine=h.machine,
        file_type=enum_or_int(FileType, h.file_type),
        osabi=h.osabi,
        interpreter=interpreter,
        loads=tuple(loads),
        dynamic=dynamic,
        symbols=table_read,
        version_needs=tuple(needs),
        version_defs=tuple(defs),
        sections=table,
        section_problem=section_problem,
        relocated_symbols=relocated,
        warnings=warnings,
    )


_STT_SECTION = 3


def _name_warnings(table: SymbolTable) -> tuple[str, ...]:
    """A warning when dynamic symbols have empty names (a zeroed string table)."""
    if "" not in table.names:  # one pass in C: nearly every table
        return ()
    empty = sum(1 for name, info in zip(table.names, table.info, strict=True)
                if not name and info & 0xF != _STT_SECTION)  # section symbols have no name
    if not empty:
        return ()
    return (f"{empty} of {len(table.names)} dynamic symbols have an empty name (is the dynamic "
            "string table zeroed?)",)


@dataclass(frozen=True, slots=True)
class ElfLayout:
    """Where an ELF file's parts lie: its program headers and, when read, its section headers.
    `dyn_entry` and `word` are the struct formats of a dynamic entry and of an address."""

    elf_class: ElfClass
    byte_order: ByteOrder
    section_headers_at: int
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]

    @property
    def dyn_entry(self) -> struct.Struct:
        return _layout(self.elf_class, self.byte_order).dyn

    @property
    def word(self) -> struct.Struct:
        p = "<" if self.byte_order is ByteOrder.LITTLE else ">"
        return struct.Struct(p + ("Q" if self.elf_class is ElfClass.ELF64 else "I"))


def parse_layout(source: ByteSource, *, sections: bool = True, names: bool = True
                 ) -> ElfLayout:
    """The ELF header's, program headers' and (with `sections`) section headers' view of the
    file in `source`, the sections named unless `names` is False (their names are then ""; the
    name table need not be read); raises ElfError if they are not readable."""
    r = _Reader(source)
    h, lay, segments, _refused = _parse_headers(r)
    return ElfLayout(h.elf_class, h.order, h.shoff, tuple(segments),
                     _parse_sections(r, h, lay, names) if sections else ())


def _parse_dynamic(
    r: _Reader, amap: _AddressMap, lay: _Layout, h: _Header, seg: Segment, relocations: bool,
    sections: tuple[Section, ...] = (), symbols: bool = True, intern: bool = True,
) -> tuple[DynamicInfo, SymbolTable, list[VersionNeed], list[VersionDef], array[int] | None]:
    entries = _parse_dynamic_entries(r, seg, lay)
    first: dict[int, int] = {}
    for tag, value in entries:
        first.setdefault(tag, value)
    if DT_STRTAB not in first:
        if any(tag in (DT_NEEDED, DT_SONAME, DT_SYMTAB) for tag, _ in entries):
            raise r.fail("dynamic section has no DT_STRTAB", seg.offset)
        strings = _Strings(r, b"", seg.offset)
    else:
        strsz = first.get(DT_STRSZ, 0)
        str_off = amap.offset(first[DT_STRTAB], "DT_STRTAB")
        strings = _Strings(r, r.read(str_off, strsz, f"dynamic string table ({strsz} bytes)"),
                           str_off)

    def names(tag: int, what: str) -> tuple[str, ...]:
        return tuple(strings.get(v, what) for t, v in entries if t == tag)

    sonames = names(DT_SONAME, "DT_SONAME")
    info = DynamicInfo(
        needed=names(DT_NEEDED, "DT_NEEDED"),
        soname=sonames[0] if sonames else None,
        rpath=names(DT_RPATH, "DT_RPATH"),
        runpath=names(DT_RUNPATH, "DT_RUNPATH"),
        flags=first.get(DT_FLAGS, 0),
        flags_1=first.get(DT_FLAGS_1, 0),
    )
    needs = (_parse_verneed(r, amap, lay, first[DT_VERNEED], first.get(DT_VERNEEDNUM), strings)
             if DT_VERNEED in first else [])
    defs = (_parse_verdef(r, amap, lay, first[DT_VERDEF], first.get(DT_VERDEFNUM), strings)
            if DT_VERDEF in first else [])
    referenced: array[int] | None = None
    if relocations:
        try:
            referenced = _relocated_symbols(r, amap, lay, first)
        except ElfError:
            referenced = None  # the order of references is a refinement, not part of the view

    def at_least(needed: bool) -> int:
        """What the relocations reference and the section headers say of the table's size;
        the relocations are read for it only when `needed` (not read otherwise)."""
        refs = referenced
        if refs is None and needed:
            try:
                refs = _relocated_symbols(r, amap, lay, first)
            except ElfError:
                refs = None
        found = max(refs, default=-1) + 2 if refs is not None else 0
        dynsym = next((s for s in sections if s.type == SHT_DYNSYM and s.addr == first[DT_SYMTAB]
                       and s.size % lay.sym_size == 0), None)
        return max(found, dynsym.size // lay.sym_size) if dynsym is not None else found

    table = _EMPTY_TABLE
    if DT_SYMTAB in first and symbols:
        table = _symbol_table(r, amap, lay, h, first, strings, needs, defs, at_least, intern)
    relocated = None
    if referenced is not None:
        count = len(table)
        relocated = array("I", (i for i in referenced if i < count))
    return info, table, needs, defs, relocated


def _relocation_ranges(first: dict[int, int]) -> list[tuple[int, int, bool]]:
    """(address, size, is_rela) of the relocation tables, in the order ld.so processes them,
    without the leading relative relocations (DT_RELACOUNT/DT_RELCOUNT), which name no symbol."""
    ranges = []
    for table, size, count, rela in ((DT_RELA, DT_RELASZ, DT_RELACOUNT, True),
                                     (DT_REL, DT_RELSZ, DT_RELCOUNT, False)):
        if table in first:
            entry = first.get(DT_RELAENT if rela else DT_RELENT, 0)
            skip = min(first.get(count, 0) * entry, first.get(size, 0))
            ranges.append((first[table] + skip, first.get(size, 0) - skip, rela))
    if DT_JMPREL in first:
        ranges.append((first[DT_JMPREL], first.get(DT_PLTRELSZ, 0),
                       first.get(DT_PLTREL, DT_RELA) == DT_RELA))
    return ranges


_RELOCATION_CHUNK = 1 << 20


def _relocated_symbols(
    r: _Reader, amap: _AddressMap, lay: _Layout, first: dict[int, int]
) -> array[int]:
    """Symbol-table entries that dynamic relocations refer to, in the order ld.so binds them.

    ld.so processes DT_RELA/DT_REL, then DT_JMPREL (all at load time under RTLD_NOW); the first
    reference that cannot be bound is the error it reports. Entries are SymbolTable indexes
    (symbol index - 1), not yet bounded by the table's size. Tables are read in chunks, so
    memory does not grow with their size beyond one mark per symbol referenced.
    """
    native = lay.prefix == _NATIVE
    seen: set[int] = set()
    order = array("I")
    for vaddr, size, rela in _relocation_ranges(first):
        words = (6 if rela else 4) if lay.word == 8 else (3 if rela else 2)
        entry = words * 4
        start = amap.offset(vaddr, "relocation table")
        end = start + size - size % entry
        while start < end:
            length = min(end - start, _RELOCATION_CHUNK - _RELOCATION_CHUNK % entry)
            raw = r.read(start, length, "relocation table")
            start += length
            if lay.word == 8:
                symbols: Iterable[int] = _column(raw, "I", native, 3 if native else 2, words)
            else:
                symbols = (i >> 8 for i in _column(raw, "I", native, 1, words))
            for i in dict.fromkeys(symbols):
                if i > 0 and i not in seen:
                    seen.add(i)
                    order.append(i - 1)
    return order


def _symbol_table(
    r: _Reader, amap: _AddressMap, lay: _Layout, h: _Header, first: dict[int, int],
    strings: _Strings, needs: list[VersionNeed], defs: list[VersionDef],
    at_least: Callable[[bool], int] = lambda _needed: 0, intern: bool = True,
) -> SymbolTable:
    """The dynamic symbol table. Its size is DT_HASH's chain count when there is one (the exact
    count); else the one DT_GNU_HASH implies (the last hashed symbol), raised to `at_least`
    (what the relocations reference and the section headers say) when that fits in the file:
    GNU hash tables leave out the symbols nothing looks up by name, all of them in a program
    that exports nothing (older GNU ld writes empty buckets and a symbol offset of 1 there; the
    relocations are then read even for a view without them)."""
    syment = first.get(DT_SYMENT, lay.sym_size)
    if syment != lay.sym_size:
        raise r.fail(f"unsupported dynamic symbol entry size {syment} (expected {lay.sym_size})")
    if DT_HASH in first:
        count = _symbol_count_hash(amap, first[DT_HASH], lay)
    elif DT_GNU_HASH in first:
        count, empty = _symbol_count_gnu_hash(r, amap, first[DT_GNU_HASH], lay)
        more = at_least(empty)
        if more > count and more * lay.sym_size <= r.size:
            count = more
    else:
        raise r.fail("dynamic section has DT_SYMTAB but neither DT_GNU_HASH nor DT_HASH")
    if count == 0:
        return _EMPTY_TABLE
    if count * lay.sym_size > r.size:
        raise r.fail(f"symbol count {count} does not fit in a file of {r.size} bytes")
    info, other, shndx, values, sizes, names = _parse_symbols(
        r, amap, lay, h.elf_class, first[DT_SYMTAB], count, strings
    )
    versym = None
    if DT_VERSYM in first:
        at = amap.offset(first[DT_VERSYM], "DT_VERSYM") + 2  # entry 0 belongs to the null symbol
        raw = r.read(at, (count - 1) * 2, f"symbol version table ({count} entries)")
        versym = _column(raw, "H", lay.prefix == _NATIVE, 0, 1)
    return SymbolTable(names, info, other, shndx, values, sizes, versym,
                       _version_names(needs, defs), intern)
