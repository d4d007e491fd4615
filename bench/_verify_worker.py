"""One `abifit doctor --verify --json --no-cache` of an environment, in this process, with the real
loads done one way: `forkserver` (abifit's `real_loads`) or `fresh` (the baseline: a fresh process
per module, one after another, as abifit did before). Prints one JSON line: the seconds spent in
the real loads, the whole run's seconds, and each module's real outcome.

    python bench/_verify_worker.py forkserver|fresh VENV_PYTHON
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Sequence

import abifit.host.realload as realload
from abifit.cli import main


def _fresh(python: str, jobs: Sequence[realload.LoadJob], **_options: object
           ) -> list[realload.RealLoad]:
    return [realload.real_load(python, j.module, j.path, list(j.imports), 120.0, list(j.preload))
            for j in jobs]


def run(mode: str, python: str) -> dict[str, object]:
    spent = [0.0]
    jobs = [0]
    loads = realload.real_loads if mode == "forkserver" else _fresh

    def measured(python: str, batch: Sequence[realload.LoadJob], **options: object
                 ) -> list[realload.RealLoad]:
        start = time.perf_counter()
        try:
            return loads(python, batch, **options)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - start
            jobs[0] += len(batch)

    realload.real_loads = measured  # type: ignore[assignment]
    out = io.StringIO()
    start = time.perf_counter()
    sys.stdout, stdout = out, sys.stdout
    try:
        code = main(["doctor", "--python", python, "--verify", "--json", "--no-cache"])
    finally:
        sys.stdout = stdout
    total = time.perf_counter() - start
    doc = json.loads(out.getvalue())
    outcomes = {v["module"]: [v["actual_loads"], v["agrees"]] for v in doc["verification"]}
    return {"mode": mode, "exit": code, "verify_s": round(spent[0], 3),
            "total_s": round(total, 3), "modules": jobs[0], "outcomes": outcomes}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])))
