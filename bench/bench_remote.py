"""Benchmark (live, PyPI): the dynamic views of every ELF member of a remote wheel, against
`pip download --no-deps` of the same wheel in the same run.

For each requirement (default torch==2.10.0 and sgl-kernel==0.3.21, for CPython 3.11 on
manylinux_2_28_x86_64), whole processes, all reading https://pypi.org/simple:

- abifit cold: `python -m abifit inspect REQ --python-version X.Y --platform TAG --index-url URL
  --cache-dir EMPTY_DIR --json`: wall time, and its `transfer` (bytes fetched, requests, wheel
  bytes);
- baseline: `pip download --no-deps --no-cache-dir --only-binary :all: --python-version X.Y
  --platform T1 --platform T2 ... --implementation cp --index-url URL -d EMPTY_DIR REQ`, with
  the platform tags abifit accepts for TAG (`compatible_platforms`: pip 23 does not expand
  `manylinux_2_28` to older manylinux tags by itself), timed; its `--log` must
  show the wheel came from files.pythonhosted.org, and the wheel must be the one abifit read (same
  name and size). The two alternate which goes first, round by round, starting with abifit (the
  first fetch of a file may miss the CDN's cache);
- abifit warm: the cold command again with the cache of the last cold run, `--warm` times;
  it must fetch 0 bytes (the index page stays fresh in the cache for 10 minutes);
- exported names against a full read: `abifit inspect WHEEL --symbols defined --json` of the
  wheel pip downloaded (every member inflated and parsed whole) against `abifit inspect REQ
  --symbols defined --offline --json` on the warm cache (the views the cold run stored), member
  by member: the multiset of defined symbol names, the symbol counts, and the whole object report
  (symbol records, needed, versions, ...). Both runs are timed, for information.

Both tools run with PIP_CONFIG_FILE=/dev/null and without the PIP_* variables that name indexes,
find-links or constraints, so that neither sees this machine's local wheel directories.

Targets per requirement: bytes fetched / wheel bytes <= 3 % for torch, <= 1 % for sgl-kernel
(3 % for any other); pip time / cold time >= 4; warm <= 0.3 s with 0 bytes fetched; 0 members
whose defined names differ from the full read.

Then (unless `--no-breakdown`) bench/_remote_worker.py repeats one cold read per requirement in a
fresh process and cache, recording where the bytes go: index page, zip directory and each member
(its HTTP ranges and how far the ELF parser reads from each end); the members that cost most are
in the JSON.

The document records the commit and the modified files of src/abifit, before and after the run,
with a digest of their contents; a change during the run is reported on stderr.

abifit's modules are byte-compiled first (`compileall`), as `pip install` does. Cold runs and pip
downloads: `--repeat` rounds (default 1: the torch wheel is ~900 MB); medians when more. Each
downloaded wheel is deleted once compared; cache directories are temporary.

Output: one JSON document on stdout; progress, missed targets and, last, a one-line summary on
stderr. `--json-only` prints nothing on stderr. The exit status is 0 whether or not targets are
met: this is a measurement, not a test.

    .venv/bin/python bench/bench_remote.py [--repeat 1] [--warm 3] [--no-breakdown] [REQ ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    REPO,
    Log,
    Runs,
    Target,
    abifit_env,
    base_machine_info,
    byte_compile_abifit,
    ratio,
)

from abifit.remote.packageindex import compatible_platforms

BENCH = REPO / "bench"
SCHEMA_VERSION = 1
REQUIREMENTS = ("torch==2.10.0", "sgl-kernel==0.3.21")
FETCHED_PERCENT_MAX = {"torch": 3.0, "sgl-kernel": 1.0}
DEFAULT_FETCHED_PERCENT_MAX = 3.0
PIP_OVER_COLD_MIN = 4.0  # issue 18
WARM_S_MAX = 0.3  # issue 18, with 0 bytes fetched
UNREPORTED = (1 << 63) - 1  # the bytes of a run that did not report its transfer
INDEX_URL = "https://pypi.org/simple"
PYPI_FILES = "https://files.pythonhosted.org/"
MB = 1_000_000
TOP_MEMBERS = 10
DIFFERENCES_SHOWN = 5
# Variables that would add indexes, local wheels or constraints to pip or abifit.
PIP_SOURCE_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                        "PIP_CONSTRAINT", "PIP_REQUIREMENT")


@dataclass(frozen=True, slots=True)
class Platform:
    """The interpreter and platform the wheels are chosen for, and the index read."""

    python_version: str
    platform: str
    index_url: str

    def abifit_args(self) -> list[str]:
        return ["--python-version", self.python_version, "--platform", self.platform,
                "--index-url", self.index_url]

    def pip_platforms(self) -> list[str]:
        """The tags abifit accepts for `platform`, given to pip one by one: pip 23 does not
        expand `manylinux_2_28_x86_64` to older manylinux tags as abifit does, so alone it
        would refuse a manylinux2014 wheel (sgl-kernel's) that abifit reads."""
        return compatible_platforms(self.platform)

    def pip_args(self) -> list[str]:
        platforms = [arg for tag in self.pip_platforms() for arg in ("--platform", tag)]
        return ["--only-binary", ":all:", "--python-version", self.python_version, *platforms,
                "--implementation", "cp", "--index-url", self.index_url]


def pypi_env() -> dict[str, str]:
    """abifit's worker environment, reading PyPI only: no pip configuration files, no index,
    find-links or constraint variables."""
    env = {k: v for k, v in abifit_env().items() if k not in PIP_SOURCE_VARIABLES}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


# ---------------------------------------------------------------------------------------------
# abifit inspect, whole process


@dataclass(frozen=True, slots=True)
class InspectRun:
    """One `abifit inspect --json` process: wall time, exit code, document, stderr's tail."""

    seconds: float
    exit_code: int
    document: dict[str, object]
    stderr: str

    @property
    def transfer(self) -> dict[str, int]:
        transfer = self.document.get("transfer")
        return transfer if isinstance(transfer, dict) else {}

    @property
    def objects(self) -> list[dict[str, object]]:
        objects = self.document.get("objects")
        return objects if isinstance(objects, list) else []

    @property
    def wheel(self) -> str | None:
        paths = {str(o.get("path")) for o in self.objects}
        return paths.pop() if len(paths) == 1 else None

    @property
    def errors(self) -> list[str]:
        return [f"{o.get('member')}: {o['error']}" for o in self.objects if o.get("error")]

    def to_json(self) -> dict[str, object]:
        return {"seconds": round(self.seconds, 3), "exit_code": self.exit_code,
                "transfer": self.transfer, "objects": len(self.objects),
                "errors": self.errors[:DIFFERENCES_SHOWN]}


def run_inspect(args: Sequence[str], env: dict[str, str]) -> InspectRun:
    """`python -m abifit inspect ARGS --json` from this working tree; stdout goes to a file
    (a `--symbols` document of torch is hundreds of MB), timed around the process alone."""
    command = [sys.executable, "-m", "abifit", "inspect", *args, "--json"]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, env=env, check=False)
        seconds = time.perf_counter() - start
        out.seek(0)
        text = out.read()
    stderr = done.stderr.decode(errors="replace").strip()
    try:
        document = json.loads(text)
    except ValueError as e:
        raise SystemExit(f"error: {' '.join(command)} exited with {done.returncode} without a "
                         f"JSON document: {stderr[-500:]}") from e
    return InspectRun(seconds, done.returncode, document, stderr[-500:])


