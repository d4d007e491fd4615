"""Import plans for the distributions of an environment, installed or laid out from wheels.

The wiring between the layers a plan needs: the Python files of a distribution (read from this
machine, or from a wheel's members), `abifit.formats.pysource` to parse them, and
`abifit.sim.imports` to find what the package loads itself and, for a file that fails, how its
imports reach it. A file that cannot be read or parsed is left out (its imports are not
followed); nothing here raises for one.
"""

from __future__ import annotations

import hashlib
import posixpath
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from abifit import workers
from abifit.errors import FormatError
from abifit.formats.pysource import ModuleCode, compile_error, read_module
from abifit.host import observe
from abifit.host.observe import Seen
from abifit.remote.diskcache import Cache
from abifit.sim.imports import (
    Compiled,
    DistributionPlan,
    LoadingRule,
    PackageCode,
    marked,
    mentions_in,
    plan_distribution,
    wrappers_of,
)

if TYPE_CHECKING:
    from abifit.host.natives import NativeFile

ReadText = Callable[[str], bytes | None]


def python_modules(files: Iterable[str], site: str) -> dict[str, str]:
    """Dotted module name -> path for the `.py` files among `files` under `site`."""
    prefix = site.rstrip("/") + "/"
    out: dict[str, str] = {}
    for path in files:
        if not (path.startswith(prefix) and path.endswith(".py")):
            continue
        parts = path[len(prefix):-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            out[".".join(parts)] = path
    return out


def top_names(declared: Iterable[str], modules: Iterable[str]) -> list[str]:
    """The top-level import names: those declared (top_level.txt), else the first parts of the
    distribution's modules."""
    names = [n for n in declared if n.isidentifier()]
    return names or sorted({m.split(".")[0] for m in modules})


def parse(data: bytes, name: str, is_package: bool) -> ModuleCode | None:
    """`read_module`, with a module that does not parse as None."""
    try:
        return read_module(data, name, is_package)
    except FormatError:
        return None


Parse = Callable[[bytes, str, bool], "ModuleCode | None"]


def code_digest(data: bytes, name: str, is_package: bool) -> str:
    """The key of a module's reading in the cache: a digest of its name and text."""
    return hashlib.sha256(f"{name}\0{is_package}\0".encode() + data).hexdigest()


def cached_parse(cache: Cache | None) -> Parse:
    """`parse`, remembered in the cache by a digest of the module's name and text."""
    if cache is None:
        return parse

    def parse_cached(data: bytes, name: str, is_package: bool) -> ModuleCode | None:
        digest = code_digest(data, name, is_package)
        stored = cache.get_code(digest)
        if isinstance(stored, ModuleCode):
            return stored
        code = parse(data, name, is_package)
        if code is not None:
            cache.put_code(digest, code)
        return code

    return parse_cached


def parse_and_keep(data: bytes, name: str, is_package: bool,
                   cache_dir: str | None) -> ModuleCode | None:
    """`parse`, its answer stored in the cache under `cache_dir` when there is one: a
    function another process can run."""
    code = parse(data, name, is_package)
    if code is not None and cache_dir is not None:
        Cache(Path(cache_dir)).put_code(code_digest(data, name, is_package), code)
    return code


MAX_SOURCE = 8 << 20  # a Python file larger than this is not read for its imports


def read_source(path: str) -> bytes | None:
    """The text of a Python file on this machine (None when unreadable or over MAX_SOURCE)."""
    try:
        data = observe.read_bytes(path, MAX_SOURCE + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_SOURCE else None


@dataclass(frozen=True, slots=True)
class Survey:
    """What reading some modules of this machine found: the observations of the reads (for
    the run's `abifit.host.observe` record), the paths of the modules whose text names a
    loading function (`marked`), and those modules read, by the digest of their text
    (`code_digest`). A survey of a whole distribution also has the modules that mention the
    wrappers of loading functions they define, by the wrapper's name (`mentions_in`), and
    those modules read too. A survey made for a CPython version has what compiling each
    top-level module raises under it (`compiled`: path, `pysource.compile_error`), which
    `import_verdicts` asks of every package."""

    seen: tuple[tuple[tuple[str, str], Seen], ...]
    marked: tuple[str, ...]
    codes: tuple[tuple[str, ModuleCode | None], ...]
    mentions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    compiled: tuple[tuple[str, str | None], ...] = ()


KEPT_TEXT = 256 << 20  # bytes of text a whole survey keeps for its search; the rest is read again


class _Reading:
    """The texts and code a survey reads: each module's text, kept up to `KEPT_TEXT` bytes
    in all (read again past it) for the search of the modules that mention a wrapper, and the
    code of the modules read, by name, from the cache under `cache_dir` and stored there."""

    def __init__(self, modules: Sequence[tuple[str, str]], cache_dir: str | None) -> None:
        self.paths = dict(modules)
        self.codes: dict[str, tuple[str, ModuleCode | None]] = {}
        self._parser = cached_parse(Cache(Path(cache_dir)) if cache_dir is not None else None)
        self._texts: dict[str, bytes | None] = {}
        self._dropped: set[str] = set()  # texts not kept
        self._kept = 0

    def load(self, name: str, keep: bool) -> bytes | None:
        """The module's text, kept for `text` when `keep` (and the bytes kept allow)."""
        data = read_source(self.paths[name])
        if keep:
            if data is not None and self._kept + len(data) > KEPT_TEXT:
                self._dropped.add(name)
            else:
                self._kept += len(data or b"")
            self._texts[name] = None if name in self._dropped else data
        return data

    def text(self, name: str) -> bytes | None:
        return read_source(self.paths[name]) if name in self._dropped else self._texts[name]

    def read(self, name: str, data: bytes) -> None:
        is_package = self.paths[name].endswith("/__init__.py")
        self.codes[name] = (code_digest(data, name, is_package),
                            self._parser(data, name, is_package))

    def mentions(self, words: Iterable[str], read_already: Iterable[str] = (),
                 ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """For each wrapper in `words`, the modules loaded (`load`) whose text mentions it
        (`mentions_in`), in name order; each of them read, unless it was or is in
        `read_already`."""
        done = set(read_already)
        found_all: list[tuple[str, tuple[str, ...]]] = []
        for word in words:
            found = mentions_in(word, ((name, self.text(name)) for name in sorted(self._texts)))
            found_all.append((word, tuple(found)))
            for name in found:
                if name not in self.codes and name not in done and \
                        (data := self.text(name)) is not None:
                    self.read(name, data)
        return tuple(found_all)


def survey(modules: Sequence[tuple[str, str]], cache_dir: str | None,
           whole: bool = False, version: tuple[int, int] | None = None) -> Survey:
    """Read the modules (name, path), and read the code of those that name a loading
    function, taking it from the cache under `cache_dir` and storing it there: a function
    another process can run, so that the main thread need not pass over every text. With
    `whole` (the modules are all those of a distribution), also find the modules that mention
    the wrappers those define, and read their code: what `load_steps` asks of the texts. The
    texts are kept for that search up to `KEPT_TEXT` bytes, and read again past it. With a
    `version`, the top-level modules are compiled for it (`Survey.compiled`)."""
    reading = _Reading(modules, cache_dir)
    marked_paths: list[str] = []
    mentions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    compiled: list[tuple[str, str | None]] = []
    with observe.recording() as recorder:
        for name, path in modules:
            data = reading.load(name, whole)
            if data is not None and marked(data):
                marked_paths.append(path)
                reading.read(name, data)
            if version is not None and data is not None and "." not in name:
                compiled.append((path, compile_error(data, version)))
        if whole:
            mentions = reading.mentions(wrappers_of(code for _, code in reading.codes.values()))
    return Survey(tuple(recorder.seen.items()), tuple(marked_paths),
                  tuple(reading.codes.values()), mentions, tuple(compiled))


def survey_mentions(modules: Sequence[tuple[str, str]], words: Sequence[str],
                    read_already: Iterable[str], cache_dir: str | None) -> Survey:
    """The end of a whole survey made in parts (`survey_in_parts`): the modules among
    `modules` (name, path) that mention each wrapper in `words` (`mentions_in`), and the code
    of those of them not `read_already` (by name), the texts kept as `survey` keeps them. A
    function another process can run."""
    reading = _Reading(modules, cache_dir)
    with observe.recording() as recorder:
        for name, _path in modules:
            reading.load(name, True)
        mentions = reading.mentions(words, read_already)
    return Survey(tuple(recorder.seen.items()), (), tuple(reading.codes.values()), mentions)


def survey_in_parts(modules: Sequence[tuple[str, str]], cache_dir: str | None,
                    parts: int, version: tuple[int, int] | None = None) -> Future[Survey]:
    """`survey(modules, cache_dir, True, version)` made on the other cores (`abifit.workers`) in
    `parts` calls at once, then one call for the modules that mention the wrappers found
    (`survey_mentions`): for a distribution so large that one core reading it all would end
    long after the others. The answer is the whole survey's, but for the order of its
    observations; the parts' failure is its failure."""
    size = -(-len(modules) // max(1, parts))
    chunks = [modules[i:i + size] for i in range(0, len(modules), size)]
    calls = [workers.submit(survey, chunk, cache_dir, False, version) for chunk in chunks]
    whole: Future[Survey] = Future()
    whole.set_running_or_notify_cancel()  # begun: nobody else may take it over (`cancel`)
    left = [len(calls)]
    lock = threading.Lock()

    def end() -> Survey:
        found = [call.result() for call in calls]
        joined = Survey(tuple(seen for f in found for seen in f.seen),
                        tuple(path for f in found for path in f.marked),
                        tuple(code for f in found for code in f.codes),
                        compiled=tuple(c for f in found for c in f.compiled))
        words = list(wrappers_of(code for f in found for _, code in f.codes))
        if not words:
            return joined
        marked = set(joined.marked)
        read = [name for name, path in modules if path in marked]
        # in the thread the last part ended in, first in line for the next free worker
        rest = workers.run(survey_mentions, modules, words, read, cache_dir, priority=1e18)
        return Survey(joined.seen + rest.seen, joined.marked, joined.codes + rest.codes,
                      rest.mentions, joined.compiled)

    def ended(_: Future[Survey]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            whole.set_result(end())
        except BaseException as e:  # any: the caller waits on it, and reads them again
            whole.set_exception(e)

    for call in calls:
        call.add_done_callback(ended)
    return whole


class ParseAhead:
    """A parser that reads modules on the other cores (`abifit.workers`) once told of
    them (`ahead`), the longest first, and asks `then` for any other module (or one whose
    reading failed there). A module whose reading is in the cache is left to `then`. Without
    worker processes nothing is read ahead."""

    def __init__(self, cache: Cache | None, then: Parse) -> None:
        self._cache = cache
        self._then = then
        self._coming: dict[str, Future[ModuleCode | None]] = {}
        self._parallel = workers.parallel()

    def ahead(self, modules: Iterable[tuple[bytes, str, bool]]) -> None:
        """Start reading `modules` (text, name, is_package)."""
        if not self._parallel:
            return
        where = str(self._cache.root) if self._cache is not None else None
        for data, name, is_package in sorted(modules, key=lambda m: -len(m[0])):
            digest = code_digest(data, name, is_package)
            if digest not in self._coming and not (self._cache is not None
                                                   and self._cache.holds_code(digest)):
                self._coming[digest] = workers.submit(parse_and_keep, data, name, is_package,
                                                    where)

    def given(self, codes: Iterable[tuple[str, ModuleCode | None]]) -> None:
        """Take modules read elsewhere (a `Survey`'s), by the digest of their text."""
        for digest, code in codes:
            done: Future[ModuleCode | None] = Future()
            done.set_result(code)
            self._coming[digest] = done

    def __call__(self, data: bytes, name: str, is_package: bool) -> ModuleCode | None:
        found = self._coming.pop(code_digest(data, name, is_package), None)
        if found is not None and not found.cancel():  # one not started yet is read here
            try:
                return found.result()
            except Exception:  # whatever it was, reading it here says it again
                pass
        return self._then(data, name, is_package)


def plan_for(key: str, natives: list[NativeFile], sources: Mapping[str, str], site: str,
             declared: Iterable[str], read: ReadText,
             rules: Mapping[str, LoadingRule], parser: Parse = parse,
             ahead: Callable[[list[tuple[bytes, str, bool]]], None] | None = None,
             loading: Iterable[str] | None = None,
             mentions: Mapping[str, Sequence[str]] | None = None,
             compiled: Compiled | None = None,
             ) -> DistributionPlan:
    """The import plan of distribution `key` (its native files, Python files and site);
    `loading`, `mentions` and `compiled`, when known, are what reading its texts found
    (`PackageCode`)."""
    prefix = site.rstrip("/") + "/"
    files = {n.path[len(prefix):]: n.path for n in natives if n.path.startswith(prefix)}
    modules = {n.module: n.path for n in natives if n.module}
    tops = top_names(declared, [*sources, *modules])
    return plan_distribution(key, tops, PackageCode(sources, read, parser, ahead, loading,
                                                         mentions, compiled),
                             modules, files, rules.get(key))


def mark_loaded(natives: list[NativeFile], plans: Mapping[str, DistributionPlan],
                roots: Iterable[str]) -> list[NativeFile]:
    """Native files that package code loads itself are checked like plugins, whether or not
    another file links to them."""
    loaded = {s.path for plan in plans.values() for s in plan.loads}
    out = []
    for n in natives:
        if n.path in loaded and not n.checked:
            root = next((r for r in sorted(roots, key=len, reverse=True)
                         if n.path.startswith(r.rstrip("/") + "/")), posixpath.dirname(n.path))
            n = replace(n, plugin=True, label=posixpath.relpath(n.path, root))
        out.append(n)
    return out
