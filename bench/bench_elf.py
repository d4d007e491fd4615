"""Benchmark: reading dynamic symbols with abifit against `nm -D` and pyelftools, and its memory.

What is measured, on every ELF file (by the `\\x7fELF` magic, symlinks skipped) under an installed
torch 2.13.0 CPU package:

1. Whole process, "read all dynamic symbols (names, versions, binding) of every ELF":
   - abifit: a fresh `sys.executable bench/_elf_read_all.py FILE...` (PYTHONPATH=src) that parses
     every file with `parse_elf` and builds a (name, version, binding) tuple per symbol;
   - baseline: ONE `nm -D FILE...` process (binutils >= 2.35 prints `name@VERSION` by default),
     its output read from a pipe, as abifit's is; per-file `nm -D FILE` processes, a bare
     `python -c pass` and `python -c "import abifit.formats.elf, abifit.formats.sources"` are
     reported for information (they split abifit's figure into interpreter start, import and work).
   Target: median(nm -D) / median(abifit) >= 3.
2. libtorch_cpu.so, in this process: `parse_elf` plus the same tuples, against pyelftools reading
   the same triples the natural pyelftools way (`DynamicSegment.iter_symbols()`,
   `GNUVerSymSection.get_symbol(i)`, version names from GNUVerDef/GNUVerNeed sections).
   Target: median(pyelftools) / median(abifit) >= 30; both must give identical triples.
3. Peak memory of `parse_elf` on libtorch_cpu.so in a fresh process (bench/_elf_peak.py): the
   tracemalloc peak, and the RSS high-water mark (VmHWM; `ru_maxrss` is inherited from this
   process across fork + exec, see _elf_peak.py) minus the RSS after imports, each against the
   bytes of the tables read (entries x 24 + DT_STRSZ + entries x 2 for DT_VERSYM).
   Target: tracemalloc peak <= 3 x table bytes.

abifit's modules are byte-compiled first (`compileall`), as `pip install` does: this machine sets
PYTHONDONTWRITEBYTECODE=1, so an editable checkout would otherwise recompile at every start.

Machines are shared and noisy: every figure is the median of `--repeat` runs (pyelftools:
`--pyelftools-repeat`), after one discarded warm-up run; all runs are in the JSON.

Output: one JSON document on stdout; progress, missed targets and, last, a one-line summary on
stderr (stdout stays a single parseable document). `--json-only` prints nothing on stderr.
`--profile` also prints a cProfile (top 15 by cumulative time) of abifit on libtorch_cpu.so to
stderr. The exit status is 0 whether or not targets are met: this is a measurement, not a test.

    .venv/bin/python bench/bench_elf.py [--repeat 5] [--torch-dir PATH] [--json-only] [--profile]

Without `--torch-dir` the torch test environment of tests/conftest.py is used (created if missing).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import elftools
from _common import (
    REPO,
    Log,
    Runs,
    Target,
    abifit_env,
    base_machine_info,
    byte_compile_abifit,
    ratio,
    timed,
)
from _elf_read_all import Triple, read_file
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_ST_INFO_BIND
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection

from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import FileSource

BENCH = REPO / "bench"
SCHEMA_VERSION = 1
LARGEST = "libtorch_cpu.so"
VERSYM_INDEX = 0x7FFF
VER_FLG_BASE = 0x1
IMPORT_ABIFIT = "import abifit.formats.elf, abifit.formats.sources"


# ---------------------------------------------------------------------------------------------
# Inputs


def resolve_torch_dir(given: Path | None) -> Path:
    """The torch package dir: `given` (torch itself or a venv holding it), else the test env."""
    venv_or_dir = given if given is not None else _ensure_test_venv()
    if (venv_or_dir / "lib").is_dir() and not (venv_or_dir / "__init__.py").exists():
        found = sorted(venv_or_dir.glob("lib/python3*/site-packages/torch"))
        if not found:
            raise SystemExit(f"error: no lib/python3*/site-packages/torch under {venv_or_dir}")
        return found[0]
    if not venv_or_dir.is_dir():
        raise SystemExit(f"error: torch directory not found: {venv_or_dir}")
    return venv_or_dir


def _ensure_test_venv() -> Path:
    """The venv of tests/conftest.py's ensure_torch_venv(), created on first use."""
    sys.path.insert(0, str(REPO / "tests"))
    import pytest

    from conftest import ensure_torch_venv  # type: ignore[import-not-found]

    try:
        return Path(ensure_torch_venv())
    except pytest.skip.Exception as e:
        raise SystemExit(f"error: cannot create the torch environment: {e.msg}") from e


