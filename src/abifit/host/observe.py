"""The file-system calls of the host layer, recorded while a run asks for it (I/O).

A result worked out from files may be kept for the next run only while nothing it looked at has
changed. So the host code that `doctor` runs asks the file system through this module, and
while `recording()` is active every answer is noted as an observation: the `stat` (or `lstat`)
of the path as a stamp (type, device, inode, size, mtime and ctime), or the error number when
there was none. Listing a directory notes the directory's stamp: adding, removing or renaming
an entry changes its mtime and ctime. Reading a file notes the `fstat` of what was opened.

`unchanged()` asks every noted path again and says whether each answer is the same. Together
with the rule `Recorder.settled()` (nothing noted changed within the last second before the run
began, so a change in the same clock tick as an observation cannot go unseen) an unchanged set
of observations means the run would see the same files and read the same bytes.

Outside `recording()` the functions are the os calls they wrap, with nothing noted.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat as stat_module
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import msgpack

STAT, LSTAT, READLINK = "stat", "lstat", "readlink"
Stamp = tuple[int, int, int, int, int, int]  # mode, device, inode, size, mtime_ns, ctime_ns
Seen = Stamp | str | int  # a stamp, a link's target, or the errno of the failed call
_KINDS = frozenset((STAT, LSTAT, READLINK))
SETTLE_NS = 1_000_000_000  # a change this close before the run began may share a clock tick


@dataclass(frozen=True, slots=True)
class Observations:
    """What one run observed, packed as MessagePack columns (kinds, paths, answers): tens of
    thousands of them are written and read back at once."""

    packed: bytes

    @classmethod
    def of(cls, seen: dict[tuple[str, str], Seen]) -> Observations:
        """The observations of `seen`, but the `stat` of a path whose `lstat` answered the same
        and is not a link: while the `lstat` answers so, the `stat` does too (a path that is not
        a link stats as itself), so asking it again would tell nothing."""
        kept = {key: answer for key, answer in seen.items()
                if key[0] != STAT or not _implied(answer, seen.get((LSTAT, key[1])))}
        columns = ([kind for kind, _ in kept], [path for _, path in kept], list(kept.values()))
        return cls(msgpack.packb(columns, use_bin_type=True, unicode_errors="surrogatepass"))

    def columns(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Seen, ...]]:
        """The kinds, paths and answers of the observations, as three columns of equal length
        (empty for bytes that are not such)."""
        try:
            kinds, paths, seen = msgpack.unpackb(self.packed, use_list=False, raw=False,
                                                 unicode_errors="surrogatepass")
        except (ValueError, TypeError, msgpack.UnpackException):
            return (), (), ()
        if not (isinstance(kinds, tuple) and isinstance(paths, tuple) and isinstance(seen, tuple)
                and len(kinds) == len(paths) == len(seen) and set(kinds) <= _KINDS
                and all(isinstance(path, str) for path in paths)):
            return (), (), ()
        return kinds, paths, seen


class Recorder:
    """The observations of one run, the first answer for each (kind, path)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], Seen] = {}
        self.started_ns = time.time_ns()

    def note(self, kind: str, path: str, seen: Seen) -> None:
        self.seen.setdefault((kind, path), seen)

    def observations(self) -> Observations:
        return Observations.of(self.seen)

    def settled(self) -> bool:
        """Whether nothing observed changed within SETTLE_NS before the run began (or after
        it): a change in the same clock tick as an observation would leave its stamp as it
        was."""
        limit = self.started_ns - SETTLE_NS
        return all(not isinstance(seen, tuple) or (seen[4] < limit and seen[5] < limit)
                   for seen in self.seen.values())


_recorders: list[Recorder] = []
os.register_at_fork(after_in_child=_recorders.clear)  # a forked worker's reads are its own


@contextmanager
def recording() -> Iterator[Recorder]:
    """Note every answer of this module's calls made inside the block."""
    recorder = Recorder()
    _recorders.append(recorder)
    try:
        yield recorder
    finally:
        _recorders.remove(recorder)


def _note(kind: str, path: str, seen: Seen) -> None:
    for recorder in _recorders:
        recorder.note(kind, path, seen)


