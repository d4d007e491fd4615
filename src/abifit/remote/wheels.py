"""Wheels that are not here: their zip directory and the dynamic view of their ELF members, read
through range requests over any `ByteSource`: an `HttpSource`, or a `FileSource` for a wheel an
index or find-links directory has on this machine (a file:// URL), read in place by the same
reader, never copied. What is read is cached by the wheel's sha256: the index's, else (a local
file) the file's own (`abifit.remote.wheelcache`).

Requests are few and overlap: a big member's first tail is fetched together with its local
header, an inflate asks for all the input a far read needs at once, small members come whole
in one request, and several members are read at once (`abifit.remote.memberreads`). A large
member's bytes come from its ends and its middle (`abifit.remote.memberbytes`); the decoding
itself (CPU-bound) runs in worker processes (`abifit.workers`), the largest members' first.
Fat binaries and the use of NumPy's C API are read by `abifit.remote.elfmembers`; the views go
into the symbol store through `abifit.remote.recording` (`record_views(wheel, ...)`), which
imports this module, never the other way.
"""

from __future__ import annotations

import contextlib
import threading
import zipfile
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from abifit import workers
from abifit.errors import FormatError, UsageError
from abifit.formats.elf import ElfImage, ImageSummary, parse_elf, summarize_image
from abifit.formats.sources import ByteSource, FileSource
from abifit.formats.wheel import (
    LOCAL_HEADER_SIZE,
    WHOLE_MEMBER,
    Member,
    WheelArchive,
    is_elf_member,
    python_members,
)
from abifit.remote import wheelcache
from abifit.remote.elfmembers import (
    read_gpu_member,
    read_local_view,
    read_numpy_member,
    shows_no_gpu_code,
)
from abifit.remote.memberbytes import FIRST_TAIL, open_member
from abifit.remote.packageindex import IndexFile, local_file, select_one, wheel_name
from abifit.remote.readahead import ReadAhead
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheelcache import (
    DIRECTORY,
    GPU_CODE,
    METADATA,
    NOT_ELF,
    NUMPY_USE,
    PYTHON,
    RELOCATIONS,
    SUMMARY,
    content_addressed,
    view_key,
)

if TYPE_CHECKING:
    from abifit.formats.fatbin import GpuCode
    from abifit.formats.numpyapi import NumpyUse

R = TypeVar("R")

LOCAL_WORKER_MIN = 4 << 20  # a local member this large (compressed) is read in a worker process
FIRST_READ = 64 << 10  # a large member's first request (its local header and data's start)
# Large members of remote wheels read at once in the whole process (each holds its decoded tail
# and windows, megabytes to tens of megabytes, until it is parsed): a matrix of three torch
# releases held 29 at its peak, 188 MB of decoded output
DECODED_AT_ONCE = 4
_DECODED_MEMBERS = threading.BoundedSemaphore(DECODED_AT_ONCE)
_DIRECTORY_GUESS = 64 << 10
_LOCAL_HEADER_BYTES = LOCAL_HEADER_SIZE + 1024  # with room for an extra field


