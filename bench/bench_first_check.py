"""Benchmark (live, PyPI): a new user's first check, cold: `abifit check sgl-kernel==0.3.21 --with
torch==2.10.0` for CPython 3.11 on manylinux_2_28_x86_64, an empty cache each run.

Measured, whole processes, `--repeat` rounds (medians): this working tree, and, with `--base
REV`, the same command from a git worktree of revision REV in the same rounds (interleaved,
the baseline first in odd rounds, second in even ones), so that the ratio is measured on the
same network and machine. Each run's JSON must give the same verdict and findings as the first
run of this tree (what is compared: the document without `transfer` and `checked_at`).

Target (issue 40): cold <= 8 s. Output: one JSON document on stdout, a one-line summary on
stderr; exit 0 whether or not the target is met.

    .venv/bin/python bench/bench_first_check.py [--repeat 3] [--base REV] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, Log, Runs, Target, base_machine_info, byte_compile_abifit, ratio

COMMAND = ["check", "sgl-kernel==0.3.21", "--with", "torch==2.10.0", "--python-version", "3.11",
           "--platform", "manylinux_2_28_x86_64", "--json"]


def cold(src: Path) -> tuple[float, dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ABIFIT_"))}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryDirectory(prefix="abifit-bench-") as cache:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "abifit", *COMMAND, "--cache-dir", cache],
                              capture_output=True, text=True, env=env, timeout=600, check=False)
        seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"abifit from {src} exited {done.returncode}: {done.stderr[-400:]}")
    doc: dict[str, object] = json.loads(done.stdout)
    for key in ("transfer", "checked_at"):
        doc.pop(key, None)
    return seconds, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base", metavar="REV")
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    byte_compile_abifit()
    sources = {"this": REPO / "src"}
    with tempfile.TemporaryDirectory(prefix="abifit-base-") as tree:
        if args.base:
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", tree,
                            args.base], check=True, capture_output=True)
            sources["base"] = Path(tree) / "src"
        try:
            times: dict[str, list[float]] = {name: [] for name in sources}
            reference: dict[str, object] | None = None
            same = True
            for n in range(args.repeat):
                order = list(sources) if n % 2 else list(reversed(sources))
                for name in order:
                    log(f"round {n + 1}/{args.repeat}: {name}")
                    seconds, doc = cold(sources[name])
                    times[name].append(seconds)
                    reference = reference if reference is not None else doc
                    same = same and doc == reference
        finally:
            if args.base:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", tree],
                               check=False, capture_output=True)
    runs = {name: Runs(tuple(v)) for name, v in times.items()}
    target = Target("cold check", round(runs["this"].median, 2), 8.0, at_least=False, unit=" s")
    doc_out: dict[str, object] = {
        "benchmark": "first check, cold: " + " ".join(COMMAND),
        "machine": base_machine_info(),
        "base": args.base,
        "runs": {name: r.to_json() for name, r in runs.items()},
        "same_report_every_run": same,
        "targets": [target.to_json()],
    }
    if "base" in runs:
        doc_out["speedup_over_base"] = ratio(runs["base"].median, runs["this"].median)
    print(json.dumps(doc_out, indent=2))
    base = (f", base {args.base} {runs['base'].median:.2f} s "
            f"({doc_out['speedup_over_base']}x)" if "base" in runs else "")
    log(f"first check cold: {runs['this'].median:.2f} s{base}; same report every run: {same}; "
        + target.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
