"""Benchmark: `abifit doctor` on a torch 2.13.0 venv, cold and warm, against `ldd -r`; memory.

The environment: a venv with torch 2.13.0 (CPU) and a few common native packages (numpy, pyyaml,
markupsafe, psutil), created once under ~/.cache/abifit-tests/bench-doctor-torch-2.13.0 (or
`--venv PATH`; an existing venv there is used as it is; or `--python PATH`, an existing
interpreter's environment such as a GPU machine's image, its site directories as
`site.getsitepackages()` names them) and marked ready by a file naming its
requirements.

What is measured, whole processes, interleaved round by round:

- baseline: `ldd -r FILE` for every ELF file in the venv's site-packages, one process per
  file, sequentially, timed as one unit; each file's time is kept too. The target's baseline is
  its shared objects (ELF files named `NAME.so` or `NAME.so.N`): the extension modules and the
  libraries, all of which doctor parses whole; the sum of their files' times is what `ldd -r`
  over them alone takes. Two more sums are reported beside it: the extension modules doctor
  checks (the `modules[].path` of its `--json` output), and every ELF file, programs included
  (torch's test binaries: doctor reads only what they link to). Issue 18 measured `ldd -r` over
  every ELF file of the environment. The exit codes and the "not found" and "undefined symbol"
  lines of `ldd -r` are reported for information: on a module that needs torch's libraries by
  soname, without a RUNPATH to find them, it reports them missing, which is its own behaviour.
- abifit cold: `python -m abifit doctor --python VENV_PYTHON --json --cache-dir EMPTY_DIR`, a
  new empty cache directory each run.
- abifit warm: the same with a cache directory filled by an earlier run.
- `python -c pass`, for the share of interpreter start.
Targets (issue 40): cold at most half of ldd over the shared objects (median(cold) /
median(ldd) <= 0.5) and warm at most a fifteenth of it (median(ldd) / median(warm) >= 15;
issue 18 asked for a fifth). Issue 40 measured them on a larger environment than the default
one, where `ldd -r` takes seconds: `--big` makes and uses such a venv (torch, numba, pyarrow,
scipy, opencv, pandas, lxml, grpcio and a few more, about 1.5 GB, made once under
~/.cache/abifit-tests/bench-doctor-big).

Then, in separate processes (bench/_doctor_worker.py, which calls `abifit.cli.main` itself), the
same cold and warm runs measured from inside: seconds per phase (facts subprocess, RECORD reading,
native file scan, host probe with its `ld.so --help` and LD_DEBUG runs, ELF parsing, cache reads
and writes, simulation, output) and peak memory, VmHWM of the abifit process read just before it
exits (see the worker for why not `ru_maxrss`). Target: peak <= 400 MB (10^6 bytes), the largest
over all these runs. Doctor's verdict must be "fits" (exit 0) in this healthy environment.

abifit's modules are byte-compiled first (`compileall`), as `pip install` does: this machine sets
PYTHONDONTWRITEBYTECODE=1, so an editable checkout would otherwise recompile at every start.
Every figure is the median of `--repeat` runs after one discarded warm-up round (which also
warms the page cache for both tools); all runs are in the JSON.

Output: one JSON document on stdout; progress, missed targets and, last, a one-line summary on
stderr. `--json-only` prints nothing on stderr. `--profile` also prints a cProfile (top 20 by
cumulative time) of a warm run of `abifit.cli.main(["doctor", ...])` to stderr. The exit status
is 0 whether or not targets are met: this is a measurement, not a test.

    .venv/bin/python bench/bench_doctor.py [--repeat 5] [--big | --venv PATH | --python PATH]
        [--json-only] [--profile]
"""

from __future__ import annotations

import argparse
import fcntl
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
from dataclasses import dataclass
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

