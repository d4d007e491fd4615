"""The local file system as the loader simulation sees it, with a cache of parsed ELF views.

`LocalObjects` is the `ObjectSource` of `abifit.loader` for this machine: it answers whether a path
is a file, which file a path is (device and inode), and the parsed ELF image of a path. Parsed
images are kept in memory for the run and, when a cache directory is given, on disk, keyed by the
path and checked against its size, mtime, device and inode, so a second run reads nothing twice.

Cache files are written to a temporary name and renamed into place, so a reader never sees a
half-written entry, whatever process is killed when; an entry that cannot be read is ignored.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from .elf import ElfImage, parse_elf
from .sources import FileSource

CACHE_BUCKET = "elf-v1"


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """$ABIFIT_CACHE_DIR, else the platform's user cache directory for abifit."""
    environ = os.environ if env is None else env
    given = environ.get("ABIFIT_CACHE_DIR")
    if given:
        return Path(given)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("abifit", appauthor=False))


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)


class ElfCache:
    """Parsed ELF images on disk, one file per path, valid while the file is unchanged."""

    def __init__(self, root: Path) -> None:
        self.root = root / CACHE_BUCKET

    def _entry(self, path: str) -> Path:
        digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()
        return self.root / digest[:2] / digest

    def get(self, path: str, st: os.stat_result) -> ElfImage | None:
        try:
            with open(self._entry(path), "rb") as f:
                stamp, stored_path, image = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError,
                AttributeError, ImportError, IndexError):
            return None
        if stamp != _stamp(st) or stored_path != path or not isinstance(image, ElfImage):
            return None
        return image

    def put(self, path: str, st: os.stat_result, image: ElfImage) -> None:
        import tempfile

        entry = self._entry(path)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                pickle.dump((_stamp(st), path, image), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, entry)
        except OSError:
            return  # a cache that cannot be written only costs time


class LocalObjects:
    """`ObjectSource` over this machine's files."""

    def __init__(self, cache: ElfCache | None = None) -> None:
        self._cache = cache
        self._images: dict[str, ElfImage] = {}
        self.parsed = 0
        self.from_cache = 0

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
            self.parsed += 1
            if self._cache is not None:
                self._cache.put(path, st, image)
        else:
            self.from_cache += 1
        self._images[key] = image
        return image
