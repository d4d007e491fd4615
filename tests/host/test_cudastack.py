"""The host's CUDA stack: parsers on real texts, fake toolkit trees, findings, and this machine.

The driver and GPU texts are copied from real hosts (an H200 with the open 580.159.04 module,
older proprietary modules); toolkit trees are built in tmp_path in the two layouts seen on real
machines (the installer's `lib64 -> targets/x86_64-linux/lib`, and the pip-assembled `lib` that
`lib64` and `targets/x86_64-linux/lib` link to); the libcuda probe runs against fake
libcuda.so.1 libraries compiled from tests/fixtures/stubs/libcuda_stub.c, one of which crashes.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from abifit.errors import FormatError
from abifit.formats.elf import ByteOrder
from abifit.formats.ldcache import CacheFormat, LdCache, LdCacheEntry
from abifit.host import cudastack
from abifit.host.cudastack import (
    CudaStack,
    CudaSupportSource,
    CudaVersion,
    Driver,
    DriverMinimum,
    DriverSource,
    Gpu,
    GpuList,
    GpuSource,
    KernelModule,
    LibcudaReport,
    LibDir,
    LibListing,
    SearchStatus,
    SearchVia,
    Toolkit,
    ToolkitOrigin,
    VersionSource,
    build_driver,
    build_lib_dirs,
    classify_search,
    cuda_major_of_soname,
    cuda_version_from_int,
    driver_minimums,
    driver_version_from_libcuda,
    loader_view,
    minimum_driver_for,
    newest_cuda_for_driver,
    parse_cuda_header,
    parse_cuda_version,
    parse_libcuda_report,
    parse_nvcc_dryrun_root,
    parse_nvcc_version,
    parse_nvidia_smi_csv,
    parse_proc_driver_version,
    parse_sys_module_version,
    parse_version_json,
    parse_version_txt,
    probe_cuda_stack,
    probe_driver,
    probe_gpus,
    sonames_in_listing,
)
from abifit.host.ldconfig import HostFacts, LoaderDefaults
from abifit.report.derivation import explanation
from abifit.sim.cudaproblems import cuda_findings
from fixtures.build import STUBS, compile_c

# ---------------------------------------------------------------------------------------------
# Texts from real hosts

PROC_OPEN_H200 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
    "(nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n"
)
PROC_PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) \n"
)
PROC_PROPRIETARY_ARM = (
    "NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.14  Thu Feb 22 01:25:25 UTC 2024\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04) \n"
)
PROC_OPEN_ARM = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build  "
    "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:55:41 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) \n"
)
NVCC_13_0 = (
    "nvcc: NVIDIA (R) Cuda compiler driver\n"
    "Copyright (c) 2005-2025 NVIDIA Corporation\n"
    "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
    "Cuda compilation tools, release 13.0, V13.0.88\n"
    "Build cuda_13.0.r13.0/compiler.36424714_0\n"
)
NVCC_11_8 = (
    "nvcc: NVIDIA (R) Cuda compiler driver\n"
    "Copyright (c) 2005-2022 NVIDIA Corporation\n"
    "Built on Wed_Sep_21_10:33:58_PDT_2022\n"
    "Cuda compilation tools, release 11.8, V11.8.89\n"
    "Build cuda_11.8.r11.8/compiler.31833905_0\n"
)
VERSION_JSON_12_8 = """{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "12.8.1"
   },
   "cuda_cccl" : {
      "name" : "CUDA C++ Core Compute Libraries",
      "version" : "12.8.90"
   },
   "cuda_cudart" : {
      "name" : "CUDA Runtime (cudart)",
      "version" : "12.8.90"
   }
}
"""
DRYRUN_13_0 = (
    "#$ _NVVM_BRANCH_=nvvm\n#$ _SPACE_= \n#$ _CUDART_=cudart\n"
    "#$ _HERE_=/usr/local/cuda-13.0/bin\n#$ _THERE_=/usr/local/cuda-13.0/bin\n"
    "#$ _TARGET_DIR_=targets/x86_64-linux\n#$ TOP=/usr/local/cuda-13.0/bin/..\n"
    "#$ CICC_PATH=/usr/local/cuda-13.0/bin/../nvvm/bin\n"
)

# ---------------------------------------------------------------------------------------------
# Driver texts


@pytest.mark.parametrize(
    ("text", "version", "kind"),
    [
        (PROC_OPEN_H200, "580.159.04", KernelModule.OPEN),
        (PROC_OPEN_ARM, "580.95.05", KernelModule.OPEN),
        (PROC_PROPRIETARY, "535.129.03", KernelModule.PROPRIETARY),
        (PROC_PROPRIETARY_ARM, "550.54.14", KernelModule.PROPRIETARY),
    ],
    ids=["open-x86_64", "open-aarch64", "proprietary-x86_64", "proprietary-aarch64"],
)
def test_proc_driver_version(text: str, version: str, kind: KernelModule) -> None:
    """/proc/driver/nvidia/version gives the version and which kernel module is loaded."""
    assert parse_proc_driver_version(text) == (version, kind)


def test_proc_driver_version_rejects_other_text() -> None:
    """A file without an NVRM line is a FormatError that quotes what it held."""
    with pytest.raises(FormatError, match="NVRM version") as e:
        parse_proc_driver_version("GCC version: 12\n")
    assert "GCC version: 12" in str(e.value)


@pytest.mark.parametrize(("text", "ok"), [("580.159.04\n", True), ("nvidia\n", False)],
                         ids=["version", "garbage"])
def test_sys_module_version(text: str, ok: bool) -> None:
    """/sys/module/nvidia/version holds only the version; anything else is a FormatError."""
    if ok:
        assert parse_sys_module_version(text) == "580.159.04"
    else:
        with pytest.raises(FormatError, match="'nvidia'"):
            parse_sys_module_version(text)


@pytest.mark.parametrize(
    ("path", "version"),
    [
        ("/usr/local/nvidia/lib64/libcuda.so.580.159.04", "580.159.04"),
        ("/usr/lib/x86_64-linux-gnu/libcuda.so.570.26", "570.26"),
        ("/lib/libcuda.so.1", None),
        ("/usr/lib/libcuda.so", None),
        ("/usr/lib/libcudart.so.12.8.90", None),
    ],
    ids=["three-part", "two-part", "soname-only", "dev-link", "not-libcuda"],
)
def test_driver_version_from_libcuda(path: str, version: str | None) -> None:
    """The file libcuda.so.1 resolves to is named after the driver version."""
    assert driver_version_from_libcuda(path) == version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"status": 0, "version": 13000, "path": "/lib/libcuda.so.580.159.04"}',
         LibcudaReport("/lib/libcuda.so.580.159.04", CudaVersion((13, 0)))),
        ('{"error": "libcuda.so.1: cannot open shared object file"}',
         LibcudaReport(error="libcuda.so.1: cannot open shared object file")),
        ('{"status": 3, "version": 0, "path": "/lib/libcuda.so.1"}',
         LibcudaReport("/lib/libcuda.so.1", error="cuDriverGetVersion returned 3")),
        ("Segmentation fault", LibcudaReport(error="unexpected output 'Segmentation fault'")),
    ],
    ids=["version", "not-loadable", "call-failed", "garbage"],
)
def test_libcuda_report(text: str, expected: LibcudaReport) -> None:
    """The probe's JSON line becomes a report; anything unexpected becomes an error."""
    assert parse_libcuda_report(text) == expected


