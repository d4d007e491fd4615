"""Where a doctor run's wall time goes, step by step, in the process that runs it.

    PYTHONPATH=src python bench/doctor_timeline.py [--json] [--profile N] -- doctor ARGS...

Calls `abifit.cli.main(["doctor", ARGS...])` in this process with the steps of `_doctor` (and
what the `abifit` command does before it: the interpreter's facts, the host and GPU probes)
wrapped: each call made on the main thread is timed from its start to its end, relative to the
start of `main`. Printed on stderr: one line per step, in order, with its start, its seconds and
the seconds between the end of the previous outermost step and its start (time in code
not wrapped); a step made inside another is shown indented under it; then the
seconds the main thread spent waiting for the other cores (a parse, a read of GPU code, a fork's
answer), and the total. `--json` prints the same as one JSON document on stdout (doctor's own
output then goes nowhere). `--profile N` also prints the top N functions of a cProfile of
the main thread, by cumulative and by own time (the steps' wrappers show in it).

This is a measurement of one run, for finding what to make faster next: bench_doctor.py gives
the medians. The garbage collector's passes are counted inside the steps they fall in.
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import io
import json
import os
import pstats
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import abifit.cli
import abifit.engines.doctor as engine
import abifit.engines.gpus
import abifit.engines.kept
import abifit.host.environment
import abifit.host.localfs
import abifit.workers
from abifit.host.allocator import tune_allocator, tune_collector

# (owner, attribute): the steps, in the order `_doctor` takes them; the owner is where the
# caller looks the name up. Not a function that is sent to a worker process: a wrapper does not
# pickle
STEPS: tuple[tuple[object, str], ...] = (
    (engine, "ask"),
    (abifit.host.environment.InterpreterQuery, "facts"),
    (abifit.engines.kept, "probe_host"),
    (abifit.engines.gpus, "detect_targets"),
    (engine, "doctor_runs"),
    (engine, "list_distributions"),
    (engine.InstalledCode, "start"),
    (engine, "parse_ahead_names"),
    (engine, "scan_native_files"),
    (engine.GpuReads, "start"),
    (engine.InstalledCode, "plans"),
    (engine, "mark_loaded"),
    (engine, "numpy_candidates"),
    (engine, "numpy_uses_on_cores"),
    (engine, "selected"),
    (engine, "system_libraries"),
    (engine.LocalObjects, "prefetch"),
    (engine, "check_shared"),
    (engine, "simulate_modules"),
    (engine, "not_files"),
    (engine, "import_verdicts"),
    (engine, "compile_findings"),
    (engine, "_gpu_check"),
)
# (owner, attribute): where the main thread waits for another process
WAITS: tuple[tuple[object, str], ...] = (
    (abifit.host.localfs.LocalObjects, "_taken"),
    (abifit.workers.ForkedCall, "result"),
    (engine, "_answer"),
)


class Timeline:
    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.steps: list[tuple[str, float, float, int]] = []
        self.waits: dict[str, list[float]] = {}
        self._depth = 0
        self._main = threading.main_thread()

    def wrap(self, label: str, function: Callable[..., Any], wait: bool) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not self._main:
                return function(*args, **kwargs)
            begin = time.perf_counter()
            self._depth += not wait
            try:
                return function(*args, **kwargs)
            finally:
                end = time.perf_counter()
                self._depth -= not wait
                if wait:
                    self.waits.setdefault(label, []).append(end - begin)
                else:  # a step inside another is shown under it
                    self.steps.append((label, begin - self.start, end - begin, self._depth))

        return timed

    def install(self) -> None:
        for group, wait in ((STEPS, False), (WAITS, True)):
            for owner, name in group:
                function = getattr(owner, name)
                label = f"{getattr(owner, '__name__', owner)}.{name}".rsplit(".", 2)
                setattr(owner, name, self.wrap(".".join(label[-2:]), function, wait))

    def document(self, total: float) -> dict[str, object]:
        rows, previous = [], 0.0
        for label, begin, seconds, depth in sorted(self.steps, key=lambda s: (s[1], s[3])):
            rows.append({"step": label, "depth": depth, "start_s": round(begin, 4),
                         "s": round(seconds, 4), "gap_before_s": round(begin - previous, 4)})
            if depth == 0:
                previous = begin + seconds
        return {"main_s": round(total, 4), "steps": rows,
                "tail_s": round(total - previous, 4),
                "waits_s": {k: round(sum(v), 4) for k, v in self.waits.items()},
                "wait_calls": {k: len(v) for k, v in self.waits.items()},
                "cpus": len(os.sched_getaffinity(0))}


def main(argv: list[str]) -> int:
    as_json, top = False, 0
    while argv and argv[0] != "--":
        option = argv.pop(0)
        if option == "--json":
            as_json = True
        elif option == "--profile" and argv and argv[0].isdigit():
            top = int(argv.pop(0))
        else:
            argv = []
    if argv[:1] != ["--"] or len(argv) < 2:
        print("usage: doctor_timeline.py [--json] [--profile N] -- doctor ARGS...",
              file=sys.stderr)
        return 2
    profiler = cProfile.Profile() if top else None
    timeline = Timeline()
    timeline.install()
    tune_allocator()  # as the `abifit` command does (`abifit.cli.app.entry`)
    tune_collector()
    abifit.workers.fork_workers()
    timeline.start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) if as_json else contextlib.nullcontext():
        if profiler is not None:
            code = profiler.runcall(abifit.cli.main, argv[1:])
        else:
            code = abifit.cli.main(argv[1:])
    doc = timeline.document(time.perf_counter() - timeline.start) | {"exit_code": code}
    if as_json:
        print(json.dumps(doc, indent=1))
        return 0
    for row in doc["steps"]:  # type: ignore[attr-defined]
        print(f"{row['start_s']:8.3f} {row['s']:7.3f}  (+{row['gap_before_s']:.3f})  "
              f"{'  ' * row['depth']}{row['step']}", file=sys.stderr)
    print(f"tail {doc['tail_s']:.3f} s; main {doc['main_s']:.3f} s; waits "
          f"{doc['waits_s']} {doc['wait_calls']}", file=sys.stderr)
    if profiler is not None:
        for order in ("cumulative", "tottime"):
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(order).print_stats(top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
