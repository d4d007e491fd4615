"""glibc's loader cache, `/etc/ld.so.cache`, read from its bytes (`parse_ld_so_cache`), and
the lookup ld.so makes in it (`LdCache.lookup`).

The new format (`glibc-ld.so.cache1.1`), the old format (`ld.so-1.7.0`) and the old format with
the new one embedded after it. Layout from glibc's sysdeps/generic/dl-cache.h and elf/cache.c;
lookup semantics from elf/dl-cache.c (`search_cache`, `_dl_cache_libcmp`). Every count and offset
is checked against the size of the data before it is used, so a corrupt file raises one
`FormatError` (file, problem, offset) and never another exception, a hang or an allocation sized
by a bogus count. How the lookup follows glibc is said in `abifit.host.ldconfig`, which reads
the file from a machine and gives the loader's search settings.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum

from abifit.errors import FormatError
from abifit.formats.elf import ByteOrder, ElfClass

LD_SO_CACHE = "/etc/ld.so.cache"

# ---------------------------------------------------------------------------------------------
# Cache entry flags (sysdeps/generic/ldconfig.h) and the loader's expected id (dl-cache.h)


class CacheLibType(IntEnum):
    """The low byte of a cache entry's flags: the kind of library (`FLAG_ELF_LIBC6` ...)."""

    LIBC4 = 0x0000
    ELF = 0x0001
    ELF_LIBC5 = 0x0002
    ELF_LIBC6 = 0x0003


class CacheArch(IntEnum):
    """The second byte of a cache entry's flags: the ABI of the library (`FLAG_X8664_LIB64` ...)."""

    NONE = 0x0000
    SPARC_LIB64 = 0x0100
    IA64_LIB64 = 0x0200
    X8664_LIB64 = 0x0300
    S390_LIB64 = 0x0400
    POWERPC_LIB64 = 0x0500
    MIPS64_LIBN32 = 0x0600
    MIPS64_LIBN64 = 0x0700
    X8664_LIBX32 = 0x0800
    ARM_LIBHF = 0x0900
    AARCH64_LIB64 = 0x0A00
    ARM_LIBSF = 0x0B00
    MIPS_LIB32_NAN2008 = 0x0C00
    MIPS64_LIBN32_NAN2008 = 0x0D00
    MIPS64_LIBN64_NAN2008 = 0x0E00
    RISCV_FLOAT_ABI_SOFT = 0x0F00
    RISCV_FLOAT_ABI_DOUBLE = 0x1000
    LARCH_FLOAT_ABI_SOFT = 0x1100
    LARCH_FLOAT_ABI_DOUBLE = 0x1200


FLAG_TYPE_MASK = 0x00FF
FLAG_REQUIRED_MASK = 0xFF00

# As elf/cache.c `print_entry` writes them.
_TYPE_TEXT = {0: "libc4", 1: "ELF", 2: "libc5", 3: "libc6"}
_ARCH_TEXT: Mapping[int, str] = {
    CacheArch.SPARC_LIB64: ",64bit",
    CacheArch.IA64_LIB64: ",IA-64",
    CacheArch.X8664_LIB64: ",x86-64",
    CacheArch.S390_LIB64: ",64bit",
    CacheArch.POWERPC_LIB64: ",64bit",
    CacheArch.MIPS64_LIBN32: ",N32",
    CacheArch.MIPS64_LIBN64: ",64bit",
    CacheArch.X8664_LIBX32: ",x32",
    CacheArch.ARM_LIBHF: ",hard-float",
    CacheArch.AARCH64_LIB64: ",AArch64",
    CacheArch.ARM_LIBSF: ",soft-float",
    CacheArch.MIPS_LIB32_NAN2008: ",nan2008",
    CacheArch.MIPS64_LIBN32_NAN2008: ",N32,nan2008",
    CacheArch.MIPS64_LIBN64_NAN2008: ",64bit,nan2008",
    CacheArch.RISCV_FLOAT_ABI_SOFT: ",soft-float",
    CacheArch.RISCV_FLOAT_ABI_DOUBLE: ",double-float",
    CacheArch.LARCH_FLOAT_ABI_SOFT: ",soft-float",
    CacheArch.LARCH_FLOAT_ABI_DOUBLE: ",double-float",
}
_OS_NAMES = ("Linux", "Hurd", "Solaris", "FreeBSD", "kNetBSD", "Syllable", "Unknown OS")

