"""The local file system as the loader simulation sees it, with a cache of parsed ELF views.

`LocalObjects` is the `ObjectSource` (`abifit.formats.objects`) of this machine: it answers
whether a path is a file, which file a path is (device and inode), and the parsed ELF image of a
path. Parsed images are kept in memory for the run and, when a cache directory is given, on
disk, keyed by the path and checked against its size, mtime, device and inode, so a second run
reads nothing twice. `FileCache` keeps other values worked out from a file (the verdicts on its
GPU code) by the same rule.

Cache files are written to a temporary name and renamed into place, so a reader never sees a
half-written entry, whatever process is killed when; an entry that cannot be read is ignored.
"""

from __future__ import annotations

import os
import pickle
import stat
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

from abifit import workers
from abifit.errors import FormatError
from abifit.formats.datacodec import conforms
from abifit.formats.elf import ElfImage, FileType, is_elf, parse_elf
from abifit.formats.sources import FileSource
from abifit.host import observe
from abifit.remote.diskcache import ELF_BUCKET, key_path, read_value, write_value


def is_elf_file(path: str) -> bool:
    """Whether a file starts with the ELF magic; False when it cannot be read."""
    try:
        return is_elf(observe.read_bytes(path, 4))
    except OSError:
        return False


# A CPython executable defines its entry points, or imports them from its shared libpython;
# PyPy's executable needs libpypy.
_PYTHON_ENTRY_POINTS = frozenset({"Py_BytesMain", "Py_Main", "Py_Initialize"})


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular one is, by its `st_mode` ("a directory", "a named
    pipe", ...); None for a regular file."""
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(mode)), None)


