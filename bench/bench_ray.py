"""Benchmark: `index add` and `matrix` on a local Ray cluster against the same work without it.

A loopback index serves `--wheels` releases of a package whose wheel holds a library of 4,000
exported functions and a 2 MB table (about 1 MB compressed: what abifit reads of each is the
dynamic tables, as of a real wheel), every request held `--latency` seconds (a network's round
trip), and an extension built against the first release for the matrix (a cell per release).

Measured, each a whole `python -m abifit` process with an empty cache directory, medians of
`--repeat`:
- local: `index add NAME --versions '>=0'` with `--jobs 4` (the default) and with `--jobs 1`;
  `matrix EXT --against NAME` with `--jobs 4`;
- cluster: the same with `--ray ADDRESS` on a Ray cluster of one node with 1, 2, ... CPUs
  (`--workers`), started for each size and stopped after.
Throughput is wheels/s and cells/s; the ratio is to the local `--jobs 4` run. Every run must
record every wheel (and the cluster's store must export as the local `--jobs 1` run's, byte
for byte) and give the same matrix document.

This machine's cores bound what more workers can give; the JSON also holds what one wheel
costs here (CPU-seconds and bytes fetched, from the local `--jobs 1` run), the figures with
which to size a real cluster.

    .venv/bin/python bench/bench_ray.py [--wheels 24] [--latency 0.02] [--workers 1,2]
        [--repeat 3] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from _common import REPO, Log, Runs, base_machine_info, byte_compile_abifit, ratio

sys.path.insert(0, str(REPO / "tests"))
from helpers import big_library_source, make_wheel
from httpserver import LoopbackIndex, LoopbackServer, publish_index
from raycluster import RAY, ray_env, start_cluster

TARGET = ("--python-version", "3.11", "--platform", "linux_x86_64")


def build(root: Path, wheels: int) -> dict[str, list[tuple[str, bytes]]]:
    """The package `benchlib` in `wheels` releases and `benchext` built against it."""
    source = root / "lib.c"
    source.write_text(big_library_source(4000, 2_000_000))
    library = root / "libbench.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-Wl,-soname,libbench.so", "-o",
                    str(library), str(source)], check=True)
    ext_source = root / "ext.c"
    ext_source.write_text("int tensor_kernel_dispatch_impl_cuda_cpu_0(int);\n"
                          "int use(int x) { return tensor_kernel_dispatch_impl_cuda_cpu_0(x); }\n")
    ext = root / "_ops.abi3.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(ext), str(ext_source), f"-L{root}",
                    "-lbench", "-Wl,-rpath,$ORIGIN/../benchlib"], check=True)
    lib_bytes = library.read_bytes()
    return {
        "benchlib": [make_wheel("benchlib", f"1.{n}", {"benchlib/__init__.py": b"",
                                                       "benchlib/libbench.so": lib_bytes})
                     for n in range(wheels)],
        "benchext": [make_wheel("benchext", "1.0", {"benchext/__init__.py": b"",
                                                    "benchext/_ops.abi3.so": ext.read_bytes()},
                                tag="cp310-abi3-linux_x86_64")],
    }


@contextmanager
def cluster(cpus: int) -> Iterator[str]:
    """A one-node Ray cluster with `cpus` CPUs (`tests/raycluster.py`), stopped on exit."""
    started = start_cluster((cpus,))
    try:
        yield started.address
    finally:
        started.stop()


def abifit(args: Sequence[str], cache: Path) -> tuple[float, float, dict[str, object]]:
    """(seconds, CPU-seconds of the process, its JSON document)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "abifit", *args, "--json", "--cache-dir",
                           str(cache)], capture_output=True, text=True, env=ray_env(),
                          timeout=1800, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"error: abifit {' '.join(args[:2])} exited {done.returncode}: "
                         f"{done.stderr[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc: dict[str, object] = json.loads(done.stdout)
    return seconds, cpu, doc


def index_add(index: LoopbackIndex, root: Path, name: str, *extra: str,
              ) -> tuple[float, float, dict[str, object], bytes]:
    cache = root / name
    seconds, cpu, doc = abifit(["index", "add", "benchlib", "--versions", ">=0", *TARGET,
                                "--index-url", index.url, *extra], cache)
    result = doc["result"]
    assert isinstance(result, dict)
    if any(w["status"] != "recorded" for w in result["wheels"]):
        raise SystemExit(f"error: {name}: not every wheel was recorded")
    export = root / f"{name}.export"
    subprocess.run([sys.executable, "-m", "abifit", "index", "export", str(export),
                    "--cache-dir", str(cache)], env=ray_env(), check=True, capture_output=True)
    data = export.read_bytes()
    shutil.rmtree(cache, ignore_errors=True)
    return seconds, cpu, result, data


