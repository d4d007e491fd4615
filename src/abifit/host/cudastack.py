"""The host's CUDA stack as facts: toolkits, where the loader looks, the driver, the GPUs.

Five things, each a pure function of text or listings plus a tiny probe at the edge:

- Toolkits installed side by side (`probe_toolkits`): `<prefix>/cuda-*`, `<prefix>/cuda` (a link:
  which one it names), `$CUDA_HOME`, `$CUDA_PATH` and the root of the `nvcc` on `$PATH`, one
  `Toolkit` per real directory. The version comes from `version.json` (`cuda.version`), else
  `version.txt`, else `bin/nvcc --version`, else `CUDA_VERSION` in `include/cuda.h`; the library
  directories are `lib64`, `targets/<target>/lib` and `lib`, merged when they are one directory
  (a pip-assembled toolkit links all three to `lib`), with the sonames they hold.
- Whether ld.so searches each library directory (`loader_view`, `classify_search`): through
  `LD_LIBRARY_PATH`, through an `/etc/ld.so.cache` entry in it, or as a default directory, all
  compared by real path, from `abifit.host.ldconfig.HostFacts`. A directory listed in ld.so.conf but
  absent from the cache is not searched (ld.so reads only the cache; `ldconfig` was not run).
- The driver (`build_driver`): its version from `/proc/driver/nvidia/version` (proprietary and
  open kernel modules), else `/sys/module/nvidia/version`, else the file name `libcuda.so.1`
  resolves to, else what the GPU query reports; the newest CUDA it supports from
  `cuDriverGetVersion` (asked in a subprocess, so a broken `libcuda.so.1` cannot crash abifit),
  else from the release notes' table of minimum drivers (`data/cuda.json`).
- GPUs and compute capabilities (`probe_gpus`): NVML through the optional `pynvml` package, else
  `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`.
- Findings (`cuda_findings`, pure): `driver-too-old`, `cuda-major-mix`, `toolkit-not-searched`,
  from the stack and the sonames an environment needs and provides (`cuda_major_of_soname` tells
  which CUDA major a runtime soname belongs to).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from abifit.errors import FormatError
from abifit.host.ldconfig import HostFacts, probe_host

DATA = Path(__file__).parent.parent / "data"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
SYS_MODULE_VERSION = "/sys/module/nvidia/version"
DEFAULT_PREFIX = "/usr/local"

# ---------------------------------------------------------------------------------------------
# Versions


@dataclass(frozen=True, slots=True, order=True)
class CudaVersion:
    """A CUDA version such as 13.0 or 13.0.88, compared part by part as numbers."""

    parts: tuple[int, ...]

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def __str__(self) -> str:
        return ".".join(map(str, self.parts))


_DOTTED = re.compile(r"\d+(?:\.\d+)+")


def parse_cuda_version(text: str, where: str = "version") -> CudaVersion:
    """'13.0.88' -> CudaVersion((13, 0, 88)); at least major.minor, or `FormatError`."""
    if not _DOTTED.fullmatch(text.strip()):
        raise FormatError(where, f"not a CUDA version: {text.strip()!r}")
    return CudaVersion(tuple(int(p) for p in text.strip().split(".")))


def cuda_version_from_int(value: int) -> CudaVersion:
    """The encoding of `cuDriverGetVersion` and `CUDA_VERSION`: 13000 -> 13.0, 12080 -> 12.8."""
    return CudaVersion((value // 1000, value % 1000 // 10))


def driver_version_key(version: str) -> tuple[int, ...]:
    """'580.95.05' -> (580, 95, 5): driver versions compare as numbers, part by part."""
    return tuple(int(p) for p in version.split("."))


# ---------------------------------------------------------------------------------------------
# Toolkit version files and command outputs (pure)


def parse_version_json(text: str, name: str = "version.json") -> CudaVersion:
    """The `cuda.version` of a toolkit's version.json (CUDA >= 11.1): '12.8.1' -> 12.8.1."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(name, f"not JSON: {e.msg}", e.pos) from e
    cuda = doc.get("cuda") if isinstance(doc, dict) else None
    value = cuda.get("version") if isinstance(cuda, dict) else None
    if not isinstance(value, str):
        raise FormatError(name, "no string at 'cuda.version'")
    return parse_cuda_version(value, name)


_VERSION_TXT = re.compile(r"CUDA Version\s+(\d+(?:\.\d+)+)")