def find_elf_files(root: Path) -> list[Path]:
    """Every regular file under root that starts with the ELF magic, sorted."""
    found = []
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if not path.is_symlink() and _starts_with_elf_magic(path):
                found.append(path)
    return sorted(found)


def _starts_with_elf_magic(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def warm_page_cache(files: Sequence[Path]) -> None:
    """Read every file once so that no measured run pays for the disk."""
    for path in files:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


# ---------------------------------------------------------------------------------------------
# Timing helpers


def run_process(command: Sequence[str], env: dict[str, str] | None = None) -> bytes:
    """Run a command with stdout on a pipe that is read to the end; return stdout."""
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: {command[0]} exited with {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[:500]}")
    return done.stdout


# ---------------------------------------------------------------------------------------------
# 1. Whole process: abifit against nm -D


@dataclass(frozen=True, slots=True)
class WholeProcess:
    abifit: Runs
    nm_one_process: Runs
    nm_per_file: Runs
    python_startup: Runs
    abifit_import: Runs
    symbols_abifit: int
    symbols_nm: int
    commands: dict[str, list[str]]

    @property
    def ratio(self) -> float:
        return ratio(self.nm_one_process.median, self.abifit.median)

    def to_json(self) -> dict[str, object]:
        return {
            "abifit": self.abifit.to_json(),
            "nm_one_process": self.nm_one_process.to_json(),
            "nm_per_file": self.nm_per_file.to_json(),
            "python_startup": self.python_startup.to_json(),
            "abifit_import": self.abifit_import.to_json(),
            "ratio_nm_over_abifit": self.ratio,
            "ratio_nm_per_file_over_abifit": ratio(self.nm_per_file.median, self.abifit.median),
            "symbols": {"abifit": self.symbols_abifit, "nm": self.symbols_nm,
                        "match": self.symbols_abifit == self.symbols_nm},
            "commands": self.commands,
        }


def count_nm_symbols(output: bytes, files: Sequence[Path]) -> int:
    """Symbol lines of `nm -D` output, without the `FILE:` headers of a multi-file run."""
    headers = {f"{path}:".encode() for path in files}
    return sum(1 for line in output.splitlines() if line and line not in headers)


def measure_whole_process(files: Sequence[Path], repeat: int) -> WholeProcess:
    names = [str(path) for path in files]
    env = abifit_env()
    abifit_cmd = [sys.executable, str(BENCH / "_elf_read_all.py"), *names]
    nm_cmd = ["nm", "-D", *names]
    startup_cmd = [sys.executable, "-c", "pass"]
    import_cmd = [sys.executable, "-c", IMPORT_ABIFIT]

    def nm_per_file() -> int:
        return sum(count_nm_symbols(run_process(["nm", "-D", name]), []) for name in names)

    actions: dict[str, Callable[[], object]] = {
        "abifit": lambda: int(run_process(abifit_cmd, env)),
        "nm_one_process": lambda: count_nm_symbols(run_process(nm_cmd), files),
        "nm_per_file": nm_per_file,
        "python_startup": lambda: run_process(startup_cmd, env),
        "abifit_import": lambda: run_process(import_cmd, env),
    }
    runs, results = _interleaved(actions, repeat)
    return WholeProcess(
        abifit=runs["abifit"],
        nm_one_process=runs["nm_one_process"],
        nm_per_file=runs["nm_per_file"],
        python_startup=runs["python_startup"],
        abifit_import=runs["abifit_import"],
        symbols_abifit=_as_int(results["abifit"]),
        symbols_nm=_as_int(results["nm_one_process"]),
        commands={
            "abifit": [sys.executable, "bench/_elf_read_all.py", "FILE..."],
            "nm_one_process": ["nm", "-D", "FILE..."],
            "nm_per_file": ["nm", "-D", "FILE"],
            "python_startup": startup_cmd,
            "abifit_import": import_cmd,
        },
    )


def _as_int(value: object) -> int:
    assert isinstance(value, int)
    return value


def _interleaved(
    actions: dict[str, Callable[[], object]], repeat: int
) -> tuple[dict[str, Runs], dict[str, object]]:
    """Run each action once to warm up, then `repeat` rounds of all actions in turn.

    Interleaving spreads a noisy neighbour's bursts over all measurements instead of one.
    """
    results = {name: action() for name, action in actions.items()}
    seconds: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            elapsed, _result = timed(action)
            seconds[name].append(elapsed)
    return {name: Runs(tuple(s)) for name, s in seconds.items()}, results


# ---------------------------------------------------------------------------------------------
# 2. libtorch_cpu.so in process: abifit against pyelftools


def pyelftools_triples(path: Path) -> list[Triple]:
    """(name, version, binding) of every dynamic symbol, read the natural pyelftools way."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        versym, version_names = _pyelftools_versions(elf)
        triples = []
        for i, symbol in enumerate(_dynamic_segment(elf).iter_symbols()):
            if i == 0:
                continue  # the null symbol, which abifit leaves out too
            version = _pyelftools_version(versym, version_names, i)
            triples.append((symbol.name, version, _binding(symbol["st_info"]["bind"])))
    return triples


def _dynamic_segment(elf: ELFFile) -> DynamicSegment:
    for segment in elf.iter_segments():
        if isinstance(segment, DynamicSegment):
            return segment
    raise SystemExit(f"error: {elf.stream.name} has no PT_DYNAMIC")


def _pyelftools_versions(elf: ELFFile) -> tuple[GNUVerSymSection | None, dict[int, str]]:
    """The versym section and version index -> name from the verdef and verneed sections."""
    versym, names = None, {}
    for section in elf.iter_sections():
        if isinstance(section, GNUVerSymSection):
            versym = section
        elif isinstance(section, GNUVerDefSection):
            for verdef, aux in section.iter_versions():
                if not verdef["vd_flags"] & VER_FLG_BASE:
                    names[verdef["vd_ndx"]] = next(aux).name
        elif isinstance(section, GNUVerNeedSection):
            for _need, auxes in section.iter_versions():
                for vernaux in auxes:
                    names[vernaux["vna_other"] & VERSYM_INDEX] = vernaux.name
    return versym, names


def _pyelftools_version(
    versym: GNUVerSymSection | None, names: dict[int, str], i: int
) -> str | None:
    if versym is None:
        return None
    index = versym.get_symbol(i)["ndx"]  # "VER_NDX_LOCAL"/"VER_NDX_GLOBAL" or a number
    return names.get(index & VERSYM_INDEX) if isinstance(index, int) else None


def _binding(bind: str | int) -> int:
    return ENUM_ST_INFO_BIND[bind] if isinstance(bind, str) else bind


@dataclass(frozen=True, slots=True)
class InProcess:
    path: Path
    abifit: Runs
    abifit_parse: Runs
    pyelftools: Runs
    symbols: int
    identical: bool
    differences: list[str]

    @property
    def ratio(self) -> float:
        return ratio(self.pyelftools.median, self.abifit.median)

    def to_json(self) -> dict[str, object]:
        return {
            "file": str(self.path),
            "symbols": self.symbols,
            "abifit": self.abifit.to_json(),
            "abifit_parse_only": self.abifit_parse.to_json(),
            "pyelftools": self.pyelftools.to_json(),
            "ratio_pyelftools_over_abifit": self.ratio,
            "identical": self.identical,
            "first_differences": self.differences,
        }


def measure_in_process(path: Path, repeat: int, pyelftools_repeat: int) -> InProcess:
    abifit_runs, parse_runs, ours = _time_abifit(path, repeat)
    theirs: list[Triple] = []
    pyelftools_runs = []
    for _ in range(pyelftools_repeat):
        elapsed, theirs = timed(lambda: pyelftools_triples(path))
        pyelftools_runs.append(elapsed)
    return InProcess(path, abifit_runs, parse_runs, Runs(tuple(pyelftools_runs)), len(ours),
                     ours == theirs, _differences(ours, theirs))


def _time_abifit(path: Path, repeat: int) -> tuple[Runs, Runs, list[Triple]]:
    """parse_elf + triples, `repeat` times after one warm-up; also parse_elf alone."""

    def parse_only() -> ElfImage:
        with FileSource(path) as source:
            return parse_elf(source)

    triples = read_file(str(path))
    total = [timed(lambda: read_file(str(path)))[0] for _ in range(repeat)]
    parse = [timed(parse_only)[0] for _ in range(repeat)]
    return Runs(tuple(total)), Runs(tuple(parse)), triples


def _differences(ours: list[Triple], theirs: list[Triple], limit: int = 5) -> list[str]:
    """The first few entries where the two readings disagree, in table order."""
    found = [f"#{i + 1}: abifit {a!r} pyelftools {b!r}"
             for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b][:limit]
    if len(ours) != len(theirs):
        found.append(f"counts differ: abifit {len(ours)} pyelftools {len(theirs)}")
    return found


def profile_abifit(path: Path, top: int = 15) -> str:
    """cProfile of one parse_elf + triples on `path`, top entries by cumulative time."""
    profiler = cProfile.Profile()
    profiler.runcall(read_file, str(path))
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# ---------------------------------------------------------------------------------------------
# 3. Peak memory against the tables read


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes of the dynamic symbol, string and version tables, from pyelftools' reading."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynamic = _dynamic_segment(elf)
        entries = dynamic.num_symbols()
        strsz = next(dynamic.iter_tags("DT_STRSZ"))["d_val"]
        has_versym = next(dynamic.iter_tags("DT_VERSYM"), None) is not None
        sym_size = elf.structs.Elf_Sym.sizeof()
    sizes = {"entries": entries, "dynsym": entries * sym_size, "dynstr": strsz,
             "versym": entries * 2 if has_versym else 0}
    sizes["total"] = sizes["dynsym"] + sizes["dynstr"] + sizes["versym"]
    return sizes


def peak_memory(path: Path, mode: str, repeat: int) -> list[dict[str, int]]:
    command = [sys.executable, str(BENCH / "_elf_peak.py"), mode, str(path)]
    env = abifit_env()
    return [json.loads(run_process(command, env)) for _ in range(repeat)]


@dataclass(frozen=True, slots=True)
class Memory:
    tables: dict[str, int]
    tracemalloc_runs: list[dict[str, int]]
    rss_runs: list[dict[str, int]]

    def median_of(self, runs: list[dict[str, int]], key: str) -> int:
        return int(statistics.median(run[key] for run in runs))

    @property
    def peak(self) -> int:
        return self.median_of(self.tracemalloc_runs, "peak_bytes")

    @property
    def rss_delta(self) -> int:
        return self.median_of(self.rss_runs, "peak_delta_bytes")

    @property
    def anon_growth(self) -> int:
        return self.median_of(self.rss_runs, "rss_anon_growth_bytes")

    def to_json(self) -> dict[str, object]:
        total = self.tables["total"]
        return {
            "table_bytes": self.tables,
            "tracemalloc_peak_bytes": self.peak,
            "tracemalloc_retained_bytes": self.median_of(self.tracemalloc_runs, "retained_bytes"),
            "rss_hwm_minus_rss_after_imports_bytes": self.rss_delta,
            "rss_after_imports_bytes": self.median_of(self.rss_runs, "rss_after_imports_bytes"),
            "rss_anon_growth_retained_bytes": self.anon_growth,
            "ratio_tracemalloc_peak_to_tables": round(self.peak / total, 2),
            "ratio_rss_hwm_delta_to_tables": round(self.rss_delta / total, 2),
            "runs": {"tracemalloc": self.tracemalloc_runs, "rss": self.rss_runs},
        }


def measure_memory(path: Path, repeat: int) -> Memory:
    return Memory(table_bytes(path), peak_memory(path, "tracemalloc", repeat),
                  peak_memory(path, "rss", repeat))


# ---------------------------------------------------------------------------------------------
# Report


def targets(whole: WholeProcess, inproc: InProcess, memory: Memory) -> list[Target]:
    return [
        Target("whole_process_nm_over_abifit", whole.ratio, 3, at_least=True),
        Target("libtorch_cpu_pyelftools_over_abifit", inproc.ratio, 30, at_least=True),
        Target("peak_tracemalloc_over_table_bytes",
               round(memory.peak / memory.tables["total"], 2), 3, at_least=False),
    ]


def machine_info() -> dict[str, object]:
    nm_version = subprocess.run(["nm", "--version"], capture_output=True, text=True, check=False)
    return {
        **base_machine_info(),
        "nm": nm_version.stdout.splitlines()[0] if nm_version.stdout else None,
        "pyelftools": elftools.__version__,
    }


def summary_line(whole: WholeProcess, inproc: InProcess, memory: Memory) -> str:
    mb, tables = 1e6, memory.tables["total"]
    parts = [
        f"elf-read: abifit {whole.abifit.median:.3g} s vs nm -D {whole.nm_one_process.median:.3g} s"
        f" ({whole.ratio:.3g}x, target 3x)",
        f"{inproc.path.name}: abifit {inproc.abifit.median:.3g} s vs pyelftools"
        f" {inproc.pyelftools.median:.3g} s ({inproc.ratio:.3g}x, target 30x,"
        f" identical={str(inproc.identical).lower()})",
        f"peak {memory.peak / mb:.1f} MB = {memory.peak / tables:.2f}x tables of"
        f" {tables / mb:.1f} MB (target 3x); RSS high-water +{memory.rss_delta / mb:.1f} MB"
        f" = {memory.rss_delta / tables:.2f}x",
    ]
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median)")
    parser.add_argument("--pyelftools-repeat", type=int, default=3,
                        help="runs of the slow pyelftools reading")
    parser.add_argument("--torch-dir", type=Path, help="torch package dir, or a venv holding one")
    parser.add_argument("--json-only", action="store_true", help="print nothing on stderr")
    parser.add_argument("--profile", action="store_true",
                        help=f"also print a cProfile of abifit on {LARGEST} to stderr")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.pyelftools_repeat < 1:
        parser.error("repeat counts must be at least 1")
    return args


def largest_file(files: Sequence[Path]) -> Path:
    named = [path for path in files if path.name == LARGEST]
    return named[0] if named else max(files, key=lambda p: p.stat().st_size)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = Log(args.json_only)
    torch_dir = resolve_torch_dir(args.torch_dir)
    files = find_elf_files(torch_dir)
    if not files:
        raise SystemExit(f"error: no ELF files under {torch_dir}")
    big = largest_file(files)
    log(f"{len(files)} ELF files under {torch_dir}; warming the page cache")
    warm_page_cache(files)
    byte_compile_abifit()
    machine = machine_info()
    log(f"whole-process reads (abifit, nm -D, python start, import): {args.repeat} runs each")
    whole = measure_whole_process(files, args.repeat)
    log(f"{big.name} in process: abifit {args.repeat} runs, pyelftools {args.pyelftools_repeat}")
    inproc = measure_in_process(big, args.repeat, args.pyelftools_repeat)
    log(f"{big.name} peak memory: {args.repeat} fresh processes per mode")
    memory = measure_memory(big, args.repeat)
    goals = targets(whole, inproc, memory)
    document = {
        "benchmark": "elf-read",
        "schema": SCHEMA_VERSION,
        "machine": machine,
        "repeat": args.repeat,
        "pyelftools_repeat": args.pyelftools_repeat,
        "files": {"torch_dir": str(torch_dir), "elf_files": len(files),
                  "bytes": sum(path.stat().st_size for path in files),
                  "total_symbols": whole.symbols_abifit},
        "whole_process": whole.to_json(),
        "in_process": inproc.to_json(),
        "memory": memory.to_json(),
        "targets": [goal.to_json() for goal in goals],
        "all_targets_met": all(goal.met for goal in goals),
    }
    print(json.dumps(document, indent=2))
    if args.profile:
        log(profile_abifit(big))
    for line in _problems(goals, whole, inproc):
        log(line)
    log(summary_line(whole, inproc, memory))
    return 0


def _problems(goals: list[Target], whole: WholeProcess, inproc: InProcess) -> Iterator[str]:
    for goal in goals:
        if not goal.met:
            yield f"target missed: {goal.describe()}"
    if not inproc.identical:
        yield f"mismatch: abifit and pyelftools differ on {inproc.path.name}"
    if whole.symbols_abifit != whole.symbols_nm:
        yield (f"mismatch: abifit read {whole.symbols_abifit} symbols, "
               f"nm -D printed {whole.symbols_nm}")


if __name__ == "__main__":
    sys.exit(main())
