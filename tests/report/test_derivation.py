"""A finding's derivation in words (`abifit.report.derivation`): the sentence each record of
`abifit.sim.derivation` states, word for word as abifit has always written it; how the records
of a derivation make its lines; a finding that `sim.diagnose` builds from a loader problem reads
as the golden report reads; and a finding holding every record goes through the cache's codec
(`formats.datacodec`) and back unchanged.
"""

from __future__ import annotations

import json
import typing
from dataclasses import replace

import pytest

from abifit.formats.datacodec import decode, encode
from abifit.report.derivation import derivation_text, explanation, reason_text, sentence
from abifit.report.gpu import coverage_reason, image_choice
from abifit.sim import derivation as d
from abifit.sim.diagnose import Context, diagnose
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.loader import Attempt, LoadProblem, ProblemKind, Resolution, Via
from helpers import GOLDEN

X = "/site/pkg/_x.so"
FAILS, OPTIONAL = d.Outcome.IMPORT_FAILS, d.Outcome.DOES_NOT_LOAD
NEAR = d.NearestDefinition("_ZN1h5checkEj", "h::check(unsigned int)", "/site/h/libh.so",
                           "h 2.0", True, ("parameter 1: `int` → `unsigned int`",),
                           "same function h::check; parameter 1: `int` → `unsigned int`")