BENCH = REPO / "bench"
SCHEMA_VERSION = 2  # 2: ldd over every ELF file; its median over the shared objects
TORCH_VERSION = "2.13.0"
REQUIREMENTS = (f"torch=={TORCH_VERSION}", "numpy", "pyyaml", "markupsafe", "psutil")
# `--big`: the kind of environment issue 40 measured (torch, numba, pyarrow, scipy, opencv,
# pandas, lxml, grpcio) with the rest of bench_verify.py's set
BIG_REQUIREMENTS = (*REQUIREMENTS, "numba", "pyarrow", "scipy", "opencv-python-headless",
                    "pandas", "lxml", "grpcio", "scikit-learn", "pillow", "cryptography",
                    "matplotlib")
TEST_CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
DEFAULT_VENV = TEST_CACHE / f"bench-doctor-torch-{TORCH_VERSION}"
BIG_VENV = TEST_CACHE / "bench-doctor-big"
READY_MARKER = ".abifit-bench-ready"
MB = 1_000_000
COLD_OVER_LDD_MAX = 0.5
LDD_OVER_WARM_MIN = 15.0  # issue 40 (issue 18 asked for 5)
PEAK_MB_MAX = 400.0


# ---------------------------------------------------------------------------------------------
# The environment


def ensure_venv(venv: Path, requirements: tuple[str, ...]) -> Path:
    """A venv holding `requirements`, created once; its ready marker lists what was installed.

    An existing environment without the marker at a path other than the default is someone
    else's: it is used as it is, never rebuilt. Creation is serialised with a file lock, as
    tests/conftest.py's `ensure_torch_venv()` does.
    """
    ready = venv / READY_MARKER
    wanted = "\n".join(requirements) + "\n"
    found = _reads(ready)
    if found == wanted:
        return venv
    if found is None and (venv / "bin" / "python").exists() and venv not in (DEFAULT_VENV,
                                                                              BIG_VENV):
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _reads(ready) != wanted:
            _create_venv(venv, requirements)
            ready.write_text(wanted)
    return venv