def parse_version_txt(text: str, name: str = "version.txt") -> CudaVersion:
    """The version in a toolkit's version.txt (CUDA <= 11.0): 'CUDA Version 11.0.228'."""
    found = _VERSION_TXT.search(text)
    if found is None:
        raise FormatError(name, f"no 'CUDA Version N.N' in {text.strip()[:80]!r}")
    return parse_cuda_version(found.group(1), name)


_NVCC_RELEASE = re.compile(r"release (\d+\.\d+)(?:, V(\d+(?:\.\d+)+))?")


def parse_nvcc_version(text: str, name: str = "nvcc --version") -> CudaVersion:
    """The compiler's version in `nvcc --version`: 'release 13.0, V13.0.88' -> 13.0.88."""
    found = _NVCC_RELEASE.search(text)
    if found is None:
        raise FormatError(name, f"no 'release N.N' in {text.strip()[-120:]!r}")
    return parse_cuda_version(found.group(2) or found.group(1), name)


_CUDA_H = re.compile(r"^\s*#\s*define\s+CUDA_VERSION\s+(\d+)", re.M)


def parse_cuda_header(text: str, name: str = "cuda.h") -> CudaVersion:
    """`#define CUDA_VERSION 13000` in cuda.h -> 13.0 (major and minor only)."""
    found = _CUDA_H.search(text)
    if found is None:
        raise FormatError(name, "no '#define CUDA_VERSION'")
    return cuda_version_from_int(int(found.group(1)))


_DRYRUN_TOP = re.compile(r"^#\$ TOP=(.+)$", re.M)


def parse_nvcc_dryrun_root(text: str) -> str | None:
    """The toolkit root nvcc works from, from the `#$ TOP=.../bin/..` line of `nvcc --dryrun`."""
    found = _DRYRUN_TOP.search(text)
    return os.path.normpath(found.group(1).strip()) if found else None


_VERSIONED = re.compile(r"(lib.+?)\.so\.(\d+(?:\.\d+)*)")


def sonames_in_listing(entries: Mapping[str, str | None]) -> tuple[str, ...]:
    """The sonames a library directory holds, from its names and their link targets.

    `entries` maps each name to its symlink target (None for a file). A versioned name
    (`libcudart.so.12`, `libcudart.so.11.0`) counts unless it is the file a versioned link points
    to (`libcupti.so.12 -> libcupti.so.2024.1.0`) or extends another versioned name of the same
    library (`libcudart.so.12.8.90` next to `libcudart.so.12`). Sorted.
    """
    versioned = {n for n in entries if _VERSIONED.fullmatch(n)}
    linked = {os.path.basename(t) for n, t in entries.items() if n in versioned and t}
    return tuple(sorted(n for n in versioned if n not in linked
                        and not any(n.startswith(o + ".") for o in versioned)))


# ---------------------------------------------------------------------------------------------
# Runtime sonames -> CUDA major


@dataclass(frozen=True, slots=True)
class _RuntimeTable:
    same_major: frozenset[str]
    mapped: Mapping[str, Mapping[int, int]]


@functools.lru_cache(maxsize=1)
def _cuda_data() -> Mapping[str, object]:
    data: Mapping[str, object] = json.loads((DATA / "cuda.json").read_text("utf-8"))
    return data


@functools.lru_cache(maxsize=1)
def _runtime_table() -> _RuntimeTable:
    raw = _cuda_data()["runtime_libraries"]
    assert isinstance(raw, dict)
    mapped = {stem: {int(k): int(v) for k, v in table.items()}
              for stem, table in raw["mapped"].items()}
    return _RuntimeTable(frozenset(raw["same_major"]), mapped)


def cuda_major_of_soname(soname: str) -> int | None:
    """The CUDA major an NVIDIA runtime library's soname belongs to, else None.

    `libcudart.so.12` -> 12, `libnvrtc.so.13` -> 13, `libcudart.so.11.0` -> 11,
    `libcufft.so.11` -> 12 (cuFFT is versioned on its own). None for the driver (`libcuda.so.1`),
    for libraries whose soname several CUDA majors share (`libcurand.so.10`) and for non-NVIDIA
    libraries. The table is `runtime_libraries` in data/cuda.json.
    """
    found = _VERSIONED.fullmatch(soname)
    if found is None:
        return None
    stem, major = found.group(1), int(found.group(2).split(".")[0])
    table = _runtime_table()
    if stem in table.same_major:
        return major
    return table.mapped.get(stem, {}).get(major)


