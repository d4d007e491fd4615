"""On a machine with an NVIDIA GPU: abifit's verdicts (`fits`, `degraded`, `fails`, by cause)
against real imports and real loads.

1. `abifit doctor --verify --json` (and the plain text) on the interpreter's own environment: the
   verdict, the warnings shown by default, and, for each module abifit says does not load, the
   package's own path run for real, twice, each time in a fresh process: the module imported
   (or a plugin dlopen'ed) after `import torch` where torch is installed, as the package's code
   does, and alone.
2. For each distribution installed under `--extra DIR` (wheels put there with
   `pip install --target`), the same doctor run for that distribution with DIR on PYTHONPATH, the
   real `import` of its top-level package twice (what it logs, which of its native files end
   up mapped in the process), and each native file of it dlopen'ed with RTLD_NOW after `import
   torch`.

Prints one JSON document and, on stderr, a line per case and a summary line.

    python3 bench/device/verdicts.py [--extra DIR [--package NAME]...] [--out FILE]

On the GPU machine (no network there), with abifit's dependencies and the extra packages as
wheels in `.whl/` of the checkout (carried with the working tree):

    pip install -q --no-deps --target /tmp/deps .whl/platformdirs-*.whl .whl/tomli_w-*.whl \
        .whl/backports_zstd-*.whl .whl/resolvelib-*.whl
    pip install -q --no-deps --target /tmp/extra .whl/xformers-*.whl .whl/bitsandbytes-*.whl
    ABIFIT_DEPS=/tmp/deps python3 bench/device/verdicts.py --extra /tmp/extra --out $OUT/v.json

First run (H100 image, torch 2.11 cu130, before the cuda.core `after` rule and the PMIx
prerequisite): 739 modules, every real load and import agreeing with the prediction; the image
`degraded` only by cuda.core's cu12/cu13 `_tensor_bridge` (undefined aoti_torch_*: real loads
fail alone and after a plain `import torch`) and nvshmem's PMIx bootstrap (undefined
pmix_value_load); cuTENSOR and TBB prerequisites and mpi4py's MPICH variant agreeing with
reality; xformers 0.0.35 `degraded` naming `_C.so` and libcudart.so.12 (its real import logs
"xFormers can't load C++/CUDA extensions", `_C.so` not mapped); bitsandbytes 0.50.2 `fits`
with 13 unused variants (the real import maps libbitsandbytes_cuda130.so).

Second run (H200 image, torch 2.11 cu130, with the cuda.core `after` rule and the PMIx
prerequisite; image only, without --extra): the image `fits`, exit 0, nothing on stderr, in
36.7 s: 739 modules, 735 load, 3 need a prerequisite (cuTENSOR, TBB, PMIx), 1 unused variant
(mpi4py's MPICH build), 0 degraded, 0 failing; 739 of 739 real loads and 69 of 69 real imports
agree. cuda.core's cu13 `_tensor_bridge`, which fails alone and after a plain `import torch`
(undefined aoti_torch_dtype_float32), loads on cuda.core's own path (torch's `_C` made global
first), as abifit now says.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEPS = os.environ.get("ABIFIT_DEPS", "")  # where abifit's own dependencies are, if not installed
RUN_ABIFIT = ("import sys; sys.path[:0] = [p for p in sys.argv[1].split(':') if p]; "
              "from abifit.cli import entry; sys.argv = ['abifit', *sys.argv[2:]]; "
              "sys.exit(entry())")

IMPORT = r"""
import ctypes, importlib, io, json, logging, os, sys, warnings
name, path, first = sys.argv[1], sys.argv[2], sys.argv[3]
log = io.StringIO()
logging.basicConfig(stream=log, level=logging.WARNING)
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    try:
        if first:
            importlib.import_module(first)
        if name:
            importlib.import_module(name)
        else:
            ctypes.CDLL(path, mode=os.RTLD_NOW)
        outcome = "ok"
    except BaseException as e:
        outcome = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
mapped = sorted({line.split()[-1] for line in open("/proc/self/maps")
                 if line.rstrip().endswith(".so") or ".so." in line})
print(json.dumps([outcome, log.getvalue()[-2000:], [str(w.message)[:300] for w in caught][-5:],
                  mapped]))