def matrix(index: LoopbackIndex, root: Path, name: str, *extra: str,
           ) -> tuple[float, dict[str, object]]:
    cache = root / name
    seconds, _cpu, doc = abifit(["matrix", "benchext", "--against", "benchlib>=0", *TARGET,
                                 "--index-url", index.url, *extra], cache)
    for key in ("transfer", "checked_at"):
        doc.pop(key, None)
    shutil.rmtree(cache, ignore_errors=True)
    return seconds, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--wheels", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--workers", default="1,2", help="Ray CPUs to try, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    if RAY is None:
        raise SystemExit("error: needs Ray (pip install 'abifit[ray]')")
    byte_compile_abifit()
    sizes = [int(n) for n in args.workers.split(",")]
    root = Path(tempfile.mkdtemp(prefix="abifit-bench-ray-"))
    try:
        log(f"building {args.wheels} wheels")
        projects = build(root, args.wheels)
        with LoopbackServer(delay_s=args.latency) as server:
            index = publish_index(server, projects)
            runs: dict[str, list[float]] = {}
            cells: dict[str, list[float]] = {}
            same = True
            reference: bytes | None = None
            document: dict[str, object] | None = None
            cpu_per_wheel = bytes_per_wheel = 0.0
            for round_ in range(args.repeat):
                log(f"round {round_ + 1}/{args.repeat}: local")
                seconds, cpu, result, data = index_add(index, root, "jobs1", "--jobs", "1")
                runs.setdefault("local_jobs1", []).append(seconds)
                reference = reference or data
                same &= data == reference
                cpu_per_wheel = cpu / args.wheels
                bytes_per_wheel = float(result["bytes_fetched"]) / args.wheels
                seconds, _cpu, _result, _data = index_add(index, root, "jobs4")
                runs.setdefault("local_jobs4", []).append(seconds)
                seconds, doc = matrix(index, root, "mjobs4")
                cells.setdefault("local_jobs4", []).append(seconds)
                document = document or doc
                same &= doc == document
                for cpus in sizes:
                    log(f"round {round_ + 1}/{args.repeat}: Ray, {cpus} CPU(s)")
                    with cluster(cpus) as address:
                        seconds, _cpu, _result, data = index_add(index, root, f"ray{cpus}",
                                                                 "--ray", address)
                        runs.setdefault(f"ray_{cpus}", []).append(seconds)
                        same &= data == reference
                        seconds, doc = matrix(index, root, f"mray{cpus}", "--ray", address)
                        cells.setdefault(f"ray_{cpus}", []).append(seconds)
                        same &= doc == document
    finally:
        shutil.rmtree(root, ignore_errors=True)
    n_cells = args.wheels
    wheel_runs = {k: Runs(tuple(v)) for k, v in runs.items()}
    cell_runs = {k: Runs(tuple(v)) for k, v in cells.items()}
    base_w, base_c = wheel_runs["local_jobs4"].median, cell_runs["local_jobs4"].median
    out = {
        "benchmark": "ray",
        "machine": base_machine_info(),
        "wheels": args.wheels,
        "latency_s": args.latency,
        "index_add": {k: {**r.to_json(), "wheels_per_s": round(args.wheels / r.median, 2),
                          "over_local_jobs4": ratio(base_w, r.median)}
                      for k, r in wheel_runs.items()},
        "matrix": {k: {**r.to_json(), "cells_per_s": round(n_cells / r.median, 2),
                       "over_local_jobs4": ratio(base_c, r.median)}
                   for k, r in cell_runs.items()},
        "per_wheel_here": {"cpu_s": round(cpu_per_wheel, 3), "bytes_fetched":
                           round(bytes_per_wheel)},
        "same_store_and_document_every_run": same,
    }
    print(json.dumps(out, indent=2))
    best = max(sizes)
    log(f"ray: {args.wheels} wheels; index add local --jobs 4 {base_w:.2f} s, Ray with {best} "
        f"CPU(s) {wheel_runs[f'ray_{best}'].median:.2f} s "
        f"({ratio(base_w, wheel_runs[f'ray_{best}'].median)}x); matrix local "
        f"{base_c:.2f} s, Ray {cell_runs[f'ray_{best}'].median:.2f} s "
        f"({ratio(base_c, cell_runs[f'ray_{best}'].median)}x); per wheel "
        f"{cpu_per_wheel:.2f} CPU-s, {bytes_per_wheel / 1e3:.0f} kB; same results: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