# ---------------------------------------------------------------------------------------------
# GPUs


def test_nvidia_smi_csv_one_gpu() -> None:
    """A real H200 line gives its name, compute capability 9.0 and the driver version."""
    assert parse_nvidia_smi_csv("NVIDIA H200, 9.0, 580.159.04\n") == (
        Gpu(0, "NVIDIA H200", (9, 0), "580.159.04"),
    )


def test_nvidia_smi_csv_several_gpus_and_missing_fields() -> None:
    """GPUs are numbered in order; '[N/A]' (older drivers) becomes None; blank lines are skipped."""
    text = ("NVIDIA GeForce RTX 4090, 8.9, 550.54.14\n\n"
            "NVIDIA B200, 10.0, 580.95.05\nTesla V100-SXM2-16GB, [N/A], 470.82.01\n")
    gpus = parse_nvidia_smi_csv(text)
    assert [(g.index, g.name, g.arch) for g in gpus] == [
        (0, "NVIDIA GeForce RTX 4090", "sm_89"), (1, "NVIDIA B200", "sm_100"),
        (2, "Tesla V100-SXM2-16GB", None)]
    assert gpus[2].driver_version == "470.82.01"


@pytest.mark.parametrize("line", ["NVIDIA H200", "NVIDIA H200, nine, 580.1"],
                         ids=["one-field", "bad-capability"])
def test_nvidia_smi_csv_rejects_malformed(line: str) -> None:
    """A line that is not 'name, compute_cap, driver_version' is a FormatError naming it."""
    with pytest.raises(FormatError, match=r"NVIDIA H200|nine"):
        parse_nvidia_smi_csv(line + "\n")


def test_probe_gpus_reads_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without NVML, the nvidia-smi on PATH is asked and its CSV parsed."""
    monkeypatch.setattr(cudastack, "_nvml_gpus", lambda: "pynvml (nvidia-ml-py) is not installed")
    _script(tmp_path / "nvidia-smi", 'echo "NVIDIA H200, 9.0, 580.159.04"')
    gpus = probe_gpus({"PATH": str(tmp_path)})
    assert gpus == GpuList((Gpu(0, "NVIDIA H200", (9, 0), "580.159.04"),), GpuSource.NVIDIA_SMI)


def test_probe_gpus_explains_an_empty_list(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """When NVML is missing and nvidia-smi fails, the list is empty and the reason quotes both."""
    monkeypatch.setattr(cudastack, "_nvml_gpus", lambda: "pynvml (nvidia-ml-py) is not installed")
    _script(tmp_path / "nvidia-smi",
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
            'driver."; exit 9')
    gpus = probe_gpus({"PATH": str(tmp_path)})
    assert gpus.gpus == () and gpus.source is None
    assert gpus.reason is not None
    assert "pynvml" in gpus.reason and "couldn't communicate" in gpus.reason


def test_probe_gpus_without_any_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVML and no nvidia-smi on PATH: empty, with both reasons."""
    monkeypatch.setattr(cudastack, "_nvml_gpus", lambda: "pynvml (nvidia-ml-py) is not installed")
    gpus = probe_gpus({"PATH": ""})
    assert gpus == GpuList((), None, "pynvml (nvidia-ml-py) is not installed; "
                                     "nvidia-smi is not on PATH")


# ---------------------------------------------------------------------------------------------
# Toolkit version texts


def test_version_json() -> None:
    """version.json's `cuda.version` is the toolkit version, not a component's."""
    assert parse_version_json(VERSION_JSON_12_8) == CudaVersion((12, 8, 1))


