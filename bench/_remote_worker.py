"""Worker of bench_remote.py: where the bytes of one cold remote read of a wheel go.

    PYTHONPATH=src python bench/_remote_worker.py REQUIREMENT CACHE_DIR \
        --python-version 3.11 --platform TAG --index-url URL

Builds the context `abifit inspect REQUIREMENT` builds (pip's index configuration with
`--index-url`, an HTTP client, the cache in CACHE_DIR, which should be empty), resolves the
requirement and runs `abifit.remote.memberreads.member_views` over the wheel, as `inspect` does.
Prints one JSON object on stdout: the bytes and requests of each phase, read from the client's
transfer counters at phase boundaries (resolving the requirement, the zip directory, then each
member opened), with the seconds each took and the part of them spent waiting in
`HttpSource.read_at`, and for each member opened:

- its sizes and compression method, whether it is ELF, and how it was read (`whole` for small
  members fetched at once, `prefix+tail` for big DEFLATE ones, `stored`);
- the HTTP ranges it cost, each as (offset from the member's local header, as a percentage of its
  compressed size; bytes), and their bytes in the front and the back half of the member;
- the uncompressed reads of the ELF parser: how far the front reads reach and where the
  lowest read of the back half starts (the tail must be decoded back to there), as percentages
  of the member's uncompressed size.

Boundaries come from wrapping `abifit.remote.memberbytes.open_member` where
`abifit.remote.wheels` calls it (one call per member not served by the cache or by an identical
twin) and `HttpSource.read_at` (every ranged read of the wheel);
the wrappers only record. Bytes read ahead past a member's end count for that member.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from abifit.errors import FormatError
from abifit.formats.sources import ByteSource
from abifit.formats.wheel import WHOLE_MEMBER, Member
from abifit.remote import wheels
from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient, HttpSource
from abifit.remote.memberreads import member_views
from abifit.remote.packageindex import PackageIndex, Target, pip_index_config
from abifit.remote.pagefetch import cached_fetch
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheels import resolve


@dataclass(slots=True)
class Phase:
    """One stretch of the read: what it is, its transfer counters at start and end, its reads."""

    label: str
    bytes_start: int
    requests_start: int
    member: Member | None = None
    bytes_end: int = 0
    requests_end: int = 0
    started: float = field(default_factory=time.perf_counter)
    ended: float = 0.0
    range_seconds: float = 0.0  # inside HttpSource.read_at: waiting for ranges
    ranges: list[tuple[int, int]] = field(default_factory=list)  # HTTP (offset, length)
    reads: list[tuple[int, int]] = field(default_factory=list)  # uncompressed (offset, length)
    elf: bool | None = None
    error: str | None = None
    how: str = ""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "phase": self.label,
            "bytes_fetched": self.bytes_end - self.bytes_start,
            "requests": self.requests_end - self.requests_start,
            "seconds": round(self.ended - self.started, 4),
            "range_read_seconds": round(self.range_seconds, 4),
        }
        if self.member is None:
            return out
        m = self.member
        front = sum(length for offset, length in self.ranges
                    if offset - m.header_offset < m.compressed_size // 2)
        fetched = self.bytes_end - self.bytes_start
        out |= {
            "size": m.size,
            "compressed_size": m.compressed_size,
            "method": "deflate" if m.method == zipfile.ZIP_DEFLATED else m.method,
            "read_as": self.how,
            "elf": self.elf,
            "error": self.error,
            "fetched_percent_of_compressed": round(100 * fetched / max(m.compressed_size, 1), 2),
            "front_half_bytes": front,
            "back_half_bytes": sum(length for _, length in self.ranges) - front,
            "ranges": [[_percent(offset - m.header_offset, m.compressed_size), length]
                       for offset, length in self.ranges],
            **self._reach(),
        }
        return out

    def _reach(self) -> dict[str, object]:
        """How far the parser's uncompressed reads go from each end, as % of the member."""
        size = self.member.size if self.member else 0
        half = size // 2
        front = [offset + length for offset, length in self.reads if offset + length <= half]
        back = [offset for offset, length in self.reads if offset + length > half]
        return {
            "parser_reads": len(self.reads),
            "front_reach_percent": _percent(max(front), size) if front else None,
            "back_reach_from_percent": _percent(min(back), size) if back else None,
        }


def _percent(part: int, whole: int) -> float:
    return round(100 * part / whole, 2) if whole else 0.0