# every record, and the sentence it states
SENTENCES: list[tuple[d.Sentence, str]] = [
    (d.NeedsSymbol(X, "pkg 1.0", "_ZN1h5checkEi", "h::check(int)", None, 12, FAILS),
     f"Because {X} (pkg 1.0) needs `h::check(int)` and none of the 12 objects in its lookup "
     "scope defines it, the import fails."),
    (d.NeedsSymbol(X, None, "PyFoo", None, "PY_3", 2, OPTIONAL, ("liba.so.1", "libb.so.2"),
                   ("/site/a/liba.so.1", "/site/b/libb.so.2")),
     f"Because {X} needs `PyFoo` at version PY_3 and none of the 2 objects in its lookup scope "
     "defines it, it does not load even once liba.so.1 and libb.so.2 are found (counted in the "
     "scope: /site/a/liba.so.1 and /site/b/libb.so.2)."),
    (d.SymbolNote("PyFoo", "introduced in CPython 3.12"), "PyFoo: introduced in CPython 3.12."),
    (d.DefinedAtOtherVersion("/site/h/libh.so", "H_2"),
     "/site/h/libh.so defines that name, but not at version H_2."),
    (d.NearestLine(NEAR),
     "Nearest definition, in /site/h/libh.so (h 2.0): `h::check(unsigned int)` — same function "
     "h::check; parameter 1: `int` → `unsigned int`."),
    (d.StringAbiDiffers(),
     "The std::string ABIs differ: one side was built with -D_GLIBCXX_USE_CXX11_ABI=0 (the old "
     "ABI), the other with the cxx11 ABI."),
    (d.RequiresVersion(X, "pkg 1.0", "GLIBCXX_3.4.32", "/lib/libstdc++.so.6", FAILS),
     f"Because {X} (pkg 1.0) requires version GLIBCXX_3.4.32 and the /lib/libstdc++.so.6 that "
     "the loader found does not define it, the import fails."),
    (d.NewestVersion("GLIBCXX_3.4.30"), "The newest GLIBCXX version it defines is GLIBCXX_3.4.30."),
    (d.NeedsLibrary(X, "pkg 1.0", "libz.so.1", 3, OPTIONAL),
     f"Because {X} (pkg 1.0) needs libz.so.1 and the loader did not find it in the 3 places it "
     "looked (paths considered, in order, below), it does not load."),
    (d.WrongElfClass(),
     "A file of that name exists on the search path but is built for another ELF class (32-bit "
     "vs 64-bit)."),
    (d.FilesFound(("/opt/z/libz.so.1", "/usr/z/libz.so.1")),
     "Files with that name on this machine: /opt/z/libz.so.1, /usr/z/libz.so.1."),
    (d.NoFileFound(), "No file with that name was found on this machine."),
    (d.IndexFix("pip install zlib-wheel  # puts <site-packages>/z/libz.so.1"),
     "From the index: pip install zlib-wheel  # puts <site-packages>/z/libz.so.1"),
    (d.IndexMiss("no wheel on the index ships libz.so.1."),
     "no wheel on the index ships libz.so.1."),
    (d.IndexMiss("the index did not answer"), "the index did not answer."),
    (d.Unreadable(X, "pkg 1.0", "libz.so.1", "/site/z/libz.so.1", "z 1.2", "file too short",
                  FAILS),
     f"Because {X} (pkg 1.0) needs libz.so.1, and /site/z/libz.so.1 (z 1.2) cannot be read as a "
     "shared object (file too short), the import fails."),
    (d.Unreadable(X, "pkg 1.0", "", X, "pkg 1.0", "not an ELF file", OPTIONAL),
     f"Because {X} (pkg 1.0) cannot be read as a shared object (not an ELF file), it does not "
     "load."),
    (d.CutShort(),
     "The file ends inside what the loader maps of it: touching a page past its end raises "
     "SIGBUS, which kills the process; no `except` around the import runs."),
    (d.UsesNumpyApi(X, "pkg 1.0", d.OldHeaders("2.1.3", 96, 88), FAILS),
     f"Because {X} (pkg 1.0) uses NumPy's C API and it was built with NumPy 1.x headers, and "
     "NumPy 2 changed the C API's layout (numpy.dtype shrank from 96 to 88 bytes): it cannot "
     "run beside numpy 2.1.3, the import fails."),
    (d.UsesNumpyApi(X, None, d.OlderCApi("1.23", "1.22.4"), OPTIONAL),
     f"Because {X} uses NumPy's C API and it was built for NumPy 1.23 or newer (its "
     "NPY_TARGET_VERSION), and numpy 1.22.4 has an older C API, its import raises."),
    (d.PrintedFirst("A module that was compiled using NumPy 1.x cannot be run in NumPy 2.1"),
     "Printed first: A module that was compiled using NumPy 1.x cannot be run in NumPy 2.1"),
    (d.ImportRaises("ImportError: numpy.core.multiarray failed to import"),
     "The import raises: ImportError: numpy.core.multiarray failed to import"),
    (d.DuplicateSoname("/site/a/libc.so.9", "libc.so.9", "b.ext", "/site/b/libc.so.9"),
     "Because /site/a/libc.so.9 is already in the process under the soname libc.so.9 and "
     "loading b.ext maps /site/b/libc.so.9 as well, two copies of that library live in one "
     "process; their global state (allocators, thread pools, registries) is not shared."),
    (d.BlockedBy("b.ext", ("l1.so", "l2.so", "l3.so", "l4.so", "l5.so"), "a", "a._core",
                 "l0.so: cannot open shared object file"),
     "Because b.ext needs l1.so, l2.so, l3.so and 2 more from a, whose a._core does not load "
     "(l0.so: cannot open shared object file), the libraries it would have brought are "
     "missing: b.ext fails only as a consequence."),
    (d.OwnLoadFails("/site/a/liba.so", "a._ext", "liba.so"),
     "Because the package's own code loads /site/a/liba.so before a._ext (which finds it by its "
     "name liba.so), and that library does not load itself, a._ext cannot find it: this is a "
     "consequence, the cause is that library's own problem."),
    (d.DoesNotCompile("/site/a/__init__.py", "a 1.0", "3.9", "a",
                      "SyntaxError: invalid syntax"),
     "Because /site/a/__init__.py (a 1.0) does not compile under Python 3.9, `import a` raises "
     "SyntaxError: invalid syntax before any native file of it is loaded."),
    (d.DefinedByPrerequisite("MPI_Init", "MPI"),
     "It needs MPI_Init, which MPI defines: the process must have loaded it."),
    (d.NotDefinedInForm("_ZN1h5checkEi"),
     "It needs _ZN1h5checkEi, which the stack does not define in that form."),
    (d.HostLacksVersion("GLIBC_2.38", "libc.so.6"),
     "It needs GLIBC_2.38 of libc.so.6, which the host lacks."),
    (d.NumpyMismatch("numpy<2", "2.1.0"), "It needs numpy<2, and the stack has numpy 2.1.0."),
    (d.CannotBeLoaded(), "The file cannot be loaded as it is."),
    (d.OwnFileFails("libown.so"), "Its own libown.so does not load."),
    (d.NotWhereLoaderLooks("libnvrtc.so.13", ("nvidia-cuda-nvrtc", "torch")),
     "The stack has libnvrtc.so.13 (nvidia-cuda-nvrtc, torch), but not where the loader looks."),
    (d.OtherRelease("libcudart.so.12", ("libcudart.so.13",)),
     "It needs libcudart.so.12, the stack has libcudart.so.13: it was built for another "
     "release."),
    (d.OtherBuild("libc10_cuda.so", "torch"),
     "It needs libc10_cuda.so, which the stack's torch lacks: it is another build of it (CPU, "
     "CUDA or ROCm)."),
    (d.DependencyShouldProvide("nvidia-cuda-nvrtc-cu12", "libnvrtc.so.12"),
     "Its dependency nvidia-cuda-nvrtc-cu12 should provide libnvrtc.so.12."),
    (d.NothingProvides("libavutil.so.59"),
     "It needs libavutil.so.59, which nothing in the stack provides."),
    (d.NeededPackageFails(), "A package it needs does not load."),
    (d.KernelsMiss(d.NoneRun("12.0", d.NoImageFits("12.0", ("sm_80",), ()), 3, 3,
                             "no kernel image is available")),
     "Because the GPU is 12.0 and there is no SASS for 12.0 (SASS: sm_80) and no PTX that can be "
     "JIT-compiled for it (PTX: none) (in 3 of 3 fat binaries), launching a kernel fails: no "
     "kernel image is available"),
    (d.SomeKernelsMiss(d.NoImageFits("9.0", ("sm_90a",), ()), "no kernel image"),
     "Because there is no SASS for 9.0 (SASS: sm_90a) and no PTX that can be JIT-compiled for it "
     "(PTX: none), a kernel of those fat binaries fails with 'no kernel image' if it is "
     "launched; libraries often build such kernels for one architecture only and launch them "
     "only there, so this is a warning, not a failure."),
    (d.GpuCodeUnreadable("vllm._C"),
     "The fat binaries of vllm._C could not be read, so whether its kernels run on the GPU is "
     "unknown."),
    (d.DriverTooOld(("torchvision._C", "nvidia-cuda-runtime"), "libcudart.so.13", 13, None,
                    "12.8", "cuDriverGetVersion"),
     "Because nvidia-cuda-runtime, torchvision._C use libcudart.so.13 (CUDA 13) and the NVIDIA "
     "driver (version unknown) supports CUDA up to 12.8 (cuDriverGetVersion), CUDA calls fail "
     "with 'CUDA driver version is insufficient for CUDA runtime version'."),
    (d.RuntimeMix("mmcv._ext", (11,), ("libcudart.so.11.0",), 13,
                  (d.ProvidedBy("libcudart.so.13", ("torch", "nvidia-cuda-runtime")),), ()),
     "Because mmcv._ext was built against CUDA 11 and needs libcudart.so.11.0, while the "
     "environment's CUDA runtime is CUDA 13 (libcudart.so.13 from nvidia-cuda-runtime, torch). "
     "Both CUDA 11 and CUDA 13 runtimes end up in one process."),
    (d.RuntimeMix("x._C", (11, 12), ("libcublas.so.11", "libcudart.so.12"), 13, (),
                  ("libcublas.so.11", "libcudart.so.12")),
     "Because x._C was built against CUDA 11/12 and needs libcublas.so.11, libcudart.so.12, "
     "while the environment's CUDA runtime is CUDA 13 (). libcublas.so.11, libcudart.so.12 are "
     "not provided, so loading fails with 'cannot open shared object file'."),
    (d.ToolkitNotSearched(("b", "a"), "libcudart.so.11.0", "/opt/cuda/lib64", True),
     "Because a, b need libcudart.so.11.0, no toolkit directory that ld.so searches holds it, "
     "and /opt/cuda/lib64, which does, is listed in ld.so.conf but not in /etc/ld.so.cache "
     "(ldconfig has not run since), loading fails with 'libcudart.so.11.0: cannot open shared "
     "object file' unless another search path (an RPATH, a pip package already loaded) "
     "provides it."),
    (d.ToolkitNotSearched((), "libcudart.so.11.0", "/opt/cuda/lib64", False),
     "Because (nothing) need libcudart.so.11.0, no toolkit directory that ld.so searches holds "
     "it, and /opt/cuda/lib64, which does, is not in LD_LIBRARY_PATH, not in /etc/ld.so.cache "
     "and not a default directory, loading fails with 'libcudart.so.11.0: cannot open shared "
     "object file' unless another search path (an RPATH, a pip package already loaded) "
     "provides it."),
    (d.SkippedEntry("a directory", "pkg._x"),
     "The import system skips a directory named like an extension module, so `import pkg._x` "
     "fails with ModuleNotFoundError: No module named 'pkg._x'."),
    (d.ImportDisagrees(),
     "abifit predicted what `import` shows and a fresh process of the target interpreter showed "
     "something else: abifit's model of this package is wrong."),
    (d.LoadDisagrees(),
     "abifit predicted one outcome and the real loader, in a fresh process of the target "
     "interpreter, gave another: abifit's model of this case is wrong."),
    (d.FoundThroughLdConf("libz.so.1", "/opt/z", "/etc/ld.so.conf.d/z.conf", 2),
     "On the snapshot's machine libz.so.1 was found through the ld.so cache in /opt/z, a "
     "directory that /etc/ld.so.conf.d/z.conf (line 2) names; this host's loader configuration "
     "does not find it."),
    (d.FoundThroughLdConf("libz.so.1", "/opt/z", None, None),
     "On the snapshot's machine libz.so.1 was found through the ld.so cache in /opt/z, a "
     "directory that ld.so.conf names; this host's loader configuration does not find it."),
    (d.FoundThroughLdLibraryPath("libz.so.1", "/opt/z"),
     "On the snapshot's machine libz.so.1 was found through LD_LIBRARY_PATH, in /opt/z."),
]


