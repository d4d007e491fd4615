"""Benchmark: `abifit check` and `abifit inspect` of a wheel named by its path (the torch 2.13.0
CPU wheel, 192 MB), cold and warm, with peak memory; against reading every ELF member whole.

The wheel: the first `torch-2.13.0*.whl` under /opt/wheels, or `--wheel PATH`.

What is measured, whole processes, interleaved round by round:

- baseline: Python's `zipfile` reading every member whose name may be an ELF file whole (what a
  tool that extracts or inflates the members pays before it reads a byte of them);
- `abifit check WHEEL --python-version 3.11` cold (a new empty cache directory each run) and warm
  (a cache filled by an earlier run). Its dependencies come from the configured index (PyPI
  here): a cold check also reads their pages and wheels;
- `abifit inspect WHEEL` cold and warm.

Each process is started by a small launcher that reports the peak resident memory of the process
and its children (`ru_maxrss`). Targets: check cold under 5 s and warm under 0.5 s; peak under
300 MB for both commands. Every figure is the median of `--repeat` runs.

Output: one JSON document on stdout, a one-line summary on stderr. Exit status 0 whether or not
targets are met: this is a measurement, not a test.

    .venv/bin/python bench/bench_local_wheel.py [--wheel PATH] [--repeat 3] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import Log, Runs, Target, abifit_env, base_machine_info, byte_compile_abifit, ratio

LAUNCHER = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak": peak, "exit": done.returncode,
                  "stderr": done.stderr.decode()[-300:]}))
"""

READ_ALL = r"""
import sys, zipfile
from abifit.formats.elf import might_be_elf
with zipfile.ZipFile(sys.argv[1]) as zf:
    for info in zf.infolist():
        if might_be_elf(info.filename):
            zf.read(info)
"""


def launch(argv: list[str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], capture_output=True,
                          text=True, env=abifit_env(), check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path,
                        default=next(Path("/opt/wheels").glob("torch-2.13.0*.whl"), None))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    if args.wheel is None or not args.wheel.is_file():
        sys.exit("error: no wheel: give --wheel PATH")
    byte_compile_abifit()
    wheel = str(args.wheel)
    abifit = [sys.executable, "-m", "abifit"]
    commands = {"check": [*abifit, "check", wheel, "--python-version", "3.11"],
                "inspect": [*abifit, "inspect", wheel]}
    runs: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory(prefix="abifit-bench-") as tmp:
        warm_cache = Path(tmp) / "warm"
        for argv in commands.values():  # fill the warm cache (and the page cache)
            launch([*argv, "--cache-dir", str(warm_cache)])
        for n in range(args.repeat):
            log(f"round {n + 1}/{args.repeat}")
            runs.setdefault("read_all", []).append(launch([sys.executable, "-c", READ_ALL,
                                                           wheel]))
            for name, argv in commands.items():
                cold = Path(tmp) / f"cold-{name}-{n}"
                runs.setdefault(f"{name}_cold", []).append(
                    launch([*argv, "--cache-dir", str(cold)]))
                runs.setdefault(f"{name}_warm", []).append(
                    launch([*argv, "--cache-dir", str(warm_cache)]))
    failed = {k: r["stderr"] for k, rs in runs.items() for r in rs if r["exit"] not in (0, 1)}
    seconds = {k: Runs(tuple(float(r["seconds"]) for r in rs))  # type: ignore[arg-type]
               for k, rs in runs.items()}
    peak_mb = {k: round(max(int(r["peak"]) for r in rs) / 1e6, 1)  # type: ignore[call-overload]
               for k, rs in runs.items()}
    abifit_peak = max(v for k, v in peak_mb.items() if k != "read_all")
    targets = [
        Target("check cold", round(seconds["check_cold"].median, 2), 5.0, False, " s"),
        Target("check warm", round(seconds["check_warm"].median, 2), 0.5, False, " s"),
        Target("peak memory of check and inspect", abifit_peak, 300.0, False, " MB"),
    ]
    doc = {
        "machine": base_machine_info(),
        "wheel": wheel,
        "wheel_bytes": args.wheel.stat().st_size,
        "seconds": {k: r.to_json() for k, r in seconds.items()},
        "peak_mb": peak_mb,
        "ratio_read_all_over": {k: ratio(seconds["read_all"].median, r.median)
                                for k, r in seconds.items() if k != "read_all"},
        "failed": failed,
        "targets": [t.to_json() for t in targets],
    }
    print(json.dumps(doc, indent=2))
    missed = [t.describe() for t in targets if not t.met]
    log(f"local wheel ({args.wheel.name}): reading every ELF member whole "
        f"{seconds['read_all'].median:.2f} s; check cold {seconds['check_cold'].median:.2f} s, "
        f"warm {seconds['check_warm'].median:.2f} s; inspect cold "
        f"{seconds['inspect_cold'].median:.2f} s, warm {seconds['inspect_warm'].median:.2f} s; "
        f"peak {abifit_peak:.0f} MB" + (f"; MISSED: {'; '.join(missed)}" if missed else "")
        + (f"; FAILED: {sorted(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