def _reads(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _create_venv(venv: Path, requirements: tuple[str, ...]) -> None:
    python = sys.executable if sys.version_info[:2] == (3, 11) else shutil.which("python3.11")
    if python is None:
        raise SystemExit(f"error: python3.11 is needed for torch {TORCH_VERSION}")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--only-binary", ":all:", *requirements], check=True)


def site_dirs(python: Path) -> list[Path]:
    """The site directories of an interpreter (`site.getsitepackages()`, those that exist): a
    venv's site-packages, or a system Python's dist-packages directories."""
    done = subprocess.run([str(python), "-I", "-c",
                           "import json, site; print(json.dumps(site.getsitepackages()))"],
                          capture_output=True, text=True, check=True)
    return [Path(d) for d in dict.fromkeys(json.loads(done.stdout)) if Path(d).is_dir()]


def installed_versions(sites: Sequence[Path]) -> dict[str, str]:
    """name -> version of every distribution in the site directories, from its dist-info
    directory names."""
    found: dict[str, str] = {}
    for site in sites:
        for info in site.glob("*.dist-info"):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            found.setdefault(name, version)
    return dict(sorted(found.items()))


def elf_files(sites: Sequence[Path]) -> list[str]:
    """Every ELF file (a regular file, not a link, starting with the ELF magic) in the site
    directories, in path order."""
    found = []
    for site in sites:
        for directory, subdirs, names in os.walk(site):
            subdirs.sort()
            for name in sorted(names):
                path = os.path.join(directory, name)
                if os.path.isfile(path) and not os.path.islink(path) and _magic(path):
                    found.append(path)
    return found


def _magic(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


_SHARED_NAME = re.compile(r"\.so(\.[0-9]+)*$")


def is_shared_object(path: str) -> bool:
    """Named like a shared object: `NAME.so`, `NAME.so.N`, `NAME.so.N.M`, ..."""
    return _SHARED_NAME.search(os.path.basename(path)) is not None


# ---------------------------------------------------------------------------------------------
# abifit doctor, whole process


@dataclass(frozen=True, slots=True)
class DoctorRun:
    """One `abifit doctor --json` process: its wall time, exit code and document."""

    seconds: float
    exit_code: int
    document: dict[str, object]

    @property
    def verdict(self) -> object:
        return self.document.get("verdict")

    @property
    def module_paths(self) -> list[str]:
        modules = self.document.get("modules")
        assert isinstance(modules, list)
        return [str(module["path"]) for module in modules]


def doctor_args(python: Path, cache_dir: Path) -> list[str]:
    return ["doctor", "--python", str(python), "--json", "--cache-dir", str(cache_dir)]


def run_doctor(python: Path, cache_dir: Path) -> DoctorRun:
    """`python -m abifit doctor ...` from this working tree, timed around the process alone."""
    command = [sys.executable, "-m", "abifit", *doctor_args(python, cache_dir)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=abifit_env(), check=False)
    seconds = time.perf_counter() - start
    try:
        document = json.loads(done.stdout)
    except ValueError as e:
        raise SystemExit(f"error: abifit doctor exited with {done.returncode} and no JSON: "
                         f"{done.stderr.decode(errors='replace').strip()[:500]}") from e
    return DoctorRun(seconds, done.returncode, document)


class CacheDirs:
    """Fresh empty cache directories for cold runs and one kept directory for warm runs."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="abifit-bench-doctor-"))
        self.warm = self.root / "warm"

    def fresh(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="cold-", dir=self.root))

    def discard(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The baseline: ldd -r


@dataclass(frozen=True, slots=True)
class LddRun:
    """`ldd -r FILE` once per file, in sequence: total and per-file seconds, and what it said."""

    seconds: float
    per_file: tuple[float, ...]
    exit_codes: tuple[int, ...]
    not_found: tuple[int, ...]
    undefined: tuple[int, ...]


def seconds_over(run: LddRun, files: Sequence[str], subset: Sequence[str]) -> float:
    """What `ldd -r` over `subset` (some of the `files` the run took) alone takes: the sum of
    their files' times (one process per file, in sequence)."""
    wanted = set(subset)
    return sum(t for path, t in zip(files, run.per_file, strict=True) if path in wanted)


def run_ldd(files: Sequence[str]) -> LddRun:
    per_file, codes, not_found, undefined = [], [], [], []
    start = time.perf_counter()
    for path in files:
        begin = time.perf_counter()
        done = subprocess.run(["ldd", "-r", path], capture_output=True, check=False)
        per_file.append(time.perf_counter() - begin)
        lines = (done.stdout + done.stderr).decode(errors="replace").splitlines()
        codes.append(done.returncode)
        not_found.append(sum("not found" in line for line in lines))
        undefined.append(sum(line.startswith("undefined symbol:") for line in lines))
    seconds = time.perf_counter() - start
    return LddRun(seconds, tuple(per_file), tuple(codes), tuple(not_found), tuple(undefined))


def ldd_findings(run: LddRun, files: Sequence[str], root: Path) -> dict[str, object]:
    """What `ldd -r` reported, for information: exit codes, line counts, the files concerned."""
    flagged = [
        {"file": _relative(path, root), "exit_code": code, "not_found": nf, "undefined": ud}
        for path, code, nf, ud in zip(files, run.exit_codes, run.not_found, run.undefined,
                                      strict=True)
        if code or nf or ud
    ]
    return {
        "exit_codes": {str(code): n for code, n in sorted(Counter(run.exit_codes).items())},
        "not_found_lines": sum(run.not_found),
        "undefined_symbol_lines": sum(run.undefined),
        "files_with_reports": flagged,
    }


def _relative(path: str, root: Path) -> str:
    return os.path.relpath(path, root) if path.startswith(str(root)) else path


# ---------------------------------------------------------------------------------------------
# Interleaved rounds


@dataclass(frozen=True, slots=True)
class Rounds:
    """The timed runs of every measurement, and the last result of each."""

    ldd: list[LddRun]
    cold: list[DoctorRun]
    warm: list[DoctorRun]
    startup: list[float]


def python_startup() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=abifit_env())
    return time.perf_counter() - start


def measure_rounds(python: Path, files: Sequence[str], dirs: CacheDirs, repeat: int,
                   log: Log) -> Rounds:
    """Rounds of ldd, cold, warm and `python -c pass`; the first round is a discarded warm-up.

    Interleaving spreads a noisy neighbour's bursts over all measurements instead of one.
    """
    rounds = Rounds([], [], [], [])
    for n in range(repeat + 1):
        log(f"round {n}/{repeat}" + (" (warm-up)" if n == 0 else ""))
        ldd, cold, warm, startup = _one_round(python, files, dirs)
        if n > 0:
            rounds.ldd.append(ldd)
            rounds.cold.append(cold)
            rounds.warm.append(warm)
            rounds.startup.append(startup)
    return rounds


def _one_round(python: Path, files: Sequence[str],
               dirs: CacheDirs) -> tuple[LddRun, DoctorRun, DoctorRun, float]:
    ldd = run_ldd(files)
    fresh = dirs.fresh()
    cold = run_doctor(python, fresh)
    dirs.discard(fresh)
    if not dirs.warm.exists():
        run_doctor(python, dirs.warm)  # fills the warm cache; not a measurement
    warm = run_doctor(python, dirs.warm)
    return ldd, cold, warm, python_startup()


# ---------------------------------------------------------------------------------------------
# Inside the abifit process: phases and peak memory


def run_worker(mode: str, python: Path, cache_dir: Path) -> str:
    """bench/_doctor_worker.py in a fresh process; the report it wrote."""
    with tempfile.NamedTemporaryFile("r", suffix=".report") as report:
        command = [sys.executable, str(BENCH / "_doctor_worker.py"), mode, report.name, "--",
                   *doctor_args(python, cache_dir)]
        done = subprocess.run(command, capture_output=True, env=abifit_env(), check=False)
        text = report.read()
    if not text:
        raise SystemExit(f"error: _doctor_worker.py {mode} exited with {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[:500]}")
    return text


@dataclass(frozen=True, slots=True)
class Inside:
    """`measure` reports of the worker for one kind of run (cold or warm)."""

    reports: list[dict[str, object]]

    def peaks(self) -> list[int]:
        return [_memory(report)["VmHWM"] for report in self.reports]

    def median_of(self, key: str) -> float:
        return statistics.median(float(_number(report[key])) for report in self.reports)

    def phase_medians(self, key: str, digits: int) -> dict[str, float]:
        """Per phase, the median over the runs of `key` (a phase absent from a run counts 0:
        the garbage collector's older generations do not run every time)."""
        tables = [_table(report, key) for report in self.reports]
        labels = dict.fromkeys(label for table in tables for label in table)
        return {label: round(statistics.median(t.get(label, 0) for t in tables), digits)
                for label in labels}

    def to_json(self) -> dict[str, object]:
        return {
            "import_s_median": round(self.median_of("import_s"), 4),
            "main_s_median": round(self.median_of("main_s"), 4),
            "process_s_median": round(self.median_of("process_s"), 4),
            "outside_import_and_main_s_median":
                round(self.median_of("outside_import_and_main_s"), 4),
            "phases_s_median": self.phase_medians("phases_s", 4),
            "phase_calls_median": self.phase_medians("phase_calls", 1),
            "phases_missing": self.reports[0]["phases_missing"],
            "peak_rss_mb_median": round(statistics.median(self.peaks()) / MB, 1),
            "peak_rss_mb_runs": [round(p / MB, 1) for p in self.peaks()],
            "exit_codes": [report["exit_code"] for report in self.reports],
        }


def _memory(report: dict[str, object]) -> dict[str, int]:
    memory = report["memory"]
    assert isinstance(memory, dict)
    return memory


def _table(report: dict[str, object], key: str) -> dict[str, float]:
    table = report[key]
    assert isinstance(table, dict)
    return table


def _number(value: object) -> float:
    assert isinstance(value, (int, float))
    return value


def measure_inside(python: Path, dirs: CacheDirs, repeat: int) -> tuple[Inside, Inside]:
    """`repeat` cold and warm worker runs, interleaved; the warm cache is already filled."""
    cold, warm = [], []
    for _ in range(repeat):
        fresh = dirs.fresh()
        cold.append(measured_worker(python, fresh))
        dirs.discard(fresh)
        warm.append(measured_worker(python, dirs.warm))
    return Inside(cold), Inside(warm)


def measured_worker(python: Path, cache_dir: Path) -> dict[str, object]:
    """The worker's `measure` report, with the process's wall time and the part of it outside
    the import and `main`: interpreter start, the worker's few stdlib imports, and exit."""
    start = time.perf_counter()
    report: dict[str, object] = json.loads(run_worker("measure", python, cache_dir))
    seconds = time.perf_counter() - start
    inside = _number(report["import_s"]) + _number(report["main_s"])
    return {**report, "process_s": seconds, "outside_import_and_main_s": seconds - inside}


# ---------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True, slots=True)
class Results:
    venv: Path
    python: Path
    sites: list[Path]  # the interpreter's site directories
    files: list[str]  # the extension modules doctor checks
    elf: list[str]  # every ELF file of the site directories: what ldd -r took, in order
    rounds: Rounds
    inside_cold: Inside
    inside_warm: Inside
    profile: str | None

    @property
    def shared(self) -> list[str]:
        """The shared objects among the ELF files: the target's baseline."""
        return [path for path in self.elf if is_shared_object(path)]

    def ldd_over(self, subset: Sequence[str]) -> Runs:
        return Runs(tuple(seconds_over(run, self.elf, subset) for run in self.rounds.ldd))

    @property
    def ldd(self) -> Runs:
        """`ldd -r` over the shared objects: the target's baseline."""
        return self.ldd_over(self.shared)

    @property
    def ldd_modules(self) -> Runs:
        return self.ldd_over(self.files)

    @property
    def ldd_all(self) -> Runs:
        """`ldd -r` over every ELF file, timed as one unit."""
        return Runs(tuple(run.seconds for run in self.rounds.ldd))

    @property
    def cold(self) -> Runs:
        return Runs(tuple(run.seconds for run in self.rounds.cold))

    @property
    def warm(self) -> Runs:
        return Runs(tuple(run.seconds for run in self.rounds.warm))

    @property
    def peak_mb(self) -> float:
        return round(max(self.inside_cold.peaks() + self.inside_warm.peaks()) / MB, 1)

    def targets(self) -> list[Target]:
        return [
            Target("cold_over_ldd", ratio(self.cold.median, self.ldd.median),
                   COLD_OVER_LDD_MAX, at_least=False),
            Target("ldd_over_warm", ratio(self.ldd.median, self.warm.median),
                   LDD_OVER_WARM_MIN, at_least=True),
            Target("peak_rss_mb", self.peak_mb, PEAK_MB_MAX, at_least=False, unit=" MB"),
        ]

    def doctor_runs(self) -> list[DoctorRun]:
        return self.rounds.cold + self.rounds.warm


def per_file_json(rounds: Rounds, files: Sequence[str], root: Path) -> dict[str, object]:
    """Each file's median over the runs; their median and the slowest files."""
    medians = [statistics.median(run.per_file[i] for run in rounds.ldd)
               for i in range(len(files))]
    slowest = sorted(zip(medians, files, strict=True), reverse=True)[:5]
    return {
        "median_of_file_medians_s": round(statistics.median(medians), 4),
        "sum_of_file_medians_s": round(sum(medians), 4),
        "slowest": [{"file": _relative(f, root), "median_s": round(s, 4)} for s, f in slowest],
    }


def doctor_summary(results: Results) -> dict[str, object]:
    runs = results.doctor_runs()
    first = runs[0].document
    inside = results.inside_cold.reports + results.inside_warm.reports
    return {
        "verdict": runs[0].verdict,
        "exit_code": runs[0].exit_code,
        "summary": first.get("summary"),
        "all_runs_ok": all(r.verdict == "fits" and r.exit_code == 0 for r in runs)
        and all(report["exit_code"] == 0 for report in inside),
        "same_modules_every_run": all(r.module_paths == results.files for r in runs),
    }


def document(results: Results, repeat: int, machine: dict[str, object]) -> dict[str, object]:
    site = results.sites[0] if results.sites else results.venv
    goals = results.targets()
    modules = set(results.files)
    return {
        "benchmark": "doctor",
        "schema": SCHEMA_VERSION,
        "machine": {**machine, "load_average_end": [round(x, 2) for x in os.getloadavg()]},
        "repeat": repeat,
        "environment": {"venv": str(results.venv), "python": str(results.python),
                        "distributions": installed_versions(results.sites)},
        "files": {"modules": len(results.files),
                  "shared_objects": len(results.shared),
                  "elf_files": len(results.elf),
                  "bytes": sum(os.path.getsize(f) for f in results.files),
                  "shared_object_bytes": sum(os.path.getsize(f) for f in results.shared),
                  "paths": [_relative(f, site) for f in results.files],
                  "other_shared_objects": [_relative(f, site) for f in results.shared
                                           if f not in modules]},
        "doctor": doctor_summary(results),
        "ldd": {**results.ldd.to_json(),
                "over": "the shared objects (the target's baseline): the sum of their files' "
                        "times in each run",
                "modules_only": results.ldd_modules.to_json(),
                "every_elf_file": results.ldd_all.to_json(),
                "per_file": per_file_json(results.rounds, results.elf, site),
                **ldd_findings(results.rounds.ldd[-1], results.elf, site)},
        "abifit_cold": results.cold.to_json(),
        "abifit_warm": results.warm.to_json(),
        "python_startup": Runs(tuple(results.rounds.startup)).to_json(),
        "inside": {
            "memory_method": "VmHWM of /proc/self/status in the abifit process, read just before "
            "it exits (bench/_doctor_worker.py); subprocesses not included",
            "cold": results.inside_cold.to_json(),
            "warm": results.inside_warm.to_json(),
        },
        "ratios": {"cold_over_ldd": goals[0].measured, "ldd_over_warm": goals[1].measured,
                   "cold_over_warm": ratio(results.cold.median, results.warm.median),
                   "cold_over_ldd_modules_only": ratio(results.cold.median,
                                                       results.ldd_modules.median),
                   "ldd_modules_only_over_warm": ratio(results.ldd_modules.median,
                                                       results.warm.median),
                   "cold_over_ldd_every_elf_file": ratio(results.cold.median,
                                                         results.ldd_all.median)},
        "targets": [goal.to_json() for goal in goals],
        "all_targets_met": all(goal.met for goal in goals),
        "commands": {
            "ldd": ["ldd", "-r", "FILE"],
            "abifit_cold": [sys.executable, "-m", "abifit", "doctor", "--python", "VENV_PYTHON",
                            "--json", "--cache-dir", "EMPTY_DIR"],
            "abifit_warm": [sys.executable, "-m", "abifit", "doctor", "--python", "VENV_PYTHON",
                            "--json", "--cache-dir", "FILLED_DIR"],
            "python_startup": [sys.executable, "-c", "pass"],
        },
    }


def machine_info() -> dict[str, object]:
    ldd = subprocess.run(["ldd", "--version"], capture_output=True, text=True, check=False)
    return {**base_machine_info(), "ldd": ldd.stdout.splitlines()[0] if ldd.stdout else None}


def summary_line(results: Results) -> str:
    cold, warm, ldd = results.cold.median, results.warm.median, results.ldd.median
    modules, every = results.ldd_modules.median, results.ldd_all.median
    verdict = results.doctor_runs()[0].verdict
    return (f"doctor: {len(results.files)} modules, verdict {verdict} | ldd -r over the "
            f"{len(results.shared)} shared objects {ldd:.3g} s (over the modules only "
            f"{modules:.3g} s, cold {cold / modules:.2f}x that; over all {len(results.elf)} ELF "
            f"files {every:.3g} s), "
            f"cold {cold:.3g} s ({cold / ldd:.2f}x ldd, target <= {COLD_OVER_LDD_MAX:g}x), "
            f"warm {warm:.3g} s (ldd {ldd / warm:.2f}x warm, target >= {LDD_OVER_WARM_MIN:g}x) | "
            f"peak {results.peak_mb:.1f} MB (target <= {PEAK_MB_MAX:g} MB)")


def problems(results: Results) -> Iterator[str]:
    for goal in results.targets():
        if not goal.met:
            yield f"target missed: {goal.describe()}"
    for run in results.doctor_runs():
        if run.verdict != "fits" or run.exit_code != 0:
            yield (f"unexpected: doctor said {run.verdict!r} (exit {run.exit_code}) in a "
                   "healthy environment")
            break


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--venv", type=Path, default=None,
                        help=f"the environment, created if missing (default: {DEFAULT_VENV}, "
                        f"with --big {BIG_VENV})")
    parser.add_argument("--python", type=Path, default=None,
                        help="an existing interpreter's environment instead of a venv, used as "
                        "it is (a GPU machine's image: its site directories, dist-packages too)")
    parser.add_argument("--big", action="store_true",
                        help="the larger environment: " + ", ".join(BIG_REQUIREMENTS))
    parser.add_argument("--json-only", action="store_true", help="print nothing on stderr")
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of a warm doctor run to stderr")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def measure(venv: Path, python: Path, repeat: int, log: Log, profile: bool) -> Results:
    dirs = CacheDirs()
    try:
        first = run_doctor(python, dirs.fresh())
        files = first.module_paths
        sites = site_dirs(python)
        elf = elf_files(sites)
        missing = sorted(set(files) - set(elf))
        if missing:
            raise SystemExit(f"error: doctor checked modules that are not ELF files of "
                             f"{venv}'s site-packages: {missing[:3]}")
        log(f"{len(files)} extension modules, {len(elf)} ELF files, verdict {first.verdict}; "
            f"{repeat} rounds of ldd -r, cold, warm")
        rounds = measure_rounds(python, elf, dirs, repeat, log)
        log(f"inside the abifit process: {repeat} cold and {repeat} warm runs")
        inside_cold, inside_warm = measure_inside(python, dirs, repeat)
        profiled = run_worker("profile", python, dirs.warm) if profile else None
    finally:
        dirs.close()
    return Results(venv, python, sites, files, elf, rounds, inside_cold, inside_warm, profiled)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = Log(args.json_only)
    if args.python is not None:
        python = args.python.expanduser().absolute()
        venv = Path(subprocess.run([str(python), "-I", "-c", "import sys; print(sys.prefix)"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    else:
        if args.venv is None:
            args.venv = BIG_VENV if args.big else DEFAULT_VENV
        venv = ensure_venv(args.venv.expanduser().absolute(),
                           BIG_REQUIREMENTS if args.big else REQUIREMENTS)
        python = venv / "bin" / "python"
    log(f"environment: {venv} ({python})")
    byte_compile_abifit()
    machine = machine_info()
    results = measure(venv, python, args.repeat, log, args.profile)
    print(json.dumps(document(results, args.repeat, machine), indent=2))
    if results.profile is not None:
        log(f"cProfile of a warm run, top 20 by cumulative time:\n{results.profile}")
    for line in problems(results):
        log(line)
    log(summary_line(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