EM_SPARC = 2
EM_386 = 3
EM_MIPS = 8
EM_SPARC32PLUS = 18
EM_PPC = 20
EM_PPC64 = 21
EM_S390 = 22
EM_ARM = 40
EM_SPARCV9 = 43
EM_IA_64 = 50
EM_X86_64 = 62
EM_AARCH64 = 183
EM_RISCV = 243
EM_LOONGARCH = 258

_LIBC6 = CacheLibType.ELF_LIBC6
# Machines whose 64-bit loader expects one fixed id (their sysdeps/.../dl-cache.h).
_LIB64_IDS = {
    EM_X86_64: CacheArch.X8664_LIB64 | _LIBC6,
    EM_AARCH64: CacheArch.AARCH64_LIB64 | _LIBC6,
    EM_IA_64: CacheArch.IA64_LIB64 | _LIBC6,
    EM_PPC64: CacheArch.POWERPC_LIB64 | _LIBC6,
    EM_S390: CacheArch.S390_LIB64 | _LIBC6,
    EM_SPARCV9: CacheArch.SPARC_LIB64 | _LIBC6,
}
_ARM_IDS = (CacheArch.ARM_LIBHF | _LIBC6, CacheArch.ARM_LIBSF | _LIBC6)
_EF_ARM_ABI_FLOAT_HARD = 0x400
_EF_MIPS_ABI2 = 0x20
_EF_MIPS_NAN2008 = 0x400
_EF_RISCV_FLOAT_ABI_DOUBLE = 0x4
_EF_RISCV_FLOAT_ABI_MASK = 0x6
_EF_LARCH_ABI_SOFT_FLOAT = 0x1
_EF_LARCH_ABI_MODIFIER_MASK = 0x7


def describe_flags(flags: int) -> str:
    """The flags as `ldconfig -p` prints them: "libc6,x86-64", "ELF", "libc6,AArch64"."""
    kind = _TYPE_TEXT.get(flags & FLAG_TYPE_MASK, "unknown")
    arch = flags & FLAG_REQUIRED_MASK
    if arch == 0:
        return kind
    return kind + _ARCH_TEXT.get(arch, f",{arch}")


def cache_id_for(elf_class: int, machine: int, e_flags: int = 0) -> int:
    """The cache flags the loader for this ELF class and machine looks for.

    This is glibc's `_DL_CACHE_DEFAULT_ID`: 0x303 for x86-64, 0x803 for x32, 0xa03 for AArch64,
    3 (`FLAG_ELF_LIBC6`) for i386 and every machine without its own id. For 32-bit Arm, RISC-V,
    LoongArch and MIPS the float ABI or NaN encoding in `e_flags` selects the id; for 32-bit Arm
    glibc's own default id is 3 and the float ABI is checked separately, so the id returned here
    is the float-ABI one (0x903 hard-float, 0xb03 soft-float), which `cache_flags_accepted` treats
    the way arm's `_dl_cache_check_flags` does.
    """
    is64 = elf_class == ElfClass.ELF64
    if machine == EM_X86_64 and not is64:
        return CacheArch.X8664_LIBX32 | _LIBC6
    if is64 and machine in _LIB64_IDS:
        return _LIB64_IDS[machine]
    if machine == EM_ARM:
        return _ARM_IDS[0] if e_flags & _EF_ARM_ABI_FLOAT_HARD else _ARM_IDS[1]
    if machine == EM_RISCV:
        double = e_flags & _EF_RISCV_FLOAT_ABI_MASK == _EF_RISCV_FLOAT_ABI_DOUBLE
        return (CacheArch.RISCV_FLOAT_ABI_DOUBLE if double else CacheArch.RISCV_FLOAT_ABI_SOFT) | 3
    if machine == EM_LOONGARCH:
        soft = e_flags & _EF_LARCH_ABI_MODIFIER_MASK == _EF_LARCH_ABI_SOFT_FLOAT
        return (CacheArch.LARCH_FLOAT_ABI_SOFT if soft else CacheArch.LARCH_FLOAT_ABI_DOUBLE) | 3
    if machine == EM_MIPS:
        return _mips_id(is64, e_flags)
    return _LIBC6


