"""`abifit index add|export|import|info`: the symbol store (`abifit.remote.store`), filled ahead
of time from an index and shared between machines.

`index add REQ...` records the wheel each requirement selects for the target; `index add NAME
--versions SPEC` every release (and wheel variant) SPEC selects, `jobs` wheels read at once.
A wheel the store holds already is not read again. Each wheel is read through its own HTTP
client, so that the bytes fetched for it are its own, and through the cache of views, so that a
wheel read before by any command fetches nothing. `index export FILE` writes the store in
`abifit.formats.storefile`'s format; `index import FILE` checks a whole file before it records
anything, and records only the wheels the store lacks.

With a cluster (`--ray`), each wheel the store lacks is read by a task elsewhere
(`ReadElsewhere`, made by `commands.cluster`), which returns it in the store's own encoding
(`read_for_store`: one wheel of an export); this process records the wheels in the order of
the requirements, as a run without the cluster does, each once, however often a task ran.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.engines.cluster import TaskFailed
from abifit.errors import AbifitError, CacheError, UsageError
from abifit.formats.storefile import MAX_EXPORT_BYTES, decode_store, encode_store
from abifit.host.localfs import read_named_file
from abifit.remote.store import SymbolStore

if TYPE_CHECKING:
    from abifit.remote.http import HttpClient
    from abifit.remote.packageindex import IndexFile
    from abifit.remote.runcontext import RemoteContext

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class IndexedWheel:
    """One wheel `index add` looked at."""

    package: str
    version: str
    wheel: str
    status: str  # "recorded", "present" (in the store already) or "failed"
    members: int = 0  # ELF members recorded
    symbols: int = 0  # their dynamic symbols
    bytes_fetched: int = 0  # fetched over HTTP to read it
    error: str | None = None  # why it failed
    unreadable: tuple[str, ...] = ()  # members that could not be read (not recorded)


@dataclass(frozen=True, slots=True)
class IndexAddReport:
    store: Path
    wheels: tuple[IndexedWheel, ...]
    bytes_fetched: int  # in all, index pages included

    @property
    def failed(self) -> tuple[IndexedWheel, ...]:
        return tuple(w for w in self.wheels if w.status == "failed")


@dataclass(frozen=True, slots=True)
class IndexTransferReport:
    """What `index export` wrote or `index import` read."""

    action: str  # "export" or "import"
    file: Path
    store: Path
    wheels: int  # written, or recorded
    skipped: int  # import: wheels the store held already
    bytes: int  # the file's size


@dataclass(frozen=True, slots=True)
class WheelRead:
    """One wheel read for the store by a task (`read_for_store`): what `index add` says of it,
    and, when it was recorded, the store's own encoding of it (an export holding that wheel
    alone)."""

    wheel: IndexedWheel
    data: bytes | None = None


# the wheels the store lacks, read elsewhere (a cluster), in their order as they are done
ReadElsewhere = Callable[[Sequence["IndexFile"], Progress],
                         Iterator[tuple["IndexFile", "WheelRead | TaskFailed"]]]


def open_store(root: Path) -> SymbolStore:
    """The symbol store of the cache directory `root`, with the views other commands noted as
    read recorded first (`remote.recording.index_seen`, from the cache of views there);
    `CacheError` when it cannot be opened."""
    from abifit.remote.diskcache import Cache
    from abifit.remote.recording import index_seen

    store = SymbolStore.open(root)
    if store is None:
        raise CacheError(f"{root}: cannot open or create the symbol store there")
    index_seen(store, Cache(root))
    return store


def index_add(requirements: Sequence[str], versions: str | None, ctx: RemoteContext,
              store: SymbolStore, progress: Progress, jobs: int = 4,
              elsewhere: ReadElsewhere | None = None) -> IndexAddReport:
    """Record the wheels of `requirements` (or of every release `versions` selects of the one
    package named) that the store does not hold; read by `elsewhere` when it is given."""
    files = _wheels(requirements, versions, ctx)
    if elsewhere is not None:
        return _add_elsewhere(files, ctx, store, progress, elsewhere)

    def one(file: IndexFile) -> IndexedWheel:
        return _add_one(file, ctx, store, progress)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = tuple(pool.map(one, files))
    fetched = ctx.client.transfer.bytes_fetched if ctx.client is not None else 0
    return IndexAddReport(store.path, done, fetched + sum(w.bytes_fetched for w in done))


def _wheels(requirements: Sequence[str], versions: str | None,
            ctx: RemoteContext) -> list[IndexFile]:
    from abifit.remote.wheels import resolve

    if versions is None:
        return [resolve(text, ctx) for text in requirements]
    from packaging.requirements import InvalidRequirement, Requirement

    from abifit.engines.matrix import host_wheels

    if len(requirements) != 1:
        raise UsageError(f"--versions: name one package, not {len(requirements)}")
    try:
        bare = Requirement(requirements[0])
    except InvalidRequirement as e:
        raise UsageError(f"invalid requirement {requirements[0]!r}") from e
    if bare.specifier or bare.url or bare.extras:
        raise UsageError(f"--versions: name the package alone, not {requirements[0]!r}")
    _name, files = host_wheels(f"{bare.name}{versions}", ctx)
    return list(reversed(files))  # oldest first


def _add_one(file: IndexFile, ctx: RemoteContext, store: SymbolStore,
             progress: Progress) -> IndexedWheel:
    from abifit.remote.recording import is_recorded, record_views
    from abifit.remote.wheels import RemoteWheel

    base = _indexed(file)
    client = ctx.client.sibling() if ctx.client is not None else None
    own = replace(ctx, client=client)
    try:
        if is_recorded(store, file, ctx.cache):
            return replace(base, status="present")
        progress(f"{file.filename}: reading")
        recorded = record_views(RemoteWheel(file, own), store, progress)
    except AbifitError as e:
        return replace(base, error=str(e).splitlines()[0], bytes_fetched=_fetched(client))
    finally:
        if client is not None:
            client.close()
    return replace(base, status="recorded", members=recorded.members,
                   symbols=recorded.symbols, bytes_fetched=_fetched(client),
                   unreadable=recorded.unreadable)


def _add_elsewhere(files: Sequence[IndexFile], ctx: RemoteContext, store: SymbolStore,
                   progress: Progress, elsewhere: ReadElsewhere) -> IndexAddReport:
    from abifit.remote.recording import is_recorded

    done = {f.filename: replace(_indexed(f), status="present") for f in files
            if is_recorded(store, f, ctx.cache)}
    for file, read in elsewhere([f for f in files if f.filename not in done], progress):
        done[file.filename] = _record_read(file, read, store)
    wheels = tuple(done[f.filename] for f in files)
    fetched = ctx.client.transfer.bytes_fetched if ctx.client is not None else 0
    return IndexAddReport(store.path, wheels, fetched + sum(w.bytes_fetched for w in wheels))


def _indexed(file: IndexFile) -> IndexedWheel:
    from packaging.utils import canonicalize_name

    wheel = file.wheel()
    assert wheel is not None
    return IndexedWheel(canonicalize_name(wheel[0]), str(wheel[1]), file.filename, "failed")


def _record_read(file: IndexFile, read: WheelRead | TaskFailed,
                 store: SymbolStore) -> IndexedWheel:
    """Record what a task read (a wheel another task recorded first is not recorded twice)."""
    if isinstance(read, TaskFailed):
        return replace(_indexed(file), error=read.reason)
    if read.data is not None:
        store.load(decode_store(read.data, file.filename))
    return read.wheel


def read_for_store(file: IndexFile, ctx: RemoteContext, progress: Progress) -> WheelRead:
    """`index add` of one wheel into a store of its own that is thrown away, with that store's
    export: what a task returns to the one writer."""
    with tempfile.TemporaryDirectory(prefix="abifit-task-") as tmp:
        store = SymbolStore.open(Path(tmp))
        if store is None:
            return WheelRead(replace(_indexed(file),
                                     error=f"{tmp}: cannot create a symbol store there"))
        with store:
            read = _add_one(file, ctx, store, progress)
            return WheelRead(read, encode_store(store.dump()) if read.status == "recorded"
                             else None)


def _fetched(client: HttpClient | None) -> int:
    return client.transfer.bytes_fetched if client is not None else 0


def index_export(store: SymbolStore, path: Path) -> IndexTransferReport:
    """Write the whole store to `path` (through a temporary file renamed into place)."""
    dump = store.dump()
    data = encode_store(dump)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return IndexTransferReport("export", path, store.path, len(dump.wheels), 0, len(data))


def index_import(store: SymbolStore, path: Path) -> IndexTransferReport:
    """Record the wheels of the export file `path` that the store lacks. The whole file is
    checked first: `FormatError` (nothing recorded) when it is not a whole export of this
    format."""
    data = read_named_file(str(path), MAX_EXPORT_BYTES)
    dump = decode_store(data, str(path))
    added, skipped = store.load(dump)
    return IndexTransferReport("import", path, store.path, added, skipped, len(data))
