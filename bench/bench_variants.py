"""Benchmark (live, PyPI): `abifit variants torch==2.10.0 --all`, cold, against the same command
of an earlier abifit.

- ours: `python -m abifit variants RELEASE --all --json --cache-dir EMPTY` with this working
  tree's `src` first on PYTHONPATH, `--runs` times, each with a fresh cache (median);
- baseline: the same command with the `src` of the git revision `--baseline` (default: the
  commit before the variants and memory work of issue 18's last round), extracted with
  `git archive`; its runs alternate with ours, so that both see the same network and load.

The two must print the same document but for `transfer` (an error otherwise). Target: ours
cold <= 15 s (median). Both are bound by the network (39 wheels, 210 MB) and by the CPU (two
shared cores): figures move with both, so compare the two columns of one run. Output: a JSON
document on stdout, a one-line summary on stderr. The exit status is 0 whether or not the
target is met.

    .venv/bin/python bench/bench_variants.py [--runs 3] [--baseline REV] [--release R]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from _common import REPO, Log, Runs, Target, base_machine_info, ratio

PYPI = "https://pypi.org/simple"
BASELINE = "9b4caf6"
TARGET_S = 15.0


def extract(revision: str, into: Path) -> Path:
    """The `src` folder of `revision`, written under `into`."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", revision, "src"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as archive:
        archive.extractall(into, filter="data")
    return into / "src"


def cold(src: Path, release: str) -> tuple[float, dict[str, object]]:
    """One cold run of variants with abifit from `src`: seconds and the JSON document."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ABIFIT_"))}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    env["PYTHONPATH"] = str(src)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "abifit")], check=True)
    cache = tempfile.mkdtemp(prefix="abifit-bench-variants-")
    try:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "abifit", "variants", release, "--all",
                               "--json", "--index-url", PYPI, "--cache-dir", cache],
                              capture_output=True, text=True, env=env, timeout=900)
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr.strip())
    doc: dict[str, object] = json.loads(done.stdout)
    return elapsed, doc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--release", default="torch==2.10.0")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    log = Log(args.quiet)
    ours_src = REPO / "src"
    with tempfile.TemporaryDirectory(prefix="abifit-bench-baseline-") as tmp:
        base_src = extract(args.baseline, Path(tmp))
        base_times, our_times = [], []
        transfer: object = None
        for n in range(1, args.runs + 1):
            base_s, base_doc = cold(base_src, args.release)
            our_s, our_doc = cold(ours_src, args.release)
            base_times.append(base_s)
            our_times.append(our_s)
            transfer = our_doc.pop("transfer", None)
            base_doc.pop("transfer", None)
            if our_doc != base_doc:
                raise RuntimeError("variants answered differently from the baseline")
            log(f"run {n}: baseline {base_s:.1f} s, ours {our_s:.1f} s")
    ours, base = Runs(tuple(our_times)), Runs(tuple(base_times))
    target = Target("variants cold (median)", round(ours.median, 2), TARGET_S, at_least=False,
                    unit=" s")
    result = {
        "release": args.release, "baseline_revision": args.baseline,
        "ours": ours.to_json(), "baseline": base.to_json(),
        "speedup": ratio(base.median, ours.median), "transfer": transfer,
        "same_output": True, "target": target.to_json(), "machine": base_machine_info(),
    }
    print(json.dumps(result, indent=1))
    print(f"summary: {target.describe()} {'met' if target.met else 'NOT met'}; baseline "
          f"{base.median:.1f} s, {ratio(base.median, ours.median)}x", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