@pytest.mark.parametrize(("text", "problem"),
                         [("{", "not JSON"), ('{"cuda_cudart": {"version": "12.8.90"}}',
                                              "cuda.version"),
                          ('{"cuda": {"version": "twelve"}}', "'twelve'")],
                         ids=["truncated", "no-cuda-key", "bad-version"])
def test_version_json_errors(text: str, problem: str) -> None:
    """A broken version.json is a FormatError that names the file and the problem."""
    with pytest.raises(FormatError, match=problem) as e:
        parse_version_json(text, "/opt/cuda/version.json")
    assert e.value.where == "/opt/cuda/version.json"


@pytest.mark.parametrize(("text", "version"),
                         [("CUDA Version 11.0.228\n", (11, 0, 228)),
                          ("CUDA Version 10.2.89", (10, 2, 89))],
                         ids=["11.0", "10.2"])
def test_version_txt(text: str, version: tuple[int, ...]) -> None:
    """version.txt (CUDA <= 11.0) reads 'CUDA Version X.Y.Z'."""
    assert parse_version_txt(text) == CudaVersion(version)


@pytest.mark.parametrize(("text", "version"),
                         [(NVCC_13_0, (13, 0, 88)), (NVCC_11_8, (11, 8, 89)),
                          ("Cuda compilation tools, release 9.0\n", (9, 0))],
                         ids=["13.0", "11.8", "release-only"])
def test_nvcc_version(text: str, version: tuple[int, ...]) -> None:
    """`nvcc --version` gives the full compiler version ('V13.0.88'), else the release."""
    assert parse_nvcc_version(text) == CudaVersion(version)


def test_nvcc_version_rejects_other_output() -> None:
    """Output without 'release N.N' is a FormatError quoting its end."""
    with pytest.raises(FormatError, match="command not found"):
        parse_nvcc_version("sh: nvcc: command not found\n")


def test_cuda_header() -> None:
    """cuda.h's CUDA_VERSION 13000 is CUDA 13.0."""
    assert parse_cuda_header("/* ... */\n#define CUDA_VERSION 13000\n") == CudaVersion((13, 0))


def test_nvcc_dryrun_root() -> None:
    """`nvcc --dryrun` names the toolkit it works from in its TOP line."""
    assert parse_nvcc_dryrun_root(DRYRUN_13_0) == "/usr/local/cuda-13.0"
    assert parse_nvcc_dryrun_root("nvcc fatal: no input files\n") is None


@pytest.mark.parametrize(("value", "version"), [(13000, (13, 0)), (12080, (12, 8)),
                                                (11020, (11, 2))], ids=["13.0", "12.8", "11.2"])
def test_cuda_version_from_int(value: int, version: tuple[int, int]) -> None:
    """cuDriverGetVersion's 1000*major + 10*minor decodes to major.minor."""
    assert cuda_version_from_int(value) == CudaVersion(version)


def test_cuda_versions_order_as_numbers() -> None:
    """12.10 is newer than 12.9; str() gives the dotted form back."""
    assert parse_cuda_version("12.10") > parse_cuda_version("12.9")
    assert str(parse_cuda_version("13.0.88")) == "13.0.88"


# ---------------------------------------------------------------------------------------------
# Sonames


def test_sonames_in_an_installer_listing() -> None:
    """Sonames, not the real files behind them: link names win over versions and build numbers."""
    entries: dict[str, str | None] = {
        "libcudart.so": "libcudart.so.12", "libcudart.so.12": "libcudart.so.12.8.90",
        "libcudart.so.12.8.90": None, "libcudart_static.a": None,
        "libcupti.so": "libcupti.so.12", "libcupti.so.12": "libcupti.so.2025.1.1",
        "libcupti.so.2025.1.1": None,
        "libnvrtc-builtins.so.12.8": "libnvrtc-builtins.so.12.8.93",
        "libnvrtc-builtins.so.12.8.93": None, "stubs": None,
    }
    assert sonames_in_listing(entries) == ("libcudart.so.12", "libcupti.so.12",
                                           "libnvrtc-builtins.so.12.8")


def test_sonames_in_a_pip_assembled_listing() -> None:
    """Plain files named by their sonames (this machine's /usr/local/cuda-13.0/lib) all count."""
    entries: dict[str, str | None] = {
        "libcudart.so": "libcudart.so.13", "libcudart.so.13": None, "libnvvm.so.4": None,
        "libnvvm.so": "libnvvm.so.4", "libpcsamplingutil.so": None, "cmake": None}
    assert sonames_in_listing(entries) == ("libcudart.so.13", "libnvvm.so.4")


@pytest.mark.parametrize(
    ("soname", "major"),
    [
        ("libcudart.so.12", 12), ("libnvrtc.so.13", 13), ("libcublas.so.12", 12),
        ("libcublasLt.so.13", 13), ("libcudart.so.11.0", 11), ("libnvrtc.so.11.2", 11),
        ("libnvrtc-builtins.so.13.0", 13), ("libnvJitLink.so.12", 12),
        ("libcufft.so.11", 12), ("libcufft.so.12", 13), ("libcusolver.so.12", 13),
        ("libcuda.so.1", None), ("libnvidia-ml.so.1", None), ("libcurand.so.10", None),
        ("libcusolver.so.11", None), ("libcudart.so", None), ("libstdc++.so.6", None),
    ],
    ids=lambda v: str(v),
)
def test_cuda_major_of_soname(soname: str, major: int | None) -> None:
    """NVIDIA runtime sonames map to their CUDA major; the driver and ambiguous ones to None."""
    assert cuda_major_of_soname(soname) == major


