"""abifit's on-disk cache: versioned buckets of small files, written atomically.

    <root>/elf-v2/     parsed views of local ELF files, valid while the file is unchanged
                       (`cuda`'s; `doctor` parses local files again, which costs less)
    <root>/views-v2/   parsed views of remote wheel members, by wheel sha256 and member path
    <root>/index-v2/   index pages, with the time they were fetched
    <root>/checks-v2/  results of checks, by the digest of every input
    <root>/pycode-v2/  what Python modules do when imported, by the digest of their text
    <root>/digests-v2/ sha256 of local wheels (no index gave one), valid while the file is
                       unchanged; the wheels themselves are read in place, never copied here
    <root>/gpu-v1/     verdicts on the GPU code of local files for the GPUs checked, valid
                       while the file is unchanged

An entry is data only, never code: the value in `abifit.formats.datacodec`'s format (MessagePack
that decodes to nothing but plain values and abifit's dataclasses, enums and errors) after a
header of 26 bytes: `ENTRY_MAGIC`, `ENTRY_FORMAT` and the first 16 bytes of the payload's
sha256. Whoever can write the cache directory can make abifit read wrong entries, not run code.
An entry whose magic, format or checksum is not this one's, whose value does not decode or does
not fit its types, or is not what the reader expects (`expect`, a type hint), is a miss: the
value is computed again. The buckets of abifit releases that
pickled their entries (`*-v1`) are never opened.

Every entry is written to a temporary file in its directory and renamed into place, so a reader
never sees half an entry, however many abifit processes run and whenever one is killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from abifit.errors import CacheError, FormatError
from abifit.formats.datacodec import conforms, decode, frame, read_frame

ELF_BUCKET = "elf-v2"
VIEWS_BUCKET = "views-v2"
INDEX_BUCKET = "index-v2"
_PAGE = tuple[float, str, bytes, str, str]  # fetched, content type, body, ETag, Last-Modified
CHECKS_BUCKET = "checks-v2"
PYCODE_BUCKET = "pycode-v2"
DIGESTS_BUCKET = "digests-v2"
GPU_BUCKET = "gpu-v1"
RUNS_BUCKET = "runs-v1"
BUCKETS = (ELF_BUCKET, VIEWS_BUCKET, INDEX_BUCKET, CHECKS_BUCKET, PYCODE_BUCKET, DIGESTS_BUCKET,
           GPU_BUCKET, RUNS_BUCKET)
# the symbol store (`abifit.remote.store`): one SQLite database at the root, with the files
# SQLite keeps beside it (`-wal`, `-shm`); counted and cleaned with the buckets
SYMBOLS_STORE = "symbols-v2"

ENTRY_MAGIC = b"abifit-c"
ENTRY_FORMAT = 1


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


def read_value(path: Path, expect: object = object) -> object | None:
    """The value stored at `path`, or None when it is missing, damaged, of another format, not
    data that decodes, or not of the type hint `expect` (see the module's docstring)."""
    try:
        data = _read_regular(path)
        if data is None:
            return None
        value = decode(read_frame(data, ENTRY_MAGIC, ENTRY_FORMAT, str(path)), str(path))
    except (OSError, FormatError):
        return None
    return value if conforms(value, expect) else None


def _read_regular(path: Path) -> bytes | None:
    """The bytes of the regular file at `path`; None for anything else planted there (a FIFO,
    whose open would wait for a writer, a device, a directory), which is a miss. The file is
    opened without waiting and checked before it is read."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def write_value(path: Path, value: object) -> None:
    """Store `value` at `path` (TypeError, a bug, for a value that is not data)."""
    atomic_write(path, frame(value, ENTRY_MAGIC, ENTRY_FORMAT))


@dataclass(frozen=True, slots=True)
class BucketInfo:
    name: str
    entries: int
    bytes: int


class RootState(Enum):
    """What is at the cache's root path."""

    DIRECTORY = "directory"
    MISSING = "missing"
    NOT_A_DIRECTORY = "not-a-directory"


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """What `abifit cache info` shows: the root, what is there, and each bucket's files."""

    root: Path
    state: RootState
    buckets: tuple[BucketInfo, ...]

    @property
    def entries(self) -> int:
        return sum(b.entries for b in self.buckets)

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.buckets)


