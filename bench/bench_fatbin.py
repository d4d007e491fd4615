"""Benchmark: listing the fat binaries of a big CUDA library with abifit against `cuobjdump`.

What is measured, on one file (default: libtorch_cuda.so of the torch cu13 test venv
`<test cache>/torch-2.14.1-cu`; else the path given):

1. Whole process, "list every cubin and PTX image": a fresh `sys.executable -c WORKER FILE`
   (PYTHONPATH=src; imports abifit only, runs `parse_elf` + `read_fatbins`, prints the listing)
   against `cuobjdump --list-elf --list-ptx FILE` (the nvidia-cuda-cuobjdump wheel), both with
   stdout read from a pipe. `python -c pass` and the import of abifit's modules are reported for
   information. Target: median(cuobjdump) / median(abifit) >= 5.
2. In this process: `parse_elf` + `read_fatbins` (the listing), and, when a zstd decoder is
   installed, `read_fatbins(check_images=True)` (every payload's head decompressed and checked).
3. Agreement: abifit's listing must equal cuobjdump's, entry for entry.

`--crafted MB` measures something else: libraries whose fat binaries nvcc never makes, built by
tests/fixtures/crafted (gcc + objcopy) with MB megabytes (default 512) of 80-byte containers:
`identical` (one container over and over, in .nv_fatbin), `embedded` (the same in .lrodata,
under a .nv_fatbin without kernels) and `alternating` (two containers by turns: a FormatError at
CONTAINER_LIMIT is the expected answer). Each is read by `read_gpu_code` in a fresh process
(bench/_fatbin_crafted.py): seconds, RSS high-water mark and growth of the anonymous RSS, the
values kept and the size of the cache entry. Targets, per case: at most 10 s, anonymous memory
at most half the bytes of containers, and a result or one FormatError (a worker that dies
misses all three).

Machines are shared and noisy: every figure is the median of `--repeat` runs after one discarded
warm-up run, the whole-process runs interleaved; all runs are in the JSON. The file is read once
first so that no run pays for the disk, and abifit's modules are byte-compiled (see _common.py).

Output: one JSON document on stdout; progress, mismatches and, last, a one-line summary with the
ratio on stderr. `--json-only` prints nothing on stderr. The exit status is 0 whether or not the
target is met: this is a measurement, not a test.

    .venv/bin/python bench/bench_fatbin.py [PATH] [--repeat 3] [--json-only]
    .venv/bin/python bench/bench_fatbin.py --crafted [MB] [--repeat 3] [--json-only]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
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
    timed,
)

from abifit.formats.elf import parse_elf
from abifit.formats.fatbin import GpuCode, read_fatbins
from abifit.formats.sources import FileSource

sys.path.insert(0, str(REPO / "tests"))
from fixtures.crafted import build as crafted  # type: ignore[import-not-found]
from fixtures.cuda.build import CACHE, find_cuobjdump  # type: ignore[import-not-found]

SCHEMA_VERSION = 1
TORCH_CU_VENV = CACHE / "torch-2.14.1-cu"
LARGEST = "torch/lib/libtorch_cuda.so"
IMPORT_ABIFIT = "import abifit.formats.elf, abifit.formats.fatbin, abifit.formats.sources"
WORKER = """\
import sys
from abifit.formats.elf import parse_elf
from abifit.formats.fatbin import read_fatbins
from abifit.formats.sources import FileSource
with FileSource(sys.argv[1]) as source:
    code = read_fatbins(source, parse_elf(source, relocations=False))