# ---------------------------------------------------------------------------------------------
# The driver table


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.159.04", (13, 0)), ("580.65.06", (13, 0)), ("580.65.05", (12, 9)),
        ("575.57.08", (12, 9)), ("570.124.05", (12, 8)), ("570.26", (12, 8)),
        ("570.25", (12, 6)), ("535.129.03", (12, 2)), ("525.60.13", (12, 0)),
        ("470.82.01", (11, 4)), ("590.44.01", (13, 1)), ("610.43.02", (13, 2)),
        ("450.36.06", (11, 0)), ("440.33", None),
    ],
    ids=lambda v: str(v),
)
def test_newest_cuda_for_driver(driver: str, cuda: tuple[int, int] | None) -> None:
    """The newest release whose minimum driver is met, compared part by part as numbers."""
    expected = CudaVersion(cuda) if cuda else None
    assert newest_cuda_for_driver(driver) == expected


def test_minimum_driver_for_a_release() -> None:
    """The oldest driver listed for a major.minor is its GA minimum."""
    assert minimum_driver_for(CudaVersion((13, 0))) == "580.65.06"
    assert minimum_driver_for(CudaVersion((12, 8))) == "570.26"
    assert minimum_driver_for(CudaVersion((14, 0))) == ""


def test_driver_table_is_complete_and_ordered() -> None:
    """Every release 11.0..13.0 is listed, newest first, and a newer release never needs less."""
    table = driver_minimums()
    listed = {(r.cuda.major, r.cuda.minor) for r in table}
    assert {(11, m) for m in range(9)} | {(12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)} | {
        (13, 0)} <= listed
    keys = [cudastack.driver_version_key(r.driver) for r in table]
    assert keys == sorted(keys, reverse=True)
    assert [r.cuda for r in table] == sorted((r.cuda for r in table), reverse=True)


def test_driver_table_can_be_passed_in() -> None:
    """A caller's table replaces the packaged one."""
    table = [DriverMinimum("CUDA 99.0 GA", CudaVersion((99, 0)), "1.0")]
    assert newest_cuda_for_driver("2.0", table) == CudaVersion((99, 0))


# ---------------------------------------------------------------------------------------------
# Putting the driver together

NO_GPUS = GpuList((), None, "none in this test")


def test_driver_from_proc_and_cu_driver_get_version() -> None:
    """/proc gives version and module; cuDriverGetVersion, when known, gives the CUDA version."""
    libcuda = LibcudaReport("/usr/local/nvidia/lib64/libcuda.so.580.159.04", CudaVersion((13, 0)))
    driver = build_driver(proc_text=PROC_OPEN_H200, sys_text="580.159.04\n", libcuda=libcuda,
                          gpus=NO_GPUS)
    assert driver == Driver("580.159.04", DriverSource.PROC, KernelModule.OPEN,
                            libcuda.path, CudaVersion((13, 0)),
                            CudaSupportSource.CU_DRIVER_GET_VERSION)


@pytest.mark.parametrize(
    ("proc", "sys", "libcuda", "gpus", "source"),
    [
        (None, "575.57.08\n", None, NO_GPUS, DriverSource.SYS_MODULE),
        ("garbage", "575.57.08\n", None, NO_GPUS, DriverSource.SYS_MODULE),
        (None, None, LibcudaReport("/lib/libcuda.so.575.57.08", error="x"), NO_GPUS,
         DriverSource.LIBCUDA_FILE),
        (None, None, None, GpuList((Gpu(0, "G", (9, 0), "575.57.08"),), GpuSource.NVIDIA_SMI),
         DriverSource.GPU_QUERY),
    ],
    ids=["sys-module", "corrupt-proc", "libcuda-file-name", "gpu-query"],
)
def test_driver_version_fallbacks(proc: str | None, sys: str | None,
                                  libcuda: LibcudaReport | None, gpus: GpuList,
                                  source: DriverSource) -> None:
    """Without /proc's answer the version comes from the next source; the table gives CUDA."""
    driver = build_driver(proc_text=proc, sys_text=sys, libcuda=libcuda, gpus=gpus)
    assert (driver.version, driver.version_source) == ("575.57.08", source)
    assert (driver.cuda_version, driver.cuda_version_source) == (
        CudaVersion((12, 9)), CudaSupportSource.RELEASE_NOTES)
    assert driver.kernel_module is None and driver.reason is None


def test_driver_unknown_says_why() -> None:
    """With no source at all, every attempt is in the reason."""
    driver = build_driver(proc_text=None, sys_text=None, gpus=NO_GPUS,
                          libcuda=LibcudaReport(error="libcuda.so.1: cannot open shared object"))
    assert driver.version is None and driver.cuda_version is None
    assert driver.reason == ("no /proc/driver/nvidia/version; no /sys/module/nvidia/version; "
                             "libcuda.so.1 probe: libcuda.so.1: cannot open shared object")


def test_driver_older_than_the_table() -> None:
    """A driver too old for CUDA 11.0 has a version, no CUDA version, and a reason."""
    driver = build_driver(proc_text=None, sys_text="440.33\n", libcuda=None, gpus=NO_GPUS)
    assert driver.version == "440.33" and driver.cuda_version is None
    assert driver.reason is not None and "older than every" in driver.reason