# ---------------------------------------------------------------------------------------------
# pip download


@dataclass(frozen=True, slots=True)
class PipRun:
    """One `pip download` process: wall time, exit code, the wheel and where it came from."""

    seconds: float
    exit_code: int
    wheel: Path | None
    wheel_bytes: int | None
    source_url: str | None
    stderr: str

    @property
    def from_pypi(self) -> bool:
        return self.source_url is not None and self.source_url.startswith(PYPI_FILES)

    def to_json(self) -> dict[str, object]:
        return {"seconds": round(self.seconds, 3), "exit_code": self.exit_code,
                "wheel": self.wheel.name if self.wheel else None,
                "wheel_bytes": self.wheel_bytes,
                "source_url": self.source_url, "from_pypi": self.from_pypi}


_ADDED = re.compile(r"Added \S+ from (\S+) to build tracker")


def run_pip(requirement: str, target: Platform, dest: Path, env: dict[str, str]) -> PipRun:
    """`pip download --no-deps` of one requirement into the empty directory `dest`, timed; its
    debug log (`--log`, written outside `dest`) names the URL the wheel came from."""
    log_file = dest.with_suffix(".log")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
               "--disable-pip-version-check", "--log", str(log_file), *target.pip_args(),
               "-d", str(dest), requirement]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    seconds = time.perf_counter() - start
    log = log_file.read_text(errors="replace") if log_file.exists() else ""
    log_file.unlink(missing_ok=True)
    found = _ADDED.search(log)
    wheels = sorted(dest.glob("*.whl"))
    wheel = wheels[0] if len(wheels) == 1 else None
    return PipRun(seconds, done.returncode, wheel, wheel.stat().st_size if wheel else None,
                  found.group(1) if found else None,
                  done.stderr.decode(errors="replace").strip()[-500:])