# ---------------------------------------------------------------------------------------------
# Driver minimums (data/cuda.json)


@dataclass(frozen=True, slots=True)
class DriverMinimum:
    """One row of NVIDIA's table: release 'CUDA 12.8 Update 1' needs a driver >= 570.124.06."""

    release: str
    cuda: CudaVersion
    driver: str


@functools.lru_cache(maxsize=1)
def driver_minimums() -> tuple[DriverMinimum, ...]:
    """The release notes' table of minimum Linux drivers, newest release first."""
    raw = _cuda_data()["driver_minimums"]
    assert isinstance(raw, dict)
    return tuple(DriverMinimum(r["release"], parse_cuda_version(r["cuda"], "cuda.json"),
                               r["driver"]) for r in raw["releases"])


def newest_cuda_for_driver(
    driver: str, table: Sequence[DriverMinimum] | None = None
) -> CudaVersion | None:
    """The newest CUDA major.minor whose minimum driver is <= `driver`, or None.

    A driver newer than the table's newest row gets that row's version: a lower bound.
    """
    key = driver_version_key(driver)
    rows = driver_minimums() if table is None else table
    fits = [r.cuda for r in rows if driver_version_key(r.driver) <= key]
    return max(fits) if fits else None


def minimum_driver_for(cuda: CudaVersion, table: Sequence[DriverMinimum] | None = None) -> str:
    """The oldest driver the table lists for this major.minor ('580.65.06' for 13.0), or ''."""
    rows = driver_minimums() if table is None else table
    fits = [r.driver for r in rows if r.cuda.parts[:2] == (cuda.major, cuda.minor)]
    return min(fits, key=driver_version_key) if fits else ""


# ---------------------------------------------------------------------------------------------
# Driver (pure parts)


class KernelModule(Enum):
    """Which NVIDIA kernel module is loaded."""

    PROPRIETARY = "proprietary"
    OPEN = "open"


class DriverSource(Enum):
    """Where the driver version was read."""

    PROC = PROC_DRIVER_VERSION
    SYS_MODULE = SYS_MODULE_VERSION
    LIBCUDA_FILE = "libcuda.so.1 file name"
    GPU_QUERY = "GPU query"


class CudaSupportSource(Enum):
    """How the newest supported CUDA version was found."""

    CU_DRIVER_GET_VERSION = "cuDriverGetVersion"
    RELEASE_NOTES = "release notes table"


_NVRM = re.compile(r"^NVRM version:.*?\b(Open )?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)",
                   re.M)


def parse_proc_driver_version(
    text: str, name: str = PROC_DRIVER_VERSION
) -> tuple[str, KernelModule]:
    """The version and module kind in /proc/driver/nvidia/version.

    'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ...' (proprietary) and
    'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ...' (open).
    """
    found = _NVRM.search(text)
    if found is None:
        raise FormatError(name, f"no 'NVRM version: ... Kernel Module N.N' in "
                                f"{text.strip()[:100]!r}")
    kind = KernelModule.OPEN if found.group(1) else KernelModule.PROPRIETARY
    return found.group(2), kind


def parse_sys_module_version(text: str, name: str = SYS_MODULE_VERSION) -> str:
    """/sys/module/nvidia/version holds just the version: '580.95.05\\n'."""
    if not _DOTTED.fullmatch(text.strip()):
        raise FormatError(name, f"not a driver version: {text.strip()[:40]!r}")
    return text.strip()


_LIBCUDA_FILE = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)*)")


def driver_version_from_libcuda(path: str) -> str | None:
    """The driver version in the name of the file libcuda.so.1 resolves to
    ('/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05' -> '580.95.05'), else None."""
    found = _LIBCUDA_FILE.fullmatch(os.path.basename(path))
    return found.group(1) if found else None


@dataclass(frozen=True, slots=True)
class LibcudaReport:
    """What a subprocess that dlopened libcuda.so.1 saw: its real path and cuDriverGetVersion."""

    path: str | None = None
    cuda_version: CudaVersion | None = None
    error: str | None = None