"""


# The package's own path to a module it loads on use, where importing the module by name is not
# what the package does: run as written, twice, each in a fresh process.
OWN_PATHS = {
    # cuda.core's StridedMemoryView handed a torch tensor: it re-opens torch._C with RTLD_GLOBAL,
    # then imports its tensor bridge (cu13/_tensor_bridge.pyi says so)
    "_tensor_bridge": (
        "import sys, torch\n"
        "from cuda.core.utils import StridedMemoryView\n"
        "t = torch.arange(6.0, device='cuda').reshape(2, 3)\n"
        "v = StridedMemoryView.from_any_interface(t, stream_ptr=-1)\n"
        "bridges = sorted(m for m in sys.modules if m.endswith('_tensor_bridge'))\n"
        "print(json.dumps(['ok', f'shape {tuple(v.shape)}; loaded {bridges}']))\n"),
}


def own_path(code: str, env: dict[str, str] | None) -> dict[str, object]:
    outcomes = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", "import json\n" + code],
                              capture_output=True, text=True, env=env, check=False, timeout=300)
        lines = done.stdout.strip().splitlines()
        outcomes.append(json.loads(lines[-1])[1] if done.returncode == 0 and lines
                        else f"failed: {done.stderr.strip().splitlines()[-1:]}")
    return {"code": code, "outcome": outcomes[0], "agree": outcomes[0] == outcomes[1]}


def abifit(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO / "src"), DEPS]))
    return subprocess.run([sys.executable, "-c", RUN_ABIFIT, path, *args], capture_output=True,
                          text=True, env=env, check=False, timeout=560)


def real(name: str, path: str, first: str, env: dict[str, str] | None) -> dict[str, object]:
    """One fresh process: import `first`, then import `name` (or dlopen `path`)."""
    done = subprocess.run([sys.executable, "-c", IMPORT, name, path, first], capture_output=True,
                          text=True, env=env, check=False, timeout=300)
    if done.returncode != 0 or not done.stdout.strip():
        return {"outcome": f"process ended with {done.returncode}: {done.stderr[-300:]}"}
    outcome, log, caught, mapped = json.loads(done.stdout.strip().splitlines()[-1])
    return {"outcome": outcome, "log": log, "warnings": caught, "mapped": mapped}


def twice(name: str, path: str, first: str, env: dict[str, str] | None) -> dict[str, object]:
    runs = [real(name, path, first, env) for _ in range(2)]
    agree = runs[0]["outcome"] == runs[1]["outcome"]
    return {"name": name, "path": path, "after": first, "outcome": runs[0]["outcome"],
            "agree": agree, "log": runs[0].get("log", ""), "warnings": runs[0].get("warnings", []),
            "mapped": runs[0].get("mapped", [])}


def has_torch(env: dict[str, str] | None) -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], env=env, check=False,
                          capture_output=True).returncode == 0


def doctor(packages: list[str], env: dict[str, str] | None) -> dict[str, object]:
    args = ["doctor", *packages, "--python", sys.executable, "--verify", "--no-cache"]
    started = time.perf_counter()
    done = abifit([*args, "--json"], env)
    seconds = time.perf_counter() - started
    text = abifit(args, env)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return {"error": done.stderr[-2000:], "seconds": seconds}
    # the modules that do not load, and those loaded on a path of their package's own
    failing = [m for m in doc["modules"]
               if not m["loads"] or any(key in m["module"] for key in OWN_PATHS)]
    return {"exit": done.returncode, "seconds": round(seconds, 1), "verdict": doc["verdict"],
            "summary": doc["summary"], "text": text.stdout, "text_stderr": text.stderr[-3000:],
            "verification": doc.get("verification"),
            "failing": [{k: m[k] for k in ("module", "kind", "path", "distribution", "loads",
                                           "error", "reachability", "effect")}
                        for m in failing],
            "findings": [{k: f[k] for k in ("kind", "object", "library", "symbol", "effect",
                                            "prerequisite", "severity", "message")}
                         for f in doc["findings"]]}


def own_paths(failing: list[dict[str, object]], env: dict[str, str] | None,
              torch: bool) -> list[dict[str, object]]:
    """Each module abifit says does not load, on the package's own path and alone."""
    out = []
    for m in failing:
        name = str(m["module"]) if m["kind"] == "extension" else ""
        path = str(m["path"])
        entry = {"module": m["module"], "loads": m["loads"], "effect": m["effect"],
                 "after_torch": twice(name, path, "torch" if torch else "", env),
                 "alone": twice(name, path, "", env)}
        code = next((c for key, c in OWN_PATHS.items() if key in str(m["module"])), None)
        if code is not None:
            entry["own_path"] = own_path(code, env)
        out.append(entry)
    return out


def extra_package(extra: str, package: str, torch: bool) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": extra}
    result = doctor([package], env)
    top = package.replace("-", "_")
    result["import"] = twice(top, "", "", env)
    natives = sorted(str(p) for p in Path(extra, top).rglob("*.so"))
    result["import"]["own_mapped"] = [p for p in natives if p in result["import"]["mapped"]]
    result["import"].pop("mapped")
    result["dlopen"] = [{"path": p, **{k: v for k, v in twice("", p, "torch" if torch else "",
                                                              env).items()
                                       if k in ("outcome", "agree")}} for p in natives]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", help="a directory of distributions installed with --target")
    ap.add_argument("--package", action="append", default=[],
                    help="a distribution under --extra to judge (default: each one there)")
    ap.add_argument("--out", help="write the JSON document here too")
    args = ap.parse_args()
    torch = has_torch(None)
    image = doctor([], None)
    image["own_paths"] = own_paths(image.get("failing", []), None, torch)  # type: ignore[arg-type]
    report: dict[str, object] = {"python": sys.executable, "torch": torch, "image": image}
    print(f"image: {image.get('verdict')} exit {image.get('exit')}, "
          f"{image.get('summary')}", file=sys.stderr)
    for own in image["own_paths"]:  # type: ignore[attr-defined]
        print(f"  {own['module']}: abifit {'loads' if own['loads'] else own['effect']}; "
              f"after torch "
              f"{own['after_torch']['outcome']}; alone {own['alone']['outcome']}"
              + (f"; own path {own['own_path']['outcome']}" if "own_path" in own else ""),
              file=sys.stderr)
    if args.extra:
        packages = args.package or sorted(
            p.name.split("-")[0] for p in Path(args.extra).glob("*.dist-info"))
        extras = {}
        for package in packages:
            extras[package] = result = extra_package(args.extra, package, torch)
            print(f"{package}: {result.get('verdict')} exit {result.get('exit')}; import "
                  f"{result['import']['outcome']} (own files mapped: "
                  f"{[Path(p).name for p in result['import']['own_mapped']]})",
                  file=sys.stderr)
        report["extras"] = extras
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).write_text(text, "utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