def pip_version() -> str:
    done = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                          text=True, check=False)
    return done.stdout.split(" from ")[0].strip()


# ---------------------------------------------------------------------------------------------
# Exported names against a full read


@dataclass(frozen=True, slots=True)
class Comparison:
    """Remote views against a full local read of the same wheel, member by member."""

    members: int
    names_differ: list[dict[str, object]]
    counts_differ: list[dict[str, object]]
    objects_differ: list[dict[str, object]]
    only_remote: list[str]
    only_local: list[str]
    defined_names: int

    @property
    def names_identical(self) -> bool:
        return not (self.names_differ or self.only_remote or self.only_local)

    def to_json(self) -> dict[str, object]:
        return {
            "members": self.members,
            "defined_names": self.defined_names,
            "names_identical": self.names_identical,
            "symbol_counts_identical": not self.counts_differ,
            "object_reports_identical": not self.objects_differ,
            "members_with_different_names": len(self.names_differ),
            "members_only_remote": self.only_remote,
            "members_only_local": self.only_local,
            "first_differences": {"names": self.names_differ[:DIFFERENCES_SHOWN],
                                  "symbol_counts": self.counts_differ[:DIFFERENCES_SHOWN],
                                  "object_reports": self.objects_differ[:DIFFERENCES_SHOWN]},
        }


def by_member(run: InspectRun) -> dict[str, dict[str, object]]:
    return {str(o.get("member")): o for o in run.objects}


def _names(obj: dict[str, object]) -> Counter[str]:
    symbols = obj.get("symbols")
    return Counter(str(s["name"]) for s in symbols) if isinstance(symbols, list) else Counter()


def compare(remote: InspectRun, local: InspectRun) -> Comparison:
    """Member by member: defined names (as a multiset), symbol counts, whole object reports
    (without `path`, which names the wheel file in one and the requirement's wheel in the other)."""
    theirs, ours = by_member(local), by_member(remote)
    names: list[dict[str, object]] = []
    counts: list[dict[str, object]] = []
    objects: list[dict[str, object]] = []
    total = 0
    for member in sorted(ours.keys() & theirs.keys()):
        mine, full = ours[member], theirs[member]
        a, b = _names(mine), _names(full)
        total += sum(b.values())
        if a != b:
            names.append({"member": member, "remote": sum(a.values()), "full_read": sum(b.values()),
                          "only_remote": sorted((a - b).elements())[:DIFFERENCES_SHOWN],
                          "only_full_read": sorted((b - a).elements())[:DIFFERENCES_SHOWN]})
        if mine.get("symbol_counts") != full.get("symbol_counts"):
            counts.append({"member": member, "remote": mine.get("symbol_counts"),
                           "full_read": full.get("symbol_counts")})
        keys = sorted((mine.keys() | full.keys()) - {"path"})
        differing = [k for k in keys if mine.get(k) != full.get(k)]
        if differing:
            objects.append({"member": member, "fields": differing})
    return Comparison(len(ours.keys() & theirs.keys()), names, counts, objects,
                      sorted(ours.keys() - theirs.keys()), sorted(theirs.keys() - ours.keys()),
                      total)