def parse_libcuda_report(text: str) -> LibcudaReport:
    """The JSON line `_LIBCUDA_SCRIPT` prints: {"path", "status", "version"} or {"error"}."""
    try:
        doc = json.loads(text.strip().splitlines()[-1] if text.strip() else "")
    except json.JSONDecodeError:
        return LibcudaReport(error=f"unexpected output {text.strip()[:100]!r}")
    if not isinstance(doc, dict):
        return LibcudaReport(error=f"unexpected output {text.strip()[:100]!r}")
    if "error" in doc:
        return LibcudaReport(error=str(doc["error"]))
    path = doc.get("path") if isinstance(doc.get("path"), str) else None
    if doc.get("status") != 0 or not isinstance(doc.get("version"), int) or doc["version"] <= 0:
        return LibcudaReport(path, error=f"cuDriverGetVersion returned {doc.get('status')}")
    return LibcudaReport(path, cuda_version_from_int(doc["version"]))


@dataclass(frozen=True, slots=True)
class Driver:
    """The NVIDIA driver: its version, its kernel module, the newest CUDA it supports.

    `cuda_version` from the release notes table is a lower bound when the driver is newer than
    the table's newest row. `reason` says why a value is missing.
    """

    version: str | None
    version_source: DriverSource | None
    kernel_module: KernelModule | None
    libcuda_path: str | None
    cuda_version: CudaVersion | None
    cuda_version_source: CudaSupportSource | None
    reason: str | None = None


def build_driver(
    *,
    proc_text: str | None,
    sys_text: str | None,
    libcuda: LibcudaReport | None,
    gpus: GpuList,
    table: Sequence[DriverMinimum] | None = None,
) -> Driver:
    """Combine the driver's sources, best first (see the module docstring); texts are None when
    the file does not exist."""
    notes: list[str] = []
    version, source, kind = _driver_version(proc_text, sys_text, libcuda, gpus, notes)
    cuda, cuda_source = None, None
    if libcuda is not None and libcuda.cuda_version is not None:
        cuda, cuda_source = libcuda.cuda_version, CudaSupportSource.CU_DRIVER_GET_VERSION
    elif version is not None:
        cuda = newest_cuda_for_driver(version, table)
        cuda_source = CudaSupportSource.RELEASE_NOTES if cuda else None
    if cuda is None and version is not None:
        notes.append(f"driver {version} is older than every CUDA 11+ release's minimum")
    reason = "; ".join(notes) if version is None or cuda is None else None
    return Driver(version, source, kind, libcuda.path if libcuda else None, cuda, cuda_source,
                  reason)


def _driver_version(
    proc_text: str | None,
    sys_text: str | None,
    libcuda: LibcudaReport | None,
    gpus: GpuList,
    notes: list[str],
) -> tuple[str | None, DriverSource | None, KernelModule | None]:
    if proc_text is not None:
        try:
            version, kind = parse_proc_driver_version(proc_text)
        except FormatError as e:
            notes.append(str(e))
        else:
            return version, DriverSource.PROC, kind
    else:
        notes.append(f"no {PROC_DRIVER_VERSION}")
    if sys_text is not None:
        try:
            return parse_sys_module_version(sys_text), DriverSource.SYS_MODULE, None
        except FormatError as e:
            notes.append(str(e))
    else:
        notes.append(f"no {SYS_MODULE_VERSION}")
    from_file = driver_version_from_libcuda(libcuda.path) if libcuda and libcuda.path else None
    if from_file is not None:
        return from_file, DriverSource.LIBCUDA_FILE, None
    if libcuda is not None and libcuda.error:
        notes.append(f"libcuda.so.1 probe: {libcuda.error}")
    reported = next((g.driver_version for g in gpus.gpus if g.driver_version), None)
    if reported is not None:
        return reported, DriverSource.GPU_QUERY, None
    return None, None, None


# ---------------------------------------------------------------------------------------------
# GPUs (pure parts)


