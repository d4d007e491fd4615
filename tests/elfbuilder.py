"""A small writer of synthetic ELF files, for tests that need a layout no compiler here produces.

`build_elf(ElfSpec(...))` lays out, in this order: ELF header, program headers (PT_LOAD over
everything up to the dynamic section, PT_DYNAMIC, optional PT_INTERP), the interpreter path, a
SysV (DT_HASH) or GNU (DT_GNU_HASH) hash table, .dynsym, .dynstr, optional .gnu.version,
.gnu.version_d and .gnu.version_r, a small .text, .dynamic, and finally (outside every PT_LOAD)
.shstrtab and the section header table when `section_headers` is set. Virtual addresses equal file
offsets. ELF32 and ELF64, little- and big-endian.

The result, `BuiltElf`, keeps the file offset of every table so a test can corrupt exactly one
field (`set_dynamic`, `put`), and `locate_tables` finds the same tables in a real file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
ET_EXEC, ET_DYN = 2, 3
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STT_NOTYPE, STT_OBJECT, STT_FUNC = 0, 1, 2
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
VER_FLG_BASE, VER_FLG_WEAK = 1, 2
VERSYM_HIDDEN = 0x8000

DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_DEBUG = 0, 1, 4, 5, 6, 21
DT_STRSZ, DT_SYMENT, DT_SONAME, DT_RPATH, DT_RUNPATH = 10, 11, 14, 15, 29
DT_FLAGS, DT_FLAGS_1 = 30, 0x6FFFFFFB
DT_GNU_HASH, DT_VERSYM = 0x6FFFFEF5, 0x6FFFFFF0
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF

SHT_PROGBITS, SHT_STRTAB, SHT_HASH, SHT_DYNAMIC, SHT_DYNSYM = 1, 3, 5, 6, 11
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = (
    0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF)
SHF_ALLOC, SHF_EXECINSTR = 2, 4

EM_386, EM_PPC, EM_PPC64, EM_S390, EM_X86_64 = 3, 20, 21, 22, 62


def elf_hash(name: bytes) -> int:
    """The SysV ELF hash (DT_HASH, version entries)."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def gnu_hash(name: bytes) -> int:
    """The GNU hash (DT_GNU_HASH)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


@dataclass(frozen=True)
class Sym:
    """A dynamic symbol; `versym` is the raw .gnu.version entry (1 = global, | 0x8000 = hidden)."""

    name: str
    defined: bool = True
    bind: int = STB_GLOBAL
    type: int = STT_FUNC
    size: int = 8
    versym: int = 1
    shndx: int | None = None  # None: .text when defined, SHN_UNDEF when not


@dataclass(frozen=True)
class Need:
    """Versions required from one library: (name, version index, weak)."""

    file: str
    versions: tuple[tuple[str, int, bool], ...]


@dataclass(frozen=True)
class Def:
    """A version defined by the object; index 1 is the BASE entry (the object's own name)."""

    index: int
    name: str
    parents: tuple[str, ...] = ()
    base: bool = False


@dataclass(frozen=True)
class ElfSpec:
    """What to put into the synthetic file."""

    elf64: bool = True
    big_endian: bool = False
    machine: int = EM_X86_64
    osabi: int = 0  # 3 (GNU) makes binutils name binding 10 "UNIQUE"
    file_type: int = ET_DYN
    symbols: tuple[Sym, ...] = ()
    needed: tuple[str, ...] = ()
    soname: str | None = None
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    flags: int | None = None
    flags_1: int | None = None
    needs: tuple[Need, ...] = ()
    defs: tuple[Def, ...] = ()
    hash_style: str = "sysv"  # or "gnu"
    interp: str | None = None
    section_headers: bool = True
    extra_dynamic: tuple[tuple[int, int], ...] = ()


@dataclass
class BuiltElf:
    """The bytes of a synthetic file and where its parts are (file offsets)."""

    spec: ElfSpec
    data: bytearray
    offsets: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    dynamic: list[tuple[int, int]] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return ">" if self.spec.big_endian else "<"

    @property
    def word(self) -> str:
        return "Q" if self.spec.elf64 else "I"

    def put(self, offset: int, fmt: str, *values: int) -> None:
        """Overwrite bytes at `offset` with `values` packed in the file's byte order."""
        struct.pack_into(self.prefix + fmt, self.data, offset, *values)

    def dynamic_entry_offset(self, tag: int) -> int:
        """File offset of the first dynamic entry with `tag`."""
        index = next(i for i, (t, _) in enumerate(self.dynamic) if t == tag)
        return self.offsets["dynamic"] + index * struct.calcsize("<" + self.word * 2)

    def set_dynamic(self, tag: int, value: int) -> None:
        """Change the value of the first dynamic entry with `tag`."""
        self.put(self.dynamic_entry_offset(tag) + struct.calcsize(self.word), self.word, value)

    def drop_dynamic(self, tag: int) -> None:
        """Turn the first dynamic entry with `tag` into DT_DEBUG, which readers ignore."""
        self.put(self.dynamic_entry_offset(tag), self.word, DT_DEBUG)

    def append_mapped(self, blob: bytes) -> int:
        """Append `blob` at the end of the file, widen PT_LOAD over it; returns its offset."""
        offset = len(self.data)
        self.data += blob
        phdr = self.offsets["phdrs"]  # PT_LOAD is the first program header
        if self.spec.elf64:
            self.put(phdr + 32, "QQ", len(self.data), len(self.data))
        else:
            self.put(phdr + 16, "II", len(self.data), len(self.data))
        return offset

    def bytes(self) -> bytes:
        return bytes(self.data)


class _Strings:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.index: dict[str, int] = {"": 0}

    def add(self, s: str) -> int:
        if s not in self.index:
            self.index[s] = len(self.data)
            self.data += s.encode() + b"\0"
        return self.index[s]


def _order_symbols(spec: ElfSpec) -> tuple[list[Sym], int, int]:
    """Symbols in table order, and (GNU hash bucket count, first hashed index)."""
    syms = list(spec.symbols)
    if spec.hash_style != "gnu":
        return syms, 0, 0
    undefined = [s for s in syms if not s.defined]
    defined = [s for s in syms if s.defined]
    nbuckets = max(1, len(defined) // 2)
    defined.sort(key=lambda s: gnu_hash(s.name.encode()) % nbuckets)
    return undefined + defined, nbuckets, 1 + len(undefined)


def _sysv_hash(syms: list[Sym], p: str) -> bytes:
    nsyms = len(syms) + 1
    nbucket = max(1, nsyms // 2)
    buckets, chains = [0] * nbucket, [0] * nsyms
    for i, s in enumerate(syms, start=1):
        b = elf_hash(s.name.encode()) % nbucket
        chains[i], buckets[b] = buckets[b], i
    return struct.pack(f"{p}II{nbucket}I{nsyms}I", nbucket, nsyms, *buckets, *chains)


def _gnu_hash(syms: list[Sym], nbuckets: int, symoffset: int, p: str, word: str) -> bytes:
    hashes = [gnu_hash(s.name.encode()) for s in syms[symoffset - 1:]]
    buckets = [0] * nbuckets
    chain = []
    for i, h in enumerate(hashes):
        b = h % nbuckets
        if buckets[b] == 0:
            buckets[b] = symoffset + i
        last = i + 1 == len(hashes) or hashes[i + 1] % nbuckets != b
        chain.append((h & ~1) | int(last))
    bloom = (1 << struct.calcsize(word) * 8) - 1  # all bits set: every lookup may match
    return (struct.pack(f"{p}IIII", nbuckets, symoffset, 1, 6) + struct.pack(p + word, bloom)
            + struct.pack(f"{p}{nbuckets}I{len(chain)}I", *buckets, *chain))


def _align(buf: bytearray, n: int) -> int:
    buf += b"\0" * (-len(buf) % n)
    return len(buf)


def _verneed(spec: ElfSpec, strings: _Strings, p: str) -> bytes:
    out = bytearray()
    for i, need in enumerate(spec.needs):
        last = i + 1 == len(spec.needs)
        size = 16 + 16 * len(need.versions)
        out += struct.pack(p + "HHIII", 1, len(need.versions), strings.add(need.file), 16,
                           0 if last else size)
        for j, (name, index, weak) in enumerate(need.versions):
            vnext = 0 if j + 1 == len(need.versions) else 16
            out += struct.pack(p + "IHHII", elf_hash(name.encode()),
                               VER_FLG_WEAK if weak else 0, index, strings.add(name), vnext)
    return bytes(out)


def _verdef(spec: ElfSpec, strings: _Strings, p: str) -> bytes:
    out = bytearray()
    for i, d in enumerate(spec.defs):
        names = (d.name, *d.parents)
        size = 20 + 8 * len(names)
        out += struct.pack(p + "HHHHIII", 1, VER_FLG_BASE if d.base else 0, d.index, len(names),
                           elf_hash(d.name.encode()), 20, 0 if i + 1 == len(spec.defs) else size)
        for j, name in enumerate(names):
            out += struct.pack(p + "II", strings.add(name), 0 if j + 1 == len(names) else 8)
    return bytes(out)


def build_elf(spec: ElfSpec) -> BuiltElf:
    """Lay out and write the file described by `spec`."""
    p = ">" if spec.big_endian else "<"
    word = "Q" if spec.elf64 else "I"
    ehsize, phentsize, shentsize = (64, 56, 64) if spec.elf64 else (52, 32, 40)
    sym_size = 24 if spec.elf64 else 16
    align = 8 if spec.elf64 else 4
    syms, nbuckets, symoffset = _order_symbols(spec)
    phnum = 2 + (spec.interp is not None)

    strings = _Strings()
    sym_names = [strings.add(s.name) for s in syms]
    needed = [strings.add(n) for n in spec.needed]
    soname = strings.add(spec.soname) if spec.soname is not None else None
    rpath = [strings.add(r) for r in spec.rpath]
    runpath = [strings.add(r) for r in spec.runpath]
    verneed = _verneed(spec, strings, p)
    verdef = _verdef(spec, strings, p)
    versioned = bool(spec.needs or spec.defs or any(s.versym != 1 for s in syms))

    built = BuiltElf(spec, bytearray(ehsize + phentsize * phnum))
    data, offsets, sizes = built.data, built.offsets, built.sizes

    def place(name: str, blob: bytes, alignment: int) -> int:
        offsets[name] = _align(data, alignment)
        sizes[name] = len(blob)
        data.extend(blob)
        return offsets[name]

    if spec.interp is not None:
        place("interp", spec.interp.encode() + b"\0", 1)
    if spec.hash_style == "gnu":
        place("hash", _gnu_hash(syms, nbuckets, symoffset, p, word), align)
    else:
        place("hash", _sysv_hash(syms, p), 4)
    sections = _section_plan(spec, versioned)
    text_index = sections.index(".text")
    symtab = bytearray(sym_size)
    for s, name in zip(syms, sym_names, strict=True):
        shndx = s.shndx if s.shndx is not None else (text_index if s.defined else SHN_UNDEF)
        info = (s.bind << 4) | s.type
        value = 0 if shndx == SHN_UNDEF else 0x10
        if spec.elf64:
            symtab += struct.pack(p + "IBBHQQ", name, info, 0, shndx, value, s.size)
        else:
            symtab += struct.pack(p + "IIIBBH", name, value, s.size, info, 0, shndx)
    place("dynsym", bytes(symtab), align)
    place("dynstr", bytes(strings.data), 1)
    if versioned:
        place("versym", struct.pack(f"{p}{len(syms) + 1}H", 0, *(s.versym for s in syms)), 2)
    if verdef:
        place("verdef", verdef, 4)
    if verneed:
        place("verneed", verneed, 4)
    place("text", b"\xc3" * 32, 16)

    dyn: list[tuple[int, int]] = [(DT_NEEDED, n) for n in needed]
    if soname is not None:
        dyn.append((DT_SONAME, soname))
    dyn += [(DT_RPATH, r) for r in rpath] + [(DT_RUNPATH, r) for r in runpath]
    dyn.append((DT_GNU_HASH if spec.hash_style == "gnu" else DT_HASH, offsets["hash"]))
    dyn += [(DT_STRTAB, offsets["dynstr"]), (DT_SYMTAB, offsets["dynsym"]),
            (DT_STRSZ, sizes["dynstr"]), (DT_SYMENT, sym_size)]
    if versioned:
        dyn.append((DT_VERSYM, offsets["versym"]))
    if verdef:
        dyn += [(DT_VERDEF, offsets["verdef"]), (DT_VERDEFNUM, len(spec.defs))]
    if verneed:
        dyn += [(DT_VERNEED, offsets["verneed"]), (DT_VERNEEDNUM, len(spec.needs))]
    if spec.flags is not None:
        dyn.append((DT_FLAGS, spec.flags))
    if spec.flags_1 is not None:
        dyn.append((DT_FLAGS_1, spec.flags_1))
    dyn += [*spec.extra_dynamic, (DT_NULL, 0)]
    built.dynamic = dyn
    place("dynamic", b"".join(struct.pack(p + word * 2, t, v) for t, v in dyn), align)
    load_end = len(data)

    shoff = 0
    if spec.section_headers:
        shoff = _write_sections(built, sections)

    header = struct.pack(
        f"{p}HHI{word}{word}{word}IHHHHHH", spec.file_type, spec.machine, 1, 0, ehsize, shoff, 0,
        ehsize, phentsize, phnum, shentsize if shoff else 0, len(sections) if shoff else 0,
        len(sections) - 1 if shoff else 0,
    )
    ident = b"\x7fELF" + bytes([2 if spec.elf64 else 1, 2 if spec.big_endian else 1, 1, spec.osabi])
    data[0:ehsize] = ident.ljust(16, b"\0") + header
    phdrs = [(PT_LOAD, 0, 0, load_end, 7, 0x1000),
             (PT_DYNAMIC, offsets["dynamic"], offsets["dynamic"], sizes["dynamic"], 6, align)]
    if spec.interp is not None:
        phdrs.append((PT_INTERP, offsets["interp"], offsets["interp"], sizes["interp"], 4, 1))
    offsets["phdrs"] = ehsize
    for i, (ptype, off, vaddr, size, flags, palign) in enumerate(phdrs):
        if spec.elf64:
            entry = struct.pack(p + "IIQQQQQQ", ptype, flags, off, vaddr, vaddr, size, size, palign)
        else:
            entry = struct.pack(p + "IIIIIIII", ptype, off, vaddr, vaddr, size, size, flags, palign)
        data[ehsize + i * phentsize: ehsize + (i + 1) * phentsize] = entry
    return built


def _section_plan(spec: ElfSpec, versioned: bool) -> list[str]:
    names = [""]
    if spec.interp is not None:
        names.append(".interp")
    names += [".gnu.hash" if spec.hash_style == "gnu" else ".hash", ".dynsym", ".dynstr"]
    if versioned:
        names.append(".gnu.version")
    if spec.defs:
        names.append(".gnu.version_d")
    if spec.needs:
        names.append(".gnu.version_r")
    return [*names, ".text", ".dynamic", ".shstrtab"]


_SECTION_KINDS = {  # name -> (part, type, flags, linked section, entry size (0: symbol size))
    ".interp": ("interp", SHT_PROGBITS, SHF_ALLOC, None, 0),
    ".hash": ("hash", SHT_HASH, SHF_ALLOC, ".dynsym", 4),
    ".gnu.hash": ("hash", SHT_GNU_HASH, SHF_ALLOC, ".dynsym", 0),
    ".dynsym": ("dynsym", SHT_DYNSYM, SHF_ALLOC, ".dynstr", -1),
    ".dynstr": ("dynstr", SHT_STRTAB, SHF_ALLOC, None, 0),
    ".gnu.version": ("versym", SHT_GNU_VERSYM, SHF_ALLOC, ".dynsym", 2),
    ".gnu.version_d": ("verdef", SHT_GNU_VERDEF, SHF_ALLOC, ".dynstr", 0),
    ".gnu.version_r": ("verneed", SHT_GNU_VERNEED, SHF_ALLOC, ".dynstr", 0),
    ".text": ("text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, None, 0),
    ".dynamic": ("dynamic", SHT_DYNAMIC, SHF_ALLOC, ".dynstr", -2),
}


def _write_sections(built: BuiltElf, sections: list[str]) -> int:
    spec, data, offsets, sizes = built.spec, built.data, built.offsets, built.sizes
    p, elf64 = built.prefix, spec.elf64
    shstrtab = _Strings()
    name_idx = [shstrtab.add(n) for n in sections]
    offsets["shstrtab"] = _align(data, 1)
    sizes["shstrtab"] = len(shstrtab.data)
    data += shstrtab.data
    shoff = _align(data, 8)
    offsets["shdrs"] = shoff
    info = {".dynsym": 1, ".gnu.version_d": len(spec.defs), ".gnu.version_r": len(spec.needs)}
    for i, name in enumerate(sections):
        if name == "":
            row = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        elif name == ".shstrtab":
            row = (name_idx[i], SHT_STRTAB, 0, 0, offsets["shstrtab"], sizes["shstrtab"], 0, 0,
                   1, 0)
        else:
            part, stype, flags, link, entsize = _SECTION_KINDS[name]
            if entsize < 0:
                entsize = (24 if elf64 else 16) if entsize == -1 else (16 if elf64 else 8)
            link_index = sections.index(link) if link else 0
            row = (name_idx[i], stype, flags, offsets[part], offsets[part], sizes[part],
                   link_index, info.get(name, 0), 8 if elf64 else 4, entsize)
        if elf64:
            data += struct.pack(p + "IIQQQQIIQQ", *row)
        else:
            data += struct.pack(p + "IIIIIIIIII", *row)
    sizes["shdrs"] = len(data) - shoff
    return shoff


def locate_tables(data: bytes) -> dict[str, tuple[int, int]]:
    """(file offset, size) of the program headers, PT_DYNAMIC and the tables it points at.

    For choosing where to corrupt a real file; sizes of tables other than the dynamic section and
    the string table are a fixed 64-byte window (their heads).
    """
    elf64, p = data[4] == 2, "<" if data[5] == 1 else ">"
    if elf64:
        phoff, phentsize, phnum = (struct.unpack_from(p + "Q", data, 32)[0],
                                   *struct.unpack_from(p + "HH", data, 54))
    else:
        phoff, phentsize, phnum = (struct.unpack_from(p + "I", data, 28)[0],
                                   *struct.unpack_from(p + "HH", data, 42))
    found = {"phdrs": (phoff, phentsize * phnum)}
    loads = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if elf64:
            ptype, _f, off, vaddr, _pa, filesz = struct.unpack_from(p + "IIQQQQ", data, at)
        else:
            ptype, off, vaddr, _pa, filesz = struct.unpack_from(p + "IIIII", data, at)
        if ptype == PT_LOAD:
            loads.append((vaddr, off, filesz))
        elif ptype == PT_DYNAMIC:
            found["dynamic"] = (off, filesz)
    if "dynamic" not in found:
        return found
    dyn_off, dyn_size = found["dynamic"]
    entry = p + ("QQ" if elf64 else "II")
    tags = {DT_HASH: "hash", DT_GNU_HASH: "gnu_hash", DT_SYMTAB: "dynsym", DT_STRTAB: "dynstr",
            DT_VERSYM: "versym", DT_VERNEED: "verneed", DT_VERDEF: "verdef"}
    strsz = 64
    for tag, value in struct.iter_unpack(entry, data[dyn_off:dyn_off + dyn_size]):
        if tag == DT_STRSZ:
            strsz = value
        if tag in tags:
            for vaddr, off, filesz in loads:
                if vaddr <= value < vaddr + filesz:
                    found[tags[tag]] = (value - vaddr + off, 64)
    if "dynstr" in found:
        found["dynstr"] = (found["dynstr"][0], strsz)
    return found