class Recorder:
    """The phases of one read, fed by the wrappers below."""

    def __init__(self, client: HttpClient) -> None:
        self.client = client
        self.phases: list[Phase] = []

    def start(self, label: str, member: Member | None = None) -> Phase:
        if self.phases:
            self.finish()
        t = self.client.transfer
        self.phases.append(Phase(label, t.bytes_fetched, t.requests, member))
        return self.phases[-1]

    def finish(self) -> None:
        t, last = self.client.transfer, self.phases[-1]
        last.bytes_end, last.requests_end, last.ended = t.bytes_fetched, t.requests, \
            time.perf_counter()

    @property
    def current(self) -> Phase:
        return self.phases[-1]


class RecordingSource:
    """A member's uncompressed bytes, with every read the parser makes written down."""

    def __init__(self, base: ByteSource, phase: Phase) -> None:
        self._base = base
        self._phase = phase

    @property
    def name(self) -> str:
        return self._base.name

    @property
    def size(self) -> int:
        return self._base.size

    def read_at(self, offset: int, length: int) -> bytes:
        self._phase.reads.append((offset, length))
        return self._base.read_at(offset, length)


def install_wrappers(recorder: Recorder) -> None:
    """Wrap `open_member` (where `RemoteWheel` calls it) and `HttpSource.read_at` to record
    phases and ranges."""
    open_member = wheels.open_member
    read_at = HttpSource.read_at

    def recording_open(archive: ByteSource, member: Member, where: str,
                       local: bool = False) -> ByteSource:
        phase = recorder.start(f"member {member.path}", member)
        opened = open_member(archive, member, where, local=local)
        phase.how = ("stored" if member.method == zipfile.ZIP_STORED
                     else "whole" if member.compressed_size <= WHOLE_MEMBER
                     else "prefix+tail")
        return RecordingSource(opened, phase)

    def recording_read(self: HttpSource, offset: int, length: int) -> bytes:
        phase = recorder.current
        phase.ranges.append((offset, length))
        start = time.perf_counter()
        try:
            return read_at(self, offset, length)
        finally:
            phase.range_seconds += time.perf_counter() - start

    wheels.open_member = recording_open
    HttpSource.read_at = recording_read  # type: ignore[method-assign]


def breakdown(requirement: str, cache_dir: Path, target: Target,
              index_url: str) -> dict[str, object]:
    """The phases of a cold read of `requirement`'s wheel, and the totals."""
    client = HttpClient()
    cache = Cache(cache_dir)
    config = pip_index_config(os.environ, index_url=index_url)
    index = PackageIndex(cached_fetch(client, cache), config)
    ctx = RemoteContext(index, client, cache, target)
    recorder = Recorder(client)
    install_wrappers(recorder)
    start = time.perf_counter()
    recorder.start("resolve (index page)")
    file = resolve(requirement, ctx)
    recorder.start("zip directory")
    yielded = 0
    for path, view in member_views(file, ctx, lambda _message: None):
        yielded += 1
        phase = recorder.current
        if phase.member is not None and phase.member.path == path:  # else an identical twin's
            phase.elf = True
            phase.error = str(view) if isinstance(view, FormatError) else None
    recorder.finish()
    for phase in recorder.phases:
        if phase.member is not None and phase.elf is None:
            phase.elf = False
    members = [p for p in recorder.phases if p.member is not None]
    return {
        "requirement": requirement,
        "wheel": file.filename,
        "wheel_bytes": ctx.state.wheel_sizes.get(file.filename),
        "seconds": round(time.perf_counter() - start, 3),
        "range_read_seconds": round(sum(p.range_seconds for p in recorder.phases), 3),
        "bytes_fetched": client.transfer.bytes_fetched,
        "requests": client.transfer.requests,
        "members_opened": len(members),
        "elf_members_opened": sum(1 for p in members if p.elf),
        "elf_members": yielded,
        "phases": [p.to_json() for p in recorder.phases],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("requirement")
    parser.add_argument("cache_dir", type=Path)
    parser.add_argument("--python-version", required=True, metavar="X.Y")
    parser.add_argument("--platform", required=True, metavar="TAG")
    parser.add_argument("--index-url", required=True, metavar="URL")
    args = parser.parse_args(argv)
    major, _, minor = args.python_version.partition(".")
    target = Target((int(major), int(minor)), platforms=(args.platform,))
    report = breakdown(args.requirement, args.cache_dir, target, args.index_url)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
