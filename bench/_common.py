"""Helpers shared by the benchmarks: runs and their medians, targets, machine facts, logging.

Also the two steps every whole-process measurement of abifit needs: byte-compiling its modules
and an environment that puts this working tree's `src` first on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Runs:
    """Seconds of repeated runs of one measurement."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def to_json(self) -> dict[str, object]:
        return {"median_s": round(self.median, 4), "runs_s": [round(s, 4) for s in self.seconds]}


def timed(action: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def ratio(baseline: float, ours: float) -> float:
    return round(baseline / ours, 2) if ours > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    measured: float
    target: float
    at_least: bool  # measured >= target, else measured <= target
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.measured >= self.target if self.at_least else self.measured <= self.target

    def describe(self) -> str:
        op = ">=" if self.at_least else "<="
        return (f"{self.name}: {self.measured:g}{self.unit} "
                f"(target {op} {self.target:g}{self.unit})")

    def to_json(self) -> dict[str, object]:
        op = ">=" if self.at_least else "<="
        return {"name": self.name, "measured": self.measured, "target": f"{op} {self.target:g}",
                "unit": self.unit.strip(), "pass": self.met}


class Log:
    """Progress and summary lines on stderr, unless silenced."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)


def byte_compile_abifit() -> None:
    """Write abifit's .pyc files, as `pip install` does, so a process start does not compile.

    Without this, an editable checkout on a machine with PYTHONDONTWRITEBYTECODE=1 (this one)
    recompiles every module at each start: ~40 ms that no installed abifit pays.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "abifit")],
                   check=True)


def memory_status(keys: tuple[str, ...] = ("VmRSS", "VmHWM", "RssAnon")) -> dict[str, int]:
    """These lines of /proc/self/status (reported in kB), in bytes."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in keys:
                found[key] = int(value.split()[0]) * 1024
    return found


def abifit_env() -> dict[str, str]:
    """The environment of abifit worker processes: this working tree's src first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    return env


def pypi_env() -> dict[str, str]:
    """The environment of a live benchmark's abifit and pip processes: this working tree's src
    on PYTHONPATH, and nothing of pip's or abifit's configuration (PyPI itself is asked)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ABIFIT_"))}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    env["PYTHONPATH"] = str(REPO / "src")
    return env


def abifit_json(args: list[str], timeout: float) -> tuple[float, dict[str, object]]:
    """One `python -m abifit ARGS` process in `pypi_env()`: its seconds and its JSON document;
    SystemExit when it exits with other than 0 or 1."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "abifit", *args], capture_output=True,
                          text=True, env=pypi_env(), timeout=timeout)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"error: abifit {args[0]} exited with {done.returncode}: "
                         f"{done.stderr.strip()[-800:]}")
    doc: dict[str, object] = json.loads(done.stdout)
    return seconds, doc


def base_machine_info() -> dict[str, object]:
    """CPU, load and Python of this machine; each benchmark adds the versions of its tools."""
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), None)
    except OSError:
        return None
