"""The C allocator of this process, set for a program that holds large buffers for a while.

glibc's malloc raises its mmap threshold each time a large block is freed, so later blocks of a
few megabytes come from heaps it keeps, and each thread gets an arena of its own; a run that
reads many wheel members at once (a matrix of torch releases) then held more than twice the
memory it used (835 MB for 350 MB live). A fixed threshold of 256 KiB sends large blocks
straight to mmap, which returns them on free, and two arenas bound what threads keep. Elsewhere
than glibc, nothing is changed.
"""

from __future__ import annotations

import ctypes
import gc

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 256 << 10
ARENAS = 2


def tune_allocator() -> bool:
    """Set glibc's mmap threshold and arena count; whether it was done."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENAS))


# A run builds millions of objects that live until it ends (symbol names, parsed views) and few
# cycles: with the default thresholds the collector scanned them over and over (0.7 s of a 6 s
# doctor run on 712 modules). Young collections now come every 50,000 allocations and full
# ones ten times more rarely; what was imported before is frozen out of their way.
COLLECT_EVERY = 50_000
FULL_EVERY = 100


def tune_collector() -> None:
    """Set the cyclic garbage collector for a command-line run (see above)."""
    gc.freeze()
    first, second, _third = gc.get_threshold()
    gc.set_threshold(max(first, COLLECT_EVERY), second, FULL_EVERY)
