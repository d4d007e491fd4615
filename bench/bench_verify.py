"""Benchmark: `abifit doctor --verify` on a large environment, fork servers against the baseline
of a fresh process per module.

The environment: a venv of this machine's CPython 3.11 with torch 2.13.0 (CPU) and common native
packages (numpy, scipy, pandas, scikit-learn, pillow, lxml, pyarrow, grpcio, cryptography,
matplotlib, pyyaml, psutil): some 300 native modules. It is created once under
~/.cache/abifit-tests/bench-big (or `--venv PATH`; an existing venv is used as it is).

What is measured, each in its own process (bench/_verify_worker.py), the same `doctor --verify
--json --no-cache` with only the real loads done differently:

- forkserver: abifit's `real_loads` (one server per set of prerequisites, split over the cores;
  a child per module);
- fresh (the baseline, what abifit did before): a fresh interpreter per module, one after
  another, importing the module's prerequisites each time.

Figures: the seconds spent in the real loads and in the whole run (the analysis, the real loads
and the real imports by name), the loads' ratio and their seconds per module. The whole run with
fork servers, scaled to 700 modules in proportion, is checked against issue 18's targets for
`doctor --verify` (under 4 minutes on 2 cores, under 60 s on 16: the target for the machine's
core count is the one checked). Both ways must report the same real outcome for every module
(whether it loads, the loader's error, the agreement and the note with the import's error); a
difference is printed and fails the check.
`--repeat N` runs each way N times (medians); the baseline is slow, so the default is 1.
`--sample N` times the baseline on N modules spread over the list (the others are loaded through
fork servers, untimed): the comparison is then per module.

Output: one JSON document on stdout, a one-line summary on stderr. Exit status 0 whether or not
the target is met: this is a measurement, not a test.

    .venv/bin/python bench/bench_verify.py [--venv PATH] [--repeat N] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from _common import REPO, Log, Runs, Target, abifit_env, base_machine_info, byte_compile_abifit

PACKAGES = ("torch==2.13.0", "numpy", "scipy", "pandas", "scikit-learn", "pillow", "lxml",
            "pyarrow", "grpcio", "cryptography", "matplotlib", "pyyaml", "psutil")
DEFAULT_VENV = Path.home() / ".cache" / "abifit-tests" / "bench-big"


def ensure_venv(venv: Path, log: Log) -> Path:
    python = venv / "bin" / "python"
    if python.exists():
        return python
    log(f"creating {venv} ({', '.join(PACKAGES)}): a few minutes")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True)
    return python


def worker(mode: str, python: Path, sample: int | None) -> dict[str, object]:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "_verify_worker.py"), mode,
                           str(python), *([str(sample)] if sample else [])],
                          capture_output=True, text=True, env=abifit_env(), check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    byte_compile_abifit()
    python = ensure_venv(args.venv, log)
    runs: dict[str, list[dict[str, object]]] = {"forkserver": [], "fresh": []}
    for n in range(args.repeat):
        for mode in runs:
            log(f"round {n + 1}/{args.repeat}: {mode}")
            runs[mode].append(worker(mode, python, args.sample if mode == "fresh" else None))
    verify = {m: Runs(tuple(float(r["verify_s"]) for r in rs))  # type: ignore[arg-type]
              for m, rs in runs.items()}
    total = {m: Runs(tuple(float(r["total_s"]) for r in rs))  # type: ignore[arg-type]
             for m, rs in runs.items()}
    modules = int(runs["forkserver"][0]["modules"])  # type: ignore[call-overload]
    timed_fresh = int(runs["fresh"][0]["modules"])  # type: ignore[call-overload]
    outcomes: list[dict[str, object]] = [r["outcomes"] for rs in runs.values()  # type: ignore[misc]
                                         for r in rs]
    differ = sorted(m for m in outcomes[0] if any(o.get(m) != outcomes[0][m] for o in outcomes))
    cores = len(os.sched_getaffinity(0))
    per_700 = total["forkserver"].median / max(1, modules) * 700
    limit = 60.0 if cores >= 16 else 240.0
    target = Target(f"doctor --verify scaled to 700 modules on {cores} cores", round(per_700, 1),
                    limit, at_least=False, unit=" s")
    per_module = {"forkserver": verify["forkserver"].median / max(1, modules),
                  "fresh": verify["fresh"].median / max(1, timed_fresh)}
    speedup = round(per_module["fresh"] / per_module["forkserver"], 2)
    doc = {
        "machine": base_machine_info(),
        "venv": str(args.venv),
        "modules": modules,
        "verify": {m: r.to_json() for m, r in verify.items()},
        "total": {m: r.to_json() for m, r in total.items()},
        "fresh_modules_timed": timed_fresh,
        "speedup_over_fresh": speedup,
        "seconds_per_module": {m: round(v, 4) for m, v in per_module.items()},
        "outcomes_differ": differ,
        "targets": [target.to_json()],
    }
    print(json.dumps(doc, indent=2))
    if differ:
        log(f"outcomes differ between the two ways for {len(differ)} module(s): {differ[:5]}")
    log(f"doctor --verify, {modules} modules: whole run {total['forkserver'].median:.1f} s, of "
        f"it real loads through fork servers {verify['forkserver'].median:.1f} s "
        f"({per_module['forkserver']:.3f} s a module), fresh processes "
        f"{per_module['fresh']:.3f} s a module over {timed_fresh} ({speedup}x); "
        f"{target.describe()}{'' if target.met else ' MISSED'}; "
        f"outcomes {'identical' if not differ else 'DIFFER'}")


if __name__ == "__main__":
    main()