def resolve(text: str, ctx: RemoteContext) -> IndexFile:
    """The wheel a requirement selects for the target."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text)
    except InvalidRequirement as e:
        reason = str(e).splitlines()[0] if str(e) else "not a requirement"
        raise UsageError(f"invalid requirement {text!r}: {reason}") from e
    files = ctx.index.project_files(requirement.name)
    return select_one(files, requirement, ctx.target, prereleases=ctx.prereleases).file


def shared_wheel(file: IndexFile, ctx: RemoteContext, relocations: bool = False) -> RemoteWheel:
    """The `RemoteWheel` of `file` that other threads of this context are reading, if any, so
    that a member is fetched once while it is not yet in the cache (or there is no cache)."""
    with ctx.state.lock:
        wheel = ctx.state.wheels.get((file.url, relocations))
        if wheel is None:
            wheel = RemoteWheel(file, ctx, relocations)
            ctx.state.wheels[(file.url, relocations)] = wheel
        return wheel


def open_wheel(file: IndexFile, ctx: RemoteContext) -> tuple[WheelArchive, ReadAhead]:
    """The wheel's directory, read from its end with one or two range requests (a local file:
    read in place)."""
    path = local_file(file.url)
    if path is not None:
        try:
            local = FileSource(path, mapped=False)
        except OSError as e:
            raise FormatError(str(path), f"cannot read the wheel ({e.strerror or e})") from e
        ctx.state.local_sizes[file.filename] = local.size
        reader = ReadAhead(local)
        return WheelArchive(reader, file.filename), reader
    if ctx.client is None:
        raise UsageError(f"offline: {file.filename} is not in the cache (run once without "
                         "--offline)")
    http = ctx.client.open(file.url, size=file.size, sha256=file.sha256)
    ctx.state.wheel_sizes[file.filename] = http.size
    source = ReadAhead(http)
    offset, tail = http.read_suffix(min(_DIRECTORY_GUESS, http.size))
    source.prime(offset, tail)
    return WheelArchive(source, file.filename), source


class RemoteWheel:
    """One wheel on an index, read lazily: its ELF candidates, the dynamic view of any member,
    its core metadata. Everything read is cached by the wheel's sha256; identical members (same
    CRC and sizes) are read once."""

    def __init__(self, file: IndexFile, ctx: RemoteContext, relocations: bool = False) -> None:
        self._given = file
        self._addressed: IndexFile | None = None
        self._address_lock = threading.Lock()
        self.ctx = ctx
        self.relocations = relocations  # also read the symbols relocations use, in their order
        self.local = local_file(file.url) is not None
        if file.size is not None:
            sizes = ctx.state.local_sizes if self.local else ctx.state.wheel_sizes
            sizes[file.filename] = file.size
        self._opened: tuple[WheelArchive, ReadAhead] | None = None
        self._members: tuple[Member, ...] | None = None
        self._same: dict[tuple[int, int, int], ElfImage] = {}
        self._known: dict[str, ElfImage | None] = {}  # views by cache entry, once read
        self._entries: set[str] = set()  # cache entries of the views in `_same`
        self._lock = threading.Lock()
        self._member_locks: dict[tuple[int, int, int], threading.Lock] = {}
        self._no_gpu_code: set[str] = set()  # members whose section headers show no fat binary

    @property
    def file(self) -> IndexFile:
        """The wheel on its index, with a sha256 to cache by (`content_addressed`)."""
        if self._addressed is None:
            with self._address_lock:
                if self._addressed is None:
                    self._addressed = content_addressed(self._given, self.ctx.cache)
        return self._addressed

    def _open(self) -> tuple[WheelArchive, ReadAhead]:
        if self._opened is None:
            self._opened = open_wheel(self._given, self.ctx)
        return self._opened

    def members(self) -> tuple[Member, ...]:
        """The members that may be ELF files (by name)."""
        with self._lock:
            if self._members is None:
                cached = wheelcache.cached(self.ctx, self.file, DIRECTORY, tuple[Member, ...])
                if not isinstance(cached, tuple):
                    cached = tuple(self._open()[0].candidates())
                    wheelcache.remember(self.ctx, self.file, DIRECTORY, cached)
                self._members = cached
            return self._members

    def view(self, member: Member) -> ElfImage | FormatError | None:
        """The member's dynamic view, the error reading it, or None if it is not ELF. Threads
        may read different members at once (each through its own read-ahead); identical
        members are read once."""
        key = (member.crc, member.size, member.compressed_size)
        with self._lock:
            lock = self._member_locks.setdefault(key, threading.Lock())
        with lock:
            return self._view(member)

    def prefetch_view(self, member: Member) -> None:
        """Read the member's view now, unless the cache holds it (a run that then finds a
        stored result needs no view): started early, reading overlaps other work."""
        entry = wheelcache.entry(member, RELOCATIONS if self.relocations else "")
        cache = self.ctx.cache
        if cache is not None and any(cache.has_view(k, entry)
                                     for k in wheelcache.lookup_keys(self.file)):
            return
        self.view(member)

    def _archive(self) -> ByteSource:
        """The wheel's bytes, for a reader of its own (the directory is read on first use)."""
        with self._lock:
            return self._open()[1].base

    def _reader(self, member: Member) -> ByteSource:
        """A large member gets a read-ahead of its own; small ones share the wheel's (fetched
        whole at once), so that neighbours come with one request."""
        if member.compressed_size > WHOLE_MEMBER:
            # the first fetch holds the local header and the data's first input chunk
            reader = ReadAhead(self._archive(), granule=FIRST_READ, first=FIRST_READ + (4 << 10))
            if member.method == zipfile.ZIP_DEFLATED:
                # the first tail comes at the same time (the local header's extra field is
                # not known yet: a margin covers one of up to 1 KiB)
                end = member.header_offset + LOCAL_HEADER_SIZE + len(member.zip_name.encode()) \
                    + member.compressed_size
                reader.prefetch(end - FIRST_TAIL, FIRST_TAIL + _LOCAL_HEADER_BYTES)
            return reader
        with self._lock:
            shared = self._open()[1]
        # the local header (with a name and an extra field of up to 1 KiB) and the data at once
        whole = _LOCAL_HEADER_BYTES + len(member.zip_name.encode()) + member.compressed_size
        shared.read_at(member.header_offset, min(whole, shared.size - member.header_offset))
        return shared

    def _view(self, member: Member) -> ElfImage | FormatError | None:
        entry = wheelcache.entry(member, RELOCATIONS if self.relocations else "")
        if entry in self._known:  # read (or found in the cache) earlier in this run
            return self._known[entry]
        found = self._read_view(member, entry)
        if not isinstance(found, FormatError):
            self._known[entry] = found
        return found

    def _read_view(self, member: Member, entry: str) -> ElfImage | FormatError | None:
        key = (member.crc, member.size, member.compressed_size)
        twin = self._same.get(key)
        if twin is not None:  # read in this run already: no second decode of its cache entry
            if entry not in self._entries:  # a twin under another path
                wheelcache.remember(self.ctx, self.file, entry, twin)
                self._note_seen(member, entry)
                self._entries.add(entry)
            return twin
        cached = wheelcache.cached(self.ctx, self.file, entry)
        if isinstance(cached, ElfImage):
            self._same[key] = cached
            self._entries.add(entry)
            return cached
        if cached == NOT_ELF:
            return None
        where = f"{self.file.filename}!{member.path}"
        path = local_file(self._given.url)
        decoded = not self.local and member.compressed_size > WHOLE_MEMBER
        try:
            if path is not None and member.compressed_size >= LOCAL_WORKER_MIN:
                # CPU-bound from end to end: on another core, off this process's GIL (a
                # SymbolTable is built again where it is unpickled, its names interned)
                image, no_gpu_code = workers.run(read_local_view, str(path), member, where,
                                               self.relocations, priority=member.compressed_size)
            else:
                with _DECODED_MEMBERS if decoded else contextlib.nullcontext():
                    reader = self._archive() if self.local else self._reader(member)
                    opened = open_member(reader, member, where, local=self.local)
                    image = None if not is_elf_member(opened) else parse_elf(
                        opened, relocations=self.relocations, sections=False)
                    no_gpu_code = (self.local and image is not None
                                   and shows_no_gpu_code(opened))
                    # the member's decoded tail and windows and the reader's fetched bytes
                    # (tens of MB) go now, not after the view is written to the cache
                    del opened, reader
            if image is None:
                wheelcache.remember(self.ctx, self.file, entry, NOT_ELF)
                return None
            if no_gpu_code:
                self._no_gpu_code_in(member)
        except FormatError as e:
            return e
        wheelcache.remember(self.ctx, self.file, entry, image)
        self._note_seen(member, entry)
        self._same[key] = image
        self._entries.add(entry)
        return image

    def _note_seen(self, member: Member, entry: str) -> None:
        """Note a view just read and cached, for the symbol store (`record_seen`)."""
        from abifit.remote.store import SeenView

        key, named = view_key(self.file), _wheel_name(self.file.filename)
        if key is None or named is None or self.ctx.cache is None:
            return
        view = SeenView(key, member.path, named[0], named[1], self.file.filename, entry)
        with self.ctx.state.lock:
            self.ctx.state.seen.append(view)

    def summary(self, member: Member) -> ImageSummary | FormatError | None:
        """The summary of the member's dynamic view (`summarize_image`), cached beside the view
        under the same key: a run that lists no symbols reads it instead of the view, whose
        symbol names can be tens of MB."""
        entry = wheelcache.entry(member, SUMMARY)
        cached = wheelcache.cached(self.ctx, self.file, entry)
        if isinstance(cached, ImageSummary):
            return cached
        if cached == NOT_ELF:
            return None
        view = self.view(member)
        if isinstance(view, FormatError):
            return view
        summary = None if view is None else summarize_image(view)
        wheelcache.remember(self.ctx, self.file, entry, NOT_ELF if summary is None else summary)
        return summary

    def _no_gpu_code_in(self, member: Member) -> None:
        """A local member's section headers, read with its view, show no fat binaries: its GPU
        code is known (none) without a second pass."""
        with self._lock:
            self._no_gpu_code.add(member.path)
        wheelcache.remember(self.ctx, self.file, wheelcache.entry(member, GPU_CODE), NOT_ELF)

    def gpu_code(self, member: Member) -> GpuCode | FormatError | None:
        """The member's fat binaries (None: not ELF, or no GPU code). A member up to
        `WHOLE_GPU_MEMBER` compressed bytes is fetched in one request and read in memory; a
        larger one has its headers read from its ends, then is inflated from its start up to
        the end of its fat binaries, in large requests."""
        from abifit.formats.fatbin import GpuCode

        if member.path in self._no_gpu_code:
            return None
        return self._read_cached(member, GPU_CODE, GpuCode, read_gpu_member)

    def numpy_use(self, member: Member) -> NumpyUse | FormatError | None:
        """The member's use of NumPy's C API (None: none, or not ELF), read from its `.rodata`
        (inflated from the member's start up to there); cached like its views."""
        from abifit.formats.numpyapi import NumpyUse

        return self._read_cached(member, NUMPY_USE, NumpyUse, read_numpy_member)

    def _read_cached(self, member: Member, what: str, kind: type[R],
                     read: Callable[[ByteSource, Member, str, bool], R | None],
                     ) -> R | FormatError | None:
        """What `read` finds in the member (None: not ELF, or nothing), cached under the
        wheel's key as `what` (`NOT_ELF` for nothing)."""
        entry = wheelcache.entry(member, what)
        cached = wheelcache.cached(self.ctx, self.file, entry)
        if isinstance(cached, kind):
            return cached
        if cached == NOT_ELF:
            return None
        try:
            found = read(self._archive(), member, f"{self.file.filename}!{member.path}",
                         self.local)
        except FormatError as e:
            return e
        wheelcache.remember(self.ctx, self.file, entry, NOT_ELF if found is None else found)
        return found

    def python_files(self) -> dict[str, bytes]:
        """The wheel's Python members and top_level.txt, read whole (`python_members`); cached
        by the wheel's sha256 like its views."""
        with self._lock:
            cached = wheelcache.cached(self.ctx, self.file, PYTHON, dict[str, bytes])
            if isinstance(cached, dict):
                return cached
            found = python_members(self._open()[0])
            wheelcache.remember(self.ctx, self.file, PYTHON, found)
            return found

    def metadata(self) -> str:
        """The wheel's core metadata (METADATA): from the index (PEP 658) when offered, else
        from the wheel's `*.dist-info/METADATA` member."""
        with self._lock:
            cached = wheelcache.cached(self.ctx, self.file, METADATA)
            if isinstance(cached, str):
                return cached
            online = self.ctx.client is not None or self.local
            data = self.ctx.index.metadata(self.file) if online else None
            if data is None:
                archive = self._open()[0]
                found = [m for m in archive.members if m.path.count("/") == 1
                         and m.path.split("/")[0].endswith(".dist-info")
                         and m.path.endswith("/METADATA")]
                if not found:
                    raise FormatError(self.file.filename, "no *.dist-info/METADATA member")
                source = archive.open(found[0])
                data = source.read_at(0, source.size)
            text = data.decode("utf-8", "replace")
            wheelcache.remember(self.ctx, self.file, METADATA, text)
            return text


def _wheel_name(filename: str) -> tuple[str, str] | None:
    """(canonical name, version) a wheel's file name gives, None when it is not a wheel's."""
    from packaging.utils import canonicalize_name

    found = wheel_name(filename)
    return None if found is None else (str(canonicalize_name(found[0])), str(found[1]))
