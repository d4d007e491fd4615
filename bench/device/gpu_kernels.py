"""On a machine with an NVIDIA GPU: abifit's kernel-image predictions against real launches.

`probe.cu` (one kernel, a host function that launches it and checks the result) is built with
nvcc once per single target: sm_120, sm_100, sm_80 SASS, sm_90a SASS and compute_80 PTX. For
each library:

- abifit's listing (`inspect --json`: SASS and PTX architectures) against `cuobjdump
  --list-elf --list-ptx`, when cuobjdump is on PATH;
- abifit's prediction: `abifit inspect LIB --gpu auto --json` (the GPU from NVML or
  nvidia-smi, the driver's CUDA release from cuDriverGetVersion), verdict and error;
- the real outcome: `probe_run()` through ctypes in a fresh process: 0, or the CUDA error string.

A prediction agrees when "runs" matches and, for a failure, the predicted error is the real one.
Prints one JSON document and, on stderr, a line per library and a summary line.

    python3 bench/device/gpu_kernels.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGETS = {
    "sm_120": "arch=compute_120,code=sm_120",
    "sm_100": "arch=compute_100,code=sm_100",
    "sm_80": "arch=compute_80,code=sm_80",
    "sm_90a": "arch=compute_90a,code=sm_90a",
    "compute_80": "arch=compute_80,code=compute_80",
}
RUN = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.probe_error.restype = ctypes.c_char_p
code = lib.probe_run()
print("ok" if code == 0 else lib.probe_error(code).decode())
"""


def abifit(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "abifit", *args], capture_output=True,
                          text=True, env=env, check=False, timeout=300)


def build(name: str, gencode: str, work: Path) -> Path:
    out = work / f"libprobe_{name}.so"
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", f"-gencode={gencode}",
                    str(HERE / "probe.cu"), "-o", str(out)], check=True, capture_output=True)
    return out


def cuobjdump_listing(path: Path) -> list[str] | None:
    tool = shutil.which("cuobjdump")
    if tool is None:
        return None
    done = subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], capture_output=True,
                          text=True, check=False)
    found = re.findall(r"^(ELF|PTX) file\s+\d+: \S+?\.((?:sm|compute)_\d+[af]?)\.(?:cubin|ptx)$",
                       done.stdout, re.M)
    return sorted(f"{kind} {arch}" for kind, arch in found)


def abifit_listing(path: Path) -> list[str]:
    """abifit's listing of every cubin and PTX image, as cuobjdump names them."""
    sys.path.insert(0, str(REPO / "src"))
    from abifit.formats.elf import parse_elf
    from abifit.formats.fatbin import read_fatbins
    from abifit.formats.sources import FileSource

    with FileSource(path) as source:
        code = read_fatbins(source, parse_elf(source))
    return sorted(f"{kind} {arch.replace('compute_', 'sm_')}" for kind, arch in code.listing())


def real_run(path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", RUN, str(path)], capture_output=True,
                          text=True, check=False, timeout=120)
    return done.stdout.strip() or f"crashed: {done.stderr.strip()[-300:]}"


def one(name: str, path: Path, gpu_option: str) -> dict[str, object]:
    done = abifit("inspect", str(path), "--gpu", gpu_option, "--json")
    doc = json.loads(done.stdout)
    (obj,) = doc["objects"]
    gpu = obj["gpu"] or {}
    predicted_runs = gpu.get("verdict") in ("runs-sass", "runs-ptx-jit")
    actual = real_run(path)
    actual_runs = actual == "ok"
    agrees = predicted_runs == actual_runs and (actual_runs or gpu.get("error") == actual)
    listing = abifit_listing(path)
    reference = cuobjdump_listing(path)
    return {
        "target": name, "gpu": doc["gpu"], "verdict": gpu.get("verdict"),
        "predicted_error": gpu.get("error"), "reason": gpu.get("reason"),
        "actual": actual, "agrees": agrees, "abifit_exit": done.returncode,
        "abifit_listing": listing, "cuobjdump_listing": reference,
        "listing_agrees": None if reference is None else listing == reference,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--gpu", default="auto", help="what abifit is told (default: auto)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, gencode in TARGETS.items():
            result = one(name, build(name, gencode, Path(tmp)), args.gpu)
            results.append(result)
            print(f"{name:<11} predicted {result['verdict']:<16} actual {result['actual']!r:<60} "
                  f"{'agrees' if result['agrees'] else 'DISAGREES'}; listing "
                  f"{result['abifit_listing']} vs cuobjdump {result['cuobjdump_listing']}",
                  file=sys.stderr)
    agree = sum(1 for r in results if r["agrees"])
    listings = sum(1 for r in results if r["listing_agrees"])
    doc = {"results": results, "agree": agree, "total": len(results),
           "listings_agree": listings}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(f"gpu_kernels: {agree}/{len(results)} predictions agree with real launches; "
          f"{listings}/{len(results)} listings equal cuobjdump's", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
