"""abifit's on-disk cache: versioned buckets of small files, written atomically.

    <root>/elf-v1/     parsed views of local ELF files, valid while the file is unchanged
    <root>/views-v1/   parsed views of remote wheel members, by wheel sha256 and member path
    <root>/index-v1/   index pages, with the time they were fetched

Every entry is written to a temporary file in its directory and renamed into place, so a reader
never sees half an entry, however many abifit processes run and whenever one is killed. An entry
that cannot be read is treated as missing.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

BUCKETS = ("elf-v1", "views-v1", "index-v1", "checks-v1", "pycode-v1")

# Where the modules of abifit's values lived before they moved into layer subpackages: entries
# written by an earlier abifit name them there, and stay readable.
MOVED_MODULES = {
    "abifit.sources": "abifit.formats.sources",
    "abifit.elf": "abifit.formats.elf",
    "abifit.demangle": "abifit.formats.demangle",
    "abifit.fatbin": "abifit.formats.fatbin",
    "abifit.wheel": "abifit.formats.wheel",
    "abifit.pins": "abifit.formats.pins",
    "abifit.cache": "abifit.remote.cache",
    "abifit.http": "abifit.remote.http",
    "abifit.index": "abifit.remote.index",
    "abifit.remote": "abifit.remote.wheels",
    "abifit.deflate": "abifit.remote.deflate",
    "abifit.middle": "abifit.remote.middle",
    "abifit.cores": "abifit.remote.cores",
    "abifit.wheelfiles": "abifit.remote.wheelfiles",
    "abifit.ldconfig": "abifit.host.ldconfig",
    "abifit.hostprofile": "abifit.host.profile",
    "abifit.environment": "abifit.host.environment",
    "abifit.localfs": "abifit.host.localfs",
    "abifit.locate": "abifit.host.locate",
    "abifit.cudastack": "abifit.host.cudastack",
    "abifit.verify": "abifit.host.realload",
    "abifit.gpu": "abifit.sim.gpu",
    "abifit.gpucode": "abifit.sim.gpu",
    "abifit.loader": "abifit.sim.loader",
    "abifit.diagnose": "abifit.sim.diagnose",
}
# definitions that moved to another module than their old module's new place
MOVED_NAMES = {
    ("abifit.diagnose", "Finding"): ("abifit.sim.findings", "Finding"),
    ("abifit.loader", "ObjectSource"): ("abifit.formats.sources", "ObjectSource"),
}


def moved(module: str, name: str) -> tuple[str, str]:
    """Where a pickled reference to `module.name` written by an earlier abifit lives now."""
    if (module, name) in MOVED_NAMES:
        return MOVED_NAMES[module, name]
    return MOVED_MODULES.get(module, module), name


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        return super().find_class(*moved(module, name))


def default_cache_dir(env: dict[str, str] | None = None) -> Path:
    """$ABIFIT_CACHE_DIR, else the platform's user cache directory for abifit."""
    environ = os.environ if env is None else env
    given = environ.get("ABIFIT_CACHE_DIR")
    if given:
        return Path(given)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("abifit", appauthor=False))


def key_path(bucket: Path, *parts: str) -> Path:
    """The entry file for a key made of parts, spread over 256 subdirectories."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()
    return bucket / digest[:2] / digest


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename; errors only cost time."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return


def read_pickle(path: Path) -> object | None:
    """The object stored at `path`, or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            value: object = _Unpickler(f).load()
            return value
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            ImportError, IndexError):
        return None


def write_pickle(path: Path, value: object) -> None:
    atomic_write(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True, slots=True)
class BucketInfo:
    name: str
    entries: int
    bytes: int


class Cache:
    """The cache directory and its buckets."""

    def __init__(self, root: Path, *, refresh: bool = False) -> None:
        self.root = root
        self.refresh = refresh

    def bucket(self, name: str) -> Path:
        return self.root / name

    def get_view(self, sha256: str, member: str) -> object | None:
        if self.refresh:
            return None
        return read_pickle(key_path(self.bucket("views-v1"), sha256, member))

    def put_view(self, sha256: str, member: str, view: object) -> None:
        write_pickle(key_path(self.bucket("views-v1"), sha256, member), view)

    def get_code(self, digest: str) -> object | None:
        """What a Python module does when imported, by the digest of its name and text."""
        return read_pickle(key_path(self.bucket("pycode-v1"), digest))

    def put_code(self, digest: str, code: object) -> None:
        write_pickle(key_path(self.bucket("pycode-v1"), digest), code)

    def get_result(self, key: str) -> object | None:
        """A stored result of a computation keyed by the digest of all its inputs."""
        if self.refresh:
            return None
        return read_pickle(key_path(self.bucket("checks-v1"), key))

    def put_result(self, key: str, value: object) -> None:
        write_pickle(key_path(self.bucket("checks-v1"), key), value)

    def get_page(self, url: str, max_age: float) -> tuple[str, bytes] | None:
        """A cached index page younger than `max_age` seconds (any age when max_age < 0)."""
        if self.refresh and max_age >= 0:
            return None
        stored = read_pickle(key_path(self.bucket("index-v1"), url))
        if not isinstance(stored, tuple) or len(stored) != 3:
            return None
        fetched, content_type, body = stored
        if max_age >= 0 and time.time() - float(fetched) > max_age:
            return None
        return str(content_type), bytes(body)

    def put_page(self, url: str, content_type: str, body: bytes) -> None:
        write_pickle(key_path(self.bucket("index-v1"), url), (time.time(), content_type, body))

    def info(self) -> list[BucketInfo]:
        out = []
        for name in BUCKETS:
            entries = size = 0
            for dirpath, _dirs, files in os.walk(self.bucket(name)):
                for f in files:
                    entries += 1
                    try:
                        size += os.stat(os.path.join(dirpath, f)).st_size
                    except OSError:
                        continue
            out.append(BucketInfo(name, entries, size))
        return out

    def clean(self) -> int:
        """Remove every bucket; returns the bytes freed."""
        freed = sum(b.bytes for b in self.info())
        for name in BUCKETS:
            shutil.rmtree(self.bucket(name), ignore_errors=True)
        return freed