def _fake_libcuda(tmp_path: Path, *defines: str) -> Path:
    """A directory with tests/fixtures/stubs/libcuda_stub.c built as libcuda.so.575.57.08 and
    the libcuda.so.1 link to it, as the driver installs them."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build a fake libcuda.so.1")
    lib_dir = tmp_path / "lib"
    real = compile_c(STUBS / "libcuda_stub.c", lib_dir / "libcuda.so.575.57.08", optimize=None,
                     flags=defines, soname="libcuda.so.1")
    (lib_dir / "libcuda.so.1").symlink_to(real.name)
    return lib_dir


def test_probe_driver_asks_libcuda_in_a_subprocess(tmp_path: Path) -> None:
    """The probe dlopens the libcuda.so.1 the loader finds and reports cuDriverGetVersion."""
    lib_dir = _fake_libcuda(tmp_path)
    driver = probe_driver({"LD_LIBRARY_PATH": str(lib_dir), "PATH": os.defpath}, NO_GPUS)
    assert driver.cuda_version == CudaVersion((12, 8))
    assert driver.cuda_version_source is CudaSupportSource.CU_DRIVER_GET_VERSION
    assert driver.libcuda_path == str((lib_dir / "libcuda.so.575.57.08").resolve())
    if driver.version_source is DriverSource.LIBCUDA_FILE:  # no NVIDIA kernel module here
        assert driver.version == "575.57.08"


def test_probe_driver_survives_a_crashing_libcuda(tmp_path: Path) -> None:
    """A libcuda.so.1 that crashes takes down the probe's subprocess, not abifit."""
    lib_dir = _fake_libcuda(tmp_path, "-DCRASH")
    report = cudastack._probe_libcuda({"LD_LIBRARY_PATH": str(lib_dir), "PATH": os.defpath})
    assert report.cuda_version is None
    assert report.error is not None and "exited with" in report.error


# ---------------------------------------------------------------------------------------------
# Where the loader looks


def _host(*, ld_library_path: Sequence[str] = (), cached: Sequence[str] = (),
          conf_dirs: Sequence[str] = (),
          system_dirs: Sequence[str] = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"),
          ) -> HostFacts:
    entries = tuple(LdCacheEntry(os.path.basename(p), p, 0x303, 0) for p in cached)
    return HostFacts(
        ld_library_path=tuple(ld_library_path), ld_preload=(), ld_so_preload=(),
        conf_dirs=tuple(conf_dirs),
        cache=LdCache("test cache", CacheFormat.NEW, ByteOrder.LITTLE, entries),
        defaults=LoaderDefaults(tuple(system_dirs), "lib/x86_64-linux-gnu", "x86_64", ()),
    )


def _same(path: str) -> str:
    return path


@pytest.mark.parametrize(
    ("host", "via", "in_conf"),
    [
        (_host(ld_library_path=["/opt/cuda/lib64"]), (SearchVia.LD_LIBRARY_PATH,), False),
        (_host(cached=["/opt/cuda/lib64/libcudart.so.12"], conf_dirs=["/opt/cuda/lib64"]),
         (SearchVia.LD_SO_CACHE,), True),
        (_host(conf_dirs=["/opt/cuda/lib64"]), (), True),
        (_host(system_dirs=["/opt/cuda/lib64"]), (SearchVia.DEFAULT_DIR,), False),
        (_host(ld_library_path=["/opt/cuda/lib64"], cached=["/opt/cuda/lib64/libnvrtc.so.12"]),
         (SearchVia.LD_LIBRARY_PATH, SearchVia.LD_SO_CACHE), False),
        (_host(ld_library_path=["$ORIGIN/../lib64", "lib64"]), (), False),
        (_host(), (), False),
    ],
    ids=["ld-library-path", "cache", "conf-without-cache", "default-dir", "two-ways",
         "relative-entries", "nowhere"],
)
def test_classify_search(host: HostFacts, via: tuple[SearchVia, ...], in_conf: bool) -> None:
    """A directory is searched through LD_LIBRARY_PATH, the cache or the defaults, never conf."""
    status = classify_search("/opt/cuda/lib64", loader_view(host, _same))
    assert status == SearchStatus(via, in_conf)
    assert status.searched == bool(via)


def test_loader_view_compares_real_paths() -> None:
    """Every directory goes through the given realpath, so links and their targets match."""
    links = {"/usr/local/cuda/lib64": "/usr/local/cuda-13.0/targets/x86_64-linux/lib"}
    view = loader_view(_host(ld_library_path=["/usr/local/cuda/lib64"]),
                       lambda p: links.get(p, p))
    status = classify_search("/usr/local/cuda-13.0/targets/x86_64-linux/lib", view)
    assert status.via == (SearchVia.LD_LIBRARY_PATH,)


def test_build_lib_dirs_merges_one_directory() -> None:
    """lib64 and targets/x86_64-linux/lib that are one directory become one LibDir."""
    real = "/opt/cuda/targets/x86_64-linux/lib"
    listing = {"libcudart.so.12": None}
    dirs = build_lib_dirs([LibListing("/opt/cuda/lib64", real, listing),
                           LibListing("/opt/cuda/targets/x86_64-linux/lib", real, listing)],
                          loader_view(_host(), _same))
    assert dirs == (LibDir("/opt/cuda/lib64", real, ("libcudart.so.12",),
                           SearchStatus((), False), ("/opt/cuda/targets/x86_64-linux/lib",)),)