def read_named_file(path: str, limit: int) -> bytes:
    """The bytes of a file a user named (a host profile, an export to import), at most `limit`
    of them; FormatError naming it for anything else. It is opened without waiting (a named
    pipe without a writer is read as empty) and a device or directory is refused, so neither
    `/dev/zero` nor a pipe that never ends can fill memory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise FormatError(path, f"cannot read it ({e.strerror or e})") from e
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None and kind not in ("a named pipe", "a socket"):
            raise FormatError(path, f"{kind}, not a file")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(16 << 20, limit + 1 - got))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            got += len(chunk)
        raise FormatError(path, f"larger than {limit >> 20:,} MiB: not a file abifit wrote")
    except OSError as e:
        raise FormatError(path, f"cannot read it ({e.strerror or e})") from e
    finally:
        os.close(fd)


def interpreter_problem(path: str, *, scripts: bool) -> str | None:
    """Why `path` is not a Python interpreter, or None: it must be an executable file, and an
    ELF executable that defines or imports Python's entry points (`Py_BytesMain`, `Py_Main`);
    with `scripts`, a script that starts one (`#!`, as pyenv's shims) does too: it will do
    to ask the interpreter its facts, not as the executable of a simulated process."""
    try:
        st = os.stat(path)
    except OSError as e:
        return (e.strerror or str(e)).lower()
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not os.access(path, os.X_OK):
        return "not executable"
    try:
        with FileSource(path) as source:
            head = source.read_at(0, min(4, source.size))
            if head.startswith(b"#!"):
                return None if scripts else "a script that starts one, not its executable"
            if not is_elf(head):
                return "neither an ELF executable nor a script"
            image = parse_elf(source)
    except OSError as e:
        return (e.strerror or str(e)).lower()
    except FormatError as e:
        return f"an unreadable ELF file: {e.problem}"
    if image.file_type != FileType.EXEC and image.interpreter is None:
        return "a shared library, not an executable"
    if _PYTHON_ENTRY_POINTS.intersection(image.symbols.names):
        return None
    if any(n.startswith("libpypy") for n in image.needed):
        return None
    return "an ELF executable that neither defines nor imports Py_BytesMain or Py_Main"


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino)


class ElfCache:
    """Parsed ELF images on disk, one file per path, valid while the file is unchanged."""

    def __init__(self, root: Path) -> None:
        self.base = root  # the cache directory
        self.root = root / ELF_BUCKET

    def get(self, path: str, st: os.stat_result) -> ElfImage | None:
        stored = read_value(key_path(self.root, path), tuple[tuple[int, ...], str, ElfImage])
        if not isinstance(stored, tuple) or len(stored) != 3:
            return None
        stamp, stored_path, image = stored
        if stamp != _stamp(st) or stored_path != path or not isinstance(image, ElfImage):
            return None
        return image

    def put(self, path: str, st: os.stat_result, image: ElfImage) -> None:
        write_value(key_path(self.root, path), (_stamp(st), path, image))

    def holds(self, path: str) -> bool:
        """Whether an entry for `path` exists (it may be stale)."""
        return key_path(self.root, path).exists()


class FileCache:
    """Values worked out from local files, one entry per file and key (what else the value
    depends on), valid while the file is unchanged, as `ElfCache`'s views are. The caller
    takes the file's `stat` before reading it, so a file changed while it is read is a miss the
    next time."""

    def __init__(self, root: Path, bucket: str) -> None:
        self.base = root  # the cache directory
        self.root = root / bucket

    def holds(self, path: str, key: str) -> bool:
        """Whether an entry for `path` and `key` exists (it may be stale)."""
        return key_path(self.root, path, key).exists()

    def get(self, path: str, st: os.stat_result, key: str, expect: object = object,
            ) -> object | None:
        stored = read_value(key_path(self.root, path, key))
        if not isinstance(stored, tuple) or len(stored) != 4:
            return None
        stamp, stored_path, stored_key, value = stored
        if stamp != _stamp(st) or stored_path != path or stored_key != key:
            return None
        return value if conforms(value, expect) else None

    def put(self, path: str, st: os.stat_result, key: str, value: object) -> None:
        write_value(key_path(self.root, path, key), (_stamp(st), path, key, value))


def parse_file(path: str, cache_root: str | None, relocations: bool = True) -> ElfImage:
    """The ELF image of the file at `path`, parsed (without its relocation tables unless
    `relocations`), and stored in the ELF cache under `cache_root` when there is one: what
    `LocalObjects.image` does for a file it has not seen, as a function another process can
    run. Raises OSError and FormatError."""
    return _parse_and_keep(path, os.stat(path),
                           ElfCache(Path(cache_root)) if cache_root is not None else None,
                           relocations)


def _parse_and_keep(path: str, st: os.stat_result, cache: ElfCache | None,
                    relocations: bool = True) -> ElfImage:
    """The ELF image of the file at `path` (whose `stat` was `st`), parsed and kept in
    `cache` (unless its relocations were left out). Its names are not interned
    (`SymbolTable`): a process holds one image per file."""
    with FileSource(path) as source:
        image = parse_elf(source, intern=False, relocations=relocations)
    if cache is not None and relocations:
        cache.put(path, st, image)
    return image


def parse_head(path: str) -> ElfImage:
    """The head of the ELF file at `path` (`parse_elf` with `symbols=False`): what it is and
    what it links to. Raises OSError and FormatError."""
    with FileSource(path) as source:
        return parse_elf(source, symbols=False)


def parse_file_pickled(path: str, cache_root: str | None, head: bool = False,
                       relocations: bool = True) -> bytes:
    """`parse_file` (`parse_head` with `head`; without the relocation tables unless
    `relocations`), its image pickled: the thread that waits for a worker then takes in bytes,
    and the image is rebuilt by the thread that uses it. Rebuilding a large image holds the
    interpreter lock for milliseconds at a time, and done in waiting threads, it made every
    read of the main thread wait that long to go on."""
    image = parse_head(path) if head else parse_file(path, cache_root, relocations)
    return pickle.dumps(image, protocol=pickle.HIGHEST_PROTOCOL)


def _identity(st: os.stat_result) -> str:
    """What a file is known by while it exists: its device and inode (one file, many names)."""
    return f"{st.st_dev}:{st.st_ino}"


class LocalObjects:
    """`ObjectSource` over this machine's files.

    With `relocations=False` the images leave out the relocation tables, which a simulation
    needs only when a symbol is not bound (which undefined symbols relocations reference, in
    what order): it asks for them then (`relocated`). They are a third of the time of parsing
    a large library."""

    def __init__(self, cache: ElfCache | None = None, *, relocations: bool = True) -> None:
        self._cache = cache
        self._relocations = relocations
        self._relocated: dict[str, ElfImage | None] = {}
        self._is_file: dict[str, bool] = {}
        self._images: dict[str, ElfImage] = {}
        self._heads: dict[str, ElfImage] = {}
        self._coming: dict[str, Future[bytes]] = {}
        self._heads_coming: dict[str, Future[bytes]] = {}

    def prefetch(self, paths: Iterable[str], heads: Iterable[str] = ()) -> None:
        """Start parsing the ELF files at `paths` on the other cores (`abifit.workers`),
        the largest first, for `image` to take, and the heads of those at `heads`, for `head`;
        a file known, already coming or in the cache is left to `image`. Nothing happens
        without worker processes."""
        if not workers.parallel():
            return
        wanted = self._wanted(paths, self._coming)
        wanted_heads = self._wanted(heads, self._heads_coming)
        root = str(self._cache.base) if self._cache is not None else None
        for key, (_size, path) in sorted(wanted.items(), key=lambda kv: -kv[1][0]):
            self._coming[key] = workers.submit(parse_file_pickled, path, root, False,
                                             self._relocations)
        for key, (_size, path) in wanted_heads.items():
            if key not in self._coming:
                self._heads_coming[key] = workers.submit(parse_file_pickled, path, None, True)

    def _wanted(self, paths: Iterable[str], coming: dict[str, Future[bytes]],
                ) -> dict[str, tuple[int, str]]:
        """The regular files of `paths` neither known, nor in `coming`, nor in the cache, by
        identity: (size, path)."""
        wanted: dict[str, tuple[int, str]] = {}
        for path in paths:
            try:
                st = observe.stat(path)
            except OSError:
                continue
            key = _identity(st)
            if (stat.S_ISREG(st.st_mode) and key not in self._images and key not in coming
                    and not (self._cache is not None and self._cache.holds(path))):
                wanted[key] = (st.st_size, path)
        return wanted

    def is_file(self, path: str) -> bool:
        """Whether `path` is a regular file, asked of the file system once: a simulation asks
        again for every library searched in the same directories (each hwcaps subdirectory of
        each system directory), and the files do not change while it runs."""
        known = self._is_file.get(path)
        if known is None:
            known = self._is_file[path] = observe.isfile(path)
        return known

    def identity(self, path: str) -> str:
        try:
            st = observe.stat(path)
        except OSError:
            return path
        return _identity(st)

    def image(self, path: str) -> ElfImage:
        st = observe.stat(path)
        key = _identity(st)
        known = self._images.get(key)
        if known is not None:
            return known
        image = self._taken(key)
        if image is None and self._cache is not None:
            image = self._cache.get(path, st)
        if image is None:
            image = _parse_and_keep(path, st, self._cache, self._relocations)
        self._images[key] = image
        return image

    def relocated(self, path: str, image: ElfImage) -> ElfImage | None:
        """The image of `path` with its relocations, when `image` (this source's image of it)
        left them out; None when it did not, or the file has none that can be read."""
        if image.relocated_symbols is not None:
            return None
        key = self.identity(path)
        if key not in self._relocated:
            known = self._images.get(key)
            better = None
            if known is image:  # not another source's image of it, nor an older file's
                better = parse_file(path, None)
                if better.relocated_symbols is None:
                    better = None
                else:
                    self._images[key] = better
            self._relocated[key] = better
        return self._relocated[key]

    def head(self, path: str) -> ElfImage:
        """The head of the file at `path` (`parse_head`): its whole image when that is known
        or was asked for, else its head, parsed ahead (`prefetch`) or here. Never an image to
        bind symbols with."""
        st = observe.stat(path)
        key = _identity(st)
        cached = self._cache is not None and self._cache.holds(path)
        if key in self._images or key in self._coming or (
                cached and key not in self._heads_coming):
            return self.image(path)
        known = self._heads.get(key)
        if known is None:
            known = self._taken(key, self._heads_coming)
            if known is None:
                known = parse_head(path)
            self._heads[key] = known
        return known

    def _taken(self, key: str, where: dict[str, Future[bytes]] | None = None,
               ) -> ElfImage | None:
        """The image parsed ahead for `key` (in `where`, by default the images coming); None
        when none was, no worker has started it yet (it is taken back: parsing it here costs
        less than waiting for it, and than taking in a worker's answer), or its parse failed
        (it is parsed here again, to raise its error in this process)."""
        coming = (self._coming if where is None else where).pop(key, None)
        if coming is None or coming.cancel():
            return None
        try:
            image = pickle.loads(coming.result())  # from abifit's own worker process
        except Exception:  # whatever it was, parsing here says it again
            return None
        return image if isinstance(image, ElfImage) else None