PTX_80 = d.PtxImage("compute_80", "8.0")
# every reason of the GPU check, and its words (`report.gpu`)
IMAGE_CHOICES: list[tuple[d.ImageChoice, str]] = [
    (d.SassRuns("sm_90a", "9.0"), "sm_90a SASS runs on 9.0"),
    (d.PtxCompiles(PTX_80, "9.0"), "compute_80 (ISA 8.0) PTX is JIT-compiled for 9.0"),
    (d.NoImageFits("12.0", ("sm_80", "sm_90"), (PTX_80, d.PtxImage("compute_90", "8.4"))),
     "there is no SASS for 12.0 (SASS: sm_80, sm_90) and no PTX that can be JIT-compiled for it "
     "(PTX: compute_80 (ISA 8.0), compute_90 (ISA 8.4))"),
    (d.NoImageFits("12.0", (), (d.PtxImage("compute_120", "8.8"),), "12.4"),
     "there is no SASS for 12.0 (SASS: none) and the PTX that fits it (compute_120 (ISA 8.8)) is "
     "newer than a CUDA 12.4 driver reads"),
]
COVERAGE_REASONS: list[tuple[d.CoverageReason, str]] = [
    (d.NoKernelsHeld(), "its fat binaries hold no kernels (registration code only)"),
    (d.NoGpuCodeHeld(), "the object carries no SASS and no PTX"),
    (d.NoneRun("9.0", d.NoImageFits("9.0", ("sm_100a",), ()), 4, 6, "no kernel image"),
     "Because the GPU is 9.0 and there is no SASS for 9.0 (SASS: sm_100a) and no PTX that can "
     "be JIT-compiled for it (PTX: none) (in 4 of 6 fat binaries), launching a kernel fails: no "
     "kernel image"),
    (d.NoneRun("9.0", d.NoImageFits("9.0", (), ()), 1, 1, "no kernel image"),
     "Because the GPU is 9.0 and there is no SASS for 9.0 (SASS: none) and no PTX that can be "
     "JIT-compiled for it (PTX: none), launching a kernel fails: no kernel image"),
    (d.SomeRun("9.0", 5, 7, False, ("sm_80", "sm_90"), ()),
     "5 of 7 fat binaries have code for 9.0 (SASS; the object holds SASS sm_80, sm_90; PTX "
     "none)"),
    (d.SomeRun("12.0", 3, 3, True, ("sm_80",), ("compute_80",)),
     "every fat binary has code for 12.0 (SASS or PTX JIT-compiled by the driver; the object "
     "holds SASS sm_80; PTX compute_80)"),
    (d.EmbeddedNoneRun("12.0", 4, (".ldata", ".rodata"), ("sm_90",), (), "no kernel image"),
     "Because the GPU is 12.0 and none of the fat binaries has code for it (its kernels are in 4 "
     "fat binaries embedded in .ldata, .rodata, which the library loads itself; SASS sm_90; PTX "
     "none), launching a kernel fails: no kernel image"),
    (d.EmbeddedSomeRun("9.0", 3, 4, (".rodata",), ("sm_90",), ("compute_90",)),
     "3 of 4 fat binaries have code for 9.0 (its kernels are in 4 fat binaries embedded in "
     ".rodata, which the library loads itself, choosing by the GPU; SASS sm_90; PTX "
     "compute_90)"),
]


