"""The end of a raw DEFLATE stream, decoded from a tail of its compressed bytes alone.

A wheel member is usually DEFLATE, and DEFLATE cannot be entered in the middle: blocks start at
arbitrary *bit* offsets, and back-references reach up to 32 KiB into output that a tail does not
have. `decode_tail` still decodes a tail, with all inflating done by zlib
(`abifit.formats.inflate`: zlib-ng's inflater, or the standard library's):

1. **Block starts.** Every bit offset of the tail may start a block. A filter computed for all
   bit offsets of a scan window at once (see "Finding block starts") keeps dynamic-Huffman
   headers with BTYPE 2, HLIT <= 29, HDIST <= 29 and a complete code-length code (zlib rejects
   anything else), and stored headers (LEN == ~NLEN on the next byte boundary). Fixed-Huffman
   headers are not tried: a quarter of all bit offsets read as one.
2. **Entering at a bit offset.** zlib starts on a byte boundary, and shifting the tail so that
   the start becomes bit 0 would move the byte boundaries that later stored blocks are aligned
   to. Instead a few synthetic bits replace the ones before the start in its byte: empty fixed
   blocks (10 bits each) and, for odd offsets, one fixed block holding a single 9-bit literal
   (19 bits), ending exactly where the real block begins. The literal is the last byte of the
   dummy window (zlib gets the others as `zdict`), so the real data sees the whole window.
3. **Decoding.** A candidate is first decoded over a little input, to reject most false starts
   fast. Its output counts only if the stream ends exactly at the end of the tail (the final
   block's padding is in the last byte, so nothing may be left over) with no more output than
   the member's uncompressed size.
4. **Certainty.** The same start decoded with `WINDOW_A` and with `WINDOW_B`, which differs from
   it at every byte, has the same structure: the bits alone decide literals, lengths and
   distances. An output byte is a literal or a copy of an earlier byte of the window or the
   output; by induction on its chain of copies, it agrees in the two decodes exactly when the
   chain ends in a literal of the output, and then it is the true byte. Differing bytes are
   uncertain. Certainty grows along the output, as back-references into the window die out.
5. **False starts.** A random bit offset can pass as a header and decode garbage: a garbage
   dynamic block rarely fails before its end-of-block code (every symbol is valid, and no
   distance reaches past the dummy window), which may be 15 bits long, so it can run for tens
   of KiB. If its end landed exactly on a true block boundary, it would go on to decode the
   true stream to the end, and its garbage literals (and copies of them) would be certain and
   wrong. So the first start found, `v`, must decode its first `_WITNESS_BYTES` of input
   without error, and then only serves as a witness for a later start `w` that decodes to the
   end. The view returned is `w`'s, and only if `w` is a block boundary of `v`'s parse: fed the
   input up to `w`'s bit, `v` has produced some bytes, and on the next `_OVERLAP_BYTES` of
   output every byte certain in `w` is certain in `v`, with the same value, in both windows.

   At a block boundary an inflater's whole state is its window, so if `w` is a boundary of
   `v`'s parse, `v` decodes the bits after `w` exactly as `w` does; a byte certain in `w` has
   its chain inside `w`'s output, where `v` has the same chain, so the check holds. A start not
   on `v`'s parse fails it (its certain literals do not line up with `v`'s bytes), unless all of
   them match by chance. `w`'s parse is the true one whenever `v`'s is at `w`: when `v` is a true
   start, and also when `v` is a false start whose garbage landed on a true boundary before `w`.
   A wrong view needs a false `v` whose garbage lands on a true boundary *after* passing through
   a second valid dynamic or stored header, `w`. Measured over 57 million bit offsets of zlib
   streams of real libraries (levels 1, 6, 9): 47,598 passed the header filter, 403 the first
   probe; the 119 false starts among these all failed before the end. A garbage block ends on a
   true boundary with a chance of about one in the bits of a block (~2 * 10^5), and the end of
   a garbage block is a valid dynamic header with a chance of about 2 * 10^-6 (119 in 57
   million), which puts a wrong view below 10^-10 per tail. The price of the witness is its
   first block: the view starts at the second block boundary found in the tail.

Memory stays proportional to the tail and its output: the scan works on one window at a time,
the decoder reads slices of the tail, the witness is decoded only a little past `w`, and the
decode of `w` with WINDOW_B stops once it has agreed with WINDOW_A's for a whole window: from
there on both inflaters hold the same window, so the uncertain bytes all lie before that point.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from abifit.errors import FormatError
from abifit.formats import inflate

WINDOW_SIZE = 1 << 15
WINDOW_A = b"\xaa" * WINDOW_SIZE
WINDOW_B = b"\xff" * WINDOW_SIZE  # differs from WINDOW_A at every byte; both end in a 9-bit literal

_View = TypeVar("_View", "TailView", "WindowView")

_SCAN_BYTES = 4 << 10  # tail bytes scanned for headers at a time (the scan stops early)
_PROBE_BYTES = 1 << 10  # input of the first, cheap decode of a candidate
_SKIM_OUTPUT = 1 << 20  # output per decode step of a probe (which drops it)
_COMPARE_BYTES = 64 << 10  # output compared per step
_WITNESS_BYTES = 128 << 10  # input a witness must decode without error
_OVERLAP_BYTES = 256 << 10  # output of a start compared with its witness's


@dataclass(frozen=True, slots=True)
class TailView:
    """The decoded end of a member: `data` holds member bytes `start` .. `start + len(data)`.

    `other` tells which of them are known: the same output decoded with `WINDOW_B`, up to its
    last byte that differs from `data`. `data[i]` is uncertain where `other[i]` differs from it,
    for `i < len(other)`; every byte past `other` is known (certainty grows along the output,
    so `other` usually stops well before the end). A comparison of two slices (a `memcmp`)
    tells whether a read is known; a mask of the differences, made when the view was decoded,
    cost big-integer conversions of all of `other`: 0.55 of the 0.86 s a 4 MiB tail of
    libtorch_cpu.so took."""

    start: int
    data: bytes
    other: bytes = b""

    def known(self, offset: int, length: int) -> bool:
        """Whether every byte of member range `[offset, offset + length)` is in view and known."""
        if length < 0:
            raise ValueError(f"negative length {length}")
        lo = offset - self.start
        hi = lo + length
        if lo < 0 or hi > len(self.data):
            return False
        return _agree(self.data, self.other, lo, hi)

    def read(self, offset: int, length: int) -> bytes | None:
        """Member bytes `[offset, offset + length)`, or None if any of them is not known."""
        if not self.known(offset, length):
            return None
        return self.data[offset - self.start : offset - self.start + length]

    @property
    def uncertain(self) -> tuple[tuple[int, int], ...]:
        """The uncertain bytes as sorted, merged `[lo, hi)` member ranges (for reports)."""
        return tuple((self.start + lo, self.start + hi) for lo, hi in _runs(self.data, self.other))


def _agree(data: bytes, other: bytes, lo: int, hi: int) -> bool:
    """Whether `data[lo:hi]` is certain: equal to `other` where `other` reaches."""
    end = min(hi, len(other))
    return lo >= end or data[lo:end] == other[lo:end]


def _runs(data: bytes, other: bytes) -> Iterator[tuple[int, int]]:
    """The `[lo, hi)` runs of `data` that differ from `other`, in order."""
    flags = _difference_mask(data[: len(other)], other).translate(_NONZERO)
    return ((match.start(), match.end()) for match in _RUNS.finditer(flags))


_NONZERO = bytes([0] + [1] * 255)
_RUNS = re.compile(b"\x01+")


def decode_tail(tail: bytes, total_size: int, name: str = "<member>") -> TailView:
    """Decode the end of a raw DEFLATE stream from its last `len(tail)` compressed bytes.

    `tail` must end exactly where the member's compressed data ends; `total_size` is the member's
    uncompressed size. Raises FormatError when the tail holds no two block starts of which the
    later decodes to the end and lies on the earlier one's parse (a wider tail usually does).
    """
    if total_size < 0:
        raise ValueError(f"negative uncompressed size {total_size}")
    found = _witnessed(
        tail,
        lambda bit: _decode_to_end(tail, bit, WINDOW_A, total_size),
        lambda witness, bit, data: _vouched(tail, total_size, witness, bit, data),
    )
    if isinstance(found, str):
        raise FormatError(name, f"{found} in the last {len(tail)} compressed bytes")
    return found


@dataclass(frozen=True, slots=True)
class WindowView:
    """Output decoded from a stretch of compressed bytes in the middle of a stream, at an
    unknown place in the member: `data` is the output from bit `bit` of the stretch to the end
    of its input, `other` tells its uncertain bytes as in `TailView`. Where `data` lies in the
    member must be learnt from its content."""

    bit: int
    data: bytes
    other: bytes = b""

    def known(self, lo: int, hi: int) -> bool:
        """Whether `data[lo:hi]` is in view and certain."""
        if lo < 0 or hi > len(self.data) or lo > hi:
            return False
        return _agree(self.data, self.other, lo, hi)


def decode_window(data: bytes, max_output: int, name: str = "<member>") -> WindowView:
    """Decode compressed bytes from the middle of a raw DEFLATE stream: from the second block
    start found (the first is its witness, as in `decode_tail`) to the end of `data`, which
    must not hold the stream's end. Raises FormatError when no such start decodes the rest
    of `data` with at most `max_output` bytes of output."""
    def vouched(witness: int, bit: int, out: bytes) -> WindowView | None:
        other = _vouched_other(data, max_output, witness, bit, out)
        return None if other is None else WindowView(bit, out, other)

    found = _witnessed(data, lambda bit: _decode_through(data, bit, WINDOW_A, max_output),
                       vouched)
    if isinstance(found, str):
        raise FormatError(name, f"{found} in {len(data)} compressed bytes")
    return found


def _witnessed(data: bytes, decode: Callable[[int], bytes | None],
               vouch: Callable[[int, int, bytes], _View | None]) -> _View | str:
    """The first view that `vouch` makes of a block start's output (`decode`; empty or None:
    not a start) with an earlier start as its witness (see the module docstring), or what was
    missing."""
    witness: int | None = None
    for bit in _block_starts(data):
        if witness is None:
            witness = bit if _probe(data, bit, _WITNESS_BYTES) else None
            continue
        out = decode(bit)
        if not out:  # not a start, or an empty last block: nothing to view
            continue
        view = vouch(witness, bit, out)
        if view is not None:
            return view
        witness = bit
    return "no DEFLATE block start" if witness is None else "no two consistent block starts"


def expansion(data: bytes) -> float | None:
    """Output bytes per input byte of compressed bytes from the middle of a raw DEFLATE stream,
    from the first block start in the first half of `data` that decodes the rest without error
    (None if there is none, or if the stream ends inside `data`). A stored block counts only
    when some input after its end decodes too (any bytes pass as a stored block's content), or
    when nothing else does. For estimates only: a false start that happens to decode through is
    not ruled out."""
    unchecked: float | None = None  # from a stored block that runs (nearly) to the end
    for bit in _block_starts(data):
        if bit > 4 * len(data):
            break
        produced = _through_length(data, bit)
        if produced is None:
            continue
        ratio = produced / (len(data) - bit / 8)
        if _header_bits(data, bit) & 6 or _stored_checked(data, bit):
            return ratio
        unchecked = ratio if unchecked is None else unchecked
    return unchecked


def _vouched(tail: bytes, total_size: int, witness: int, bit: int, data: bytes) -> TailView | None:
    """The view decoded from `bit` (output `data` with WINDOW_A), if `bit` lies on the parse
    from `witness` (see the module docstring), else None."""
    start = total_size - len(data)
    other = _vouched_other(tail, start + min(_OVERLAP_BYTES, len(data)), witness, bit, data)
    return None if other is None else TailView(start, data, other)


def _vouched_other(tail: bytes, limit: int, witness: int, bit: int, data: bytes) -> bytes | None:
    """The output from `bit` with WINDOW_B up to its last byte that differs from `data` (the
    output with WINDOW_A), if `bit` lies on the parse from `witness`, whose output before `bit`
    may be at most `limit` bytes; else None."""
    after = min(_OVERLAP_BYTES, len(data))
    crossed_a = _decode_across(tail, witness, WINDOW_A, limit, bit, after)
    crossed_b = _decode_across(tail, witness, WINDOW_B, limit, bit, after)
    if crossed_a is None or crossed_b is None or crossed_a[0] != crossed_b[0]:
        return None
    drop, witness_a = crossed_a
    witness_b = crossed_b[1]
    if drop <= 0 or min(len(witness_a), len(witness_b)) < drop + after:
        return None
    data_b = _decode_until_agreeing(tail, bit, data, after)
    if data_b is None or not _vouches(witness_a, witness_b, drop, data[:after], data_b[:after]):
        return None
    try:
        return data_b[: _last_difference(data_b, data) + 1]
    except ValueError:  # they agree wherever B was decoded
        return b""


# Finding block starts ---------------------------------------------------------------------------
#
# The dynamic-header filter is computed for all bit offsets p of a scan window at once. "lanes"
# holds one byte per p, the 8 tail bits from p. `bytes.translate` maps every lane to a flag or a
# Kraft term at once, read as one big integer; a header field at bit p + k for every p is then
# that integer shifted down by k lanes, and big-integer arithmetic on the lanes adds them up (a
# table per field would translate the lanes once per field: 20 times, not 5). A lane holds a
# sum of at most three terms of at most 64; the sums of those groups are added in 16-bit lanes,
# even and odd offsets apart, so no carry crosses lanes. Which code lengths are present (HCLEN)
# is tested by arithmetic too: HCLEN + 128 - k has its top bit set exactly when HCLEN >= k.


def _table(value: Callable[[int], int]) -> bytes:
    """A `bytes.translate` table."""
    return bytes(value(byte) for byte in range(256))


def _kraft(length: int) -> int:
    """2^-length in units of 2^-7 (0 for an absent code, length 0)."""
    return 1 << (7 - length) if length else 0


# BTYPE == 2 (bits 1-2 read as 0 then 1) and HLIT <= 29; then HDIST <= 29.
_BAD_FIRST = _table(lambda v: 0 if (v >> 1) & 3 == 2 and v >> 3 <= 29 else 1)
_BAD_SECOND = _table(lambda v: 1 if v & 31 > 29 else 0)
_KRAFT_TERM = _table(lambda v: _kraft(v & 7))
_KRAFT_PAIR = _table(lambda v: _kraft(v & 7) + _kraft((v >> 3) & 7))  # two lengths from a lane
_LOW_NIBBLE = _table(lambda v: v & 15)
_HCLEN_AT = 13
_LENGTHS_AT = 17
_LENGTHS = 19  # code lengths 0-3 are always present, 4 + k when HCLEN >= k + 1
_LEN_NLEN = re.compile(b"(?=\xff\xff)")
_ZERO = re.compile(b"\x00")


def _block_starts(tail: bytes) -> Iterator[int]:
    """Bit offsets that pass the cheap dynamic and stored header checks, in increasing order."""
    for lo in range(0, len(tail), _SCAN_BYTES):
        hi = min(lo + _SCAN_BYTES, len(tail))
        yield from heapq.merge(_dynamic_starts(tail, lo, hi), _stored_starts(tail, lo, hi))


def _dynamic_starts(tail: bytes, lo: int, hi: int) -> Iterator[int]:
    """Bits in [8 lo, 8 hi) where a dynamic-Huffman header has BTYPE 2, HLIT <= 29, HDIST <= 29
    and a complete code-length code (HCLEN + 4 lengths whose Kraft sum is 1), as zlib demands."""
    count = 8 * (hi - lo)
    lanes = _bit_lanes(tail, lo, hi - lo + 11)

    def mapped(table: bytes) -> int:  # each lane through the table; the field at k: >> 8 k
        return int.from_bytes(lanes.translate(table), "little")

    hclen = mapped(_LOW_NIBBLE) >> 8 * _HCLEN_AT
    kraft = mapped(_KRAFT_TERM)
    top = _repeat(b"\x80", count)
    # the first group: lengths 0-1 (one lane) and 2; then 3 with the present ones from 4 on
    groups = [(mapped(_KRAFT_PAIR) >> 8 * _LENGTHS_AT) + (kraft >> 8 * (_LENGTHS_AT + 6))]
    terms = kraft >> 8 * (_LENGTHS_AT + 9)
    in_group = 1
    for index in range(4, _LENGTHS):
        present = (hclen + _repeat(bytes([128 - (index - 3)]), count)) & top
        terms += (kraft >> 8 * (_LENGTHS_AT + 3 * index)) & (present - (present >> 7))
        in_group += 1
        if in_group == 3 or index == _LENGTHS - 1:
            groups.append(terms)
            terms, in_group = 0, 0
    even = _repeat(b"\xff\x00", count)  # lanes past `count` fall away here
    sums = [sum(g & even for g in groups), sum((g >> 8) & even for g in groups)]
    complete = _repeat(b"\x80\x00", count)
    incomplete = _nonzero_lanes(sums[0] ^ complete, count)
    incomplete |= _nonzero_lanes(sums[1] ^ complete, count) << 8
    everywhere = _repeat(b"\xff", count)
    reject = (mapped(_BAD_FIRST) | (mapped(_BAD_SECOND) >> 64) | incomplete) & everywhere
    for match in _ZERO.finditer(reject.to_bytes(count, "little")):
        yield 8 * lo + match.start()


def _bit_lanes(tail: bytes, lo: int, count: int) -> bytes:
    """One byte per bit offset of `tail[lo : lo + count]`: the 8 bits from there."""
    lanes = bytearray(8 * count)
    for shift in range(8):
        shifted = _shifted(tail, 8 * lo + shift, count)
        lanes[shift : 8 * len(shifted) : 8] = shifted
    return bytes(lanes)


@functools.lru_cache(maxsize=64)
def _repeat(pattern: bytes, count: int) -> int:
    return int.from_bytes(pattern * (count // len(pattern)), "little")


def _nonzero_lanes(value: int, count: int) -> int:
    """`value` with each of its 16-bit lanes replaced by 1 if it is not zero, else 0."""
    value |= value >> 8
    return _nonzero_bytes(value, count) & _repeat(b"\x01\x00", count)


def _stored_starts(tail: bytes, lo: int, hi: int) -> Iterator[int]:
    """Bits in [8 lo, 8 hi) that start a stored block header: BTYPE 0, then LEN == ~NLEN at the
    next byte boundary. The bits before one LEN that read BTYPE 0 all decode the same, but for
    BFINAL: the first with each BFINAL value is given."""
    first = tail[lo + 1 : hi + 4]
    second = tail[lo + 3 : hi + 6]
    size = min(len(first), len(second))
    if size < 2:
        return
    xor = int.from_bytes(first[:size], "little") ^ int.from_bytes(second[:size], "little")
    for match in _LEN_NLEN.finditer(xor.to_bytes(size, "little")):
        len_byte = lo + 1 + match.start()
        seen: set[int] = set()
        for bit in range(max(8 * len_byte - 10, 8 * lo), min(8 * len_byte - 2, 8 * hi)):
            header = _header_bits(tail, bit)
            if header & 6 == 0 and header & 1 not in seen:
                seen.add(header & 1)
                yield bit


def _stored_checked(data: bytes, bit: int) -> bool:
    """Whether the stored block whose header is at `bit` ends `_PROBE_BYTES` before the end of
    `data` (so that what follows it was decoded too)."""
    at = (bit + 3 + 7) // 8  # LEN, at the byte boundary after the 3 header bits
    return at + 4 + int.from_bytes(data[at : at + 2], "little") + _PROBE_BYTES <= len(data)


def _header_bits(tail: bytes, bit: int) -> int:
    """BFINAL (bit 0) and BTYPE (bits 1-2) of a block header at bit `bit`."""
    byte = bit // 8
    return (int.from_bytes(tail[byte : byte + 2], "little") >> (bit % 8)) & 7


def _shifted(tail: bytes, bit: int, length: int) -> bytes:
    """Up to `length` bytes whose bit 0 is bit `bit` of the tail (zero bits past its end)."""
    byte = bit // 8
    piece = tail[byte : byte + length + 1]
    return (int.from_bytes(piece, "little") >> (bit % 8)).to_bytes(len(piece), "little")[:length]


# Decoding from a bit offset ---------------------------------------------------------------------


class _BitWriter:
    """DEFLATE bit packing: fields LSB first, Huffman codes MSB first."""

    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def field(self, value: int, size: int) -> None:
        self.value |= value << self.count
        self.count += size

    def code(self, code: int, size: int) -> None:
        self.field(int(f"{code:0{size}b}"[::-1], 2), size)


@functools.cache
def _entry_bits(shift: int, literal: int) -> tuple[int, int]:
    """Non-final fixed blocks whose length is `shift` modulo 8: empty ones (10 bits), preceded for
    odd shifts by one holding `literal` (a 9-bit code, 19 bits in all); as (bits, bit count)."""
    assert 144 <= literal <= 255, "only literals 144-255 have 9-bit fixed codes"
    writer = _BitWriter()
    empty_blocks = (shift // 2) % 4
    if shift % 2:
        writer.field(0b010, 3)  # BFINAL 0, BTYPE 1
        writer.code(0b110010000 + literal - 144, 9)
        writer.code(0, 7)  # end of block
        empty_blocks = ((shift - 3) // 2) % 4
    for _ in range(empty_blocks):
        writer.field(0b010, 3)
        writer.code(0, 7)
    return writer.value, writer.count


@functools.lru_cache(maxsize=8)
def _zdict(window: bytes, trimmed: bool) -> bytes:
    """The window, or all of it but its last byte (which an entry block carries as a literal)."""
    return window[:-1] if trimmed else window


def _entry(tail: bytes, bit: int, window: bytes) -> tuple[bytes, bytes, int]:
    """The bytes that bring an inflater to bit `bit` of the tail with the tail's byte alignment,
    ending with the tail's byte at `bit // 8`; the zdict to use; the output they produce."""
    byte, shift = divmod(bit, 8)
    value, count = _entry_bits(shift, window[-1])
    kept = tail[byte] & (0xFF << shift) & 0xFF
    head = value | (kept << (count - shift))
    head_bytes = head.to_bytes(count // 8 + 1, "little")
    odd = shift % 2 == 1
    return head_bytes, _zdict(window, odd), int(odd)


class _Inflater:
    """A raw inflater entered at a bit offset of the tail, fed the tail's bytes in order."""

    def __init__(self, tail: bytes, bit: int, window: bytes) -> None:
        head, zdict, entry_output = _entry(tail, bit, window)
        self._decoder = inflate.decompressobj(-15, zdict)
        self._view = memoryview(tail)
        self.position = bit // 8 + 1  # tail bytes fed so far (the head stands for the first)
        self.produced = 0  # output bytes so far
        try:
            self._broken = len(self._decoder.decompress(head)) != entry_output
        except inflate.error:
            self._broken = True

    def feed(self, end: int, max_length: int) -> bytes | None:
        """The output (at most `max_length` bytes) of the tail's bytes up to `end`, or None on
        a decoding error. Output beyond `max_length` stays undecoded: stop feeding then."""
        if self._broken:
            return None
        try:
            out = self._decoder.decompress(self._take(end), max_length)
        except inflate.error:
            return None
        self.produced += len(out)
        return out

    def skim(self, end: int) -> bool:
        """Decode the tail's bytes up to `end`, dropping the output; False on a decoding error."""
        if self._broken:
            return False
        data: bytes | memoryview = self._take(end)
        while data:
            try:
                self._decoder.decompress(data, _SKIM_OUTPUT)
            except inflate.error:
                return False
            data = self._decoder.unconsumed_tail
        return True

    def _take(self, end: int) -> memoryview:
        data = self._view[self.position : end]
        self.position = max(end, self.position)
        return data

    @property
    def ended(self) -> bool:
        return self._decoder.eof

    @property
    def ended_at_end(self) -> bool:
        """Whether the stream ended exactly with the tail's last byte."""
        decoder = self._decoder
        return decoder.eof and not decoder.unused_data and self.position == len(self._view)


def _probe(tail: bytes, bit: int, depth: int) -> bool:
    """Whether a block start at `bit` decodes `depth` bytes of input (or up to the end of the
    stream, if that is the end of the tail) without error; a small first step fails fast."""
    inflater = _Inflater(tail, bit, WINDOW_A)
    start = bit // 8
    stop = min(start + depth, len(tail))
    for end in (min(start + _PROBE_BYTES, stop), stop):
        if not inflater.skim(end):
            return False
        if inflater.ended:
            return inflater.ended_at_end
    return True


def _decode_to_end(tail: bytes, bit: int, window: bytes, limit: int) -> bytes | None:
    """The output from `bit` to the end of the stream, or None unless `bit` starts a block, the
    stream ends exactly at the end of the tail and the output is at most `limit` bytes."""
    if not _probe(tail, bit, _PROBE_BYTES):
        return None
    inflater = _Inflater(tail, bit, window)  # afresh, so that the output is one bytes object
    out = inflater.feed(len(tail), limit + 1)
    return out if out is not None and len(out) <= limit and inflater.ended_at_end else None


def _through_length(data: bytes, bit: int) -> int | None:
    """The output length from `bit` to the end of `data`, or None on an error or the stream's
    end."""
    if not _probe(data, bit, _PROBE_BYTES):
        return None
    inflater = _Inflater(data, bit, WINDOW_A)
    produced = 0
    for end in range(bit // 8 + _COMPARE_BYTES, len(data) + _COMPARE_BYTES, _COMPARE_BYTES):
        out = inflater.feed(min(end, len(data)), 0)
        if out is None or inflater.ended:
            return None
        produced += len(out)
    return produced


def _decode_through(data: bytes, bit: int, window: bytes, limit: int) -> bytes | None:
    """The output from `bit` to the end of `data`, or None unless `bit` starts a block, the
    stream goes on past `data` and the output is at most `limit` bytes."""
    if not _probe(data, bit, _PROBE_BYTES):
        return None
    inflater = _Inflater(data, bit, window)
    out = inflater.feed(len(data), limit + 1)
    return out if out is not None and len(out) <= limit and not inflater.ended else None


def _decode_until_agreeing(tail: bytes, bit: int, data_a: bytes, least: int) -> bytes | None:
    """The output from `bit` with WINDOW_B, `data_a` being the output with WINDOW_A, up to where
    the two have agreed for a whole window (and at least `least` bytes), or None on a mismatch
    of structure. Past that point the two inflaters hold the same window and read the same bits,
    so the rest of their output is the same: the rest of B need not be decoded."""
    inflater = _Inflater(tail, bit, WINDOW_B)
    parts: list[bytes] = []
    produced = agreed_from = 0
    position = bit // 8
    while position < len(tail):
        position = min(position + _COMPARE_BYTES, len(tail))
        out = inflater.feed(position, 0)
        if out is None:
            return None
        same = data_a[produced : produced + len(out)]
        if len(same) != len(out):
            return None
        if same != out:
            agreed_from = produced + _last_difference(same, out) + 1
        parts.append(out)
        produced += len(out)
        if produced - agreed_from >= WINDOW_SIZE and produced >= least:
            return b"".join(parts)
    return b"".join(parts) if produced == len(data_a) else None


def _last_difference(first: bytes, second: bytes) -> int:
    """The index of the last byte where `first` and `second[: len(first)]` differ; ValueError
    when they do not."""
    hi = len(first)
    while hi > 0:
        lo = max(0, hi - 4096)
        if first[lo:hi] != second[lo:hi]:
            xor = int.from_bytes(first[lo:hi], "little") ^ int.from_bytes(second[lo:hi], "little")
            return lo + (xor.bit_length() - 1) // 8
        hi = lo
    raise ValueError("the byte strings do not differ")


def _decode_across(
    tail: bytes, bit: int, window: bytes, limit: int, split: int, after: int
) -> tuple[int, bytes] | None:
    """Decode from `bit` over the input up to bit `split`, then `after` more output bytes (or to
    the end of the stream): (the output before the split, the output), or None on an error or
    more than `limit` bytes before the split."""
    inflater = _Inflater(tail, bit, window)
    before = inflater.feed(-(-split // 8), limit + 1)
    if before is None or len(before) > limit or inflater.ended:
        return None
    rest = inflater.feed(len(tail), after)
    return None if rest is None else (len(before), before + rest)


# Comparing outputs ------------------------------------------------------------------------------
#
# Two outputs are compared a chunk at a time; only chunks that differ are looked into, through
# big integers: XOR marks differing bytes, and OR-ing a byte's bits into its lowest bit turns
# "this byte is not zero" into a bit that masks can combine.

def _vouches(
    witness_a: bytes, witness_b: bytes, drop: int, decoded_a: bytes, decoded_b: bytes
) -> bool:
    """Whether every byte certain in `decoded` (equal in its A and B decodes) is certain in
    `witness[drop:]` with the same value (equal in all four)."""
    for lo in range(0, len(decoded_a), _COMPARE_BYTES):
        hi = min(lo + _COMPARE_BYTES, len(decoded_a))
        wa, wb = witness_a[drop + lo : drop + hi], witness_b[drop + lo : drop + hi]
        da, db = decoded_a[lo:hi], decoded_b[lo:hi]
        if wa == da and wb == db:
            continue
        wa_, wb_, da_, db_ = (int.from_bytes(part, "little") for part in (wa, wb, da, db))
        mismatch = _nonzero_bytes((wa_ ^ da_) | (wb_ ^ db_), hi - lo)
        if mismatch & ~_nonzero_bytes(da_ ^ db_, hi - lo):
            return False
    return True


def _nonzero_bytes(value: int, count: int) -> int:
    """`value` with each of its `count` bytes replaced by 1 if it is not zero, else 0."""
    value |= value >> 4
    value |= value >> 2
    value |= value >> 1
    return value & _repeat(b"\x01", count)


def _difference_mask(first: bytes, second: bytes) -> bytes:
    """Bytes, non-zero where two equally long outputs differ, up to the last difference."""
    end = len(first)
    while end > 0:  # trim the agreeing end a chunk at a time
        lo = max(0, end - _COMPARE_BYTES)
        if first[lo:end] != second[lo:end]:
            break
        end = lo
    if end == 0:
        return b""
    xor = int.from_bytes(first[:end], "little") ^ int.from_bytes(second[:end], "little")
    return xor.to_bytes(end, "little")