def note_all(seen: Iterable[tuple[tuple[str, str], Seen]]) -> None:
    """Note observations made elsewhere for this run (a worker process's reads, its
    `Recorder.seen`)."""
    if _recorders:
        for (kind, path), answer in seen:
            _note(kind, path, answer)


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _implied(answer: Seen, lstat_answer: Seen | None) -> bool:
    """Whether a `stat` answer is the `lstat` answer of a path that is not a link."""
    return (answer == lstat_answer and isinstance(answer, tuple)
            and not stat_module.S_ISLNK(answer[0]))


def unchanged(observations: Observations) -> bool:
    """Whether every path answers as it did (nothing readable: not). A warm `doctor` asks tens
    of thousands of paths, so the loop makes no call per path beyond the system call's."""
    kinds, paths, seen = observations.columns()
    stat, lstat, readlink = os.stat, os.lstat, os.readlink
    for kind, path, answer in zip(kinds, paths, seen, strict=True):
        try:
            if kind == READLINK:
                if readlink(path) != answer:
                    return False
                continue
            st = stat(path) if kind == STAT else lstat(path)
        except OSError as e:
            if (e.errno or -1) != answer:
                return False
            continue
        except ValueError:  # a NUL in the name: noted as ENOENT (`_stat`)
            if answer != errno.ENOENT:
                return False
            continue
        if (st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                st.st_ctime_ns) != answer:
            return False
    return len(paths) > 0


# ---------------------------------------------------------------------------------------------
# The calls


def stat(path: str) -> os.stat_result:
    """`os.stat`, noted."""
    return _stat(STAT, path)


def lstat(path: str) -> os.stat_result:
    """`os.lstat`, noted."""
    return _stat(LSTAT, path)


def _stat(kind: str, path: str) -> os.stat_result:
    path = os.fspath(path)
    try:
        if "\x00" in path:  # a name no file can have (os.stat raises ValueError)
            raise FileNotFoundError(errno.ENOENT, "a NUL byte in the name", path)
        st = os.stat(path) if kind == STAT else os.lstat(path)
    except OSError as e:
        if _recorders:
            _note(kind, path, e.errno or -1)
        raise
    if _recorders:
        _note(kind, path, stamp_of(st))
    return st


def _mode(kind: str, path: str) -> int | None:
    try:
        return _stat(kind, path).st_mode
    except (OSError, ValueError):
        return None


def isfile(path: str) -> bool:
    mode = _mode(STAT, path)
    return mode is not None and stat_module.S_ISREG(mode)


def isdir(path: str) -> bool:
    mode = _mode(STAT, path)
    return mode is not None and stat_module.S_ISDIR(mode)


def exists(path: str) -> bool:
    return _mode(STAT, path) is not None


def lexists(path: str) -> bool:
    return _mode(LSTAT, path) is not None


def islink(path: str) -> bool:
    mode = _mode(LSTAT, path)
    return mode is not None and stat_module.S_ISLNK(mode)


def realpath(path: str) -> str:
    """`os.path.realpath(path)` (not strict); while recording, resolved here one component at
    a time so that what each component visited links to (or that it is no link) is noted, the
    components of the links followed included: nothing else of them decides the answer."""
    if not _recorders:
        return os.path.realpath(path)
    start = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    resolved, _complete = _resolve("", start, {})
    return os.path.abspath(resolved)


def _resolve(base: str, rest: str, links: dict[str, str | None]) -> tuple[str, bool]:
    """`rest` resolved from the resolved directory `base`; False when a loop of links stopped
    it (the rest is then joined as it is). `links` maps each link met to where it leads (None
    while it is being resolved)."""
    if rest.startswith("/"):
        base, rest = "/", rest.lstrip("/")
    while rest:
        name, _, rest = rest.partition("/")
        if name in ("", "."):
            continue
        if name == "..":
            base = os.path.dirname(base) if base not in ("", "/") else base or ".."
            continue
        path = os.path.join(base, name)
        target = _readlink(path)
        if target is None:
            base = path
            continue
        if path in links:
            known = links[path]
            if known is None:
                return os.path.join(path, rest), False
            base = known
            continue
        links[path] = None
        base, complete = _resolve(base, target, links)
        if not complete:
            return os.path.join(base, rest), False
        links[path] = base
    return base, True


def _readlink(path: str) -> str | None:
    """Where the link `path` leads; None when it is no link (or is not there), noted."""
    try:
        target = os.readlink(path)
    except OSError as e:
        _note(READLINK, path, e.errno or -1)
        return None
    _note(READLINK, path, target)
    return target