# ---------------------------------------------------------------------------------------------
# Where the bytes go


def run_breakdown(requirement: str, target: Platform, env: dict[str, str]) -> dict[str, object]:
    """bench/_remote_worker.py's cold read of `requirement`, in a fresh process and cache; the
    members that cost most in full, the rest summed."""
    with tempfile.TemporaryDirectory(prefix="abifit-bench-remote-") as cache:
        command = [sys.executable, str(BENCH / "_remote_worker.py"), requirement, cache,
                   "--python-version", target.python_version, "--platform", target.platform,
                   "--index-url", target.index_url]
        done = subprocess.run(command, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: _remote_worker.py {requirement} exited with {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-500:]}")
    report: dict[str, object] = json.loads(done.stdout)
    phases = report.pop("phases")
    assert isinstance(phases, list)
    members = sorted((p for p in phases if "size" in p), key=lambda p: -p["bytes_fetched"])
    rest = members[TOP_MEMBERS:]
    return {
        **report,
        "phases": [p for p in phases if "size" not in p],
        "top_members": members[:TOP_MEMBERS],
        "other_members": {"count": len(rest),
                          "elf": sum(1 for p in rest if p["elf"]),
                          "bytes_fetched": sum(p["bytes_fetched"] for p in rest),
                          "requests": sum(p["requests"] for p in rest),
                          "seconds": round(sum(p["seconds"] for p in rest), 3)},
    }


# ---------------------------------------------------------------------------------------------
# One requirement


