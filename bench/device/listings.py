"""abifit's fat-binary listing against `cuobjdump --list-elf --list-ptx` on every ELF file with a
`.nv_fatbin` section under the given directories (a Python environment's site-packages, a CUDA
toolkit's lib64): entry for entry, in order.

Prints one JSON document (per file: entries, agreement, both tools' times) and, on stderr, each
disagreement and a summary line. Files are taken smallest first until `--budget` seconds of
cuobjdump time are spent.

    python3 bench/device/listings.py DIR... [--budget 240]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from abifit.errors import FormatError
from abifit.formats.elf import parse_elf
from abifit.formats.fatbin import has_gpu_code, read_fatbins
from abifit.formats.sources import FileSource
from abifit.host.localfs import is_elf_file

LINE = re.compile(r"^(ELF|PTX) file\s+\d+: \S+?\.((?:sm|compute)_\d+[af]?)\.(?:cubin|ptx)$", re.M)


def candidates(roots: list[str]) -> list[Path]:
    found = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = Path(dirpath) / name
                if ".so" in name and path.is_file() and not path.is_symlink() \
                        and is_elf_file(str(path)):
                    found.append(path)
    return sorted(set(found), key=lambda p: p.stat().st_size)


def listing(path: Path) -> tuple[list[tuple[str, str]], float] | None:
    started = time.perf_counter()
    with FileSource(path) as source:
        image = parse_elf(source)
        if not has_gpu_code(image):
            return None
        code = read_fatbins(source, image)
    return [(kind, arch.replace("compute_", "sm_")) for kind, arch in code.listing()], \
        time.perf_counter() - started


def reference(tool: str, path: Path) -> tuple[list[tuple[str, str]], float]:
    started = time.perf_counter()
    done = subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], capture_output=True,
                          text=True, check=False, timeout=300)
    return [(kind, arch) for kind, arch in LINE.findall(done.stdout)], \
        time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--budget", type=float, default=240.0)
    args = parser.parse_args()
    tool = shutil.which("cuobjdump")
    if tool is None:
        print("cuobjdump is not on PATH", file=sys.stderr)
        return 2
    results, spent = [], 0.0
    for path in candidates(args.roots):
        try:
            ours = listing(path)
        except FormatError as e:
            results.append({"path": str(path), "error": str(e), "agrees": False})
            continue
        if ours is None:
            continue
        if spent > args.budget:
            break
        theirs, took = reference(tool, path)
        spent += took
        agrees = ours[0] == theirs
        results.append({"path": str(path), "size": path.stat().st_size, "entries": len(theirs),
                        "agrees": agrees, "abifit_s": round(ours[1], 4),
                        "cuobjdump_s": round(took, 3)})
        if not agrees:
            print(f"DISAGREES {path}: abifit {ours[0][:6]}... ({len(ours[0])}) vs cuobjdump "
                  f"{theirs[:6]}... ({len(theirs)})", file=sys.stderr)
    agree = sum(1 for r in results if r["agrees"])
    entries = sum(int(r.get("entries", 0)) for r in results)
    print(json.dumps({"files": results, "agree": agree, "total": len(results),
                      "entries": entries}, indent=2))
    print(f"listings: {agree}/{len(results)} files with .nv_fatbin equal cuobjdump's "
          f"({entries} entries; {spent:.0f} s of cuobjdump)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