print("\\n".join(f"{kind} {arch}" for kind, arch in code.listing()))
"""
_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)$", re.MULTILINE)

Listing = list[tuple[str, str]]


# ---------------------------------------------------------------------------------------------
# Inputs


def resolve_file(given: Path | None) -> Path:
    """The file to list: `given`, else libtorch_cuda.so of the torch cu13 test venv."""
    if given is not None:
        if not given.is_file():
            raise SystemExit(f"error: not a file: {given}")
        return given
    found: list[Path] = sorted(TORCH_CU_VENV.glob(f"lib/python3*/site-packages/{LARGEST}"))
    if not found:
        raise SystemExit(f"error: no {LARGEST} under {TORCH_CU_VENV}; give a path to a CUDA "
                         "library")
    return found[0]


def resolve_cuobjdump() -> Path:
    found: Path | None = find_cuobjdump()
    if found is None:
        raise SystemExit("error: cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    return found


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def run_process(command: Sequence[str], env: dict[str, str] | None = None) -> str:
    """Run a command with stdout on a pipe read to the end; return stdout.

    cuobjdump exits 255 on a file without device code; that is an empty listing, not a failure.
    """
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0 and "does not contain device code" not in done.stderr:
        raise SystemExit(f"error: {command[0]} exited with {done.returncode}: "
                         f"{done.stderr.strip()[:500]}")
    return done.stdout


def cuobjdump_listing(output: str) -> Listing:
    return [(m[1], m[2]) for m in _LISTED.finditer(output)]


def worker_listing(output: str) -> Listing:
    """The WORKER's output, one "KIND ARCH" line per image, as a listing."""
    return [(kind, arch) for kind, _, arch in (line.partition(" ") for line in output.splitlines())]


# ---------------------------------------------------------------------------------------------
# 1. Whole process


@dataclass(frozen=True, slots=True)
class WholeProcess:
    abifit: Runs
    cuobjdump: Runs
    python_startup: Runs
    abifit_import: Runs
    listing_abifit: Listing
    listing_cuobjdump: Listing

    @property
    def ratio(self) -> float:
        return ratio(self.cuobjdump.median, self.abifit.median)

    @property
    def identical(self) -> bool:
        return self.listing_abifit == self.listing_cuobjdump

    def to_json(self, cuobjdump: Path) -> dict[str, object]:
        return {
            "abifit": self.abifit.to_json(),
            "cuobjdump": self.cuobjdump.to_json(),
            "python_startup": self.python_startup.to_json(),
            "abifit_import": self.abifit_import.to_json(),
            "ratio_cuobjdump_over_abifit": self.ratio,
            "images": {"abifit": len(self.listing_abifit),
                       "cuobjdump": len(self.listing_cuobjdump), "identical": self.identical},
            "commands": {
                "abifit": [sys.executable, "-c", "WORKER", "FILE"],
                "cuobjdump": [str(cuobjdump), "--list-elf", "--list-ptx", "FILE"],
                "python_startup": [sys.executable, "-c", "pass"],
                "abifit_import": [sys.executable, "-c", IMPORT_ABIFIT],
            },
        }


def measure_whole_process(path: Path, cuobjdump: Path, repeat: int) -> WholeProcess:
    env = abifit_env()
    actions: dict[str, Callable[[], str]] = {
        "abifit": lambda: run_process([sys.executable, "-c", WORKER, str(path)], env),
        "cuobjdump": lambda: run_process([str(cuobjdump), "--list-elf", "--list-ptx",
                                          str(path)]),
        "python_startup": lambda: run_process([sys.executable, "-c", "pass"], env),
        "abifit_import": lambda: run_process([sys.executable, "-c", IMPORT_ABIFIT], env),
    }
    runs, outputs = _interleaved(actions, repeat)
    return WholeProcess(runs["abifit"], runs["cuobjdump"], runs["python_startup"],
                        runs["abifit_import"], worker_listing(outputs["abifit"]),
                        cuobjdump_listing(outputs["cuobjdump"]))


def _interleaved(
    actions: dict[str, Callable[[], str]], repeat: int
) -> tuple[dict[str, Runs], dict[str, str]]:
    """One warm-up run of each action, then `repeat` rounds of all actions in turn."""
    outputs = {name: action() for name, action in actions.items()}
    seconds: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            seconds[name].append(timed(action)[0])
    return {name: Runs(tuple(s)) for name, s in seconds.items()}, outputs


# ---------------------------------------------------------------------------------------------
# 2. In process


def read_code(path: Path, check_images: bool = False) -> GpuCode:
    with FileSource(path) as source:
        return read_fatbins(source, parse_elf(source, relocations=False),
                            check_images=check_images)


@dataclass(frozen=True, slots=True)
class InProcess:
    listing: Runs
    checked: Runs | None
    containers: int
    entries: int
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "parse_elf_and_read_fatbins": self.listing.to_json(),
            "with_check_images": self.checked.to_json() if self.checked else None,
            "containers": self.containers,
            "entries": self.entries,
            "check_images_notes": list(self.notes),
        }