@dataclass(slots=True)
class Measured:
    """Every run for one requirement."""

    requirement: str
    cold: list[InspectRun] = field(default_factory=list)
    pip: list[PipRun] = field(default_factory=list)
    warm: list[InspectRun] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    remote_symbols: InspectRun | None = None
    local_symbols: InspectRun | None = None
    comparison: Comparison | None = None
    wheel_check: dict[str, object] = field(default_factory=dict)
    breakdown: dict[str, object] | None = None

    @property
    def project(self) -> str:
        return re.split(r"[=<>!~\[; @]", self.requirement, maxsplit=1)[0].strip().lower()

    @property
    def wheel_bytes(self) -> int:
        return self.cold[-1].transfer.get("wheel_bytes", 0)

    @property
    def fetched(self) -> float:
        return statistics.median(run.transfer.get("bytes_fetched", 0) for run in self.cold)

    @property
    def requests(self) -> float:
        return statistics.median(run.transfer.get("requests", 0) for run in self.cold)

    @property
    def fetched_percent(self) -> float:
        return round(100 * self.fetched / self.wheel_bytes, 3) if self.wheel_bytes else 0.0

    @property
    def cold_s(self) -> Runs:
        return Runs(tuple(run.seconds for run in self.cold))

    @property
    def warm_s(self) -> Runs:
        return Runs(tuple(run.seconds for run in self.warm))

    @property
    def pip_s(self) -> Runs:
        return Runs(tuple(run.seconds for run in self.pip))

    @property
    def warm_bytes(self) -> int:
        """The most bytes a warm run fetched. A run that reported no transfer (it failed)
        counts as fetching: 0 bytes must be measured, not assumed."""
        return max(run.transfer.get("bytes_fetched", UNREPORTED) for run in self.warm)

    def targets(self) -> list[Target]:
        limit = FETCHED_PERCENT_MAX.get(self.project, DEFAULT_FETCHED_PERCENT_MAX)
        differing = (len(self.comparison.names_differ) + len(self.comparison.only_remote)
                     + len(self.comparison.only_local)) if self.comparison else -1
        return [
            Target(f"{self.project}: fetched_percent", self.fetched_percent, limit,
                   at_least=False, unit=" %"),
            Target(f"{self.project}: pip_over_cold", ratio(self.pip_s.median, self.cold_s.median),
                   PIP_OVER_COLD_MIN, at_least=True),
            Target(f"{self.project}: warm_s", round(self.warm_s.median, 3), WARM_S_MAX,
                   at_least=False, unit=" s"),
            Target(f"{self.project}: warm_bytes_fetched", self.warm_bytes, 0, at_least=False,
                   unit=" B"),
            Target(f"{self.project}: members_with_different_names", differing, 0,
                   at_least=False, unit=" members"),
        ]

    def to_json(self) -> dict[str, object]:
        goals = self.targets()
        return {
            "requirement": self.requirement,
            "wheel": self.cold[-1].wheel,
            "wheel_bytes": self.wheel_bytes,
            "elf_members": len(self.cold[-1].objects),
            "bytes_fetched": self.fetched,
            "fetched_percent": self.fetched_percent,
            "requests": self.requests,
            "cold": {**self.cold_s.to_json(), "runs": [run.to_json() for run in self.cold]},
            "warm": {**self.warm_s.to_json(), "runs": [run.to_json() for run in self.warm]},
            "pip_download": {**self.pip_s.to_json(), "runs": [run.to_json() for run in self.pip]},
            "round_order": self.order,
            "ratios": {"pip_over_cold": goals[1].measured,
                       "cold_over_warm": ratio(self.cold_s.median, self.warm_s.median)},
            "same_wheel": self.wheel_check,
            "full_read_comparison": {
                **(self.comparison.to_json() if self.comparison else {}),
                "remote_symbols_offline_run": (self.remote_symbols.to_json()
                                               if self.remote_symbols else None),
                "full_read_run": self.local_symbols.to_json() if self.local_symbols else None,
            },
            "breakdown": self.breakdown,
            "targets": [goal.to_json() for goal in goals],
            "all_targets_met": all(goal.met for goal in goals),
        }

    def summary(self) -> str:
        same = "yes" if self.comparison and self.comparison.names_identical else "NO"
        return (f"{self.project}: {self.fetched / MB:.1f} of {self.wheel_bytes / MB:.0f} MB "
                f"({self.fetched_percent:.2f} %), {self.requests:g} requests; cold "
                f"{self.cold_s.median:.2f} s, pip {self.pip_s.median:.1f} s "
                f"(pip/cold {ratio(self.pip_s.median, self.cold_s.median):g}x); warm "
                f"{self.warm_s.median:.3f} s, {self.warm_bytes} B; names same as full read: "
                f"{same}")


