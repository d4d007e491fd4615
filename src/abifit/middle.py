"""Placing output decoded from the middle of an ELF member: where its dynamic array lies.

A large library's `PT_DYNAMIC` often sits far from both ends of the file (in torch's and
cuBLAS's libraries, tens or hundreds of MB of symbol tables or data follow it), and a DEFLATE
member's tail is only decoded with every compressed byte up to the end. `abifit.deflate` can
decode a stretch from the middle (`decode_window`), but not tell where in the member its output
lies. The dynamic array says so itself, with the help of the section headers:

- **The anchor.** The first word of the global offset table (`.got.plt`, or `.got` where there
  is no `.got.plt`) holds the address of the dynamic array (`_GLOBAL_OFFSET_TABLE_[0] =
  _DYNAMIC`, as the x86-64 psABI asks; in all 1,176 libraries of a Debian system and a torch
  wheel surveyed, it did). Section names are not read (the name table sits where a tail
  decodes late), so the anchor is either of the first two writable PROGBITS sections after the
  dynamic section (`.got` and `.got.plt`, or `.got` and `.data`). A window that shows the word
  at some index `q` has the dynamic section's start at `q - (anchor.offset - dynamic.offset)`,
  if the guess is right.
- **The check.** The dynamic section there must then be a well-formed dynamic array whose
  `DT_SYMTAB` is the `.dynsym` section's address and whose `DT_STRTAB` is the address of an
  allocated string table, every byte of it certain, ending in `DT_NULL`; and the entry-sized
  slot just before it must not read as a dynamic entry. That last part rules out the guess
  that takes `.got.plt`'s word for `.got`'s: it puts the array's start a few entries late, where
  the slot before is a true entry.

A guess is taken only when exactly one place passes both; anything else leaves the member to
the tail decoder, so a wrong placement needs an anchor word and a valid dynamic array with the
file's own table addresses at the anchor's distance, in output that is not the member's.
"""

from __future__ import annotations

from dataclasses import dataclass

from .deflate import WindowView
from .elf import DT_NULL, DT_STRTAB, DT_SYMTAB, ElfLayout

PT_DYNAMIC = 2
SHT_PROGBITS = 1
SHT_STRTAB = 3
SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHF_ALLOC = 2
SHF_WRITE = 1
ANCHORS = 2  # sections after the dynamic one that may be the GOT
DT_LAST_STANDARD = 0x25  # DT_NEEDED .. DT_SYMTAB_SHNDX and a little room
DT_GNU_LOW = 0x6FFFFD00  # DT_VALRNGLO .. DT_VERNEEDNUM: the GNU and version tags
DT_VERSION_HIGH = 0x6FFFFFFF
MAX_ANCHOR_GAP = 16 << 20  # bytes from the dynamic section to its GOT, at most


@dataclass(frozen=True, slots=True)
class DynamicSite:
    """What a window that holds the dynamic array must show, from the section headers."""

    offset: int  # file offset of the dynamic section
    size: int
    address: int  # its virtual address: the GOT's first word
    anchors: tuple[int, ...]  # file offsets of the sections that may hold the GOT's first word
    symtab: int  # address of .dynsym
    strtabs: frozenset[int]  # addresses of the allocated string tables
    layout: ElfLayout

def dynamic_site(layout: ElfLayout) -> DynamicSite | None:
    """The dynamic section and its anchors, or None when the section headers do not show a
    dynamic section matching `PT_DYNAMIC` with a GOT after it and a `.dynsym`."""
    segment = next((s for s in layout.segments if s.type == PT_DYNAMIC), None)
    dynamic = next((s for s in layout.sections if s.type == SHT_DYNAMIC), None)
    dynsym = next((s for s in layout.sections if s.type == SHT_DYNSYM), None)
    if segment is None or dynamic is None or dynsym is None:
        return None
    if (dynamic.offset, dynamic.addr) != (segment.offset, segment.vaddr):
        return None
    after = sorted((s for s in layout.sections
                    if s.type == SHT_PROGBITS and s.flags & SHF_WRITE and s.flags & SHF_ALLOC
                    and s.size >= layout.word.size
                    and dynamic.offset < s.offset <= dynamic.offset + MAX_ANCHOR_GAP),
                   key=lambda s: s.offset)
    strtabs = frozenset(s.addr for s in layout.sections
                        if s.type == SHT_STRTAB and s.flags & SHF_ALLOC)
    if not after or not strtabs:
        return None
    size = min(dynamic.size, segment.filesz)
    return DynamicSite(dynamic.offset, size, dynamic.addr,
                       tuple(s.offset for s in after[:ANCHORS]), dynsym.addr, strtabs, layout)


def place(site: DynamicSite, view: WindowView) -> int | None:
    """The file offset of `view.data[0]`, if exactly one place in the window shows the anchor
    word at an anchor's distance from a valid, certain dynamic array whose slot before is not
    a dynamic entry; else None."""
    needle = site.layout.word.pack(site.address)
    entry = site.layout.dyn_entry.size
    found: set[int] = set()
    for anchor in site.anchors:
        gap = anchor - site.offset
        q = view.data.find(needle, gap + entry)
        while q >= 0:
            start = q - gap
            end = max(start + site.size, q + len(needle))
            if (view.known(start - entry, end)
                    and _valid(site, view.data[start : start + site.size])
                    and not _entry_like(site, view.data[start - entry : start])):
                found.add(site.offset - start)
            q = view.data.find(needle, q + 1)
    return found.pop() if len(found) == 1 else None


def _entry_like(site: DynamicSite, slot: bytes) -> bool:
    """Whether an entry-sized slot reads as a dynamic entry with a tag other than DT_NULL."""
    tag: int = site.layout.dyn_entry.unpack(slot)[0]
    return 0 < tag <= DT_LAST_STANDARD or DT_GNU_LOW <= tag <= DT_VERSION_HIGH


def _valid(site: DynamicSite, array: bytes) -> bool:
    """Whether bytes read as a dynamic array that ends in DT_NULL and names the file's
    `.dynsym` and an allocated string table."""
    entry = site.layout.dyn_entry
    first: dict[int, int] = {}
    for tag, value in entry.iter_unpack(array[: len(array) - len(array) % entry.size]):
        if tag == DT_NULL:
            return first.get(DT_SYMTAB) == site.symtab and first.get(DT_STRTAB) in site.strtabs
        first.setdefault(tag, value)
    return False