def measure_in_process(path: Path, repeat: int) -> InProcess:
    code = read_code(path)
    listing = Runs(tuple(timed(lambda: read_code(path))[0] for _ in range(repeat)))
    checked_code = read_code(path, check_images=True)
    checked = None
    if not checked_code.notes:
        checked = Runs(tuple(timed(lambda: read_code(path, True))[0] for _ in range(repeat)))
    return InProcess(listing, checked, len(code.containers), len(code.entries),
                     checked_code.notes)


# ---------------------------------------------------------------------------------------------
# Report


def machine_info(cuobjdump: Path) -> dict[str, object]:
    version = run_process([str(cuobjdump), "--version"]).strip().splitlines()
    return {**base_machine_info(), "cuobjdump": version[-1] if version else None,
            "cuobjdump_path": str(cuobjdump)}


def summary_line(path: Path, whole: WholeProcess, inproc: InProcess) -> str:
    checked = (f", {inproc.checked.median:.3g} s checking every image" if inproc.checked
               else "")
    return (f"fatbin-list {path.name}: abifit {whole.abifit.median:.3g} s vs cuobjdump "
            f"{whole.cuobjdump.median:.3g} s ({whole.ratio:.3g}x, target 5x, "
            f"identical={str(whole.identical).lower()}, {inproc.entries} images in "
            f"{inproc.containers} fat binaries); in process {inproc.listing.median:.3g} s"
            f"{checked}")


# ---------------------------------------------------------------------------------------------
# --crafted: many tiny containers


CRAFTED_WORKER = Path(__file__).resolve().parent / "_fatbin_crafted.py"
CRAFTED_SECONDS = 10.0
CRAFTED_ANON_SHARE = 0.5  # anonymous memory over the bytes of containers