# ---------------------------------------------------------------------------------------------
# Fake toolkit trees


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_nvcc(root: Path, release: str, build: str) -> Path:
    return _script(root / "bin" / "nvcc", f"""case "$1" in
  --version) echo "Cuda compilation tools, release {release}, V{build}" ;;
  --dryrun) echo '#$ TOP={root}/bin/..' >&2 ;;
  *) exit 1 ;;
esac""")


def _installer_toolkit(prefix: Path, name: str, sonames: Sequence[str]) -> Path:
    """The runfile/deb layout: lib64 -> targets/x86_64-linux/lib, versioned files behind links."""
    root = prefix / name
    lib = root / "targets" / "x86_64-linux" / "lib"
    lib.mkdir(parents=True)
    (root / "lib64").symlink_to("targets/x86_64-linux/lib")
    for soname in sonames:
        (lib / f"{soname}.8.90").touch()
        (lib / soname).symlink_to(f"{soname}.8.90")
    (root / "include").mkdir()
    (root / "include" / "cuda.h").write_text("#define CUDA_VERSION 12080\n")
    return root


def _pip_toolkit(prefix: Path, name: str, sonames: Sequence[str]) -> Path:
    """This machine's layout: plain files in lib; lib64 and targets/x86_64-linux/lib link to it."""
    root = prefix / name
    (root / "lib").mkdir(parents=True)
    (root / "lib64").symlink_to("lib")
    (root / "targets" / "x86_64-linux").mkdir(parents=True)
    (root / "targets" / "x86_64-linux" / "lib").symlink_to("../../lib")
    for soname in sonames:
        (root / "lib" / soname).touch()
    (root / "nvvm").mkdir()
    return root


@pytest.fixture
def side_by_side(tmp_path: Path) -> Path:
    """/usr/local with CUDA 12.8 (version.json) and 13.0 (nvcc only), and cuda -> cuda-13.0."""
    prefix = tmp_path / "usr_local"
    old = _installer_toolkit(prefix, "cuda-12.8", ["libcudart.so.12", "libnvrtc.so.12"])
    (old / "version.json").write_text(VERSION_JSON_12_8)
    new = _pip_toolkit(prefix, "cuda-13.0", ["libcudart.so.13", "libnvrtc.so.13"])
    _fake_nvcc(new, "13.0", "13.0.88")
    (prefix / "cuda").symlink_to("cuda-13.0")
    return prefix


FIXED_DRIVER = Driver("580.95.05", DriverSource.PROC, KernelModule.OPEN, None,
                      CudaVersion((13, 0)), CudaSupportSource.RELEASE_NOTES)


def _stack(prefix: Path, env: dict[str, str], host: HostFacts) -> CudaStack:
    return probe_cuda_stack(env, host=host, prefix=str(prefix), target="x86_64-linux",
                            driver=FIXED_DRIVER, gpus=NO_GPUS)


def test_two_toolkits_side_by_side(side_by_side: Path) -> None:
    """Both toolkits are found with their versions, sources, library dirs and sonames."""
    new_lib = str(side_by_side / "cuda-13.0" / "lib" / "libcudart.so.13")
    stack = _stack(side_by_side, {"PATH": ""}, _host(cached=[new_lib]))
    assert [(t.root, str(t.version), t.version_source) for t in stack.toolkits] == [
        (str(side_by_side / "cuda-12.8"), "12.8.1", VersionSource.VERSION_JSON),
        (str(side_by_side / "cuda-13.0"), "13.0.88", VersionSource.NVCC),
    ]
    old, new = stack.toolkits
    assert [d.sonames for d in old.lib_dirs] == [("libcudart.so.12", "libnvrtc.so.12")]
    assert [d.sonames for d in new.lib_dirs] == [("libcudart.so.13", "libnvrtc.so.13")]
    assert old.lib_dirs[0].real_path == str(side_by_side / "cuda-12.8/targets/x86_64-linux/lib")
    assert new.lib_dirs[0].aliases == (str(side_by_side / "cuda-13.0/targets/x86_64-linux/lib"),
                                       str(side_by_side / "cuda-13.0/lib"))


def test_default_link_names_one_toolkit(side_by_side: Path) -> None:
    """<prefix>/cuda is recorded as written and joins the toolkit it points to."""
    stack = _stack(side_by_side, {"PATH": ""}, _host())
    assert stack.default_link == "cuda-13.0"
    toolkit = stack.toolkit_at(str(side_by_side / "cuda"))
    assert toolkit is not None and toolkit.root == str(side_by_side / "cuda-13.0")
    assert toolkit.origins == (ToolkitOrigin.VERSIONED_DIR, ToolkitOrigin.DEFAULT_LINK)


def test_search_status_of_each_toolkit(side_by_side: Path) -> None:
    """Only the toolkit whose directory the cache lists is searched; the other is not."""
    cached = [str(side_by_side / "cuda-13.0" / "lib" / "libcudart.so.13")]
    stack = _stack(side_by_side, {"PATH": ""},
                   _host(cached=cached, conf_dirs=[str(side_by_side / "cuda-13.0" / "lib")]))
    old, new = stack.toolkits
    assert new.lib_dirs[0].search == SearchStatus((SearchVia.LD_SO_CACHE,), True)
    assert old.lib_dirs[0].search == SearchStatus((), False)


