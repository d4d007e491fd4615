"""Worker of bench_fatbin.py --crafted: `read_gpu_code` on one file, in a fresh process.

    PYTHONPATH=src python bench/_fatbin_crafted.py FILE

Prints one JSON object: the seconds of `parse_elf` + `read_gpu_code`, the resident set after
imports and its high-water mark after reading (VmHWM of /proc/self/status; `ru_maxrss` is carried
across fork + exec, see _elf_peak.py), the growth of the anonymous resident set (RssAnon: memory
abifit allocated, where VmHWM also counts the file pages read through the mmap), the number of
`FatbinContainer` values kept and of fat binaries they stand for, the size of the value as the
cache would store it (`datacodec.encode`), and the error when the read stopped at a limit.
"""

from __future__ import annotations

import json
import sys
import time

from _common import memory_status

from abifit.errors import FormatError
from abifit.formats import datacodec
from abifit.formats.elf import parse_elf
from abifit.formats.fatbin import GpuCode, read_gpu_code
from abifit.formats.sources import FileSource


def read(path: str) -> GpuCode | FormatError | None:
    try:
        with FileSource(path) as source:
            return read_gpu_code(source, parse_elf(source, relocations=False))
    except FormatError as e:
        return e


def measure(path: str) -> dict[str, object]:
    before = memory_status()
    start = time.perf_counter()
    code = read(path)
    seconds = time.perf_counter() - start
    after = memory_status()
    found: dict[str, object] = {
        "seconds": seconds,
        "rss_after_imports_bytes": before["VmRSS"],
        "hwm_after_read_bytes": after["VmHWM"],
        "rss_anon_growth_bytes": after["RssAnon"] - before["RssAnon"],
        "error": str(code) if isinstance(code, FormatError) else None,
    }
    if isinstance(code, GpuCode):
        found.update({
            "values_kept": len(code.containers) + len(code.embedded),
            "fat_binaries": code.fat_binaries + sum(c.count for c in code.embedded),
            "sass": sorted({str(a) for c in (*code.containers, *code.embedded)
                            for a in c.sass_archs}),
            "encoded_bytes": len(datacodec.encode(code)),
        })
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: _fatbin_crafted.py FILE", file=sys.stderr)
        return 2
    print(json.dumps(measure(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
