"""Whole results kept between runs while nothing they were worked out from has changed (I/O).

A run's result depends on what it was given (its key: the command's arguments and the facts a
run asks for live, such as the interpreter's answers and the host's loader), on the environment
variables it read, and on the files it looked at. The last two are recorded while it works
(`observe.recording()`, `ReadEnviron`), and stored with the result. A later run with the same
key takes the result only when every variable read has the same value and every path observed
answers as it did (`observe.unchanged`), and a result is stored only when nothing it observed
changed in the second before the run began (`Recorder.settled`).

The key also holds abifit's release and a fingerprint of its own files, so a changed abifit never
takes a result an older one worked out.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from abifit.errors import FormatError
from abifit.formats.datacodec import conforms, decode, encode
from abifit.host import observe
from abifit.remote.diskcache import RUNS_BUCKET, key_path, read_value, write_value

_PACKAGE = Path(__file__).resolve().parent.parent


class ReadEnviron(Mapping[str, str]):
    """An environment that notes which variables were read; going through all of them (as
    handing them to a subprocess does) notes all."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.read: dict[str, str | None] = {}
        self.all_read = False

    def __getitem__(self, name: str) -> str:
        self.read[name] = self._environ.get(name)
        return self._environ[name]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.read[name] = self._environ.get(name)
        return name in self._environ

    def __iter__(self) -> Iterator[str]:
        self.all_read = True
        return iter(self._environ)

    def __len__(self) -> int:
        self.all_read = True
        return len(self._environ)

    def unnoted(self, names: Iterable[str]) -> dict[str, str]:
        """The variables of `names` that are set, with their values, not noted as read."""
        return {name: self._environ[name] for name in names if name in self._environ}

    def seen(self) -> tuple[tuple[str, str | None], ...]:
        """Every variable read with its value (all of them when all were gone through)."""
        read = dict(self._environ) if self.all_read else self.read
        return tuple(sorted(read.items()))


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A result, with what it was worked out from beyond its key, and what the command printed
    of it: the result is kept encoded, so that reading the entry for the printed form needs
    none of the result's classes (a warm `abifit doctor` imports no simulation)."""

    key: str
    environ: tuple[tuple[str, str | None], ...]
    observations: observe.Observations
    result: bytes  # the result, encoded by the data codec
    printed: object = None  # the command's own value: what it prints of the result


# what sets a key noted last (`RunCache.remember`) apart from the results, in an entry's name
LATEST = "-latest"


@dataclass(frozen=True, slots=True)
class Guess:
    """A key noted before, and its entry while everything it was worked out from is
    unchanged (None: not, or no entry)."""

    key: str
    stored: StoredRun | None


def fingerprint() -> str:
    """abifit's own code and data files: their names, sizes and mtimes."""
    rows = []
    for directory, subdirs, files in os.walk(_PACKAGE):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                st = os.stat(os.path.join(directory, name))
                rows.append(f"{os.path.relpath(directory, _PACKAGE)}/{name}:{st.st_size}:"
                            f"{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def run_key(*parts: object) -> str:
    """The digest of what a run was given (values the data codec can write)."""
    from abifit.version import __version__

    return hashlib.sha256(encode((__version__, fingerprint(), parts))).hexdigest()


class RunCache:
    """Whole results of one command, one entry per key, under the cache directory."""

    def __init__(self, root: Path, command: str) -> None:
        self.root = root / RUNS_BUCKET
        self.command = command

    def get(self, key: str, environ: Mapping[str, str], expect: object) -> object | None:
        """The stored result for `key` while everything it was worked out from is unchanged."""
        stored = self._valid(key, environ)
        if stored is None:
            return None
        try:
            result = decode(stored.result, str(self._path(key)))
        except FormatError:
            return None
        return result if conforms(result, expect) else None

    def printed(self, key: str, environ: Mapping[str, str], expect: object,
                guessed: Guess | None = None) -> object | None:
        """What the command printed of the stored result for `key`, on the same terms as
        `get`, without decoding the result; a `guess` of the same key is taken as the entry's
        check (`guess`)."""
        stored = guessed.stored if guessed is not None and guessed.key == key else \
            self._valid(key, environ)
        if stored is None or not conforms(stored.printed, expect):
            return None
        return stored.printed

    def remember(self, name: str, key: str) -> None:
        """Note `key` as the last result kept under `name` (what a later run knows before its
        key: see `guess`)."""
        write_value(key_path(self.root, self.command + LATEST, name), key)

    def guess(self, name: str, environ: Mapping[str, str]) -> Guess | None:
        """The result last kept under `name` (`remember`), checked as `printed` checks one:
        started before a run knows its own key (a warm `doctor` checks the tens of thousands
        of paths of its kept run while the interpreter is still answering), and taken only
        when the key it comes to is the same. None when no key is noted."""
        key = read_value(key_path(self.root, self.command + LATEST, name), str)
        return Guess(key, self._valid(key, environ)) if isinstance(key, str) else None

    def put(self, key: str, environ: ReadEnviron, recorder: observe.Recorder,
            result: object, printed: object = None) -> bool:
        """Keep `result` (and `printed`) unless something it looked at changed too recently to
        tell; whether it was kept."""
        if not recorder.settled():
            return False
        write_value(self._path(key), StoredRun(key, environ.seen(), recorder.observations(),
                                               encode(result), printed))
        return True

    def _path(self, key: str) -> Path:
        return key_path(self.root, self.command, key)

    def _valid(self, key: str, environ: Mapping[str, str]) -> StoredRun | None:
        """The entry for `key` while the variables it read and the paths it observed answer
        as they did."""
        stored = read_value(self._path(key), StoredRun)
        if not isinstance(stored, StoredRun) or stored.key != key:
            return None
        if any(environ.get(name) != value for name, value in stored.environ):
            return None
        return stored if observe.unchanged(stored.observations) else None
