"""Benchmark (live, PyPI): `abifit resolve sgl-kernel==0.3.21 torch`, cold and warm, against
the naive product of versions and against `pip download` of the chosen native wheels.

- cold: `python -m abifit resolve sgl-kernel==0.3.21 torch --json --cache-dir EMPTY` for
  cp311 on manylinux_2_28_x86_64: the bytes fetched (the document's `transfer`, against the
  sizes of the wheels touched), the seconds, the pairs checked (`stats.pairs_checked`) against
  the pairs a product of versions would check (`stats.naive_pairs`: the releases of torch that
  fit the target x 1 release of sgl-kernel), the torch chosen and the releases tried.
- warm: the same command again on the filled cache, `--runs` times (median): 0 pairs checked,
  0 bytes fetched. Target: under 5 s.
- baseline: `pip download --no-deps --only-binary :all:` of the chosen sgl-kernel and torch
  wheels (what one would fetch to try that pair by hand), timed as one unit. Trying each torch
  release by hand would fetch one torch wheel per release.

Output: one JSON document on stdout; progress and, last, a one-line summary on stderr. The exit
status is 0 whether or not targets are met: this is a measurement, not a test.

    .venv/bin/python bench/bench_resolve.py [--runs 3] [--no-pip]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    Log,
    Runs,
    Target,
    abifit_json,
    base_machine_info,
    byte_compile_abifit,
    pypi_env,
    ratio,
)

PYPI = "https://pypi.org/simple"
REQUIREMENTS = ("sgl-kernel==0.3.21", "torch")
TARGET = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64")
PIP_TARGET = ("--python-version", "3.11", *(a for p in ("manylinux_2_28_x86_64",
              "manylinux_2_17_x86_64", "manylinux2014_x86_64") for a in ("--platform", p)))
WARM_TARGET_S = 5.0
PAIRS_TARGET_PCT = 50.0  # pairs checked, as a percentage of the naive product


def resolve(cache: Path) -> tuple[float, dict[str, object]]:
    """One `abifit resolve` process: its seconds and its JSON document."""
    return abifit_json(["resolve", *REQUIREMENTS, "--json", "--index-url", PYPI,
                        "--cache-dir", str(cache), *TARGET], 3600)


def pip_download(pins: list[str], log: Log) -> tuple[float, int]:
    """`pip download` of the chosen wheels: seconds and bytes downloaded."""
    where = Path(tempfile.mkdtemp(prefix="abifit-bench-resolve-pip-"))
    try:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary", ":all:", "--index-url", PYPI, *PIP_TARGET, *pins,
                        "-d", str(where)], check=True, env=pypi_env(), capture_output=True)
        seconds = time.perf_counter() - start
        size = sum(f.stat().st_size for f in where.iterdir())
    finally:
        shutil.rmtree(where, ignore_errors=True)
    log(f"  pip download {' '.join(pins)}: {seconds:.1f} s")
    return seconds, size


def _stats(doc: dict[str, object]) -> dict[str, int]:
    stats = doc["stats"]
    assert isinstance(stats, dict)
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="warm runs (median)")
    parser.add_argument("--no-pip", action="store_true", help="skip the pip download baseline")
    args = parser.parse_args()
    log = Log(False)
    byte_compile_abifit()
    cache = Path(tempfile.mkdtemp(prefix="abifit-bench-resolve-"))
    try:
        log(f"resolve {' '.join(REQUIREMENTS)}: cold")
        cold_s, cold = resolve(cache)
        warm, warm_fetched, warm_checked = [], [], []
        for n in range(args.runs):
            seconds, doc = resolve(cache)
            warm.append(seconds)
            warm_fetched.append(int((doc["transfer"] or {}).get("bytes_fetched", 0)))  # type: ignore[union-attr]
            warm_checked.append(_stats(doc)["pairs_checked"])
            log(f"  warm {n + 1}/{args.runs}: {seconds:.3f} s")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    pins = {p["name"]: p for p in cold["pins"]}  # type: ignore[union-attr]
    torch = pins.get("torch", {}).get("version")
    chosen = [f"{n}=={pins[n]['version']}" for n in ("sgl-kernel", "torch") if n in pins]
    pip_s, pip_b = (0.0, 0) if args.no_pip or not chosen else pip_download(chosen, log)
    transfer = cold["transfer"] or {}
    assert isinstance(transfer, dict)
    fetched, wheel_bytes = int(transfer.get("bytes_fetched", 0)), int(
        transfer.get("wheel_bytes", 0))
    stats = _stats(cold)
    naive = stats["naive_pairs"]
    pairs_pct = 100.0 * stats["pairs_checked"] / naive if naive else 0.0
    rejected = [r["version"] for r in pins.get("torch", {}).get("newer", [])]
    warm_runs = Runs(tuple(warm))
    targets = [Target("warm_s", round(warm_runs.median, 3), WARM_TARGET_S, False, " s"),
               Target("warm_pairs_checked", float(max(warm_checked, default=0)), 0.0, False,
                      " pairs"),
               Target("cold_pairs_pct_of_naive", round(pairs_pct, 1), PAIRS_TARGET_PCT, False,
                      " %")]
    document = {
        "benchmark": "resolve",
        "machine": base_machine_info(),
        "requirements": list(REQUIREMENTS),
        "chosen": chosen,
        "torch_rejected": rejected,
        "cold": {"seconds": round(cold_s, 3), "bytes_fetched": fetched,
                 "wheel_bytes": wheel_bytes,
                 "percent": round(100.0 * fetched / wheel_bytes, 2) if wheel_bytes else 0.0,
                 "stats": stats},
        "warm": {**warm_runs.to_json(), "bytes_fetched": warm_fetched,
                 "pairs_checked": warm_checked},
        "pip_download": None if args.no_pip else {"seconds": round(pip_s, 3), "bytes": pip_b},
        "pip_over_cold": None if args.no_pip else ratio(pip_s, cold_s),
        "targets": [t.to_json() for t in targets],
    }
    print(json.dumps(document, indent=2))
    for t in targets:
        if not t.met:
            log(f"target missed: {t.describe()}")
    pip = "" if args.no_pip else f" | pip download of the pair {pip_b / 1e6:.0f} MB, {pip_s:.1f} s"
    log(f"resolve: torch {torch} ({len(rejected)} newer rejected) | cold {cold_s:.1f} s, "
        f"{fetched / 1e6:.1f} MB fetched, {stats['pairs_checked']} pairs checked of a naive "
        f"{naive} | warm {warm_runs.median:.2f} s, {max(warm_fetched, default=0)} B, "
        f"{max(warm_checked, default=0)} pairs checked{pip}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