def measure(requirement: str, target: Platform, repeat: int, warm: int, breakdown: bool,
            log: Log) -> Measured:
    """Cold and pip rounds, warm runs, the comparison with a full read, the breakdown."""
    env = pypi_env()
    result = Measured(requirement)
    with tempfile.TemporaryDirectory(prefix="abifit-bench-remote-") as scratch:
        root = Path(scratch)
        for n in range(repeat):
            cache, wheel_dir = root / f"cache-{n}", root / f"wheel-{n}"
            wheel_dir.mkdir()
            steps = ["abifit_cold", "pip_download"] if n % 2 == 0 else \
                ["pip_download", "abifit_cold"]
            result.order.append(" then ".join(steps))
            for step in steps:
                if step == "abifit_cold":
                    run = run_inspect([requirement, *target.abifit_args(), "--cache-dir",
                                       str(cache)], env)
                    result.cold.append(run)
                    log(f"  cold {n + 1}/{repeat}: {run.seconds:.2f} s, "
                        f"{run.transfer.get('bytes_fetched', 0):,} B in "
                        f"{run.transfer.get('requests', 0)} requests (exit {run.exit_code})")
                else:
                    pip = run_pip(requirement, target, wheel_dir, env)
                    result.pip.append(pip)
                    log(f"  pip download {n + 1}/{repeat}: {pip.seconds:.2f} s, "
                        f"{pip.wheel.name if pip.wheel else 'no wheel'} "
                        f"(exit {pip.exit_code}, from {pip.source_url})")
            if n < repeat - 1:
                shutil.rmtree(cache)
                shutil.rmtree(wheel_dir)
        for n in range(warm):
            run = run_inspect([requirement, *target.abifit_args(), "--cache-dir", str(cache)],
                              env)
            result.warm.append(run)
            log(f"  warm {n + 1}/{warm}: {run.seconds:.3f} s, "
                f"{run.transfer.get('bytes_fetched', 0):,} B")
        result.wheel_check = check_same_wheel(result.cold[-1], result.pip[-1])
        compare_full_read(result, target, cache, env, log)
        if result.pip[-1].wheel is not None:
            result.pip[-1].wheel.unlink()
    if breakdown:
        log("  breakdown: one more cold read, recording where the bytes go")
        result.breakdown = run_breakdown(requirement, target, env)
    return result


def check_same_wheel(cold: InspectRun, pip: PipRun) -> dict[str, object]:
    """Whether pip downloaded the wheel abifit read: same name, same size, from PyPI."""
    name = pip.wheel.name if pip.wheel else None
    return {"abifit": cold.wheel, "pip": name, "pip_from_pypi": pip.from_pypi,
            "same": name == cold.wheel and pip.wheel_bytes == cold.transfer.get("wheel_bytes")
            and pip.from_pypi}


def compare_full_read(result: Measured, target: Platform, cache: Path, env: dict[str, str],
                      log: Log) -> None:
    """Defined symbols of the stored views (offline) against a full read of pip's wheel."""
    wheel = result.pip[-1].wheel
    if wheel is None:
        log("  no wheel from pip: no comparison with a full read")
        return
    result.remote_symbols = run_inspect([result.requirement, *target.abifit_args(), "--cache-dir",
                                         str(cache), "--offline", "--symbols", "defined"], env)
    result.local_symbols = run_inspect([str(wheel), "--symbols", "defined"], env)
    result.comparison = compare(result.remote_symbols, result.local_symbols)
    log(f"  full read {result.local_symbols.seconds:.1f} s, remote views with symbols "
        f"{result.remote_symbols.seconds:.1f} s: names identical "
        f"{result.comparison.names_identical}, "
        f"{result.comparison.defined_names:,} defined names in "
        f"{result.comparison.members} members")


# ---------------------------------------------------------------------------------------------
# Report


def machine_info() -> dict[str, object]:
    from abifit import __version__

    return {**base_machine_info(), "pip": pip_version(), "abifit": __version__}