class GpuSource(Enum):
    """Which interface listed the GPUs."""

    NVML = "NVML (pynvml)"
    NVIDIA_SMI = "nvidia-smi"


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU: its name, compute capability (major, minor) and the driver it reports."""

    index: int
    name: str
    compute_capability: tuple[int, int] | None
    driver_version: str | None

    @property
    def arch(self) -> str | None:
        """The SASS architecture name: (9, 0) -> 'sm_90'."""
        cc = self.compute_capability
        return f"sm_{cc[0]}{cc[1]}" if cc else None


@dataclass(frozen=True, slots=True)
class GpuList:
    """The GPUs found, which interface found them, and why the list is empty when it is."""

    gpus: tuple[Gpu, ...]
    source: GpuSource | None
    reason: str | None = None


_NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "")


def _compute_capability(text: str, where: str) -> tuple[int, int] | None:
    if text in _NOT_AVAILABLE:
        return None
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise FormatError(where, f"not a compute capability: {text!r}")
    return int(major), int(minor)


def parse_nvidia_smi_csv(text: str, name: str = "nvidia-smi") -> tuple[Gpu, ...]:
    """The output of `nvidia-smi --query-gpu=name,compute_cap,driver_version
    --format=csv,noheader`: one 'NVIDIA H100 80GB HBM3, 9.0, 580.95.05' line per GPU."""
    gpus: list[Gpu] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        fields = [f.strip() for f in line.rsplit(",", 2)]
        if len(fields) != 3:
            raise FormatError(name, f"expected 'name, compute_cap, driver_version': {line!r}")
        gpu_name, cc, driver = fields
        driver_version = None if driver in _NOT_AVAILABLE else driver
        gpus.append(Gpu(len(gpus), gpu_name, _compute_capability(cc, name), driver_version))
    return tuple(gpus)


# ---------------------------------------------------------------------------------------------
# Where the loader looks (pure, given a realpath function)


class SearchVia(Enum):
    """How ld.so comes to search a directory for a DT_NEEDED name without a slash."""

    LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
    LD_SO_CACHE = "ld.so.cache"
    DEFAULT_DIR = "default directory"


@dataclass(frozen=True, slots=True)
class LoaderView:
    """The directories ld.so searches for every object, by real path, per mechanism."""

    ld_library_path: frozenset[str]
    cache_dirs: frozenset[str]
    conf_dirs: frozenset[str]
    default_dirs: frozenset[str]


def loader_view(host: HostFacts, realpath: Callable[[str], str]) -> LoaderView:
    """The searched directories of `host`, each passed through `realpath`.

    Relative `LD_LIBRARY_PATH` entries and ones with `$` tokens are left out (they depend on the
    loading object or the working directory).
    """
    lib_path = (d for d in host.ld_library_path if d.startswith("/") and "$" not in d)
    cached = {os.path.dirname(e.path) for e in host.cache.entries} if host.cache else set()
    return LoaderView(
        ld_library_path=frozenset(map(realpath, lib_path)),
        cache_dirs=frozenset(map(realpath, cached)),
        conf_dirs=frozenset(map(realpath, host.conf_dirs)),
        default_dirs=frozenset(map(realpath, host.defaults.system_dirs)),
    )


@dataclass(frozen=True, slots=True)
class SearchStatus:
    """Whether ld.so searches a directory, and how; `in_ld_so_conf` alone does not count."""

    via: tuple[SearchVia, ...]
    in_ld_so_conf: bool

    @property
    def searched(self) -> bool:
        return bool(self.via)


def classify_search(real_dir: str, view: LoaderView) -> SearchStatus:
    """How ld.so reaches `real_dir` (a real path), in the order it tries the mechanisms."""
    via = [v for v, dirs in ((SearchVia.LD_LIBRARY_PATH, view.ld_library_path),
                             (SearchVia.LD_SO_CACHE, view.cache_dirs),
                             (SearchVia.DEFAULT_DIR, view.default_dirs)) if real_dir in dirs]
    return SearchStatus(tuple(via), real_dir in view.conf_dirs)


# ---------------------------------------------------------------------------------------------
# Toolkits


class ToolkitOrigin(Enum):
    """What names a toolkit root."""

    VERSIONED_DIR = "cuda-* directory"
    DEFAULT_LINK = "cuda link"
    CUDA_HOME = "CUDA_HOME"
    CUDA_PATH = "CUDA_PATH"
    NVCC_ON_PATH = "nvcc on PATH"


class VersionSource(Enum):
    """Where a toolkit's version was read."""

    VERSION_JSON = "version.json"
    VERSION_TXT = "version.txt"
    NVCC = "nvcc --version"
    CUDA_H = "cuda.h"


@dataclass(frozen=True, slots=True)
class LibDir:
    """A toolkit library directory: its path, real path, sonames, and whether ld.so searches it.

    `aliases` are the other candidate paths that are the same directory (`lib64` and
    `targets/x86_64-linux/lib` are one directory in a standard toolkit).
    """

    path: str
    real_path: str
    sonames: tuple[str, ...]
    search: SearchStatus
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Toolkit:
    """One installed CUDA toolkit, by its real root, with every name that leads to it."""

    root: str
    names: tuple[str, ...]
    origins: tuple[ToolkitOrigin, ...]
    version: CudaVersion | None
    version_source: VersionSource | None
    lib_dirs: tuple[LibDir, ...]

    def holding(self, soname: str) -> tuple[LibDir, ...]:
        """The library directories that hold `soname`."""
        return tuple(d for d in self.lib_dirs if soname in d.sonames)


