"""Object sources: the seam of the loader simulation, one level above the byte sources
(`abifit.formats.sources`): paths to parsed ELF images (`abifit.host.localfs.LocalObjects` on
this machine, `VirtualTree` over wheels)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from abifit.formats.elf import ElfImage


class ObjectSource(Protocol):
    """Files as the loader simulation sees them, parsed: the I/O edge (this machine's file
    system, a tree of wheels) gives one to the simulation."""

    def is_file(self, path: str) -> bool: ...

    def identity(self, path: str) -> str:
        """The same value for two paths of one file (a resolved path, or device and inode)."""
        ...

    def image(self, path: str) -> ElfImage:
        """The parsed ELF file; raises FormatError when it is not a readable ELF file."""
        ...


@runtime_checkable
class RelocationSource(Protocol):
    """An `ObjectSource` whose images may leave out the relocation tables, and that reads them
    when asked (`abifit.host.localfs.LocalObjects`)."""

    def relocated(self, path: str, image: ElfImage) -> ElfImage | None:
        """The image of `path` with its relocations, when `image`, this source's image of it,
        left them out; None otherwise."""
        ...