def _mips_id(is64: bool, e_flags: int) -> int:
    nan2008 = bool(e_flags & _EF_MIPS_NAN2008)
    if is64:
        arch = CacheArch.MIPS64_LIBN64_NAN2008 if nan2008 else CacheArch.MIPS64_LIBN64
    elif e_flags & _EF_MIPS_ABI2:
        arch = CacheArch.MIPS64_LIBN32_NAN2008 if nan2008 else CacheArch.MIPS64_LIBN32
    else:
        arch = CacheArch.MIPS_LIB32_NAN2008 if nan2008 else CacheArch.NONE
    return arch | _LIBC6


def cache_flags_accepted(flags: int, cache_id: int) -> bool:
    """Whether a loader expecting `cache_id` uses an entry with these flags.

    glibc's `_dl_cache_check_flags`: the generic rule (i386 and other 32-bit loaders with id 3)
    accepts `FLAG_ELF` (1, a library not linked against libc) and `FLAG_ELF_LIBC6` (3); 32-bit Arm
    accepts its float ABI's id or plain 3; every other loader with its own id accepts only that id.
    """
    if cache_id == _LIBC6:
        return flags in (CacheLibType.ELF, _LIBC6)
    if cache_id in _ARM_IDS:
        return flags in (cache_id, _LIBC6)
    return flags == cache_id


# ---------------------------------------------------------------------------------------------
# ld.so.cache


class CacheFormat(Enum):
    """Which of the three layouts ldconfig can write (`ldconfig -c new|compat|old`)."""

    NEW = "new"
    COMPAT = "compat"
    OLD = "old"


_DL_CACHE_HWCAP_EXTENSION = 1 << 62
_ISA_LEVEL_MASK = (1 << 10) - 1


@dataclass(frozen=True, slots=True)
class LdCacheEntry:
    """One library in the cache: the name ld.so matches, the file it maps, and when it may.

    `hwcap` is either legacy hwcap bits (libraries in `tls/`, `x86_64/` ... subdirectories) or,
    with bit 62 set, an index into the cache's glibc-hwcaps table; `hwcaps_subdir` is then the
    subdirectory name (`x86-64-v3`) as the cache's extension section gives it.
    """

    soname: str
    path: str
    flags: int
    hwcap: int
    osversion: int = 0
    hwcaps_subdir: str | None = None

    @property
    def is_glibc_hwcaps(self) -> bool:
        """Whether the entry comes from a glibc-hwcaps subdirectory (dl-cache.h's test)."""
        return ((self.hwcap >> 32) & ~_ISA_LEVEL_MASK) == _DL_CACHE_HWCAP_EXTENSION >> 32

    @property
    def isa_level(self) -> int:
        """The x86 ISA level recorded for a glibc-hwcaps entry (0 when none)."""
        return (self.hwcap >> 32) & _ISA_LEVEL_MASK if self.is_glibc_hwcaps else 0

    @property
    def description(self) -> str:
        """What `ldconfig -p` prints in parentheses: 'libc6,x86-64, hwcap: "x86-64-v3"'."""
        text = describe_flags(self.flags)
        if self.hwcaps_subdir is not None:
            text += f', hwcap: "{self.hwcaps_subdir}"'
        elif self.hwcap:
            text += f", hwcap: 0x{self.hwcap:016x}"
        if self.osversion:
            os_name = _OS_NAMES[min(self.osversion >> 24, len(_OS_NAMES) - 1)]
            v = self.osversion
            text += f", OS ABI: {os_name} {(v >> 16) & 0xFF}.{(v >> 8) & 0xFF}.{v & 0xFF}"
        return text