@dataclass(frozen=True, slots=True)
class LibListing:
    """A library directory as read from disk: its names and their link targets."""

    path: str
    real_path: str
    entries: Mapping[str, str | None]


def build_lib_dirs(listings: Iterable[LibListing], view: LoaderView) -> tuple[LibDir, ...]:
    """One `LibDir` per real directory, in the order first seen, later paths as aliases."""
    merged: dict[str, tuple[LibListing, list[str]]] = {}
    for listing in listings:
        if listing.real_path in merged:
            merged[listing.real_path][1].append(listing.path)
        else:
            merged[listing.real_path] = (listing, [])
    return tuple(LibDir(first.path, real, sonames_in_listing(first.entries),
                        classify_search(real, view), tuple(aliases))
                 for real, (first, aliases) in merged.items())


@dataclass(frozen=True, slots=True)
class Nvcc:
    """The `nvcc` found on PATH, its version, and the toolkit root it compiles with."""

    path: str
    real_path: str
    version: CudaVersion | None
    root: str | None


@dataclass(frozen=True, slots=True)
class CudaStack:
    """The host's CUDA stack. `default_link` is what `<prefix>/cuda` points to, as written."""

    toolkits: tuple[Toolkit, ...]
    default_link: str | None
    cuda_home: str | None
    cuda_path: str | None
    nvcc: Nvcc | None
    driver: Driver
    gpus: GpuList

    def toolkit_at(self, path: str) -> Toolkit | None:
        """The toolkit with `path` among its names or as its root."""
        return next((t for t in self.toolkits if path == t.root or path in t.names), None)


