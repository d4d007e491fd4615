"""Benchmark: `abifit inspect FILE --symbols all` (every dynamic symbol, demangled) against
`nm -D -C FILE`, whole processes, in the same run.

The file: torch 2.13.0's libtorch_cpu.so (75,414 dynamic symbols) from the torch test venv
(~/.cache/abifit-tests/torch-2.13.0, made by the test suite), or `--file PATH`.

Measured, interleaved round by round (`--repeat` rounds, medians):

- baseline: `nm -D -C FILE > /dev/null`;
- `abifit inspect FILE --symbols all --no-cache`, its text to /dev/null;
- the same with `--json`.

Both list the same symbols: the count abifit's JSON reports must equal the lines nm prints.
Target: text within 2x of nm (nm's time / abifit's >= 0.5). Output: one JSON document on
stdout, a one-line summary on stderr; exit 0 whether or not the target is met.

    .venv/bin/python bench/bench_inspect.py [--file PATH] [--repeat 5] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import Log, Runs, Target, abifit_env, base_machine_info, byte_compile_abifit, ratio
from _common import timed as timed_call

DEFAULT = sorted(Path.home().glob(".cache/abifit-tests/torch-2.13.0/lib/python3*/site-packages/"
                                  "torch/lib/libtorch_cpu.so"))


def run(argv: list[str]) -> float:
    seconds, done = timed_call(lambda: subprocess.run(argv, stdout=subprocess.DEVNULL,
                                                      stderr=subprocess.PIPE,
                                                      env=abifit_env(), check=False))
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {done.stderr.decode()[-300:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=DEFAULT[0] if DEFAULT else None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    if args.file is None or not args.file.is_file():
        raise SystemExit("no file: give --file PATH (or run the test suite, which makes the "
                         "torch venv)")
    byte_compile_abifit()
    path = str(args.file)
    abifit = [sys.executable, "-m", "abifit", "inspect", path, "--symbols", "all", "--no-cache"]
    nm = ["nm", "-D", "-C", path]
    listed = json.loads(subprocess.run([*abifit, "--json"], capture_output=True, text=True,
                                       env=abifit_env(), check=True).stdout)
    count = len(listed["objects"][0]["symbols"])
    nm_lines = len(subprocess.run(nm, capture_output=True, text=True, check=True)
                   .stdout.splitlines())
    times: dict[str, list[float]] = {"nm": [], "abifit_text": [], "abifit_json": []}
    for n in range(args.repeat):
        log(f"round {n + 1}/{args.repeat}")
        times["nm"].append(run(nm))
        times["abifit_text"].append(run(abifit))
        times["abifit_json"].append(run([*abifit, "--json"]))
    runs = {k: Runs(tuple(v)) for k, v in times.items()}
    text_ratio = ratio(runs["nm"].median, runs["abifit_text"].median)
    json_ratio = ratio(runs["nm"].median, runs["abifit_json"].median)
    targets = [Target("nm time / abifit text time", text_ratio, 0.5, at_least=True)]
    doc = {
        "benchmark": "inspect --symbols all against nm -D -C",
        "machine": base_machine_info(),
        "file": path,
        "symbols": {"abifit": count, "nm_lines": nm_lines, "equal": count == nm_lines},
        "runs": {k: r.to_json() for k, r in runs.items()},
        "ratios": {"nm_over_text": text_ratio, "nm_over_json": json_ratio},
        "targets": [t.to_json() for t in targets],
    }
    print(json.dumps(doc, indent=2))
    log(f"inspect --symbols all: text {runs['abifit_text'].median:.2f} s, json "
        f"{runs['abifit_json'].median:.2f} s, nm -D -C {runs['nm'].median:.2f} s "
        f"(ratio {text_ratio}x, json {json_ratio}x); {count} symbols, nm {nm_lines} lines; "
        + "; ".join(t.describe() for t in targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
