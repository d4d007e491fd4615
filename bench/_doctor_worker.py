"""Worker of bench_doctor.py: one `abifit doctor` run in this fresh process, measured from inside.

    PYTHONPATH=src python bench/_doctor_worker.py measure REPORT -- doctor ARGS...
    PYTHONPATH=src python bench/_doctor_worker.py profile REPORT -- doctor ARGS...

Both call `abifit.cli.main(ARGS)` in this process; doctor's own output goes to stdout as usual.

`measure` writes a JSON object to REPORT: doctor's exit code, the seconds of importing abifit and
of `main`, the seconds spent in each phase (below) and this process's peak memory. Phases are
timed by wrapping module-level functions of abifit (each wrapper costs about a microsecond per
call); they nest, e.g. `parse_elf` runs inside `scan_native_files` and `simulate_modules`.

Peak memory is VmHWM of /proc/self/status read just before exiting: the high-water mark of this
process's resident set since its exec. `ru_maxrss` is not used because Linux carries the
parent's high-water mark across fork (or vfork) + exec into it, and for RUSAGE_CHILDREN it is the
maximum over all children ever waited for. VmHWM covers this process only, not the subprocesses
abifit runs (the target interpreter for its facts, the dynamic loader for its defaults); those
are short-lived and run one at a time.

`profile` writes the top 20 entries by cumulative time of a cProfile of `main` to REPORT.
"""

from __future__ import annotations

import functools
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from _common import memory_status

START = time.perf_counter()


import abifit.cli  # noqa: E402 - after START, to time the import
import abifit.engines.doctor  # noqa: E402
import abifit.host.environment  # noqa: E402
import abifit.host.ldconfig  # noqa: E402
import abifit.host.localfs  # noqa: E402
import abifit.report.doctor  # noqa: E402
import abifit.report.json  # noqa: E402
import abifit.sim.loader  # noqa: E402
import abifit.sim.process  # noqa: E402
from abifit.host.allocator import tune_allocator, tune_collector  # noqa: E402

IMPORTED = time.perf_counter()
PROFILE_TOP = 20
P = ParamSpec("P")
R = TypeVar("R")

# (label, owner of the attribute, attribute): what each phase is, where it is looked up.
PHASES: tuple[tuple[str, object, str], ...] = (
    ("facts_subprocess", abifit.engines.doctor, "query_interpreter"),
    ("read_records", abifit.engines.doctor, "list_distributions"),
    ("scan_native_files", abifit.engines.doctor, "scan_native_files"),
    ("probe_host", abifit.engines.doctor, "probe_host"),
    ("probe_host.ld_so_help", abifit.host.ldconfig, "_ld_so_help"),
    ("probe_host.ld_debug_probe", abifit.host.ldconfig, "_search_trace"),
    ("probe_host.ld_so_cache", abifit.host.ldconfig, "read_ld_so_cache"),
    ("load_data_tables", abifit.engines.doctor, "load_preload_rules"),
    ("load_data_tables", abifit.engines.doctor, "load_soname_packages"),
    ("library_dirs", abifit.engines.doctor, "library_dirs"),
    ("python_code.read", abifit.engines.doctor.InstalledCode, "start"),
    ("import_plans", abifit.engines.doctor.InstalledCode, "plans"),
    ("simulate_and_diagnose", abifit.engines.doctor, "simulate_modules"),
    ("simulate.bind_symbols", abifit.sim.loader._Session, "bind_symbols"),
    ("simulate.requirements", abifit.sim.process, "_requirements"),
    ("gpu_check", abifit.engines.doctor, "_gpu_check"),
    ("elf.parse", abifit.host.localfs, "parse_elf"),
    ("elf.cache_get", abifit.host.localfs.ElfCache, "get"),
    ("elf.cache_put", abifit.host.localfs.ElfCache, "put"),
    ("output.doctor_json", abifit.report.doctor, "doctor_json"),
    ("output.dumps", abifit.report.json, "dumps"),
)


class PhaseClock:
    """Seconds and calls per phase, collected by wrappers around abifit's functions, and the
    seconds of the garbage collector's passes (`gc.callbacks`), which fall inside the phases."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._gc_start = 0.0

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        label = f"gc.generation{info['generation']}"
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - self._gc_start
        self.calls[label] = self.calls.get(label, 0) + 1

    def wrap(self, label: str, function: Callable[P, R]) -> Callable[P, R]:
        self.seconds.setdefault(label, 0.0)
        self.calls.setdefault(label, 0)

        @functools.wraps(function)
        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start
                self.calls[label] += 1

        return timed

    def install(self) -> list[str]:
        """Wrap every phase function that exists; the names of those that do not."""
        missing = []
        for label, owner, name in PHASES:
            function = getattr(owner, name, None)
            if function is None:
                missing.append(name)
            else:
                setattr(owner, name, self.wrap(label, function))
        gc.callbacks.append(self.on_gc)
        return missing



def measure(argv: list[str]) -> dict[str, object]:
    clock = PhaseClock()
    missing = clock.install()
    tune_allocator()  # as the `abifit` command does before its main
    tune_collector()
    start = time.perf_counter()
    code = abifit.cli.main(argv)
    main_s = time.perf_counter() - start
    return {
        "exit_code": code,
        "import_s": IMPORTED - START,
        "main_s": main_s,
        "phases_s": clock.seconds,
        "phase_calls": clock.calls,
        "phases_missing": missing,
        "memory": memory_status(),
    }


def profile(argv: list[str]) -> str:
    # Imported here, not above: `measure` times abifit's import, which should not find the
    # modules these pull in (dataclasses, inspect, enum) already loaded.
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(abifit.cli.main, argv)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(PROFILE_TOP)
    return out.getvalue()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] not in ("measure", "profile") or argv[2] != "--":
        print("usage: _doctor_worker.py {measure|profile} REPORT -- doctor ARGS...",
              file=sys.stderr)
        return 2
    mode, report, doctor_argv = argv[0], Path(argv[1]), argv[3:]
    if mode == "measure":
        report.write_text(json.dumps(measure(doctor_argv)))
    else:
        report.write_text(profile(doctor_argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