# ---------------------------------------------------------------------------------------------
# Host probes: tiny, private, replaceable by passing values in.


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _run(argv: Sequence[str], env: Mapping[str, str],
         cwd: str | None = None) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(list(argv), env=dict(env), cwd=cwd, capture_output=True,
                              text=True, errors="replace", timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def _tool_env(env: Mapping[str, str]) -> dict[str, str]:
    keep = ("PATH", "LD_LIBRARY_PATH", "HOME", "LANG", "LC_ALL")
    return {k: env[k] for k in keep if k in env} | {"PATH": env.get("PATH", os.defpath)}


def _nvcc_version(nvcc: str, env: Mapping[str, str]) -> CudaVersion | None:
    done = _run([nvcc, "--version"], _tool_env(env))
    if done is None or done.returncode != 0:
        return None
    try:
        return parse_nvcc_version(done.stdout, f"{nvcc} --version")
    except FormatError:
        return None


def _nvcc_dryrun_root(nvcc: str, env: Mapping[str, str]) -> str | None:
    """`nvcc --dryrun` prints its TOP without reading the (absent) source. It still names
    temporary files (`tmpxft_*`) in its TMPDIR, so it runs in a private directory, removed
    after, never the shared /tmp where such predictable names could be planted."""
    with tempfile.TemporaryDirectory(prefix="abifit-nvcc-") as tmp:
        done = _run([nvcc, "--dryrun", "-c", "abifit-probe.cu"],
                    _tool_env(env) | {"TMPDIR": tmp}, cwd=tmp)
    return parse_nvcc_dryrun_root(done.stdout + done.stderr) if done else None


def _looks_like_toolkit(root: str) -> bool:
    """bin/nvcc alone is not enough: /usr/local/bin/nvcc may be a wrapper script."""
    marks = ("version.json", "version.txt", "include/cuda.h", "nvvm", "targets")
    return os.path.exists(os.path.join(root, "bin", "nvcc")) and any(
        os.path.exists(os.path.join(root, m)) for m in marks)


def _probe_nvcc(env: Mapping[str, str]) -> Nvcc | None:
    path = shutil.which("nvcc", path=env.get("PATH", ""))
    if path is None:
        return None
    real = os.path.realpath(path)
    root: str | None = os.path.dirname(os.path.dirname(real))
    if os.path.basename(os.path.dirname(real)) != "bin" or not _looks_like_toolkit(str(root)):
        root = _nvcc_dryrun_root(path, env)  # a wrapper script, as /usr/local/bin/nvcc can be
    return Nvcc(path, real, _nvcc_version(path, env), os.path.realpath(root) if root else None)


def _toolkit_version(
    root: str, env: Mapping[str, str], nvcc: Nvcc | None
) -> tuple[CudaVersion, VersionSource] | None:
    readers: tuple[tuple[str, Callable[[str, str], CudaVersion], VersionSource], ...] = (
        ("version.json", parse_version_json, VersionSource.VERSION_JSON),
        ("version.txt", parse_version_txt, VersionSource.VERSION_TXT),
    )
    for name, parse, source in readers:
        text = _read_text(os.path.join(root, name))
        if text is not None:
            try:
                return parse(text, os.path.join(root, name)), source
            except FormatError:
                pass
    own = os.path.join(root, "bin", "nvcc")
    if nvcc is not None and nvcc.root == root and nvcc.version is not None:
        version: CudaVersion | None = nvcc.version  # already asked
    else:
        version = _nvcc_version(own, env) if os.access(own, os.X_OK) else None
    if version is not None:
        return version, VersionSource.NVCC
    for header in (os.path.join(root, "include", "cuda.h"),
                   *sorted(glob.glob(os.path.join(root, "targets", "*", "include", "cuda.h")))):
        text = _read_text(header)
        if text is not None:
            try:
                return parse_cuda_header(text, header), VersionSource.CUDA_H
            except FormatError:
                pass
    return None


def _list_dir(path: str) -> LibListing | None:
    if not os.path.isdir(path):
        return None
    try:
        names = os.listdir(path)
    except OSError:
        return None
    entries = {n: os.readlink(os.path.join(path, n))
               if os.path.islink(os.path.join(path, n)) else None for n in names}
    return LibListing(path, os.path.realpath(path), entries)


def host_target() -> str:
    """The toolkit's `targets/` name for this machine: x86_64-linux, sbsa-linux, ..."""
    machine = platform.machine()
    return {"x86_64": "x86_64-linux", "aarch64": "sbsa-linux", "arm64": "sbsa-linux",
            "ppc64le": "ppc64le-linux"}.get(machine, f"{machine}-linux")


def _toolkit_candidates(
    prefix: str, env: Mapping[str, str], nvcc: Nvcc | None
) -> list[tuple[str, ToolkitOrigin]]:
    found = [(p, ToolkitOrigin.VERSIONED_DIR)
             for p in sorted(glob.glob(os.path.join(prefix, "cuda-*"))) if os.path.isdir(p)]
    link = os.path.join(prefix, "cuda")
    if os.path.isdir(link):
        found.append((link, ToolkitOrigin.DEFAULT_LINK))
    for var, origin in (("CUDA_HOME", ToolkitOrigin.CUDA_HOME),
                        ("CUDA_PATH", ToolkitOrigin.CUDA_PATH)):
        value = env.get(var)
        if value and os.path.isdir(value):
            found.append((os.path.normpath(value), origin))
    if nvcc is not None and nvcc.root and os.path.isdir(nvcc.root):
        found.append((nvcc.root, ToolkitOrigin.NVCC_ON_PATH))
    return found


def probe_toolkits(
    env: Mapping[str, str],
    view: LoaderView,
    *,
    prefix: str = DEFAULT_PREFIX,
    target: str | None = None,
    nvcc: Nvcc | None = None,
) -> tuple[Toolkit, ...]:
    """Every toolkit root named under `prefix`, by `$CUDA_HOME`/`$CUDA_PATH`, or by `nvcc`."""
    grouped: dict[str, tuple[list[str], list[ToolkitOrigin]]] = {}
    for path, origin in _toolkit_candidates(prefix, env, nvcc):
        names, origins = grouped.setdefault(os.path.realpath(path), ([], []))
        names.extend([path] if path not in names else [])
        origins.extend([origin] if origin not in origins else [])
    subdirs = ("lib64", f"targets/{target or host_target()}/lib", "lib")
    toolkits = []
    for root, (names, origins) in grouped.items():
        version = _toolkit_version(root, env, nvcc)
        listings = (_list_dir(os.path.join(root, sub)) for sub in subdirs)
        toolkits.append(Toolkit(
            root, tuple(names), tuple(origins), version[0] if version else None,
            version[1] if version else None,
            build_lib_dirs((x for x in listings if x is not None), view)))
    return tuple(toolkits)


_LIBCUDA_SCRIPT = r"""
import ctypes, json, os
out = {}
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    out["error"] = str(e)
else:
    value = ctypes.c_int(0)
    out["status"] = lib.cuDriverGetVersion(ctypes.byref(value))
    out["version"] = value.value
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libcuda.so"):
                out["path"] = os.path.realpath(fields[5].strip())
                break
print(json.dumps(out))
"""


def _probe_libcuda(env: Mapping[str, str]) -> LibcudaReport:
    """dlopen libcuda.so.1 in a child Python (a crash there is only an error here)."""
    # -S: the standard library alone (a GPU image's site-packages can take 0.07 s to start)
    done = _run([sys.executable, "-I", "-S", "-c", _LIBCUDA_SCRIPT], _tool_env(env))
    if done is None:
        return LibcudaReport(error="could not run a Python subprocess")
    if done.returncode != 0:
        return LibcudaReport(error=f"the probe exited with {done.returncode}: "
                                   f"{done.stderr.strip()[-200:]}")
    return parse_libcuda_report(done.stdout)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_gpus() -> tuple[Gpu, ...] | str:
    """The GPUs through pynvml, or why not (not installed, no driver, ...)."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed"
    try:
        nvml.nvmlInit()
    except Exception as e:  # pynvml raises NVMLError subclasses and OSError-like failures
        return f"NVML: {e}"
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetName(handle)),
                            (int(major), int(minor)), driver))
        return tuple(gpus)
    except Exception as e:
        return f"NVML: {e}"
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


_SMI_QUERY = ("--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader")


def probe_gpus(env: Mapping[str, str]) -> GpuList:
    """The GPUs through NVML, else nvidia-smi; an empty list with the reasons when neither works."""
    nvml = _nvml_gpus()
    if not isinstance(nvml, str) and nvml:
        return GpuList(nvml, GpuSource.NVML)
    reasons = [nvml if isinstance(nvml, str) else "NVML lists no GPU"]
    smi = shutil.which("nvidia-smi", path=env.get("PATH", ""))
    if smi is None:
        return GpuList((), None, "; ".join([*reasons, "nvidia-smi is not on PATH"]))
    done = _run([smi, *_SMI_QUERY], _tool_env(env))
    if done is None or done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()[:1] if done else []
        reasons.append(f"nvidia-smi failed: {said[0] if said else 'could not run'}")
        return GpuList((), None, "; ".join(reasons))
    try:
        gpus = parse_nvidia_smi_csv(done.stdout, smi)
    except FormatError as e:
        return GpuList((), None, "; ".join([*reasons, str(e)]))
    return GpuList(gpus, GpuSource.NVIDIA_SMI, None if gpus else "nvidia-smi lists no GPU")


def probe_driver(env: Mapping[str, str], gpus: GpuList) -> Driver:
    """Read the driver's files and ask libcuda.so.1 (in a subprocess)."""
    return build_driver(proc_text=_read_text(PROC_DRIVER_VERSION),
                        sys_text=_read_text(SYS_MODULE_VERSION),
                        libcuda=_probe_libcuda(env), gpus=gpus)


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def probe_cuda_stack(
    env: Mapping[str, str],
    *,
    host: HostFacts | None = None,
    prefix: str = DEFAULT_PREFIX,
    target: str | None = None,
    driver: Driver | None = None,
    gpus: GpuList | None = None,
) -> CudaStack:
    """The host's CUDA stack; `env` supplies PATH, LD_LIBRARY_PATH, CUDA_HOME and CUDA_PATH.

    Anything passed in is used instead of being probed: `host` (else `ldconfig.probe_host`),
    `driver`, `gpus`; `prefix` is where `cuda-*` and `cuda` are looked for, `target` the
    `targets/` name (else `host_target()`).
    """
    host = probe_host(env) if host is None else host
    view = loader_view(host, os.path.realpath)
    nvcc = _probe_nvcc(env)
    gpus = probe_gpus(env) if gpus is None else gpus
    return CudaStack(
        toolkits=probe_toolkits(env, view, prefix=prefix, target=target, nvcc=nvcc),
        default_link=_readlink(os.path.join(prefix, "cuda")),
        cuda_home=env.get("CUDA_HOME"),
        cuda_path=env.get("CUDA_PATH"),
        nvcc=nvcc,
        driver=probe_driver(env, gpus) if driver is None else driver,
        gpus=gpus,
    )