def _members(union: object) -> set[type]:
    """The classes of a union type, nested unions flattened."""
    args = typing.get_args(union)
    return set().union(*map(_members, args)) if args else {union}


@pytest.mark.parametrize(("record", "text"), SENTENCES,
                         ids=[f"{type(r).__name__}-{n}" for n, (r, _) in enumerate(SENTENCES)])
def test_each_record_states_its_sentence(record: d.Sentence, text: str) -> None:
    """Each record is written as the sentence abifit writes for it, word for word."""
    assert sentence(record) == text


def test_every_record_has_its_sentence_here() -> None:
    """The tables above cover every kind of record a derivation may hold, and every reason of
    the GPU check."""
    assert {type(r) for r, _ in SENTENCES} == _members(d.Sentence)
    assert {type(r) for r, _ in IMAGE_CHOICES} == _members(d.ImageChoice)
    assert {type(r) for r, _ in COVERAGE_REASONS} == _members(d.CoverageReason)
    assert {type(r.reason) for r, _ in SENTENCES if isinstance(r, d.UsesNumpyApi)} == (
        _members(d.NumpyReason))


@pytest.mark.parametrize(("record", "text"), IMAGE_CHOICES,
                         ids=[type(r).__name__ for r, _ in IMAGE_CHOICES])
