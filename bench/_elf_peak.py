"""Worker of bench_elf.py: peak memory of `parse_elf` on one file, in a fresh process.

    PYTHONPATH=src python bench/_elf_peak.py tracemalloc FILE
    PYTHONPATH=src python bench/_elf_peak.py rss FILE

Prints one JSON object. `tracemalloc` mode reports the peak and the retained size of Python
allocations while parsing (the image is kept alive; mmap'd file pages are not allocations).
`rss` mode runs without tracemalloc (its bookkeeping would inflate RSS) and reports the resident
set after imports and its high-water mark after parsing; the high-water mark includes the file
pages of the tables touched through the mmap.

The high-water mark is VmHWM of /proc/self/status, not `ru_maxrss`: on Linux `ru_maxrss` carries
the parent's high-water mark across fork + exec (a child of a 100 MB parent starts at 100 MB), so
it is reported for reference only.
"""

from __future__ import annotations

import json
import resource
import sys
import tracemalloc

from _common import memory_status

from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import FileSource

STATUS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")  # the lines of /proc/self/status read

def parse(path: str) -> ElfImage:
    with FileSource(path) as source:
        return parse_elf(source)



def ru_maxrss() -> int:
    """getrusage's high-water mark in bytes (Linux reports KiB); inherited across exec."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_tracemalloc(path: str) -> dict[str, int]:
    tracemalloc.start()
    image = parse(path)
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"peak_bytes": peak, "retained_bytes": retained, "symbols": len(image.symbols)}


def measure_rss(path: str) -> dict[str, int]:
    before, ru_before = memory_status(STATUS), ru_maxrss()
    image = parse(path)
    after, ru_after = memory_status(STATUS), ru_maxrss()
    return {
        "rss_after_imports_bytes": before["VmRSS"],
        "hwm_after_imports_bytes": before["VmHWM"],
        "hwm_after_parse_bytes": after["VmHWM"],
        "peak_delta_bytes": after["VmHWM"] - before["VmRSS"],
        "rss_anon_growth_bytes": after["RssAnon"] - before["RssAnon"],
        "ru_maxrss_after_imports_bytes": ru_before,
        "ru_maxrss_after_parse_bytes": ru_after,
        "symbols": len(image.symbols),
    }


MODES = {"tracemalloc": measure_tracemalloc, "rss": measure_rss}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in MODES:
        print(f"usage: _elf_peak.py {{{'|'.join(MODES)}}} FILE", file=sys.stderr)
        return 2
    print(json.dumps(MODES[argv[0]](argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
