"""Benchmark (live, PyPI): `abifit matrix sgl-kernel==0.3.21 --against 'torch>=2.8,<2.11'`, cold
and warm, against downloading the same wheels with pip in the same run.

- abifit cold: `python -m abifit matrix EXT --against SPEC --python-version 3.11 --platform
  manylinux_2_28_x86_64 --index-url https://pypi.org/simple --cache-dir EMPTY --json`: wall
  time and its `transfer` (bytes fetched, requests, and the summed size of every wheel it
  opened: the extension, each torch, their nvidia-* and other native dependencies);
- abifit warm: the same command on the cache the cold run left, `--warm` times (median);
- baseline: `pip download --no-deps --no-cache-dir` of exactly the wheels abifit opened (their
  URLs, as the cold run's JSON cannot list them: the list comes from `abifit check --json` per
  torch release on the warm cache, which fetches nothing), one at a time, each deleted once
  downloaded; the summed time. `--no-pip` skips it (it downloads ~15 GB).

The releases are bounded (2.8, 2.9, 2.10) so that a new torch release does not change what is
measured. Peak memory is the largest resident set of the abifit processes run (the cold run's,
in practice: `ru_maxrss` of the waited-for children).

Targets: bytes fetched <= 3 % of the wheels' bytes; cold <= 60 s; warm <= 2 s; peak memory
<= 300 MB. The exit status
is 0 whether or not they are met: a measurement, not a test. Output: a JSON document on
stdout, a one-line summary on stderr.

    .venv/bin/python bench/bench_matrix.py [--warm 3] [--no-pip] [--against SPEC]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYPI = "https://pypi.org/simple"
PEAK_TARGET = 300_000_000  # bytes
TARGET = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--index-url", PYPI]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
ENV["PIP_CONFIG_FILE"] = "/dev/null"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def abifit(*args: str) -> tuple[float, dict[str, object]]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "abifit", *args, *TARGET, "--json"],
                          capture_output=True, text=True, env=ENV, timeout=3600)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr.strip())
    doc: dict[str, object] = json.loads(done.stdout)
    return elapsed, doc


def wheels_opened(ext: str, rows: list[dict[str, object]], cache: str) -> dict[str, int]:
    """filename -> size of every wheel the matrix read, from `check --json` on the warm cache."""
    found: dict[str, int] = {}
    for row in rows:
        _t, doc = abifit("check", ext, "--with", f"torch=={row['version']}", "--cache-dir",
                         cache, "--assume-driver", "any")
        for wheel in doc["wheels"]:  # type: ignore[union-attr]
            found[wheel["filename"]] = wheel["size"]
    return found


def pip_download(filenames: list[str]) -> float:
    total = 0.0
    for filename in filenames:
        name, version = filename.split("-")[:2]
        with tempfile.TemporaryDirectory() as target:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--no-cache-dir", "--only-binary", ":all:", "--python-version",
                            "3.11", "--platform", "manylinux_2_28_x86_64", "--platform",
                            "manylinux_2_27_x86_64", "--platform", "manylinux_2_17_x86_64",
                            "--platform", "manylinux2014_x86_64", "--platform",
                            "manylinux_2_12_x86_64", "--platform", "manylinux2010_x86_64",
                            "--platform", "manylinux_2_24_x86_64", "--implementation", "cp",
                            "--index-url", PYPI, "-d", target,
                            f"{name.replace('_', '-')}=={version}"],
                           env=ENV, timeout=3600)
            total += time.perf_counter() - start
            got = [p.name for p in Path(target).iterdir()]
            if filename not in got:
                log(f"note: pip chose {got} for {filename}")
        log(f"pip: {filename} ({total:.1f} s so far)")
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--extension", default="sgl-kernel==0.3.21")
    parser.add_argument("--against", default="torch>=2.8,<2.11")
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--no-pip", action="store_true")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "src/abifit"], check=True)
    cache = tempfile.mkdtemp(prefix="abifit-bench-matrix-")
    try:
        log("abifit matrix, cold")
        cold, doc = abifit("matrix", args.extension, "--against", args.against, "--cache-dir",
                           cache)
        transfer = doc["transfer"]
        assert isinstance(transfer, dict)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # kB on Linux
        log(f"cold {cold:.1f} s, {transfer['bytes_fetched']:,} of {transfer['wheel_bytes']:,} "
            f"bytes, peak {peak / 1e6:.0f} MB")
        warm_times = []
        for _ in range(args.warm):
            elapsed, again = abifit("matrix", args.extension, "--against", args.against,
                                    "--cache-dir", cache)
            warm_times.append(elapsed)
            assert again["rows"] == doc["rows"], "a warm run answered differently"
        warm = statistics.median(warm_times)
        rows = doc["rows"]
        assert isinstance(rows, list)
        opened = wheels_opened(args.extension, rows, cache)
        pip_time = None if args.no_pip else pip_download(sorted(opened))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    fraction = transfer["bytes_fetched"] / transfer["wheel_bytes"]
    result = {
        "extension": args.extension, "against": args.against,
        "rows": [{k: r[k] for k in ("version", "variant", "verdict", "failing_symbols",
                                    "failing_sonames", "first")} for r in rows],
        "fits": doc["fits"],
        "cold_s": round(cold, 2), "warm_s": [round(t, 3) for t in warm_times],
        "warm_median_s": round(warm, 3),
        "bytes_fetched": transfer["bytes_fetched"], "requests": transfer["requests"],
        "wheel_bytes": transfer["wheel_bytes"], "fraction": round(fraction, 5),
        "wheels_opened": len(opened), "wheels_opened_bytes": sum(v or 0 for v in opened.values()),
        "pip_download_s": None if pip_time is None else round(pip_time, 1),
        "peak_memory_bytes": peak,
        "targets": {"bytes_le_3pct": fraction <= 0.03, "cold_le_60s": cold <= 60,
                    "warm_le_2s": warm <= 2.0, "peak_le_300mb": peak <= PEAK_TARGET},
    }
    print(json.dumps(result, indent=1))
    ratio = f", pip/abifit cold {pip_time / cold:.1f}x" if pip_time else ""
    log(f"summary: {len(rows)} torch releases; cold {cold:.1f} s, warm {warm:.2f} s; "
        f"{transfer['bytes_fetched'] / 1e6:.0f} MB of {transfer['wheel_bytes'] / 1e9:.2f} GB "
        f"({fraction:.2%}){ratio}; peak {peak / 1e6:.0f} MB (target <= {PEAK_TARGET / 1e6:.0f} MB, "
        f"{peak / PEAK_TARGET:.2f}x of it); fits: "
        f"{', '.join(doc['fits'])}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