def test_ld_library_path_through_the_default_link(side_by_side: Path) -> None:
    """LD_LIBRARY_PATH=<prefix>/cuda/lib64 reaches the 13.0 library directory by real path."""
    lib64 = str(side_by_side / "cuda" / "lib64")
    env = {"PATH": "", "LD_LIBRARY_PATH": lib64}
    stack = _stack(side_by_side, env, _host(ld_library_path=[lib64]))
    new = stack.toolkit_at(str(side_by_side / "cuda-13.0"))
    assert new is not None and new.lib_dirs[0].search.via == (SearchVia.LD_LIBRARY_PATH,)


def test_cuda_home_and_nvcc_on_path(side_by_side: Path) -> None:
    """$CUDA_HOME and the nvcc on PATH name the 12.8 toolkit; the stack records both."""
    old = side_by_side / "cuda-12.8"
    _fake_nvcc(old, "12.8", "12.8.93")
    env = {"PATH": str(old / "bin"), "CUDA_HOME": str(old), "CUDA_PATH": "/nonexistent"}
    stack = _stack(side_by_side, env, _host())
    toolkit = stack.toolkit_at(str(old))
    assert toolkit is not None
    assert toolkit.origins == (ToolkitOrigin.VERSIONED_DIR, ToolkitOrigin.CUDA_HOME,
                               ToolkitOrigin.NVCC_ON_PATH)
    assert toolkit.version == CudaVersion((12, 8, 1))  # version.json wins over nvcc
    assert stack.nvcc is not None
    assert (stack.nvcc.root, str(stack.nvcc.version)) == (str(old), "12.8.93")
    assert (stack.cuda_home, stack.cuda_path) == (str(old), "/nonexistent")
    assert len(stack.toolkits) == 2


def test_nvcc_wrapper_outside_the_toolkit(side_by_side: Path, tmp_path: Path) -> None:
    """A wrapper script on PATH (like /usr/local/bin/nvcc) is traced to its toolkit by --dryrun."""
    new = side_by_side / "cuda-13.0"
    wrapper = _script(tmp_path / "bin" / "nvcc", f'exec {new}/bin/nvcc "$@"')
    stack = _stack(side_by_side, {"PATH": str(wrapper.parent)}, _host())
    assert stack.nvcc is not None
    assert (stack.nvcc.path, stack.nvcc.root) == (str(wrapper), str(new))
    toolkit = stack.toolkit_at(str(new))
    assert toolkit is not None and ToolkitOrigin.NVCC_ON_PATH in toolkit.origins


def test_toolkit_version_from_cuda_h(tmp_path: Path) -> None:
    """Without version files or nvcc, cuda.h's CUDA_VERSION gives major.minor."""
    _installer_toolkit(tmp_path, "cuda-12.8", ["libcudart.so.12"])
    stack = _stack(tmp_path, {"PATH": ""}, _host())
    assert [(str(t.version), t.version_source) for t in stack.toolkits] == [
        ("12.8", VersionSource.CUDA_H)]


def test_no_toolkit(tmp_path: Path) -> None:
    """An empty prefix and no CUDA variables give no toolkits and no nvcc."""
    stack = _stack(tmp_path, {"PATH": ""}, _host())
    assert (stack.toolkits, stack.nvcc, stack.default_link) == ((), None, None)


# ---------------------------------------------------------------------------------------------
# Findings

SGL_KERNEL = "sgl_kernel/common_ops.abi3.so"
TORCH_CU13: dict[str, set[str]] = {
    "libcudart.so.13": {"nvidia-cuda-runtime"}, "libnvrtc.so.13": {"nvidia-cuda-nvrtc"},
    "libcublas.so.13": {"nvidia-cublas"}, "libcuda.so.1": {"(driver)"},
}


def _stack_with(driver: Driver = FIXED_DRIVER, toolkits: tuple[Toolkit, ...] = ()) -> CudaStack:
    return CudaStack(toolkits, None, None, None, None, driver, NO_GPUS)


def test_major_mix_sgl_kernel_story() -> None:
    """sgl-kernel built for CUDA 12 next to a CUDA 13 torch: one finding naming its .so.12 needs."""
    needed = {"libcudart.so.12": {SGL_KERNEL}, "libnvrtc.so.12": {SGL_KERNEL},
              "libcublas.so.12": {SGL_KERNEL}, "libcuda.so.1": {SGL_KERNEL},
              "libcudart.so.13": {"torch/lib/libtorch_cuda.so"}}
    findings = cuda_findings(_stack_with(), needed, TORCH_CU13)
    assert [(f.kind, f.object) for f in findings] == [("cuda-major-mix", SGL_KERNEL)]
    mix = findings[0]
    assert mix.candidates == ("libcublas.so.12", "libcudart.so.12", "libnvrtc.so.12")
    assert "CUDA 12" in mix.message and "CUDA 13" in mix.message
    assert "nvidia-cuda-runtime" in explanation(mix)
    assert "cannot open shared object file" in explanation(mix)


