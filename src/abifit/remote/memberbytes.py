"""The uncompressed bytes of one member of a wheel that is not here, read with as few remote
bytes as the reads need (`open_member`): a small member whole, a large DEFLATE one as a
`RemoteMember`.

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

The decoding itself (CPU-bound) runs in worker processes (`abifit.workers`), the largest
members' first.
"""

from __future__ import annotations

import zipfile
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing

from abifit import workers
from abifit.errors import FormatError
from abifit.formats.deflate import TailView, decode_tail, expansion
from abifit.formats.elf import parse_layout
from abifit.formats.middle import dynamic_site, placed_array
from abifit.formats.sources import ByteSource, InflateSource, Layered, SliceSource, check_range
from abifit.formats.wheel import WHOLE_MEMBER, Member, member_bytes, member_data_start

LOCAL_INPUT = 1 << 20  # a local member's compressed bytes are read this many at a time
FIRST_TAIL = 128 << 10
TAIL_DOUBLING = 1 << 20  # a shorter tail that falls short at least doubles
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
            try:  # only the array comes back: the rest of the window (tens of MB) is not read
                array = workers.run(placed_array, site, self._stored(lo, hi), MIDDLE_OUTPUT,
                                    self._name, priority=self._priority)
            except FormatError:
                array = None
            if array is not None:
                self._placed = (site.offset, array)
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