_DIGIT_RUNS = re.compile(r"([0-9]+)")


def cache_name_key(name: str) -> tuple[str, ...]:
    """A key under which two names are equal exactly when `_dl_cache_libcmp` says they are.

    glibc compares runs of ASCII digits by numeric value, so leading zeros do not count.
    """
    parts = _DIGIT_RUNS.split(name)
    parts[1::2] = [run.lstrip("0") for run in parts[1::2]]
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class LdCache:
    """A parsed ld.so cache; `entries` are in file order, which is the order ld.so searches."""

    name: str
    format: CacheFormat
    byte_order: ByteOrder
    entries: tuple[LdCacheEntry, ...]
    generator: str | None = None
    _by_key: Mapping[tuple[str, ...], tuple[LdCacheEntry, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        index: dict[tuple[str, ...], list[LdCacheEntry]] = {}
        for entry in self.entries:
            index.setdefault(cache_name_key(entry.soname), []).append(entry)
        object.__setattr__(self, "_by_key", {k: tuple(v) for k, v in index.items()})

    def by_soname(self, soname: str) -> tuple[LdCacheEntry, ...]:
        """The entries ld.so considers for this name, in file order (compared as glibc does)."""
        return self._by_key.get(cache_name_key(soname), ())

    def lookup(
        self,
        soname: str,
        arch_flags: int,
        *,
        hwcaps_subdirs: Sequence[str] = (),
        legacy_hwcaps: Sequence[str] = ("tls",),
    ) -> str | None:
        """The path ld.so takes from the cache for `soname`, or None when the cache has none.

        `arch_flags` is the loader's id (`cache_id_for`); `hwcaps_subdirs` are the glibc-hwcaps
        subdirectories the loader searches, best first (`LoaderDefaults.hwcaps_subdirs`), and
        `legacy_hwcaps` the legacy subdirectory names it searches
        (`LoaderDefaults.legacy_hwcaps_subdirs`). See the module docstring for the rules.
        """
        best: str | None = None
        best_rank = len(hwcaps_subdirs)
        for entry in self.by_soname(soname):
            if not cache_flags_accepted(entry.flags, arch_flags):
                continue
            if entry.is_glibc_hwcaps:
                rank = _hwcaps_rank(entry.hwcaps_subdir, hwcaps_subdirs)
                if rank < best_rank:
                    best, best_rank = entry.path, rank
                continue
            if best is not None:
                break
            if entry.hwcap == 0 or _legacy_usable(entry, legacy_hwcaps):
                return entry.path
        return best


def _hwcaps_rank(subdir: str | None, searched: Sequence[str]) -> int:
    if subdir is None or subdir not in searched:
        return len(searched)
    return searched.index(subdir)


def _legacy_usable(entry: LdCacheEntry, searched: Sequence[str]) -> bool:
    """ldconfig sets one hwcap bit per trailing hwcap/platform/tls directory of the path."""
    count = bin(entry.hwcap).count("1")
    trailing = os.path.dirname(entry.path).split("/")[-count:]
    return len(trailing) == count and all(part in searched for part in trailing)


_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_HEADER = struct.Struct("<11sxI")
_OLD_ENTRY_SIZE = 12
_NEW_HEADER_SIZE = 48
_NEW_ENTRY_SIZE = 24
_EXTENSION_MAGIC = 0xEAA42174  # (uint32_t) -358342284
_TAG_GENERATOR = 0
_TAG_GLIBC_HWCAPS = 1
_ENDIAN_INVALID = 1
_ENDIAN_BIG = 3
_MAX_STRING = 4096  # longer than any path ld.so accepts; bounds the search for the NUL


class _Strings:
    """NUL-terminated strings at offsets relative to `base`, checked and decoded once each."""

    def __init__(self, data: bytes, base: int, name: str) -> None:
        self._data = data
        self._base = base
        self._name = name
        self._seen: dict[int, str] = {}

    def get(self, offset: int, field_at: int) -> str:
        """The string at `offset`; `field_at` is where the offset was read, for the error."""
        text = self._seen.get(offset)
        if text is None:
            text = self._seen[offset] = self._read(offset, field_at)
        return text

    def _read(self, offset: int, field_at: int) -> str:
        start = self._base + offset
        if start >= len(self._data):
            problem = f"string offset {offset:#x} points past the end"
            raise FormatError(self._name, problem, field_at)
        end = self._data.find(b"\0", start, start + _MAX_STRING + 1)
        if end < 0:
            raise FormatError(self._name, "string is not NUL-terminated", start)
        return self._data[start:end].decode("utf-8", "surrogateescape")


def parse_ld_so_cache(data: bytes, name: str = LD_SO_CACHE) -> LdCache:
    """Parse an ld.so cache in any of the formats ldconfig writes; raises `FormatError`."""
    if data.startswith(_NEW_MAGIC):
        return _parse_new(data, 0, name, CacheFormat.NEW)
    if data.startswith(_OLD_MAGIC):
        return _parse_old(data, name)
    if _NEW_MAGIC.startswith(data) or _OLD_MAGIC.startswith(data):
        raise FormatError(name, f"truncated ld.so cache header ({len(data)} bytes)", 0)
    raise FormatError(name, "not an ld.so cache (no 'glibc-ld.so.cache1.1' magic)", 0)


def _need(data: bytes, offset: int, length: int, name: str, what: str) -> None:
    if offset + length > len(data):
        raise FormatError(name, f"truncated {what}: needs {length} bytes", offset)


def _parse_new(data: bytes, base: int, name: str, fmt: CacheFormat) -> LdCache:
    _need(data, base, _NEW_HEADER_SIZE, name, "cache header")
    endian = data[base + 28] & 3
    if endian == _ENDIAN_INVALID:
        raise FormatError(name, "cache header marks the cache as invalid", base + 28)
    order = ">" if endian == _ENDIAN_BIG else "<"
    nlibs, _len_strings = struct.unpack_from(order + "II", data, base + 20)
    (extension_offset,) = struct.unpack_from(order + "I", data, base + 32)
    table = base + _NEW_HEADER_SIZE
    room = (len(data) - table) // _NEW_ENTRY_SIZE
    if nlibs > room:
        raise FormatError(name, f"header claims {nlibs} entries, room for {room}", base + 20)
    hwcaps, generator = _parse_extensions(data, extension_offset, order, name)
    strings = _Strings(data, base, name)
    file_strings = _Strings(data, 0, name)
    rows = struct.iter_unpack(order + "iIIIQ", data[table : table + nlibs * _NEW_ENTRY_SIZE])
    entries = []
    for i, (flags, key, value, osversion, hwcap) in enumerate(rows):
        at = table + i * _NEW_ENTRY_SIZE
        entry = LdCacheEntry(strings.get(key, at + 4), strings.get(value, at + 8), flags, hwcap,
                             osversion)
        subdir = _hwcaps_name(entry, hwcaps, file_strings, len(data), at + 16)
        entries.append(entry if subdir is None else replace(entry, hwcaps_subdir=subdir))
    byte_order = ByteOrder.BIG if order == ">" else ByteOrder.LITTLE
    return LdCache(name, fmt, byte_order, tuple(entries), generator)


def _hwcaps_name(
    entry: LdCacheEntry,
    table: tuple[int, ...] | None,
    strings: _Strings,
    size: int,
    field_at: int,
) -> str | None:
    """The glibc-hwcaps subdirectory of an entry; its string offset counts from the file start.

    As in glibc (cache.c `glibc_hwcaps_string`), an index or offset out of range means no name.
    """
    if table is None or not entry.is_glibc_hwcaps:
        return None
    index = entry.hwcap & 0xFFFFFFFF
    if index >= len(table) or table[index] >= size:
        return None
    return strings.get(table[index], field_at)


def _parse_extensions(
    data: bytes, offset: int, order: str, name: str
) -> tuple[tuple[int, ...] | None, str | None]:
    """The glibc-hwcaps string table and the generator text (dl-cache.h `cache_extension_load`)."""
    if offset == 0:
        return None, None
    if offset % 4:
        raise FormatError(name, "extension directory offset is not a multiple of 4", offset)
    _need(data, offset, 8, name, "extension directory")
    magic, count = struct.unpack_from(order + "II", data, offset)
    if magic != _EXTENSION_MAGIC:
        raise FormatError(name, f"bad extension directory magic {magic:#x}", offset)
    room = (len(data) - offset - 8) // 16
    if count > room:
        raise FormatError(name, f"extension directory claims {count} sections, room for {room}",
                          offset + 4)
    hwcaps: tuple[int, ...] | None = None
    generator: str | None = None
    for at in range(offset + 8, offset + 8 + 16 * count, 16):
        tag, _flags, start, size = struct.unpack_from(order + "IIII", data, at)
        if start + size > len(data):
            raise FormatError(name, "extension section extends past the end of the file", at)
        if tag == _TAG_GENERATOR:
            generator = data[start : start + size].decode("utf-8", "replace")
        elif tag == _TAG_GLIBC_HWCAPS:
            valid = size > 0 and start % 4 == 0 and size % 4 == 0
            hwcaps = struct.unpack_from(f"{order}{size // 4}I", data, start) if valid else None
    return hwcaps, generator


def _old_count(data: bytes, name: str) -> tuple[str, int]:
    """The byte order and entry count of an old-format header (the format records no order)."""
    _need(data, 0, _OLD_HEADER.size, name, "cache header")
    room = (len(data) - _OLD_HEADER.size) // _OLD_ENTRY_SIZE
    for order in "<>":
        (nlibs,) = struct.unpack_from(order + "I", data, 12)
        if nlibs <= room:
            return order, nlibs
    (nlibs,) = struct.unpack_from("<I", data, 12)
    raise FormatError(name, f"header claims {nlibs} entries, room for {room}", 12)


def _embedded_new_header(data: bytes, table_end: int) -> int | None:
    """Where the new format hides after the old table: 8-aligned, or 4-aligned (32-bit hosts)."""
    for candidate in ((table_end + 7) & ~7, table_end):
        if candidate + _NEW_HEADER_SIZE <= len(data) and data.startswith(_NEW_MAGIC, candidate):
            return candidate
    return None


def _parse_old(data: bytes, name: str) -> LdCache:
    order, nlibs = _old_count(data, name)
    table_end = _OLD_HEADER.size + nlibs * _OLD_ENTRY_SIZE
    new_at = _embedded_new_header(data, table_end)
    if new_at is not None:
        return _parse_new(data, new_at, name, CacheFormat.COMPAT)
    strings = _Strings(data, table_end, name)
    rows = struct.iter_unpack(order + "iII", data[_OLD_HEADER.size : table_end])
    entries = []
    for i, (flags, key, value) in enumerate(rows):
        at = _OLD_HEADER.size + i * _OLD_ENTRY_SIZE
        entries.append(LdCacheEntry(strings.get(key, at + 4), strings.get(value, at + 8), flags, 0))
    byte_order = ByteOrder.BIG if order == ">" else ByteOrder.LITTLE
    return LdCache(name, CacheFormat.OLD, byte_order, tuple(entries))