def test_each_fat_binarys_reason_has_its_words(record: d.ImageChoice, text: str) -> None:
    """Why one fat binary runs on a GPU, or not, in the GPU check's words."""
    assert image_choice(record) == text


@pytest.mark.parametrize(("record", "text"), COVERAGE_REASONS,
                         ids=[type(r).__name__ for r, _ in COVERAGE_REASONS])
def test_each_objects_reason_has_its_words(record: d.CoverageReason, text: str) -> None:
    """Why an object's kernels run on a GPU, or not, in the GPU check's words."""
    assert coverage_reason(record) == text


def test_a_reason_is_a_clause_and_a_sentence() -> None:
    """Why the verdict rule says a file does not load is a clause (`reason_text`); in a
    derivation it is a sentence."""
    reason = d.NothingProvides("libavutil.so.59")
    assert reason_text(reason) == "it needs libavutil.so.59, which nothing in the stack provides"
    assert sentence(reason) == f"{reason_text(reason)[0].upper()}{reason_text(reason)[1:]}."


def test_a_derivation_is_a_sentence_a_line() -> None:
    """The sentences of a finding's derivation are its explanation, one a line, in order."""
    finding = Finding(FindingKind.MISSING_LIBRARY, X, "libz.so.1: cannot open shared object",
                      (d.NeedsLibrary(X, None, "libz.so.1", 2, FAILS), d.NoFileFound(),
                       d.IndexFix("pip install z\nThe loader looks there ...")))
    assert explanation(finding) == (
        f"Because {X} needs libz.so.1 and the loader did not find it in the 2 places it looked "
        "(paths considered, in order, below), the import fails.\n"
        "No file with that name was found on this machine.\n"
        "From the index: pip install z\nThe loader looks there ...")
    assert derivation_text(()) == ""


def test_what_the_snapshots_machine_did_goes_on_the_last_line() -> None:
    """The snapshot's loader settings end the derivation's last line, after a space."""
    found = d.FoundThroughLdLibraryPath("libz.so.1", "/opt/z")
    said = sentence(found)
    lines = derivation_text((d.NeedsLibrary(X, None, "libz.so.1", 2, FAILS), d.NoFileFound(),
                             found)).splitlines()
    assert lines[1:] == [f"No file with that name was found on this machine. {said}"]
    assert derivation_text((found,)) == f" {said}"