def test_major_mix_names_the_odd_ones_out() -> None:
    """torch 2.10 (CUDA 12.8, its nvidia-*-cu12 wheels) with CUDA 13 builds of torchvision and
    torchaudio, whose runtime wheels also came in: the stack's CUDA is 12, the one most
    distributions need or ship, and the two CUDA 13 packages are the findings, not torch."""
    torch = {f: "torch" for f in ("torch/lib/libtorch_cuda.so", "torch/lib/libc10_cuda.so")}
    needers = {**torch, "torchvision/_C.so": "torchvision",
               "torchaudio/lib/_torchaudio.so": "torchaudio",
               "nvidia/cusolver/lib/libcusolver.so.11": "nvidia-cusolver-cu12"}
    needed = {"libcudart.so.12": {*torch}, "libcublas.so.12": {*torch,
                                                              "nvidia/cusolver/lib/"
                                                              "libcusolver.so.11"},
              "libcudart.so.13": {"torchvision/_C.so", "torchaudio/lib/_torchaudio.so"}}
    provided = {"libcudart.so.12": {"nvidia-cuda-runtime-cu12"},
                "libcublas.so.12": {"nvidia-cublas-cu12"},
                "libcudart.so.13": {"nvidia-cuda-runtime"}}
    findings = cuda_findings(_stack_with(), needed, provided, needers)
    assert [(f.kind, f.object) for f in findings] == [
        ("cuda-major-mix", "torchaudio/lib/_torchaudio.so"),
        ("cuda-major-mix", "torchvision/_C.so")]
    assert "use a CUDA 12 build" in (findings[0].hint or "")
    # without owners each file counts as its own user: still 12 (five users against three)
    assert [f.object for f in cuda_findings(_stack_with(), needed, provided)] == [
        "torchaudio/lib/_torchaudio.so", "torchvision/_C.so"]


def test_same_major_is_no_mix() -> None:
    """Needs and provisions of one CUDA major give no finding."""
    needed = {"libcudart.so.13": {"flashinfer/_kernels.so"}, "libcuda.so.1": {"x"}}
    assert cuda_findings(_stack_with(), needed, TORCH_CU13) == ()


def test_driver_too_old() -> None:
    """A CUDA 13 runtime with a driver that supports CUDA 12.9 is driver-too-old, with the fix."""
    driver = Driver("575.57.08", DriverSource.PROC, KernelModule.OPEN, None,
                    CudaVersion((12, 9)), CudaSupportSource.RELEASE_NOTES)
    needed = {"libcudart.so.13": {"torch/lib/libtorch_cuda.so"}}
    provided = {"libcudart.so.13": {"nvidia-cuda-runtime"}}
    findings = cuda_findings(_stack_with(driver), needed, provided)
    assert [(f.kind, f.library) for f in findings] == [("driver-too-old", "libcudart.so.13")]
    assert findings[0].hint is not None and "580.65.06" in findings[0].hint
    assert "575.57.08" in explanation(findings[0])


def test_unknown_driver_is_not_too_old() -> None:
    """When the driver's CUDA version is unknown, no driver finding is guessed."""
    driver = Driver(None, None, None, None, None, None, "no driver")
    needed = {"libcudart.so.13": {"torch/lib/libtorch_cuda.so"}}
    assert cuda_findings(_stack_with(driver), needed, TORCH_CU13) == ()


def _toolkit(root: str, sonames: Sequence[str], search: SearchStatus) -> Toolkit:
    lib = LibDir(f"{root}/lib64", f"{root}/targets/x86_64-linux/lib", tuple(sonames), search)
    return Toolkit(root, (root,), (ToolkitOrigin.VERSIONED_DIR,), None, None, (lib,))


@pytest.mark.parametrize(
    ("in_conf", "hint"),
    [(False, "LD_LIBRARY_PATH"), (True, "run `ldconfig`")],
    ids=["nowhere", "conf-but-stale-cache"],
)
def test_toolkit_not_searched(in_conf: bool, hint: str) -> None:
    """A needed soname only in an unsearched toolkit dir is a finding with the right fix."""
    toolkit = _toolkit("/usr/local/cuda-13.0", ["libnvrtc.so.13"], SearchStatus((), in_conf))
    needed = {"libnvrtc.so.13": {"sgl_kernel/common_ops.abi3.so"}}
    findings = cuda_findings(_stack_with(toolkits=(toolkit,)), needed, {})
    assert [(f.kind, f.object, f.library) for f in findings] == [
        ("toolkit-not-searched", "/usr/local/cuda-13.0/lib64", "libnvrtc.so.13")]
    assert findings[0].hint is not None and hint in findings[0].hint
    assert "libnvrtc.so.13: cannot open shared object file" in explanation(findings[0])


def test_searched_copy_elsewhere_silences_not_searched() -> None:
    """If another toolkit dir that ld.so searches holds the soname, nothing is reported."""
    hidden = _toolkit("/opt/cuda-13.0", ["libnvrtc.so.13"], SearchStatus((), False))
    seen = _toolkit("/usr/local/cuda-13.0", ["libnvrtc.so.13"],
                    SearchStatus((SearchVia.LD_SO_CACHE,), True))
    needed = {"libnvrtc.so.13": {"x.so"}}
    assert cuda_findings(_stack_with(toolkits=(hidden, seen)), needed, {}) == ()


# ---------------------------------------------------------------------------------------------
# This machine


def test_this_machine_finds_cuda_13_0() -> None:
    """On this host (and CI hosts like it) /usr/local/cuda-13.0 is found with version 13.0.x."""
    if not os.path.isdir("/usr/local/cuda-13.0"):
        pytest.skip("no /usr/local/cuda-13.0 on this host")
    stack = probe_cuda_stack(os.environ)
    toolkit = stack.toolkit_at("/usr/local/cuda-13.0")
    assert toolkit is not None and toolkit.version is not None
    assert toolkit.version.parts[:2] == (13, 0)
    assert any("libcudart.so.13" in d.sonames for d in toolkit.lib_dirs)
    assert stack.driver.version is not None or stack.driver.reason
    assert stack.gpus.gpus or stack.gpus.reason
