"""Benchmark (live, PyPI): `abifit history` over torch releases, cold and warm, against
`pip download` of the same wheels.

- cold: `python -m abifit history SYMBOL --in torch --versions SPEC --json --cache-dir EMPTY`:
  every release's wheel is read by range requests and recorded in the symbol store; the bytes
  fetched come from the document's `transfer`, against the wheels' sizes (`wheel_bytes`).
- warm: the same command again on the filled cache, `--runs` times (median): a store query,
  0 bytes fetched. Target: under 0.5 s.
- baseline: `pip download --no-deps --only-binary :all:` of each of the same wheels (the target
  of this interpreter: cp311, manylinux_2_28_x86_64), one after the other into a temporary
  directory emptied after each, timed as one unit.
- the symbol store's size after the cold run, per release recorded.

The symbol is the seed case's, `c10::cuda::c10_cuda_check_implementation` as sgl-kernel 0.3.21
was built against it; the document's forms and changes are printed for information (the change
at 2.10.0: parameter 4, `int` to `unsigned int`).

Output: one JSON document on stdout; progress and, last, a one-line summary on stderr. The exit
status is 0 whether or not targets are met: this is a measurement, not a test.

    .venv/bin/python bench/bench_history.py [--versions '>=2.4.1,<2.11'] [--runs 3] [--no-pip]
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
SYMBOL = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
# ten releases: 2.4.1, 2.5.0, 2.5.1, 2.6.0, 2.7.0, 2.7.1, 2.8.0, 2.9.0, 2.9.1, 2.10.0
VERSIONS = ">=2.4.1,<2.11"
WARM_TARGET_S = 0.5
BYTES_TARGET_PCT = 3.0
TARGET = ("--python-version", "3.11", "--platform", "manylinux_2_28_x86_64")
# pip takes exactly the platform tags it is given: the older manylinux tags that abifit's
# target also accepts (torch 2.4.1 is tagged manylinux1_x86_64)
PIP_TARGET = ("--python-version", "3.11", *(a for p in ("manylinux_2_28_x86_64",
              "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
              for a in ("--platform", p)))


def history(cache: Path, versions: str) -> tuple[float, dict[str, object]]:
    """One `abifit history` process: its seconds and its JSON document."""
    return abifit_json(["history", SYMBOL, "--in", "torch", "--versions", versions, "--json",
                        "--index-url", PYPI, "--cache-dir", str(cache), *TARGET], 1800)


def pip_download(releases: list[str], log: Log) -> tuple[float, int]:
    """`pip download` of each release's wheel in turn: total seconds and bytes downloaded."""
    total_s, total_b = 0.0, 0
    for release in releases:
        where = Path(tempfile.mkdtemp(prefix="abifit-bench-history-pip-"))
        try:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--only-binary", ":all:", "--index-url", PYPI, *PIP_TARGET,
                            f"torch=={release}", "-d", str(where)],
                           check=True, env=pypi_env(), capture_output=True)
            total_s += time.perf_counter() - start
            total_b += sum(f.stat().st_size for f in where.iterdir())
        finally:
            shutil.rmtree(where, ignore_errors=True)
        log(f"  pip download torch=={release}: {total_s:.1f} s so far")
    return total_s, total_b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default=VERSIONS)
    parser.add_argument("--runs", type=int, default=3, help="warm runs (median)")
    parser.add_argument("--no-pip", action="store_true", help="skip the pip download baseline")
    args = parser.parse_args()
    log = Log(False)
    byte_compile_abifit()
    cache = Path(tempfile.mkdtemp(prefix="abifit-bench-history-"))
    try:
        log(f"history cold over torch{args.versions}")
        cold_s, cold_doc = history(cache, args.versions)
        releases = list(cold_doc["releases"])  # type: ignore[arg-type]
        transfer = cold_doc["transfer"] or {}
        assert isinstance(transfer, dict)
        fetched = int(transfer.get("bytes_fetched", 0))
        wheel_bytes = int(transfer.get("wheel_bytes", 0))
        store = cache / "symbols-v2.sqlite"
        store_bytes = sum(p.stat().st_size for p in cache.glob("symbols-v2.sqlite*"))
        warm = []
        warm_fetched = []
        for n in range(args.runs):
            seconds, doc = history(cache, args.versions)
            warm.append(seconds)
            warm_fetched.append(int((doc["transfer"] or {}).get("bytes_fetched", 0)))  # type: ignore[union-attr]
            log(f"  warm {n + 1}/{args.runs}: {seconds:.3f} s")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    pip_s, pip_b = (0.0, 0) if args.no_pip else pip_download(releases, log)
    warm_runs = Runs(tuple(warm))
    pct = 100.0 * fetched / wheel_bytes if wheel_bytes else 0.0
    targets = [Target("warm_s", round(warm_runs.median, 3), WARM_TARGET_S, False, " s"),
               Target("cold_bytes_pct", round(pct, 2), BYTES_TARGET_PCT, False, " %"),
               Target("warm_bytes", float(max(warm_fetched, default=0)), 0.0, False, " B")]
    document = {
        "benchmark": "history",
        "machine": base_machine_info(),
        "symbol": SYMBOL,
        "versions": args.versions,
        "releases": releases,
        "cold": {"seconds": round(cold_s, 3), "bytes_fetched": fetched,
                 "wheel_bytes": wheel_bytes, "percent": round(pct, 2)},
        "warm": {**warm_runs.to_json(), "bytes_fetched": warm_fetched},
        "pip_download": None if args.no_pip else {"seconds": round(pip_s, 3), "bytes": pip_b},
        "pip_over_cold": None if args.no_pip else ratio(pip_s, cold_s),
        "store": {"path": store.name, "bytes": store_bytes,
                  "bytes_per_release": store_bytes // max(1, len(releases))},
        "forms": [{"name": f["name"], "releases": f["releases"]}  # type: ignore[index]
                  for f in cold_doc["forms"]],  # type: ignore[union-attr]
        "changes": cold_doc["changes"],
        "targets": [t.to_json() for t in targets],
    }
    print(json.dumps(document, indent=2))
    for t in targets:
        if not t.met:
            log(f"target missed: {t.describe()}")
    pip = "" if args.no_pip else f", pip download {pip_s:.1f} s ({ratio(pip_s, cold_s)}x cold)"
    log(f"history: {len(releases)} torch releases | cold {cold_s:.1f} s, {fetched / 1e6:.1f} of "
        f"{wheel_bytes / 1e6:.0f} MB ({pct:.2f} %){pip} | warm {warm_runs.median:.3f} s, "
        f"{max(warm_fetched, default=0)} B | store {store_bytes / 1e6:.1f} MB "
        f"({store_bytes / max(1, len(releases)) / 1e6:.1f} MB a release)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
