"""Placing output decoded from the middle of an ELF member: where its dynamic array lies.

A large library's `PT_DYNAMIC` often sits far from both ends of the file (in torch's and
cuBLAS's libraries, tens or hundreds of MB of symbol tables or data follow it), and a DEFLATE
member's tail is only decoded with every compressed byte up to the end. `abifit.formats.deflate` can
decode a stretch from the middle (`decode_window`), but not tell where in the member its output
lies. The dynamic array says so itself; the program headers give its size and address, and
nothing else is needed (section headers sit at the end, where a tail may stay uncertain far
back):

- **The array.** A place `p` in the window holds it if the `p_filesz / entry` entries there are
  all certain, read as known dynamic tags up to a `DT_NULL`, and include `DT_SYMTAB` and
  `DT_STRTAB` with addresses inside the file's loaded segments.
- **Its ends.** The entry-sized slot just before `p` must not read as a dynamic entry: otherwise
  `p` could be a few entries into the true array (a shift that keeps the rest valid, when the
  array ends in several `DT_NULL`s). A place a few entries before the true array fails the first
  check, since the bytes in front of an array are not dynamic entries.
- **The anchor.** The array's `DT_PLTGOT` names the global offset table, whose first word holds
  the array's own address (`_GLOBAL_OFFSET_TABLE_[0] = _DYNAMIC`, as the x86-64 psABI asks; in
  all 1,176 libraries of a Debian system and a torch wheel surveyed, it did). The window must
  show that word exactly `DT_PLTGOT - p_vaddr` bytes after `p`. This ties the place to the
  array's content: a table of (tag, value) pairs elsewhere in the file (torch has one) passes
  the first two checks, but not this one. A library without `DT_PLTGOT` is left to the tail.

A place is taken only when exactly one passes all three; anything else leaves the member to
the tail decoder.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from abifit.formats.deflate import WindowView, decode_window
from abifit.formats.elf import (
    DT_NULL,
    DT_PLTGOT,
    DT_STRTAB,
    DT_SYMTAB,
    PT_DYNAMIC,
    PT_LOAD,
    ElfLayout,
    Segment,
)

DT_LAST_STANDARD = 0x25  # DT_NEEDED .. DT_SYMTAB_SHNDX and a little room
DT_LOOS = 0x6000000D  # DT_LOOS .. DT_HIPROC: the GNU, version and processor tags
DT_HIPROC = 0x7FFFFFFF
MAX_ANCHOR_GAP = 4 << 20  # bytes from the array to its GOT, at most


@dataclass(frozen=True, slots=True)
class DynamicSite:
    """What a window that holds the dynamic array must show, from the program headers."""

    offset: int  # file offset of PT_DYNAMIC
    size: int  # its bytes in the file
    address: int  # its virtual address: the GOT's first word
    loads: tuple[Segment, ...]
    entry: struct.Struct  # a dynamic entry of the file's class and byte order
    word: struct.Struct  # an address

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # a Struct does not pickle: its format does (a worker process places windows)
        return (_site, (self.offset, self.size, self.address, self.loads, self.entry.format,
                        self.word.format))


def _site(offset: int, size: int, address: int, loads: tuple[Segment, ...], entry: str,
          word: str) -> DynamicSite:
    return DynamicSite(offset, size, address, loads, struct.Struct(entry), struct.Struct(word))


def dynamic_site(layout: ElfLayout) -> DynamicSite | None:
    """The dynamic array's place and size, or None without a PT_DYNAMIC of whole entries."""
    segment = next((s for s in layout.segments if s.type == PT_DYNAMIC), None)
    entry = layout.dyn_entry
    if segment is None or segment.filesz < 2 * entry.size:
        return None
    size = segment.filesz - segment.filesz % entry.size
    loads = tuple(s for s in layout.segments if s.type == PT_LOAD)
    return DynamicSite(segment.offset, size, segment.vaddr, loads, entry, layout.word)


