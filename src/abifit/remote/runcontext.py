"""What reading wheels from an index needs for a run: `RemoteContext`, the settings fixed for
the run, and its `RunState`, what the run learns while it reads."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient
from abifit.remote.packageindex import PackageIndex, Target

if TYPE_CHECKING:
    from abifit.remote.store import SeenView
    from abifit.remote.wheels import RemoteWheel


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
