"""The views read from wheels, recorded in the symbol store (`abifit.remote.store`): a whole
wheel at once (`record_views`, as `index`, `history` and `explain` do), and the views any
other command read, noted as it ends (`record_seen`) and recorded from the cache of views
before the store is next queried (`index_seen`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, is_library_name
from abifit.formats.wheel import Member
from abifit.remote import wheelcache
from abifit.remote.diskcache import Cache
from abifit.remote.memberreads import READ_JOBS, member_reads
from abifit.remote.packageindex import IndexFile
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheelcache import DIRECTORY, RELOCATIONS, content_addressed, view_key

if TYPE_CHECKING:
    from abifit.remote.store import SeenView, SymbolStore
    from abifit.remote.wheels import RemoteWheel


@dataclass(frozen=True, slots=True)
class Recorded:
    """What `record_views` put in the symbol store for one wheel."""

    key: str
    members: int  # ELF members recorded
    symbols: int  # their dynamic symbols
    unreadable: tuple[str, ...]  # members that could not be read, with why


def record_views(wheel: RemoteWheel, store: SymbolStore, progress: Callable[[str], None],
                 jobs: int = READ_JOBS) -> Recorded:
    """Read the dynamic view of every library and extension module of `wheel` (members named
    `*.so*`: what a process can load; executables are not read) through the cache of views (a
    warm cache fetches nothing), and record them in `store` at once, under the wheel's
    `view_key` (its URL when the index gives no sha256). Package and version come from the
    wheel's file name."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    file = wheel.file
    name, version, _build, _tags = parse_wheel_filename(file.filename)
    views: list[tuple[str, ElfImage]] = []
    unreadable: list[str] = []
    for path, found in member_reads(wheel, wheel.view, progress, jobs, _loadable):
        if isinstance(found, FormatError):
            unreadable.append(str(found))
        else:
            views.append((path, found))
    key = store_key(file)
    store.record(key, canonicalize_name(name), str(version), file.filename, views)
    with wheel.ctx.state.lock:  # recorded whole: nothing of it left to note
        wheel.ctx.state.seen = [v for v in wheel.ctx.state.seen if v.key != key]
    return Recorded(key, len(views), sum(len(v.symbols) for _p, v in views), tuple(unreadable))


def store_key(file: IndexFile) -> str:
    """What the symbol store knows a wheel by: its `view_key`, else (no sha256 given) its
    URL."""
    return view_key(file) or "url:" + file.url.split("#", 1)[0]


def is_recorded(store: SymbolStore, file: IndexFile, cache: Cache | None) -> bool:
    """Whether the store holds `file`'s wheel, under the key `record_views` records it by (a
    local file's by the sha256 of its bytes, `content_addressed`)."""
    return store.has_wheel(store_key(content_addressed(file, cache)))


def record_seen(ctx: RemoteContext) -> None:
    """Note in the symbol store of the context's cache the views the run read since the last
    call (`SymbolStore.note_seen`: rows, nothing decoded); nothing without a cache or when the
    store cannot be opened."""
    from abifit.remote.store import SymbolStore

    with ctx.state.lock:
        seen, ctx.state.seen = ctx.state.seen, []
    if not seen or ctx.cache is None:
        return
    store = SymbolStore.open(ctx.cache.root)
    if store is None:
        return
    with store, contextlib.suppress(sqlite3.Error):
        store.note_seen(seen)


def index_seen(store: SymbolStore, cache: Cache) -> int:
    """Record in `store` the views of libraries and extension modules that commands noted as
    read (`record_seen`), from the cache of views (nothing fetched; a view the cache no longer
    holds is dropped, an executable's is not recorded, as `record_views`); a wheel is complete
    when the cache holds a view, or a not-ELF mark, of each of its members named like a
    library. The number of views recorded."""
    groups: dict[str, list[SeenView]] = {}
    for view in store.seen():
        groups.setdefault(view.key, []).append(view)
    recorded = 0
    for key, seen in groups.items():
        if store.has_wheel(key):  # recorded whole since: the rows go, nothing is decoded
            store.record_seen(seen, (), False)
            continue
        views = [(v.member, found) for v in seen if is_library_name(v.member)
                 and isinstance(found := cache.get_view(key, v.entry), ElfImage)]
        store.record_seen(seen, views, _complete_in(cache, key))
        recorded += len(views)
    return recorded


def _complete_in(cache: Cache, key: str) -> bool:
    directory = cache.get_view(key, DIRECTORY)
    if not isinstance(directory, tuple):
        return False
    return all(any(cache.has_view(key, wheelcache.entry(m, what)) for what in ("", RELOCATIONS))
               for m in directory if isinstance(m, Member) and is_library_name(m.path))


def _loadable(member: Member) -> bool:
    return is_library_name(member.path)