def place(site: DynamicSite, view: WindowView) -> int | None:
    """The file offset of `view.data[0]`, if exactly one place in the window passes the checks
    of the module docstring; else None. Candidates come from `DT_PLTGOT` entries whose value
    lies just after the array's address, at each entry's distance before them."""
    entry = site.entry.size
    word = site.word
    tag = word.pack(DT_PLTGOT)
    needle = word.pack(site.address)
    found: set[int] = set()
    t = view.data.find(tag)
    while 0 <= t <= len(view.data) - entry:
        gap = word.unpack_from(view.data, t + word.size)[0] - site.address
        if 0 < gap <= MAX_ANCHOR_GAP:
            for start in range(t, max(entry, t - site.size + entry) - 1, -entry):
                q = start + gap  # a cheap look for the anchor first; _holds_array decides
                if view.data[q : q + word.size] == needle and _holds_array(site, view, start):
                    found.add(start)
        t = view.data.find(tag, t + 1)
    if len(found) != 1:
        return None
    return site.offset - found.pop()


def placed_array(site: DynamicSite, data: bytes, max_output: int,
                 name: str = "<member>") -> bytes | None:
    """The dynamic array's bytes, from a window of compressed bytes (`decode_window`) placed
    by `place`; None when the window decodes but is not placed. Raises FormatError as
    `decode_window` does. A worker process's call: it sends back the array alone, not the
    window's output (tens of MB, and the other decode that tells its uncertain bytes)."""
    view = decode_window(data, max_output, name)
    base = place(site, view)
    if base is None:
        return None
    lo = site.offset - base
    return view.data[lo : lo + site.size]


def _holds_array(site: DynamicSite, view: WindowView, start: int) -> bool:
    entry = site.entry
    end = start + site.size
    if start < entry.size or end > len(view.data):
        return False
    if not _known_tag(entry.unpack_from(view.data, start)[0]):  # most candidates stop here
        return False
    if _entry_like(site, view.data[start - entry.size : start]):
        return False
    pltgot = _valid(site, view.data[start:end])
    if pltgot is None or not view.known(start - entry.size, end):
        return False
    needle = site.word.pack(site.address)
    q = start + pltgot - site.address
    return (0 <= q <= len(view.data) - len(needle) and view.data[q : q + len(needle)] == needle
            and view.known(q, q + len(needle)))


def _known_tag(tag: int) -> bool:
    """Whether a tag is one of the standard ones or in the OS- or processor-specific ranges."""
    return 0 < tag <= DT_LAST_STANDARD or DT_LOOS <= tag <= DT_HIPROC


def _entry_like(site: DynamicSite, slot: bytes) -> bool:
    """Whether an entry-sized slot reads as a dynamic entry with a tag other than DT_NULL."""
    tag: int = site.entry.unpack(slot)[0]
    return _known_tag(tag)


def _mapped(site: DynamicSite, address: int) -> bool:
    return any(s.vaddr <= address < s.vaddr + max(s.filesz, 1) for s in site.loads)


def _valid(site: DynamicSite, array: bytes) -> int | None:
    """The DT_PLTGOT address of bytes that read as a dynamic array of known tags ending in
    DT_NULL, whose DT_SYMTAB and DT_STRTAB lie in the loaded segments and whose DT_PLTGOT (the
    GOT, which must hold the array's address) lies after it; else None."""
    first: dict[int, int] = {}
    for tag, value in site.entry.iter_unpack(array):
        if tag == DT_NULL:
            symtab, strtab = first.get(DT_SYMTAB), first.get(DT_STRTAB)
            pltgot = first.get(DT_PLTGOT)
            if (symtab is None or strtab is None or pltgot is None or not _mapped(site, symtab)
                    or not _mapped(site, strtab)):
                return None
            return pltgot if 0 < pltgot - site.address <= MAX_ANCHOR_GAP else None
        if not _known_tag(tag):
            return None
        first.setdefault(tag, value)
    return None