def crafted_sections(case: str, size: int) -> dict[str, bytes]:
    """The sections of one crafted case, `size` bytes of containers."""
    tiny = crafted.container(crafted.cubin(90))
    if case == "identical":
        return {".nv_fatbin": tiny * (size // len(tiny))}
    if case == "embedded":
        return {".nv_fatbin": crafted.container(), ".lrodata": tiny * (size // len(tiny))}
    pair = tiny + crafted.container(crafted.cubin(80), crafted.ptx(80))
    return {".nv_fatbin": pair * (size // len(pair))}


CRAFTED_CASES = ("identical", "embedded", "alternating")


@dataclass(frozen=True, slots=True)
class CraftedCase:
    name: str
    file_bytes: int
    container_bytes: int
    runs: tuple[dict[str, object], ...]  # the worker's JSON per run; {} for a worker that died

    @property
    def seconds(self) -> Runs:
        return Runs(tuple(_number(r, "seconds") for r in self.runs))

    @property
    def anon_mib(self) -> float:
        return max(_number(r, "rss_anon_growth_bytes") for r in self.runs) / 2**20

    @property
    def clean(self) -> bool:
        """Every run gave a result or one FormatError (the worker did not die)."""
        return all(r for r in self.runs)

    def targets(self) -> list[Target]:
        return [Target(f"{self.name}_seconds", round(self.seconds.median, 3), CRAFTED_SECONDS,
                       at_least=False, unit=" s"),
                Target(f"{self.name}_anon_memory_over_container_bytes",
                       round(self.anon_mib * 2**20 / self.container_bytes, 4),
                       CRAFTED_ANON_SHARE, at_least=False, unit="x"),
                Target(f"{self.name}_clean", float(self.clean), 1, at_least=True, unit="")]

    def describe(self) -> str:
        last = self.runs[-1]
        if not last:
            answer = "the worker died"
        elif last.get("error"):
            answer = "FormatError: " + str(last["error"]).split(": ", 1)[-1][:60]
        else:
            answer = f"{last['values_kept']} value(s) for {last['fat_binaries']} fat binaries"
        return (f"{self.name} {self.seconds.median:.3g} s, {self.anon_mib:.3g} MiB anon "
                f"({answer})")

    def to_json(self) -> dict[str, object]:
        return {"file_bytes": self.file_bytes, "container_bytes": self.container_bytes,
                "seconds": self.seconds.to_json(),
                "max_rss_anon_growth_mib": round(self.anon_mib, 2), "clean": self.clean,
                "runs": list(self.runs)}


def _number(run: dict[str, object], key: str) -> float:
    """A figure of a worker's run; infinite for a worker that died (it meets no target)."""
    value = run.get(key)
    return float(value) if isinstance(value, (int, float)) else float("inf")


def measure_crafted(case: str, size: int, repeat: int, log: Log) -> CraftedCase:
    with tempfile.TemporaryDirectory() as scratch:
        log(f"crafted {case}: building {size >> 20} MiB of containers")
        sections = crafted_sections(case, size)
        path = crafted.library(Path(scratch), case, sections)
        container_bytes = sum(len(data) for data in sections.values())
        del sections
        warm_page_cache(path)
        runs = []
        for _ in range(repeat):
            done = subprocess.run([sys.executable, str(CRAFTED_WORKER), str(path)],
                                  capture_output=True, text=True, env=abifit_env(), check=False)
            runs.append(json.loads(done.stdout) if done.returncode == 0 else {})
            if done.returncode != 0:
                log(f"crafted {case}: the worker exited with {done.returncode}: "
                    f"{done.stderr.strip()[-500:]}")
        return CraftedCase(case, path.stat().st_size, container_bytes, tuple(runs))


def main_crafted(megabytes: int, repeat: int, log: Log) -> int:
    byte_compile_abifit()
    cases = [measure_crafted(case, megabytes << 20, repeat, log) for case in CRAFTED_CASES]
    goals = [goal for case in cases for goal in case.targets()]
    document = {
        "benchmark": "fatbin-crafted",
        "schema": SCHEMA_VERSION,
        "machine": base_machine_info(),
        "repeat": repeat,
        "megabytes": megabytes,
        "cases": {case.name: case.to_json() for case in cases},
        "targets": [goal.to_json() for goal in goals],
        "all_targets_met": all(goal.met for goal in goals),
    }
    print(json.dumps(document, indent=2))
    for goal in goals:
        if not goal.met:
            log(f"target missed: {goal.describe()}")
    log(f"fatbin-crafted {megabytes} MiB of 80-byte containers: "
        + "; ".join(case.describe() for case in cases))
    return 0


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", type=Path, help="a CUDA library (default: "
                        "libtorch_cuda.so of the torch cu13 test venv)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--json-only", action="store_true", help="print nothing on stderr")
    parser.add_argument("--crafted", type=int, nargs="?", const=512, metavar="MB",
                        help="measure crafted libraries of MB megabytes of tiny containers "
                        "(default 512) instead of a real library")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log = Log(args.json_only)
    if args.crafted is not None:
        return main_crafted(args.crafted, args.repeat, log)
    path = resolve_file(args.path)
    cuobjdump = resolve_cuobjdump()
    log(f"{path}: warming the page cache")
    warm_page_cache(path)
    byte_compile_abifit()
    log(f"whole process (abifit, cuobjdump, python start, import): {args.repeat} runs each")
    whole = measure_whole_process(path, cuobjdump, args.repeat)
    log(f"in process: {args.repeat} runs")
    inproc = measure_in_process(path, args.repeat)
    goal = Target("cuobjdump_over_abifit_whole_process", whole.ratio, 5, at_least=True)
    document = {
        "benchmark": "fatbin-list",
        "schema": SCHEMA_VERSION,
        "machine": machine_info(cuobjdump),
        "repeat": args.repeat,
        "file": {"path": str(path), "bytes": path.stat().st_size},
        "whole_process": whole.to_json(cuobjdump),
        "in_process": inproc.to_json(),
        "targets": [goal.to_json()],
        "all_targets_met": goal.met,
    }
    print(json.dumps(document, indent=2))
    if not goal.met:
        log(f"target missed: {goal.describe()}")
    if not whole.identical:
        log(f"mismatch: abifit listed {len(whole.listing_abifit)} images, cuobjdump "
            f"{len(whole.listing_cuobjdump)}, not the same")
    log(summary_line(path, whole, inproc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
