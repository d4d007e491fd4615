"""Wheels that are not here: their zip directory and the dynamic view of their ELF members, read
through range requests over any `ByteSource`: an `HttpSource`, or a `FileSource` for a wheel an
index or find-links directory has on this machine (a file:// URL), read in place by the same
reader, never copied. What is read is cached by the wheel's sha256: the index's, else (a local
file) the file's own.

The loader's view of a large `.so` is spread over both ends of the file: the ELF header, program
headers, `.dynsym` and `.gnu.version*` near the front, `PT_DYNAMIC`, the section headers and (in
patchelf-rewritten libraries such as torch's) `.dynstr` and `.gnu.hash` at the end. A DEFLATE
member cannot be entered in the middle, so `RemoteMember` serves the front by inflating a prefix
of the member and the back by decoding a tail of the compressed data without its window
(`abifit.formats.deflate`), widening the tail while a needed byte is still uncertain. Members under
`WHOLE_MEMBER` compressed bytes are fetched whole.

Where tens or hundreds of MB follow `PT_DYNAMIC` (torch's symbol tables, cuBLAS's large data),
a tail reaching back to it would cost them all. Then the compressed place of the dynamic array
is estimated by walking back from the tail in steps sized by sampled expansions, and windows
around it, each twice as wide as the last, are decoded from the middle and placed by content
(`abifit.formats.middle`, from the program headers alone); when none is placed within
`MIDDLE_BUDGET` of the estimated tail, the tail is widened as before, reusing what the windows
fetched.

Requests are few and overlap: a big member's first tail is fetched together with its local
header, an inflate asks for all the input a far read needs at once, small members come whole
in one request, and several members are read at once. The decoding itself (CPU-bound) runs in
worker processes (`abifit.workers`), the largest members' first.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
import weakref
import zipfile
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from abifit import workers
from abifit.errors import AbifitError, FormatError, UsageError, WheelRefused
from abifit.formats.deflate import TailView, decode_tail, decode_window, expansion
from abifit.formats.elf import (
    ElfImage,
    ImageSummary,
    is_library_name,
    parse_elf,
    parse_layout,
    summarize_image,
)
from abifit.formats.middle import dynamic_site, place
from abifit.formats.sources import (
    ByteSource,
    BytesSource,
    FileSource,
    InflateSource,
    Layered,
    SliceSource,
    check_range,
)
from abifit.formats.wheel import (
    LOCAL_HEADER_SIZE,
    WHOLE_MEMBER,
    WHOLE_METHODS,
    Member,
    WheelArchive,
    is_elf_member,
    member_bytes,
    member_data_start,
    python_members,
    whole_member,
)
from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient
from abifit.remote.packageindex import (
    Fetch,
    IndexFile,
    PackageIndex,
    Target,
    local_file,
    select_one,
)

if TYPE_CHECKING:
    from abifit.formats.fatbin import GpuCode
    from abifit.formats.numpyapi import NumpyUse
    from abifit.remote.store import SeenView, SymbolStore

R = TypeVar("R")

LOCAL_INPUT = 1 << 20  # a local member's compressed bytes are read this many at a time
READ_JOBS = 8  # members read at once (network waits and zlib overlap)
LOCAL_WORKER_MIN = 4 << 20  # a local member this large (compressed) is read in a worker process
WHOLE_GPU_MEMBER = 64 << 20  # members read for their GPU code in one request up to this size
FIRST_TAIL = 128 << 10
TAIL_DOUBLING = 1 << 20  # a shorter tail that falls short at least doubles
FIRST_READ = 64 << 10  # a large member's first request (its local header and data's start)
RATIO_TRUSTED = 4 << 20  # a compressed tail this long predicts the rest of the member
MIDDLE_MIN = 4 << 20  # members this large (compressed) may have their dynamic array ...
MIDDLE_FROM = 6 << 20  # ... read from the middle when it is estimated this far from the end
MIDDLE_WINDOW = 2 << 20  # the first window around its estimated place
MIDDLE_BUDGET = 0.5  # windows grow up to this fraction of the estimated tail
HEADERS_BUDGET = 0.25  # the tail may grow to the section headers up to this fraction of it
MIDDLE_OUTPUT = 384 << 20  # output of one window, at most
MIDDLE_STEPS = 32  # steps in the first guess of the distance to the dynamic array
SAMPLE_JOBS = 16  # samples fetched at once
SAMPLE_BYTES = 64 << 10  # compressed bytes of one
# Large members of remote wheels read at once in the whole process (each holds its decoded tail
# and windows, megabytes to tens of megabytes, until it is parsed): a matrix of three torch
# releases held 29 at its peak, 188 MB of decoded output
DECODED_AT_ONCE = 4
_DECODED_MEMBERS = threading.BoundedSemaphore(DECODED_AT_ONCE)


class ReadAhead(Layered):
    """A ByteSource over a slow one: small reads are rounded up, sequential reads fetch ever
    larger spans ahead, and recent spans are kept, so a zip parse or a streaming inflate costs a
    handful of requests. Threads may share one: fetches run outside its lock, so they overlap,
    and a read that a fetch under way holds waits for that fetch instead of fetching again."""

    def __init__(self, base: ByteSource, granule: int = 16 << 10, max_ahead: int = 1 << 20,
                 keep: int = 32 << 20, first: int = 0) -> None:
        super().__init__(base)
        self._granule = granule
        self._first = first  # the first fetch, at least
        self.max_ahead = max_ahead
        self._keep = keep
        self._spans: OrderedDict[int, bytes] = OrderedDict()
        self._kept = 0
        self._last_end = -1
        self._ahead = granule
        self._lock = threading.Lock()
        self._fetching: list[tuple[int, int, threading.Event]] = []  # (offset, end, done)

    def prime(self, offset: int, data: bytes) -> None:
        """Remember bytes already fetched (a suffix read for the zip directory)."""
        with self._lock:
            self._remember(offset, data)

    def _remember(self, offset: int, data: bytes) -> None:
        self._spans[offset] = data
        self._kept += len(data)
        while self._kept > self._keep and len(self._spans) > 1:
            _, old = self._spans.popitem(last=False)
            self._kept -= len(old)

    def _cached(self, offset: int, length: int) -> bytes | None:
        for start, data in reversed(self._spans.items()):
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start : offset - start + length]
        return None

    def _head(self, offset: int) -> bytes:
        """The bytes from `offset` to the end of a span that holds it (empty: none does)."""
        for start, data in reversed(self._spans.items()):
            if start <= offset < start + len(data):
                return data[offset - start :]
        return b""

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        if length == 0:
            return b""
        while True:
            with self._lock:
                known = self._cached(offset, length)
                if known is not None:
                    return known
                coming = self._coming(offset, length)
                if coming is None:
                    head = self._head(offset)
                    if not head:
                        fetch = self._fetch_size(offset, length)
                        done = self._start(offset, fetch)
                    break
            coming.wait()  # a fetch under way holds it: wait for that one, then look again
        if head:  # a read that runs past what is held: fetch only the rest
            return head + self.read_at(offset + len(head), length - len(head))
        return self._fetch(offset, fetch, done)[:length]

    def prefetch(self, offset: int, length: int) -> None:
        """Fetch `[offset, offset + length)` in the background; reads it holds wait for it."""
        length = min(length, self.size - offset)
        if offset < 0 or length <= 0:
            return
        with self._lock:
            done = self._start(offset, length)
        threading.Thread(target=self._fetch, args=(offset, length, done, True),
                         daemon=True).start()

    def _coming(self, offset: int, length: int) -> threading.Event | None:
        for start, end, done in self._fetching:
            if start <= offset and offset + length <= end:
                return done
        return None

    def _start(self, offset: int, length: int) -> threading.Event:
        done = threading.Event()
        self._fetching.append((offset, offset + length, done))
        return done

    def _fetch(self, offset: int, length: int, done: threading.Event,
               quiet: bool = False) -> bytes:
        data = b""
        try:
            data = self._base.read_at(offset, length)
        except AbifitError:
            if not quiet:  # a failed prefetch is fetched again by the read that needs it
                raise
        finally:
            with self._lock:
                if data:
                    self._remember(offset, data)
                self._fetching.remove((offset, offset + length, done))
            done.set()
        return data

    def _fetch_size(self, offset: int, length: int) -> int:
        """How much to fetch from `offset`: a read that starts where the last fetch ended
        continues a sequential scan, and the fetches ahead double."""
        if offset == self._last_end:
            self._ahead = min(self._ahead * 2, self.max_ahead)
        else:
            self._ahead = self._granule
        fetch = max(length, self._ahead)
        fetch = min(self.size - offset, -(-fetch // self._granule) * self._granule)
        if self._last_end < 0:
            fetch = min(self.size - offset, max(fetch, self._first))
        self._last_end = offset + fetch
        return fetch


class RemoteMember:
    """The uncompressed bytes of one DEFLATE member, from a prefix inflate, a decoded tail and,
    for a dynamic array far from the end, a window decoded from the middle
    (`abifit.formats.middle`)."""

    def __init__(self, archive: ByteSource, member: Member, start: int, name: str,
                 max_tail_fraction: float = 0.5) -> None:
        self._archive = archive
        self._member = member
        self._start = start
        self._name = name
        self._prefix = InflateSource(SliceSource(archive, start, member.compressed_size, name),
                                     member.size, name, crc=member.crc)
        self._tail: TailView | None = None
        self._tail_bytes = 0
        self._held: list[tuple[int, bytes]] = []  # compressed spans fetched: (offset, bytes)
        self._max_tail = max(FIRST_TAIL, int(member.compressed_size * max_tail_fraction))
        self._middle_tried = False
        self._tail_cap: int | None = None  # while widening the tail only where cheap
        # the dynamic array's bytes, from a placed window (certain there), and their offset
        self._placed: tuple[int, bytes] | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def _priority(self) -> float:
        """Of its decoding work, while all workers are busy: the largest members, which have
        the longest chains of reads and decodes, go first."""
        return float(self._member.compressed_size)

    @property
    def size(self) -> int:
        return self._member.size

    def read_at(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        if offset + length <= self.size // 2:
            return self._prefix.read_at(offset, length)
        while True:
            if self._tail is not None:
                data = self._tail.read(offset, length)
                if data is not None:
                    return data
            if self._placed is not None:
                at, array = self._placed
                if at <= offset and offset + length <= at + len(array):
                    return array[offset - at : offset - at + length]
            if self._look_in_middle(offset, length):
                continue
            if self._tail_cap is not None and self._tail_bytes >= self._tail_cap:
                raise FormatError(self._name, "the tail is uncertain too far back (capped)")
            if self._give_up_tail(offset):
                return self._prefix.read_at(offset, length)  # give up on the tail: inflate
            self._widen(offset)

    def _give_up_tail(self, offset: int) -> bool:
        """Whether to inflate from the start instead of widening the tail further: when the
        tail holds the whole member, or is past `max_tail_fraction` of it and the rest of the
        way to `offset` is estimated to cost more than inflating up to it (the bytes already
        fetched are spent either way)."""
        size = self._member.compressed_size
        if self._tail_bytes >= size:
            return True
        if self._tail_bytes < self._max_tail:
            return False
        reach = self._distance(offset)
        return reach - self._tail_bytes > size - reach

    def _distance(self, offset: int) -> int:
        """The compressed bytes from member offset `offset` to the end, estimated with the
        decoded tail's compression ratio (the member's, before a tail is decoded)."""
        member = self._member
        if self._tail is None or self._tail.start >= member.size:
            return (member.size - offset) * member.compressed_size // max(1, member.size)
        if offset >= self._tail.start:
            return self._tail_bytes
        ratio = self._tail_bytes / (member.size - self._tail.start)
        return self._tail_bytes + int((self._tail.start - offset) * ratio)

    def _look_in_middle(self, offset: int, length: int) -> bool:
        """Once per member, for a read inside a dynamic array far from the end: decode windows
        of compressed bytes around its estimated place, each twice as wide as the last, until
        one is placed (`abifit.formats.middle.place`) or the windows grow past `MIDDLE_BUDGET` of
        the estimated tail. True when a window was placed."""
        if self._middle_tried:
            return False
        self._middle_tried = True  # also keeps the reads below out of here
        size = self._member.compressed_size
        if size < MIDDLE_MIN or self._distance(offset) < MIDDLE_FROM:
            return False
        try:
            layout = parse_layout(self, sections=False)  # the prefix: no tail
        except FormatError:
            return False
        site = dynamic_site(layout)
        if site is None or not site.offset <= offset <= offset + length <= site.offset + site.size:
            return False
        self._reach_section_headers(offset, layout.section_headers_at)
        for _ in range(3):  # the walk starts from a decoded tail
            if self._tail is not None:
                break
            self._widen(self.size)
        if self._tail is None:
            return False
        plain = self._distance(site.offset)  # with the tail's ratio: no samples
        behind = self._region_length(site.offset)
        centre = size - self._tail_bytes - behind - MIDDLE_WINDOW // 8
        # a region of very compressible text in front of less compressible tables (.strtab
        # before .symtab) makes the walk stop short: the windows may grow past its estimate
        budget = max(MIDDLE_WINDOW, int(max(size - centre, plain) * MIDDLE_BUDGET))
        half = MIDDLE_WINDOW // 2
        while 2 * half <= budget:
            lo, hi = max(0, centre - half), min(size - 1, centre + half)
            try:
                view = workers.run(decode_window, self._stored(lo, hi), MIDDLE_OUTPUT,
                                 self._name, priority=self._priority)
            except FormatError:
                view = None
            base = place(site, view) if view is not None else None
            if view is not None and base is not None:
                # only the array is kept: the rest of the window (tens of MB) is not read
                lo = site.offset - base
                self._placed = (site.offset, view.data[lo : lo + site.size])
                return True
            half *= 2
        return False

    def _reach_section_headers(self, offset: int, shoff: int) -> None:
        """Widen the tail to the section headers where that is cheap (a quarter of the way to
        `offset`, estimated). They are not needed, but in patchelf-rewritten libraries (torch's)
        they sit just before `.dynstr` and `.gnu.hash`, which the reader needs next: the walk to
        the dynamic array then starts from that longer tail, with less to estimate. Where the
        tail stays uncertain far back (cuRAND's tables), the cap stops it."""
        self._tail_cap = max(4 * FIRST_TAIL, int(self._distance(offset) * HEADERS_BUDGET))
        try:
            if 0 < shoff < self.size:
                self.read_at(shoff, min(64, self.size - shoff))
        except FormatError:
            pass
        finally:
            self._tail_cap = None

    def _region_length(self, offset: int) -> int:
        """The compressed length of the member from `offset` to the decoded tail, estimated by
        walking back from the tail in steps, each as long as its sample's expansion (output
        per input byte, `abifit.formats.deflate.expansion`) says, until the steps hold the region's
        uncompressed length. Samples are fetched `SAMPLE_JOBS` at a time, and computed as the walk
        needs them."""
        if self._tail is None:
            raise ValueError("no decoded tail to walk back from")
        member = self._member
        end = member.compressed_size - self._tail_bytes
        wanted = self._tail.start - offset
        guess = min(wanted * member.compressed_size // max(1, member.size), self._distance(offset))
        step = max(2 * SAMPLE_BYTES, guess // MIDDLE_STEPS)
        held = 0.0  # uncompressed bytes in the steps so far
        rate = member.size / max(1, member.compressed_size)
        k = 0
        while (k + 1) * step <= end:
            centres = [end - (k + i) * step - step // 2 for i in range(SAMPLE_JOBS)]
            with closing(self._expansions(centres)) as expansions:
                for centre, sampled in zip(centres, expansions, strict=True):
                    if centre < step // 2:
                        return end
                    rate = sampled or rate
                    if held + rate * step >= wanted:
                        return k * step + int((wanted - held) / rate)
                    held += rate * step
                    k += 1
        return end

    def _expansions(self, centres: list[int]) -> Generator[float | None, None, None]:
        """Output per input byte around each compressed offset, in order: the samples are
        fetched at once and computed only a few ahead of the walk, which mostly stops before
        the last of them (computing all of them cost torch's members a third more)."""
        raw = self._archive.base if isinstance(self._archive, Layered) else self._archive
        size = self._member.compressed_size

        def fetched(centre: int) -> bytes:
            lo = max(0, centre - SAMPLE_BYTES // 2)
            return raw.read_at(self._start + lo, min(size - 1, lo + SAMPLE_BYTES) - lo)

        def computed(sample: Future[bytes]) -> float | None:
            data = sample.result()
            if len(data) < SAMPLE_BYTES // 2:
                return None
            return workers.run(expansion, data, priority=self._priority)

        ahead = max(1, workers.workers_wanted())
        with ThreadPoolExecutor(max_workers=len(centres)) as pool:
            samples = [pool.submit(fetched, centre) for centre in centres]
            pending: deque[Future[float | None]] = deque()
            for sample in samples:
                pending.append(pool.submit(computed, sample))
                if len(pending) > ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def _stored(self, lo: int, hi: int) -> bytes:
        """The member's compressed bytes `[lo, hi)`, fetching only what no earlier read holds;
        the spans held are merged."""
        parts: list[tuple[int, bytes]] = []
        at = lo
        for start, data in sorted(self._held):
            end = start + len(data)
            if end <= at or start >= hi:
                continue
            if start > at:
                parts.append((at, self._archive.read_at(self._start + at, start - at)))
            parts.append((max(at, start), data[max(at, start) - start : min(end, hi) - start]))
            at = min(end, hi)
        if at < hi:
            parts.append((at, self._archive.read_at(self._start + at, hi - at)))
        data = b"".join(part for _, part in parts)
        kept = [(s, d) for s, d in self._held if s + len(d) < lo or s > hi]
        merged_lo, merged = lo, data
        for s, d in self._held:
            if not (s + len(d) < lo or s > hi):  # touching or overlapping: merge
                if s < merged_lo:
                    merged, merged_lo = d[: merged_lo - s] + merged, s
                if s + len(d) > merged_lo + len(merged):
                    merged += d[merged_lo + len(merged) - s :]
        self._held = [*kept, (merged_lo, merged)]
        return data

    def _widen(self, offset: int) -> None:
        """Widen the compressed tail (fetching only the bytes no earlier read holds): to
        double, or at once to what should reach `offset` at the compression ratio seen so
        far, with a margin."""
        wanted = max(FIRST_TAIL, self._tail_bytes * 2)
        if self._tail is not None and self._tail.start < self._member.size:
            # the ratio of a short tail (the file's very end) misleads: aim short, then again
            # with the ratio of the longer tail, closely. Each step decodes the whole tail
            # again, so a step that falls far short costs a decode: 0.8 of the estimate below
            # RATIO_TRUSTED took libtorch_python from 128 KiB to 3.7 MB in four more steps
            # (1.9, 2.4, 3.0, 3.7 MB), and decoded 75.6 MB of tails in a check of sgl-kernel
            # with torch 2.15.0 where these margins decode 53.9 MB and fetch 5 % less
            ratio = self._tail_bytes / (self._member.size - self._tail.start)
            margin = (1.05 if self._tail_bytes >= RATIO_TRUSTED
                      else 0.95 if self._tail_bytes >= TAIL_DOUBLING else 0.9)
            grow = 2.0 if self._tail_bytes < TAIL_DOUBLING else 1.25  # round trips or bytes
            wanted = max(int(self._tail_bytes * grow),
                         int((self._member.size - offset) * ratio * margin))
        take = min(wanted, self._member.compressed_size)
        size = self._member.compressed_size
        tail = self._stored(size - take, size)
        self._tail_bytes = take
        try:
            self._tail = workers.run(decode_tail, tail, self._member.size, self._name,
                                   priority=self._priority)
        except FormatError:
            self._tail = None


def open_member(archive: ByteSource, member: Member, where: str,
                local: bool = False) -> ByteSource:
    """A member's uncompressed bytes, read with as few remote bytes as the reads need; in a
    `local` archive, where bytes cost nothing but reading them, a large member is inflated
    forward as far as the reads go (decoding a tail without its window costs far more CPU)."""
    start = member_data_start(archive, member, where)
    if local or member.method != zipfile.ZIP_DEFLATED or member.compressed_size <= WHOLE_MEMBER:
        return member_bytes(archive, member, start, where,
                            max_input=LOCAL_INPUT if local else None)
    return RemoteMember(archive, member, start, where)


def _inflated(compressed: ByteSource, member: Member, where: str) -> ByteSource:
    """A member's bytes, inflated from its start, over a source of its stored bytes."""
    if member.method == zipfile.ZIP_STORED:
        return compressed
    if member.method in WHOLE_METHODS:
        return BytesSource(whole_member(compressed.read_at(0, compressed.size), member, where),
                           where)
    if member.method != zipfile.ZIP_DEFLATED:
        raise FormatError(where, f"unsupported zip compression method {member.method}")
    return InflateSource(compressed, member.size, where, crc=member.crc)


def shows_no_gpu_code(opened: ByteSource) -> bool:
    """Whether a member just inflated for its view has section headers that show no fat
    binaries (reading them costs little more then; False when they cannot be read:
    `gpu_code` then reads the member, and says why it cannot)."""
    from abifit.formats.fatbin import has_gpu_code

    try:
        layout = parse_layout(opened, sections=True)
    except FormatError:
        return False
    return not has_gpu_code(layout)


def read_local_view(path: str, member: Member, where: str, relocations: bool,
                    ) -> tuple[ElfImage | None, bool]:
    """The view of a member of a wheel on this machine (None: not ELF), inflated from its
    start as far as the reads go, and whether it shows no fat binaries (`shows_no_gpu_code`):
    one large member's inflating and parsing, for a worker process (`workers.run`)."""
    with FileSource(path, mapped=False) as archive:
        opened = open_member(archive, member, where, local=True)
        if not is_elf_member(opened):
            return None, False
        image = parse_elf(opened, relocations=relocations, sections=False)
        return image, shows_no_gpu_code(opened)


def _read_gpu_member(archive: ByteSource, member: Member, where: str,
                     local: bool = False) -> GpuCode | None:
    """A member's fat binaries: a small member fetched in one request; a large one with its
    headers read from its ends, then inflated from its start up to its fat binaries' end; in a
    `local` archive, inflated from its start as far as the reads go."""
    from abifit.formats.fatbin import read_gpu_code

    return _read_member(archive, member, where, local, read_gpu_code)


def _read_numpy_member(archive: ByteSource, member: Member, where: str,
                       local: bool = False) -> NumpyUse | None:
    """A member's use of NumPy's C API (`formats.numpyapi`), read from its `.rodata` as
    `_read_gpu_member` reads fat binaries."""
    from abifit.formats.numpyapi import read_numpy_use

    return _read_member(archive, member, where, local,
                        lambda source, image: read_numpy_use(source, image.sections))


def _read_member(archive: ByteSource, member: Member, where: str, local: bool,
                 read: Callable[[ByteSource, ElfImage], R | None]) -> R | None:
    """`read` of an ELF member's bytes and headers (None: not ELF): a small member fetched in
    one request; a large one with its headers read from its ends, then inflated from its start
    as far as `read` reads; in a `local` archive, inflated from its start."""
    if local:
        opened = open_member(archive, member, where, local=True)
        if not is_elf_member(opened):
            return None
        return read(opened, parse_elf(opened, relocations=False))
    source = ReadAhead(archive, max_ahead=8 << 20)
    start = member_data_start(source, member, where)
    stored: ByteSource = SliceSource(source, start, member.compressed_size, where)
    if member.compressed_size <= WHOLE_GPU_MEMBER:
        stored = BytesSource(archive.read_at(start, member.compressed_size), where)
        opened = _inflated(stored, member, where)
        if not is_elf_member(opened):
            return None
        return read(opened, parse_elf(opened, relocations=False))
    headers = open_member(source, member, where)
    if not is_elf_member(headers):
        return None
    return read(_inflated(stored, member, where), parse_elf(headers, relocations=False))


class RunState:
    """What one run learns while it reads wheels: mutable, shared by the run's threads."""

    def __init__(self) -> None:
        self.wheel_sizes: dict[str, int] = {}  # filename -> bytes, of wheels read over HTTP
        self.local_sizes: dict[str, int] = {}  # filename -> bytes, of wheels read in place
        self.warnings: list[str] = []  # what the run warned about (an index it skipped)
        self.seen: list[SeenView] = []  # views read, for the symbol store (`record_seen`)
        # wheels being read, by URL and whether relocations are read: threads (the cells of a
        # matrix) that need one wheel read each member once
        self.wheels: weakref.WeakValueDictionary[tuple[str, bool], RemoteWheel] = (
            weakref.WeakValueDictionary())
        self.lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class RemoteContext:
    """What reading wheels from an index needs, fixed for a run: the index, the HTTP client, the
    cache, the target interpreter and platform, whether pre-releases count; and the run's
    mutable `state`."""

    index: PackageIndex
    client: HttpClient | None  # None: offline, read only what the cache holds
    cache: Cache | None
    target: Target
    prereleases: bool = False
    state: RunState = field(default_factory=RunState, compare=False)


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
                cached = _cached(self.ctx, self.file, _DIRECTORY, tuple[Member, ...])
                if not isinstance(cached, tuple):
                    cached = tuple(self._open()[0].candidates())
                    _remember(self.ctx, self.file, _DIRECTORY, cached)
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
        entry = _entry(member, _RELOCATIONS if self.relocations else "")
        cache = self.ctx.cache
        if cache is not None and any(cache.has_view(k, entry) for k in _lookup_keys(self.file)):
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
        entry = _entry(member, _RELOCATIONS if self.relocations else "")
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
                _remember(self.ctx, self.file, entry, twin)
                self._note_seen(member, entry)
                self._entries.add(entry)
            return twin
        cached = _cached(self.ctx, self.file, entry)
        if isinstance(cached, ElfImage):
            self._same[key] = cached
            self._entries.add(entry)
            return cached
        if cached == _NOT_ELF:
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
                no_gpu_code = self.local and image is not None and shows_no_gpu_code(opened)
            if image is None:
                _remember(self.ctx, self.file, entry, _NOT_ELF)
                return None
            if no_gpu_code:
                self._no_gpu_code_in(member)
        except FormatError as e:
            return e
        _remember(self.ctx, self.file, entry, image)
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
        entry = _entry(member, _SUMMARY)
        cached = _cached(self.ctx, self.file, entry)
        if isinstance(cached, ImageSummary):
            return cached
        if cached == _NOT_ELF:
            return None
        view = self.view(member)
        if isinstance(view, FormatError):
            return view
        summary = None if view is None else summarize_image(view)
        _remember(self.ctx, self.file, entry, _NOT_ELF if summary is None else summary)
        return summary

    def _no_gpu_code_in(self, member: Member) -> None:
        """A local member's section headers, read with its view, show no fat binaries: its GPU
        code is known (none) without a second pass."""
        with self._lock:
            self._no_gpu_code.add(member.path)
        _remember(self.ctx, self.file, _entry(member, _GPU_CODE), _NOT_ELF)

    def gpu_code(self, member: Member) -> GpuCode | FormatError | None:
        """The member's fat binaries (None: not ELF, or no GPU code). A member up to
        `WHOLE_GPU_MEMBER` compressed bytes is fetched in one request and read in memory; a
        larger one has its headers read from its ends, then is inflated from its start up to
        the end of its fat binaries, in large requests."""
        from abifit.formats.fatbin import GpuCode

        if member.path in self._no_gpu_code:
            return None
        return self._read_cached(member, _GPU_CODE, GpuCode, _read_gpu_member)

    def numpy_use(self, member: Member) -> NumpyUse | FormatError | None:
        """The member's use of NumPy's C API (None: none, or not ELF), read from its `.rodata`
        (inflated from the member's start up to there); cached like its views."""
        from abifit.formats.numpyapi import NumpyUse

        return self._read_cached(member, _NUMPY_USE, NumpyUse, _read_numpy_member)

    def _read_cached(self, member: Member, what: str, kind: type[R],
                     read: Callable[[ByteSource, Member, str, bool], R | None],
                     ) -> R | FormatError | None:
        """What `read` finds in the member (None: not ELF, or nothing), cached under the
        wheel's key as `what` (`_NOT_ELF` for nothing)."""
        entry = _entry(member, what)
        cached = _cached(self.ctx, self.file, entry)
        if isinstance(cached, kind):
            return cached
        if cached == _NOT_ELF:
            return None
        try:
            found = read(self._archive(), member, f"{self.file.filename}!{member.path}",
                         self.local)
        except FormatError as e:
            return e
        _remember(self.ctx, self.file, entry, _NOT_ELF if found is None else found)
        return found

    def python_files(self) -> dict[str, bytes]:
        """The wheel's Python members and top_level.txt, read whole (`python_members`); cached
        by the wheel's sha256 like its views."""
        with self._lock:
            cached = _cached(self.ctx, self.file, _PYTHON, dict[str, bytes])
            if isinstance(cached, dict):
                return cached
            found = python_members(self._open()[0])
            _remember(self.ctx, self.file, _PYTHON, found)
            return found

    def record_views(self, store: SymbolStore,
                     progress: Callable[[str], None] = lambda _m: None) -> Recorded:
        """Record every ELF member's dynamic view in the symbol store (`record_views`)."""
        return record_views(self, store, progress)

    def metadata(self) -> str:
        """The wheel's core metadata (METADATA): from the index (PEP 658) when offered, else
        from the wheel's `*.dist-info/METADATA` member."""
        with self._lock:
            cached = _cached(self.ctx, self.file, _METADATA)
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
            _remember(self.ctx, self.file, _METADATA, text)
            return text


@dataclass(frozen=True, slots=True)
class Recorded:
    """What `RemoteWheel.record_views` put in the symbol store for one wheel."""

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
    for path, found in _member_reads(wheel, wheel.view, progress, jobs, _loadable):
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


def _wheel_name(filename: str) -> tuple[str, str] | None:
    """(canonical name, version) a wheel's file name gives, None when it is not a wheel's."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    return str(canonicalize_name(name)), str(version)


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
    directory = cache.get_view(key, _DIRECTORY)
    if not isinstance(directory, tuple):
        return False
    return all(any(cache.has_view(key, _entry(m, what)) for what in ("", _RELOCATIONS))
               for m in directory if isinstance(m, Member) and is_library_name(m.path))


def member_views(
    file: IndexFile, ctx: RemoteContext, progress: Callable[[str], None],
    wheel: RemoteWheel | None = None, jobs: int = READ_JOBS,
) -> Iterator[tuple[str, ElfImage | FormatError]]:
    """(member path, dynamic view or the error reading it) for every ELF member of a wheel,
    `jobs` members read at once."""
    wheel = RemoteWheel(file, ctx) if wheel is None else wheel
    return _member_reads(wheel, wheel.view, progress, jobs)


def member_summaries(
    file: IndexFile, ctx: RemoteContext, progress: Callable[[str], None],
    wheel: RemoteWheel | None = None, jobs: int = READ_JOBS,
) -> Iterator[tuple[str, ImageSummary | FormatError]]:
    """(member path, summary of its dynamic view or the error reading it) for every ELF member
    of a wheel, as `member_views` reads them (`RemoteWheel.summary`)."""
    wheel = RemoteWheel(file, ctx) if wheel is None else wheel
    return _member_reads(wheel, wheel.summary, progress, jobs)


def _loadable(member: Member) -> bool:
    return is_library_name(member.path)


def _member_reads(
    wheel: RemoteWheel, read: Callable[[Member], R | FormatError | None],
    progress: Callable[[str], None], jobs: int, only: Callable[[Member], bool] | None = None,
) -> Iterator[tuple[str, R | FormatError]]:
    members = tuple(m for m in wheel.members() if only is None or only(m))
    filename, client = wheel.file.filename, wheel.ctx.client
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # large members first, largest first, so that the long reads overlap; then the small
        # ones in file order, which share read-ahead spans; results in the wheel's order
        order = sorted(members, key=lambda m: (m.compressed_size <= WHOLE_MEMBER,
                                               -m.compressed_size if m.compressed_size
                                               > WHOLE_MEMBER else m.header_offset))
        futures = {m.path: pool.submit(read, m) for m in order}
        for n, member in enumerate(members, 1):
            found = futures[member.path].result()
            fetched = client.transfer.bytes_fetched if client else 0
            how = "read in place" if wheel.local else f"{fetched / 1e6:.1f} MB fetched"
            progress(f"{filename}: member {n}/{len(members)} {member.path} ({how})")
            if found is not None:
                yield member.path, found


_NOT_ELF = "not-elf"
_DIRECTORY = "<directory-3>"  # 2: members under 4 bytes named like modules are listed;
# 3: members by the path an install gives them
_METADATA = "<metadata>"
_PYTHON = "<python>"
_RELOCATIONS = "\x00relocations"  # cache entry of a view that has relocated_symbols
_GPU_CODE = "\x00gpu-code"  # cache entry of a member's fat binaries
_NUMPY_USE = "\x00numpy-use"  # cache entry of a member's use of NumPy's C API
_SUMMARY = "\x00summary"  # cache entry of the summary of a member's view
_DIRECTORY_GUESS = 64 << 10
_LOCAL_HEADER_BYTES = LOCAL_HEADER_SIZE + 1024  # with room for an extra field


def _entry(member: Member, what: str) -> str:
    """A member's cache entry: its path with the CRC-32 and sizes the zip directory read gives
    it, and what is stored (`what`: a view, with relocations, the GPU code)."""
    return f"{member.path}\x00{member.crc:08x}:{member.size}:{member.compressed_size}{what}"


def view_key(file: IndexFile) -> str | None:
    """What a wheel's views are cached by. A local file: the sha256 of its bytes, which were
    read and hashed (`content_addressed`). A wheel on an index, read by ranges that cannot be
    hashed: the digest of the URL the bytes come from, the size and the sha256 the index gives;
    so an index that claims another wheel's sha256 while serving other bytes keys them apart
    from that wheel's views, which it cannot replace. None (nothing cached) when the index gives
    no sha256."""
    if not file.sha256:
        return None
    if local_file(file.url) is not None:
        return file.sha256.lower()
    url = file.url.split("#", 1)[0]
    return hashlib.sha256(f"{file.sha256}\0{url}\0{file.size}".encode()).hexdigest()


def _lookup_keys(file: IndexFile) -> tuple[str, ...]:
    """Where a wheel's views are looked for: under its own key, and for a wheel on an index
    also under its sha256, where views of a local file with those very bytes are (they describe
    the wheel the sha256 names, whatever the index serves)."""
    key = view_key(file)
    if key is None:
        return ()
    return (key,) if local_file(file.url) is not None else (key, str(file.sha256).lower())


def _cached(ctx: RemoteContext, file: IndexFile, member: str,
            expect: object = object) -> object | None:
    """The cached value of a wheel's entry, when it fits `expect` (an entry of another shape,
    planted or from another release, is a miss)."""
    if ctx.cache is None:
        return None
    for key in _lookup_keys(file):
        found = ctx.cache.get_view(key, member, expect)
        if found is not None:
            return found
    return None


def _remember(ctx: RemoteContext, file: IndexFile, member: str, value: object) -> None:
    key = view_key(file)
    if ctx.cache is not None and key is not None:
        ctx.cache.put_view(key, member, value)


def content_addressed(file: IndexFile, cache: Cache | None) -> IndexFile:
    """`file`, with the sha256 of its bytes when it is a local file: checked against the one
    its index gives (`WheelRefused` when they differ, as pip refuses it), else computed when there
    is a cache to key its views by. Unchanged otherwise (and when it cannot be read: the
    reader then says why)."""
    path = local_file(file.url)
    if path is None or (cache is None and not file.sha256):
        return file
    digest = file_sha256(path, cache)
    if digest is None:
        return file
    if file.sha256 and digest != file.sha256.lower():
        raise WheelRefused(file.filename, f"sha256 of the file is {digest}, its index says "
                           f"{file.sha256} (pip refuses this wheel)")
    return replace(file, hashes={**file.hashes, "sha256": digest})


def file_sha256(path: Path, cache: Cache | None) -> str | None:
    """The sha256 of a local file, read once and then remembered by the cache (if any) while
    the file keeps its size, modification time and inode; None when it cannot be read."""
    try:
        resolved = path.resolve()
        st = resolved.stat()
        stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}"
        known = cache.get_digest(str(resolved), stamp) if cache is not None else None
        if known is not None:
            return known
        digest = hashlib.sha256()
        with open(resolved, "rb") as f:
            while chunk := f.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    if cache is not None:
        cache.put_digest(str(resolved), stamp, digest.hexdigest())
    return digest.hexdigest()


_HASH_CHUNK = 1 << 20

# Index pages are fresh for this long; offline, any age will do.
PAGE_MAX_AGE = 600.0


def cached_fetch(client: HttpClient | None, cache: Cache | None) -> Fetch:
    """The index's fetch function: cached pages when fresh, the network otherwise, and only the
    cache when offline (client None). A cached page that is no longer fresh is asked for with
    its ETag or Last-Modified: when the server answers 304 (unchanged), no page is sent again."""

    def fetch(url: str, headers: Mapping[str, str]) -> tuple[int, Mapping[str, str], bytes, str]:
        entry = cache.page_entry(url) if cache is not None else None
        usable = entry is not None and cache is not None and not cache.refresh
        if entry is not None and (client is None  # offline: any age, refresh or not
                                  or (usable and time.time() - entry[0] <= PAGE_MAX_AGE)):
            return 200, {"content-type": entry[1]}, entry[2], url
        if client is None:
            raise UsageError(f"offline: {url} is not in the cache (run once without --offline)")
        stale = entry[1:] if entry is not None and usable else None
        conditional = {} if stale is None else {
            k: v for k, v in (("If-None-Match", stale[2]), ("If-Modified-Since", stale[3])) if v}
        response = client.get(url, {**headers, **conditional}, allow=(304,) if conditional
                              else ())
        if cache is not None and stale is not None and response.status == 304:
            cache.put_page(url, *stale)  # unchanged: fresh again
            return 200, {"content-type": stale[0]}, stale[1], url
        if cache is not None and response.status == 200:
            cache.put_page(url, response.headers.get("content-type", ""), response.body,
                           response.headers.get("ETag", ""),
                           response.headers.get("Last-Modified", ""))
        return response.status, response.headers, response.body, response.url

    return fetch
