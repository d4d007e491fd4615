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