def source_state() -> dict[str, object]:
    """The commit, the files of src/abifit that differ from it, and a digest of their contents:
    taken before and after the run, so that figures measured on a tree that changed under them
    are flagged."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip()

    digest = hashlib.sha256()
    for path in sorted((REPO / "src" / "abifit").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "modified": git("status", "--porcelain", "--", "src/abifit").splitlines(),
            "src_digest": digest.hexdigest()[:16]}


def document(results: list[Measured], target: Platform, repeat: int, warm: int,
             machine: dict[str, object],
             sources: tuple[dict[str, object], dict[str, object]]) -> dict[str, object]:
    goals = [goal for result in results for goal in result.targets()]
    return {
        "benchmark": "remote",
        "schema": SCHEMA_VERSION,
        "machine": {**machine, "load_average_end": [round(x, 2) for x in os.getloadavg()]},
        "source": {"start": sources[0], "end": sources[1],
                   "unchanged": sources[0] == sources[1]},
        "target": {"python_version": target.python_version, "platform": target.platform,
                   "index_url": target.index_url, "pip_platforms": target.pip_platforms()},
        "repeat": repeat,
        "warm_runs": warm,
        "requirements": [result.to_json() for result in results],
        "targets": [goal.to_json() for goal in goals],
        "all_targets_met": all(goal.met for goal in goals),
        "environment": {"PIP_CONFIG_FILE": os.devnull, "removed": list(PIP_SOURCE_VARIABLES)},
        "commands": {
            "abifit_cold": [sys.executable, "-m", "abifit", "inspect", "REQ",
                            *target.abifit_args(), "--cache-dir", "EMPTY_DIR", "--json"],
            "abifit_warm": [sys.executable, "-m", "abifit", "inspect", "REQ",
                            *target.abifit_args(), "--cache-dir", "FILLED_DIR", "--json"],
            "pip_download": [sys.executable, "-m", "pip", "download", "--no-deps",
                             "--no-cache-dir", "--disable-pip-version-check", "--log", "FILE",
                             *target.pip_args(), "-d", "EMPTY_DIR", "REQ"],
            "remote_symbols": [sys.executable, "-m", "abifit", "inspect", "REQ",
                               *target.abifit_args(), "--cache-dir", "FILLED_DIR", "--offline",
                               "--symbols", "defined", "--json"],
            "full_read": [sys.executable, "-m", "abifit", "inspect", "WHEEL", "--symbols",
                          "defined", "--json"],
        },
    }


def problems(results: list[Measured]) -> Iterator[str]:
    for result in results:
        for goal in result.targets():
            if not goal.met:
                yield f"target missed: {goal.describe()}"
        if not result.wheel_check.get("same"):
            yield f"unexpected: pip and abifit did not read the same wheel: {result.wheel_check}"
        for run in [*result.cold, *result.warm]:
            if run.exit_code != 0:
                yield (f"unexpected: abifit exited with {run.exit_code} for "
                       f"{result.requirement}: {run.stderr[-300:]}")
                break
        for pip in result.pip:
            if pip.exit_code != 0:
                yield f"unexpected: pip exited with {pip.exit_code}: {pip.stderr[-300:]}"
                break


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("requirements", nargs="*", default=list(REQUIREMENTS), metavar="REQ",
                        help=f"requirements to read (default: {' '.join(REQUIREMENTS)})")
    parser.add_argument("--repeat", type=int, default=1,
                        help="cold runs and pip downloads per requirement (median; default 1)")
    parser.add_argument("--warm", type=int, default=3, help="warm runs (median; default 3)")
    parser.add_argument("--python-version", default="3.11", metavar="X.Y")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64", metavar="TAG")
    parser.add_argument("--index-url", default=INDEX_URL, metavar="URL")
    parser.add_argument("--no-breakdown", action="store_true",
                        help="skip the extra cold read that records where the bytes go")
    parser.add_argument("--json-only", action="store_true", help="print nothing on stderr")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.warm < 1:
        parser.error("--repeat and --warm must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = Log(args.json_only)
    target = Platform(args.python_version, args.platform, args.index_url)
    byte_compile_abifit()
    machine = machine_info()
    start = source_state()
    results = []
    for requirement in args.requirements:
        log(f"{requirement}: {args.repeat} cold run(s) and pip download(s), {args.warm} warm")
        results.append(measure(requirement, target, args.repeat, args.warm,
                               not args.no_breakdown, log))
    end = source_state()
    print(json.dumps(document(results, target, args.repeat, args.warm, machine, (start, end)),
                     indent=2))
    for line in problems(results):
        log(line)
    if start != end:
        log(f"warning: src/abifit changed during the run ({start['src_digest']} -> "
            f"{end['src_digest']}): the figures mix two versions")
    log(" | ".join(result.summary() for result in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