def test_a_finding_with_every_record_goes_through_the_cache_codec() -> None:
    """A finding whose derivation holds every kind of record is written by the cache's codec
    and read back equal (nothing in it is a pickle, each field checked against its type)."""
    gpu = (*(d.KernelsMiss(r) for r, _ in COVERAGE_REASONS),
           *(d.SomeKernelsMiss(r, "no kernel image") for r, _ in IMAGE_CHOICES))
    finding = Finding(FindingKind.UNDEFINED_SYMBOL, X, "undefined symbol: _ZN1h5checkEi",
                      (*(record for record, _ in SENTENCES), *gpu), nearest=(NEAR,))
    back = decode(encode(finding), "a cache entry")
    assert back == finding
    assert [type(s) for s in back.derivation] == [type(s) for s in finding.derivation]


# --- a finding diagnose builds reads as the golden report reads --------------------------------


SITE = "/opt/venv/lib/python3.11/site-packages"
ARROW = f"{SITE}/pyarrow/libarrow.so.1800"
MMCV = f"{SITE}/mmcv/_ext.cpython-311-x86_64-linux-gnu.so"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
CUDA118 = "/usr/local/cuda-11.8/targets/x86_64-linux/lib"
OWNERS = {ARROW: "pyarrow 18.1.0", MMCV: "mmcv 2.1.0"}
CONTEXT = Context(owner=OWNERS.get, exports=lambda _p: (),
                  versions_defined=lambda path: (("GLIBCXX_3.4", "GLIBCXX_3.4.29",
                                                  "GLIBCXX_3.4.30", "CXXABI_1.3.13")
                                                 if path == LIBSTDCXX else ()),
                  locate=lambda name: ((f"{CUDA118}/{name}",) if name == "libcudart.so.11.0"
                                       else ()),
                  pip_package=lambda _n: None)


def _golden_explanation(kind: str, obj: str) -> str:
    """The `explanation` of the finding of `kind` about `obj` in golden/doctor_problems.json."""
    doc = json.loads((GOLDEN / "doctor_problems.json").read_text("utf-8"))
    [found] = [f["explanation"] for f in doc["findings"]
               if f["kind"] == kind and f["object"] == obj]
    assert isinstance(found, str)
    return found


def test_a_missing_version_diagnosed_reads_as_the_golden_report() -> None:
    """pyarrow's libarrow beside a libstdc++ without GLIBCXX_3.4.32: the finding diagnose
    builds is explained in the very words of the golden doctor report."""
    problem = LoadProblem(ProblemKind.MISSING_VERSION, ARROW,
                          f"{LIBSTDCXX}: version `GLIBCXX_3.4.32' not found (required by "
                          f"{ARROW})", version="GLIBCXX_3.4.32", library=LIBSTDCXX)
    finding = diagnose(problem, "pyarrow.lib", CONTEXT)
    assert finding.derivation == (
        d.RequiresVersion(ARROW, "pyarrow 18.1.0", "GLIBCXX_3.4.32", LIBSTDCXX, FAILS),
        d.NewestVersion("GLIBCXX_3.4.30"))
    assert explanation(finding) == _golden_explanation("missing-version", ARROW)


def test_a_missing_library_diagnosed_reads_as_the_golden_report() -> None:
    """mmcv's extension, whose CUDA 11 runtime the loader does not find in the 4 places it
    looks (a copy is elsewhere on the machine), in a module package code does without."""
    attempts = tuple(Attempt(f"{where}/libcudart.so.11.0", Via.SYSTEM, None, "not found")
                     for where in ("/usr/local/nvidia/lib64", f"{SITE}/torch/lib",
                                   "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"))
    problem = LoadProblem(ProblemKind.MISSING_LIBRARY, MMCV, "libcudart.so.11.0: cannot open "
                          "shared object file: No such file or directory",
                          library="libcudart.so.11.0",
                          resolution=Resolution(MMCV, "libcudart.so.11.0", None, None, attempts))
    finding = diagnose(problem, "mmcv._ext", CONTEXT, outcome=OPTIONAL)
    assert explanation(finding) == _golden_explanation("missing-library", MMCV)
    no_copy = diagnose(problem, "mmcv._ext", replace(CONTEXT, locate=lambda _n: ()))
    assert [type(s) for s in no_copy.derivation] == [d.NeedsLibrary, d.NoFileFound]
