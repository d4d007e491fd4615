"""The local file system as the loader simulation sees it, with a cache of parsed ELF views.

`LocalObjects` is the `ObjectSource` (`abifit.formats.sources`) of this machine: it answers
whether a path is a file, which file a path is (device and inode), and the parsed ELF image of a
path. Parsed images are kept in memory for the run and, when a cache directory is given, on
disk, keyed by the path and checked against its size, mtime, device and inode, so a second run
reads nothing twice.

Cache files are written to a temporary name and renamed into place, so a reader never sees a
half-written entry, whatever process is killed when; an entry that cannot be read is ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

from abifit.formats.elf import ElfImage, is_elf, parse_elf
from abifit.formats.sources import FileSource
from abifit.remote.cache import key_path, read_pickle, write_pickle

CACHE_BUCKET = "elf-v1"


def is_elf_file(path: str) -> bool:
    """Whether a file starts with the ELF magic; False when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return is_elf(f.read(4))
    except OSError:
        return False


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)


class ElfCache:
    """Parsed ELF images on disk, one file per path, valid while the file is unchanged."""

    def __init__(self, root: Path) -> None:
        self.root = root / CACHE_BUCKET

    def get(self, path: str, st: os.stat_result) -> ElfImage | None:
        stored = read_pickle(key_path(self.root, path))
        if not isinstance(stored, tuple) or len(stored) != 3:
            return None
        stamp, stored_path, image = stored
        if stamp != _stamp(st) or stored_path != path or not isinstance(image, ElfImage):
            return None
        return image

    def put(self, path: str, st: os.stat_result, image: ElfImage) -> None:
        write_pickle(key_path(self.root, path), (_stamp(st), path, image))


class LocalObjects:
    """`ObjectSource` over this machine's files."""

    def __init__(self, cache: ElfCache | None = None) -> None:
        self._cache = cache
        self._images: dict[str, ElfImage] = {}

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def identity(self, path: str) -> str:
        try:
            st = os.stat(path)
        except OSError:
            return path
        return f"{st.st_dev}:{st.st_ino}"

    def image(self, path: str) -> ElfImage:
        st = os.stat(path)
        key = f"{st.st_dev}:{st.st_ino}"
        known = self._images.get(key)
        if known is not None:
            return known
        image = self._cache.get(path, st) if self._cache else None
        if image is None:
            with FileSource(path) as source:
                image = parse_elf(source)
            if self._cache is not None:
                self._cache.put(path, st, image)
        self._images[key] = image
        return image
