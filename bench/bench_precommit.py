"""Benchmark (live, PyPI): abifit's pre-commit hook on a 30-package lock, warm and cold.

The hook (`.pre-commit-hooks.yaml`) runs `abifit check FILE...` on the lock and requirements
files a commit changes. Here the file is a requirements file pinning 30 popular packages (22 of
them with native code: numpy, scipy, pandas, pyarrow, grpcio, ...) for CPython 3.12 on
manylinux_2_28_x86_64, and the hook's command is run as pre-commit runs it, a whole process:

- cold: once, with an empty cache directory (what the first commit after installing pays);
- warm: `--repeat` runs over the cache the cold run filled (every later commit that touches
  the file): the target is <= 2 s (median);
- warm offline: the same with `--offline`, which must give the same document: the warm run
  needs nothing from the network;
- baseline, in the same rounds: `pip install --dry-run --no-deps --ignore-installed` of the
  same file for the same target, with pip's own (warm) cache: what resolving the file without
  installing takes pip, which does not check whether the native parts fit.

Every run's JSON must equal the first warm run's (without `transfer` and `checked_at`).
Output: one JSON document on stdout, a one-line summary on stderr; exit 0 whether or not the
target is met.

    .venv/bin/python bench/bench_precommit.py [--repeat 5] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import (
    Log,
    Runs,
    Target,
    base_machine_info,
    byte_compile_abifit,
    pypi_env,
    ratio,
    timed,
)

PINS = (
    "numpy==2.5.5", "scipy==1.18.1", "pandas==3.1.1", "pyarrow==26.0.1", "pillow==13.0.0",
    "lxml==6.2.1", "cryptography==51.0.1", "cffi==2.1.1", "pydantic-core==2.50.5",
    "orjson==3.13.0", "ujson==6.1.0", "msgpack==1.2.4", "psutil==7.2.2", "pyyaml==6.0.4",
    "markupsafe==3.0.4", "charset-normalizer==3.5.3", "regex==2026.12.2", "grpcio==1.85.4",
    "protobuf==7.36.2", "zstandard==0.25.0", "aiohttp==3.14.5", "frozenlist==1.8.0",
    "multidict==7.2.1", "yarl==1.25.1", "kiwisolver==1.5.1", "matplotlib==3.11.2",
    "contourpy==1.4.0", "h5py==3.16.0", "shapely==2.2.0", "scikit-learn==1.9.1",
)
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")
# pip takes each platform tag it may install, not the glibc: those of manylinux_2_28 and below
PIP_TARGET = ("--python-version", "3.12",
              *(a for minor in range(28, 4, -1) for a in ("--platform",
                                                           f"manylinux_2_{minor}_x86_64")),
              "--platform", "manylinux2014_x86_64", "--platform", "manylinux2010_x86_64",
              "--platform", "manylinux1_x86_64")
WARM_MAX_S = 2.0


def hook(requirements: Path, cache: Path, *extra: str) -> tuple[float, dict[str, object]]:
    """The hook's command on the file, as one process: its seconds and its JSON document."""
    command = [sys.executable, "-m", "abifit", "check", str(requirements), *TARGET, "--json",
               "--cache-dir", str(cache), *extra]
    seconds, done = timed(lambda: subprocess.run(command, capture_output=True, text=True,
                                                 env=pypi_env(), timeout=900, check=False))
    if done.returncode not in (0, 1):
        raise SystemExit(f"error: abifit check exited with {done.returncode}: "
                         f"{done.stderr.strip()[-800:]}")
    doc: dict[str, object] = json.loads(done.stdout)
    for key in ("transfer", "checked_at"):
        doc.pop(key, None)
    return seconds, doc


def pip_dry_run(requirements: Path, target: Path) -> float:
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
               "--ignore-installed", "--ignore-requires-python", "--only-binary=:all:", "--quiet",
               *PIP_TARGET,
               "--target", str(target), "-r", str(requirements)]
    seconds, done = timed(lambda: subprocess.run(command, capture_output=True, text=True,
                                                 env=pypi_env(), timeout=900, check=False))
    if done.returncode != 0:
        raise SystemExit(f"error: pip exited with {done.returncode}: {done.stderr[-800:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="warm runs (median)")
    parser.add_argument("--json-only", action="store_true", help="print nothing on stderr")
    args = parser.parse_args()
    log = Log(args.json_only)
    byte_compile_abifit()
    with tempfile.TemporaryDirectory(prefix="abifit-bench-precommit-") as tmp:
        root = Path(tmp)
        requirements = root / "requirements.txt"
        requirements.write_text("".join(f"{pin}\n" for pin in PINS))
        cache = root / "cache"
        log(f"cold run over {len(PINS)} pins")
        cold_s, first = hook(requirements, cache)
        pip_dry_run(requirements, root / "pip-target")  # pip's own cache warm, as ours
        warm, offline, pip = [], [], []
        agree = True
        for round_ in range(args.repeat):
            log(f"round {round_ + 1}/{args.repeat}")
            seconds, doc = hook(requirements, cache)
            warm.append(seconds)
            agree &= doc == first
            seconds, doc = hook(requirements, cache, "--offline")
            offline.append(seconds)
            agree &= doc == first
            pip.append(pip_dry_run(requirements, root / "pip-target"))
    warm_runs, offline_runs, pip_runs = Runs(tuple(warm)), Runs(tuple(offline)), Runs(tuple(pip))
    target = Target("warm_hook_s", round(warm_runs.median, 3), WARM_MAX_S, at_least=False,
                    unit=" s")
    summary = first.get("summary")
    print(json.dumps({
        "benchmark": "precommit",
        "machine": base_machine_info(),
        "pins": list(PINS),
        "target_platform": list(TARGET),
        "verdict": first.get("verdict"),
        "summary": summary,
        "cold_s": round(cold_s, 3),
        "warm": warm_runs.to_json(),
        "warm_offline": offline_runs.to_json(),
        "pip_dry_run": pip_runs.to_json(),
        "pip_over_warm": ratio(pip_runs.median, warm_runs.median),
        "same_document_every_run": agree,
        "targets": [target.to_json()],
    }, indent=2))
    log(f"pre-commit hook on {len(PINS)} pins: verdict {first.get('verdict')}; cold "
        f"{cold_s:.2f} s; warm {warm_runs.median:.3f} s (target <= {WARM_MAX_S:g} s: "
        f"{'met' if target.met else 'missed'}), offline {offline_runs.median:.3f} s; "
        f"pip --dry-run {pip_runs.median:.3f} s ({ratio(pip_runs.median, warm_runs.median)}x "
        f"ours); same document every run: {agree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
