"""One `abifit doctor --verify --json --no-cache` of an environment, in this process, with the real
loads done one way: `forkserver` (abifit's `real_loads`) or `fresh` (the baseline: a fresh process
per module, one after another, as abifit did before). Prints one JSON line: the seconds spent in
the real loads, the whole run's seconds, and each module's real outcome.

    python bench/_verify_worker.py forkserver|fresh VENV_PYTHON [SAMPLE]

With SAMPLE, `fresh` loads only every k-th module in a fresh process (SAMPLE of them, spread
evenly) and times those alone; the others are loaded through fork servers, untimed, so that the
report is whole. The figure to compare is then the seconds per module.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Sequence

import abifit.host.realload as realload
from abifit.cli import main

FORK_SERVERS = realload.real_loads


def _fresh(python: str, job: realload.LoadJob) -> realload.RealLoad:
    return realload.real_load(python, job.module, job.path, list(job.imports), 120.0,
                              list(job.preload))


def run(mode: str, python: str, sample: int | None = None) -> dict[str, object]:
    spent = [0.0]
    jobs = [0]

    def measured(python: str, batch: Sequence[realload.LoadJob], **options: object
                 ) -> list[realload.RealLoad]:
        if mode == "forkserver":
            start = time.perf_counter()
            results = FORK_SERVERS(python, batch, **options)  # type: ignore[arg-type]
            spent[0] += time.perf_counter() - start
            jobs[0] += len(batch)
            return results
        step = max(1, len(batch) // sample) if sample else 1
        chosen = set(range(0, len(batch), step))
        others = [j for i, j in enumerate(batch) if i not in chosen]
        rest = iter(FORK_SERVERS(python, others) if others else [])
        results = []
        for i, job in enumerate(batch):
            if i in chosen:
                start = time.perf_counter()
                results.append(_fresh(python, job))
                spent[0] += time.perf_counter() - start
                jobs[0] += 1
            else:
                results.append(next(rest))
        return results

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
    outcomes = {v["module"]: [v["actual_loads"], v["actual_error"], v["agrees"], v["note"]]
                for v in doc["verification"]}
    return {"mode": mode, "exit": code, "verify_s": round(spent[0], 3),
            "total_s": round(total, 3), "modules": jobs[0], "outcomes": outcomes}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2],
                         int(sys.argv[3]) if len(sys.argv) > 3 else None)))
