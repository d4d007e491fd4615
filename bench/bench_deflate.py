"""Benchmark: decoding the end of a big DEFLATE member from a tail of its compressed bytes.

What is measured, on one big file (default: torch 2.13.0's libtorch_cpu.so, 434 MB, from the
test environment if it exists; otherwise 128 MB of this machine's shared libraries concatenated
into a temporary file), compressed once as raw DEFLATE (`--level`, default 6, as zipfile does):

- for each tail size (`--tails`, default 256 KiB, 1, 4 and 16 MiB of compressed data): the
  median time of `decode_tail` over `--repeat` runs, the view's size, its certain fraction,
  the number of uncertain ranges, and the certain fraction by distance from the view's start
  (back-references into the unknown window die out, so certainty should grow);
- how many bit offsets passed the header filter and were tried before success, counted by
  wrapping the module's private generator of candidates (a measurement, not an API);
- that every certain byte equals the original (`wrong_certain_bytes` must be 0).

Output: one JSON document on stdout; progress and a summary on stderr.

    .venv/bin/python bench/bench_deflate.py [--file PATH] [--level 6] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from _common import REPO, Log, Runs, base_machine_info, timed

from abifit.formats import deflate
from abifit.formats.deflate import TailView, decode_tail

SCHEMA_VERSION = 1
KiB = 1 << 10
MiB = 1 << 20
CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
TORCH_CPU = CACHE / "torch-2.13.0/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
SYSTEM_LIBRARIES = Path("/usr/lib/x86_64-linux-gnu")
REGIONS = ((0, 32 * KiB), (32 * KiB, 64 * KiB), (64 * KiB, 256 * KiB), (256 * KiB, MiB),
           (MiB, None))


def default_input(log: Log) -> Path:
    """libtorch_cpu.so if the test environment has it, else concatenated system libraries."""
    if TORCH_CPU.exists():
        return TORCH_CPU
    target = Path(tempfile.gettempdir()) / "abifit-bench-deflate-input.bin"
    if not target.exists():
        log(f"building {target} from {SYSTEM_LIBRARIES}/*.so*")
        with open(target, "wb") as out:
            for path in sorted(SYSTEM_LIBRARIES.glob("*.so*")):
                if out.tell() >= 128 * MiB:
                    break
                if path.is_file() and not path.is_symlink():
                    out.write(path.read_bytes())
    return target


def compress(data: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


class CandidateCounter:
    """Counts the bit offsets `decode_tail` takes from the module's candidate generator."""

    def __init__(self) -> None:
        self.count = 0
        self._original = deflate._block_starts

    def __enter__(self) -> CandidateCounter:
        def counting(tail: bytes) -> Iterator[int]:
            for bit in self._original(tail):
                self.count += 1
                yield bit

        deflate._block_starts = counting
        return self

    def __exit__(self, *_: object) -> None:
        deflate._block_starts = self._original


def known_ranges(view: TailView) -> Iterator[tuple[int, int]]:
    position = view.start
    for lo, hi in view.uncertain:
        yield position, lo
        position = hi
    yield position, view.start + len(view.data)


def wrong_certain_bytes(view: TailView, original: bytes) -> int:
    wrong = 0
    for lo, hi in known_ranges(view):
        got, want = view.data[lo - view.start : hi - view.start], original[lo:hi]
        if got != want:
            wrong += sum(a != b for a, b in zip(got, want, strict=True))
    return wrong


def certain_fraction(view: TailView, lo: int, hi: int) -> float:
    first, last = view.start + lo, view.start + hi
    unknown = sum(max(0, min(b, last) - max(a, first)) for a, b in view.uncertain)
    return round(1 - unknown / (last - first), 4)


def measure_tail(
    compressed: bytes, original: bytes, size: int, repeat: int, log: Log
) -> dict[str, object]:
    tail = compressed[-size:]
    with CandidateCounter() as counter:
        view = decode_tail(tail, len(original))
    seconds = []
    for _ in range(repeat):
        elapsed, view = timed(lambda: decode_tail(tail, len(original)))
        seconds.append(elapsed)
    regions = {}
    for lo, hi in REGIONS:
        end = len(view.data) if hi is None else min(hi, len(view.data))
        if lo < end:
            regions[f"{lo // KiB}K-{'end' if hi is None else f'{hi // KiB}K'}"] = (
                certain_fraction(view, lo, end))
    runs = Runs(tuple(seconds))
    certain = certain_fraction(view, 0, len(view.data))
    wrong = wrong_certain_bytes(view, original)
    log(f"tail {size // KiB} KiB: {runs.median:.3f} s, {len(view.data)} bytes, certain {certain}, "
        f"{counter.count} candidates, wrong certain bytes {wrong}")
    return {
        "tail_bytes": len(tail),
        "time": runs.to_json(),
        "candidates_tried": counter.count,
        "view_bytes": len(view.data),
        "view_start": view.start,
        "certain_fraction": certain,
        "uncertain_ranges": len(view.uncertain),
        "certain_fraction_by_distance": regions,
        "wrong_certain_bytes": wrong,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, help="the member to compress (default: see above)")
    parser.add_argument("--level", type=int, default=6)
    parser.add_argument("--tails", type=int, nargs="+", default=[256 * KiB, MiB, 4 * MiB, 16 * MiB])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    log = Log(args.json_only)
    path = args.file or default_input(log)
    original = path.read_bytes()
    log(f"compressing {path} ({len(original)} bytes) at level {args.level}")
    compress_s, compressed = timed(lambda: compress(original, args.level))
    results = [measure_tail(compressed, original, size, args.repeat, log) for size in args.tails]
    document = {
        "schema_version": SCHEMA_VERSION,
        "machine": {**base_machine_info(), "zlib": zlib.ZLIB_RUNTIME_VERSION},
        "input": {"path": str(path), "bytes": len(original), "level": args.level,
                  "compressed_bytes": len(compressed), "compress_s": round(compress_s, 2)},
        "tails": results,
        "repo": str(REPO),
    }
    json.dump(document, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
