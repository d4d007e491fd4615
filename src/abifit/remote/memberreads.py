"""Every ELF member of a wheel read at once (`member_views`, `member_summaries`), `READ_JOBS`
members at a time: the large members first, largest first, so that their long reads overlap,
then the small ones in file order, which share read-ahead spans; the results in the wheel's
order, each with a progress line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, ImageSummary
from abifit.formats.wheel import WHOLE_MEMBER, Member
from abifit.remote.packageindex import IndexFile
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheels import RemoteWheel

R = TypeVar("R")

READ_JOBS = 8  # members read at once (network waits and zlib overlap)


def member_views(
    file: IndexFile, ctx: RemoteContext, progress: Callable[[str], None],
    wheel: RemoteWheel | None = None, jobs: int = READ_JOBS,
) -> Iterator[tuple[str, ElfImage | FormatError]]:
    """(member path, dynamic view or the error reading it) for every ELF member of a wheel,
    `jobs` members read at once."""
    wheel = RemoteWheel(file, ctx) if wheel is None else wheel
    return member_reads(wheel, wheel.view, progress, jobs)


def member_summaries(
    file: IndexFile, ctx: RemoteContext, progress: Callable[[str], None],
    wheel: RemoteWheel | None = None, jobs: int = READ_JOBS,
) -> Iterator[tuple[str, ImageSummary | FormatError]]:
    """(member path, summary of its dynamic view or the error reading it) for every ELF member
    of a wheel, as `member_views` reads them (`RemoteWheel.summary`)."""
    wheel = RemoteWheel(file, ctx) if wheel is None else wheel
    return member_reads(wheel, wheel.summary, progress, jobs)


def member_reads(
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
