"""Placing output decoded from the middle of an ELF member: where its dynamic array lies.

A large library's `PT_DYNAMIC` often sits far from both ends of the file (in torch's and
cuBLAS's libraries, tens or hundreds of MB of symbol tables or data follow it), and a DEFLATE
member's tail is only decoded with every compressed byte up to the end. `abifit.deflate` can
decode a stretch from the middle (`decode_window`), but not tell where in the member its output
lies. The dynamic array says so itself, with the help of the section headers:

- **The anchor.** The first word of the global offset table (`.got.plt`, or `.got` where there
  is no `.got.plt`) holds the address of the dynamic array (`_GLOBAL_OFFSET_TABLE_[0] =
  _DYNAMIC`, as the x86-64 psABI asks; in all 1,176 libraries of a Debian system and a torch
  wheel surveyed, it did). A window that shows that word at some index `q` has the dynamic
  section's start at `q - (got.offset - dynamic.offset)`, if the guess is right. Only that one
  section is tried: with two, a `.got.plt` word read as `.got`'s would put a shifted array
  in view, which can pass the check below.
- **The check.** The dynamic section there must then be a well-formed dynamic array whose
  `DT_SYMTAB` is the `.dynsym` section's address and whose `DT_STRTAB` is the address of an
  allocated string table, every byte of it certain, ending in `DT_NULL`.

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
GOT_NAMES = (".got.plt", ".got")
MAX_ANCHOR_GAP = 16 << 20  # bytes from the dynamic section to its GOT, at most


@dataclass(frozen=True, slots=True)
class DynamicSite:
    """What a window that holds the dynamic array must show, from the section headers."""

    offset: int  # file offset of the dynamic section
    size: int
    address: int  # its virtual address: the GOT's first word
    anchor: int  # file offset of the GOT after it
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
    gots = {s.name: s for s in layout.sections if s.name in GOT_NAMES}
    got = gots.get(".got.plt") or gots.get(".got")
    strtabs = frozenset(s.addr for s in layout.sections
                        if s.type == SHT_STRTAB and s.flags & SHF_ALLOC)
    if got is None or got.type != SHT_PROGBITS or got.size < layout.word.size or not strtabs:
        return None
    if not dynamic.offset < got.offset <= dynamic.offset + MAX_ANCHOR_GAP:
        return None
    size = min(dynamic.size, segment.filesz)
    return DynamicSite(dynamic.offset, size, dynamic.addr, got.offset, dynsym.addr, strtabs,
                       layout)


def place(site: DynamicSite, view: WindowView) -> int | None:
    """The file offset of `view.data[0]`, if exactly one place in the window shows the anchor
    word at the GOT's distance from a valid, certain dynamic array; else None."""
    needle = site.layout.word.pack(site.address)
    gap = site.anchor - site.offset
    found: list[int] = []
    q = view.data.find(needle, gap)
    while q >= 0:
        start = q - gap
        end = max(start + site.size, q + len(needle))
        if view.known(start, end) and _valid(site, view.data[start : start + site.size]):
            found.append(site.offset - start)
        q = view.data.find(needle, q + 1)
    return found[0] if len(found) == 1 else None


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