def scandir(path: str) -> list[os.DirEntry[str]]:
    """The entries of a directory, in the order the file system gives them; raises OSError.
    The directory's stamp is noted, and the `stat` of each symbolic link among the entries
    (`DirEntry.is_file()` and `is_dir()` follow it)."""
    path = os.fspath(path)
    before = _stat(STAT, path) if _recorders else None
    with os.scandir(path) as listing:
        entries = list(listing)
    if before is not None:
        for entry in entries:
            if entry.is_symlink():
                _mode(STAT, entry.path)
    return entries


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)` (top down, errors ignored, links to directories listed but not
    entered), each directory noted as `scandir` notes it. The caller may prune the list of
    subdirectories in place, as with `os.walk`."""
    try:
        entries = scandir(top)
    except OSError:
        return
    dirs: list[str] = []
    files: list[str] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        (dirs if is_dir else files).append(entry.name)
    yield top, dirs, files
    for name in dirs:
        path = os.path.join(top, name)
        if not islink(path):
            yield from walk(path)


def read_bytes(path: str, size: int = -1) -> bytes:
    """The bytes of a file, at most `size` of them when it is not negative; raises OSError.
    Notes the `fstat` of the opened file (the `stat` of the path when it cannot be opened: it
    changes with whatever would let it open). Plain system calls: doctor reads thousands of
    small files, and a Python file object costs more than reading one."""
    try:  # without waiting: a FIFO's open would wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        if _recorders:
            _mode(STAT, path)
        raise
    try:
        st = os.fstat(fd)
        if _recorders:
            _note(STAT, os.fspath(path), stamp_of(st))
        if stat_module.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if stat_module.S_ISFIFO(st.st_mode) or stat_module.S_ISSOCK(st.st_mode):
            raise OSError(errno.EINVAL, "a FIFO or socket, not a file: not read", path)
        os.set_blocking(fd, True)
        # ask for the size the file has, one byte more (a file that grew is read on): asking
        # for `size` would allocate that much for every small file, and give it back
        regular = stat_module.S_ISREG(st.st_mode)
        chunks = []
        left = size
        while left != 0:
            want = max(st.st_size + 1, 1 << 16)
            want = want if left < 0 else min(want, left)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            left = left if left < 0 else left - len(chunk)
            if regular and len(chunk) < want:  # a short read of a regular file: its end
                break
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str) -> str:
    """A UTF-8 text file as `open(path, encoding="utf-8", errors="replace").read()` gives it
    (undecodable bytes replaced, line ends made "\\n"); raises OSError."""
    text = read_bytes(path).decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def glob(pattern: str, *, hidden: bool) -> list[str]:
    """The paths matching an absolute `pattern` (`*`, `?`, `[...]` within a component; `**` for a
    directory and every directory below it), every directory read noted.

    `hidden=False` follows `glob.glob`: a wildcard does not match a name starting with a dot
    unless its own component does, and a literal last component need only exist as a link.
    `hidden=True` follows `pathlib.Path.glob`: wildcards match every name, and a literal last
    component must lead to something. Matches come in the file system's order, as theirs do.
    """
    if not pattern.startswith("/"):
        raise ValueError(f"not an absolute pattern: {pattern!r}")
    parts = pattern.split("/")
    first = next((i for i, p in enumerate(parts) if _magic(p)), len(parts))
    if first == len(parts):
        found = exists(pattern) if hidden else lexists(pattern)
        return [pattern] if found else []
    head = "/".join(parts[:first]) or "/"
    paths = [head] if isdir(head) else []
    rest = parts[first:]
    for n, part in enumerate(rest):
        last = n == len(rest) - 1
        paths = [match for path in paths for match in _expand(path, part, last, hidden)]
    return paths


def _magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def _expand(directory: str, part: str, last: bool, hidden: bool) -> list[str]:
    """The paths below `directory` that match one component of a pattern."""
    if part == "**":
        return [d for d, _subdirs, _files in walk(directory)]
    if not _magic(part):
        path = os.path.join(directory, part)
        if not last:
            return [path] if isdir(path) else []
        return [path] if (exists(path) if hidden else lexists(path)) else []
    try:
        entries = scandir(directory)
    except OSError:
        return []
    out = []
    for entry in entries:
        if not hidden and entry.name.startswith(".") and not part.startswith("."):
            continue
        if not fnmatch.fnmatchcase(entry.name, part):
            continue
        if not last:
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
        out.append(os.path.join(directory, entry.name))
    return out