class Cache:
    """The cache directory and its buckets."""

    def __init__(self, root: Path, *, refresh: bool = False) -> None:
        self.root = root
        self.refresh = refresh

    def bucket(self, name: str) -> Path:
        return self.root / name

    def get_view(self, sha256: str, member: str, expect: object = object) -> object | None:
        if self.refresh:
            return None
        return read_value(key_path(self.bucket(VIEWS_BUCKET), sha256, member), expect)

    def has_view(self, sha256: str, member: str) -> bool:
        """Whether an entry is stored for this view (whether it decodes is not checked)."""
        return not self.refresh and key_path(self.bucket(VIEWS_BUCKET), sha256, member).is_file()

    def put_view(self, sha256: str, member: str, view: object) -> None:
        write_value(key_path(self.bucket(VIEWS_BUCKET), sha256, member), view)

    def get_digest(self, path: str, stamp: str) -> str | None:
        """The sha256 of a local file, stored while its `stamp` (size, mtime, inode) held."""
        if self.refresh:
            return None
        value = read_value(key_path(self.bucket(DIGESTS_BUCKET), path, stamp), str)
        return value if isinstance(value, str) else None

    def put_digest(self, path: str, stamp: str, digest: str) -> None:
        write_value(key_path(self.bucket(DIGESTS_BUCKET), path, stamp), digest)

    def get_code(self, digest: str, expect: object = object) -> object | None:
        """What a Python module does when imported, by the digest of its name and text."""
        return read_value(key_path(self.bucket(PYCODE_BUCKET), digest), expect)

    def put_code(self, digest: str, code: object) -> None:
        write_value(key_path(self.bucket(PYCODE_BUCKET), digest), code)

    def holds_code(self, digest: str) -> bool:
        """Whether an entry for the module of `digest` exists (it may not read)."""
        return key_path(self.bucket(PYCODE_BUCKET), digest).exists()

    def get_result(self, key: str, expect: object = object) -> object | None:
        """A stored result of a computation keyed by the digest of all its inputs, when it is of
        the type hint `expect`."""
        if self.refresh:
            return None
        return read_value(key_path(self.bucket(CHECKS_BUCKET), key), expect)

    def put_result(self, key: str, value: object) -> None:
        write_value(key_path(self.bucket(CHECKS_BUCKET), key), value)

    def page_entry(self, url: str) -> tuple[float, str, bytes, str, str] | None:
        """A cached index page of any age, `refresh` or not: (when it was fetched, content
        type, body, ETag, Last-Modified), the last two "" when the server gave none."""
        stored = read_value(key_path(self.bucket(INDEX_BUCKET), url), _PAGE)
        if not isinstance(stored, tuple):
            return None
        fetched, content_type, body, etag, modified = stored
        return float(fetched), str(content_type), bytes(body), str(etag), str(modified)

    def put_page(self, url: str, content_type: str, body: bytes, etag: str = "",
                 modified: str = "") -> None:
        """Store an index page, fetched now, with its ETag and Last-Modified (for revalidation)."""
        write_value(key_path(self.bucket(INDEX_BUCKET), url),
                    (time.time(), content_type, body, etag, modified))

    def info(self) -> CacheInfo:
        """The entries and bytes of each bucket (none when the root is not a directory)."""
        state = (RootState.DIRECTORY if self.root.is_dir()
                 else RootState.NOT_A_DIRECTORY if self.root.exists() else RootState.MISSING)
        out = []
        for name in BUCKETS:
            found = list(self._entries(name))
            out.append(BucketInfo(name, len(found),
                                  sum(st.st_size for _path, st in found if st is not None)))
        store = self._store_files()
        out.append(BucketInfo(SYMBOLS_STORE, len(store), sum(size for _, size in store)))
        return CacheInfo(self.root, state, tuple(out))

    def _entries(self, bucket: str) -> Iterator[tuple[str, os.stat_result | None]]:
        """The files of a bucket, each with its `stat` (None when it cannot be had)."""
        for dirpath, _dirs, files in os.walk(self.bucket(bucket)):
            for f in files:
                path = os.path.join(dirpath, f)
                try:
                    yield path, os.stat(path)
                except OSError:
                    yield path, None

    def _store_files(self) -> list[tuple[Path, int]]:
        """The symbol store's files (the database and SQLite's files beside it), with sizes."""
        out = []
        for path in self.root.glob(f"{SYMBOLS_STORE}.sqlite*") if self.root.is_dir() else ():
            with contextlib.suppress(OSError):
                out.append((path, path.stat().st_size))
        return out

    def prune(self, max_bytes: int | None = None, older_than_s: float | None = None,
              now: float | None = None) -> tuple[int, int]:
        """Remove the entries last written more than `older_than_s` ago, then the oldest
        others until the buckets hold at most `max_bytes`; the symbol store is kept (`clean`
        removes it). Returns (entries removed, bytes freed); an entry that cannot be removed
        is left, and counted as kept."""
        entries = sorted((st.st_mtime, st.st_size, path) for name in BUCKETS
                         for path, st in self._entries(name) if st is not None)
        total = sum(size for _, size, _ in entries)
        cutoff = None if older_than_s is None else (now or time.time()) - older_than_s
        removed = freed = 0
        for mtime, size, path in entries:  # oldest first: once one stays, all later stay
            old = cutoff is not None and mtime < cutoff
            large = max_bytes is not None and total > max_bytes
            if not (old or large):
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            removed += 1
            freed += size
            total -= size
        return removed, freed

    def clean(self) -> int:
        """Remove every bucket; returns the bytes freed. Raises `CacheError` when something
        could not be removed (a read-only cache): what was freed is then said with it."""
        before = self.info().bytes
        failed: list[str] = []

        def note(_function: object, path: str, _error: object) -> None:
            failed.append(path)

        for name in BUCKETS:
            if self.bucket(name).exists():
                if sys.version_info >= (3, 12):
                    shutil.rmtree(self.bucket(name), onexc=note)
                else:
                    shutil.rmtree(self.bucket(name), onerror=note)
        for path, _size in self._store_files():
            try:
                path.unlink()
            except OSError:
                failed.append(str(path))
        freed = before - self.info().bytes
        if failed:
            raise CacheError(f"{self.root}: could not remove {len(failed)} cache file(s) or "
                             f"directories (first: {failed[0]}); {freed:,} bytes removed")
        return freed
