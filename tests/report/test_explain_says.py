"""What an explanation of `abifit explain` says, in words (`report.explain`): the line each
summary and each note record of `engines.explanation` is written as, word for word as abifit
has always written it, for every kind of record."""

from __future__ import annotations

import typing

import pytest

from abifit.engines import explanation as says
from abifit.report.explain import note_text, summary_text
from abifit.sim.derivation import NoGpuCodeHeld

SUMMARIES: list[tuple[says.Summary, str]] = [
    (says.SymbolNeeded("_Z1fv", "/s/x.so"), "_Z1fv needed by /s/x.so"),
    (says.SymbolNeeded("_Z1fv", None), "_Z1fv"),
    (says.LibraryNotFound("libz.so.1", "/s/x.so"), "libz.so.1 was not found (needed by /s/x.so)"),
    (says.LibraryNotFound("libz.so.1", None), "libz.so.1 was not found"),
    (says.LibraryNeededNowhere("libz.so.1"),
     "libz.so.1 was not found, and no object of this environment needs it"),
    (says.LibraryFoundHere("libz.so.1"),
     "libz.so.1 was not found elsewhere; here the objects that need it find it"),
    (says.LoaderRefuses("/s/x.so", "file too short"), "the loader refuses /s/x.so: file too short"),
    (says.DiedOfSigbus("/s/libz.so.1"), "the process died of SIGBUS: /s/libz.so.1 is cut short"),
    (says.DiedOfSigbus(None), "the process died of SIGBUS"),
    (says.NumpyApiMismatch("2.1.0", ("a", "b", "c", "d", "e", "f")),
     "a module built for another NumPy's C API is imported beside numpy 2.1.0: 6 module(s) of "
     "this environment do that, a, b, c, d, e ..."),
    (says.NumpyApiMismatch(None, ()),
     "a module built for another NumPy's C API is imported beside no numpy"),
    (says.VersionNotFound("GLIBC_2.38", "libc.so.6", "/s/x.so"),
     "version GLIBC_2.38 not found in libc.so.6 (required by /s/x.so)"),
    (says.VersionNotFound("GLIBC_2.38", None, None), "version GLIBC_2.38 not found"),
    (says.LoadLibraryFailed("/s/ops.so"), "torch.ops.load_library could not load /s/ops.so"),
    (says.OperatorNotRegistered("torchvision", "nms"),
     "operator torchvision::nms is not registered"),
    (says.ArchNotCovered("sm_120"), "torch's kernels do not cover the GPU's sm_120"),
    (says.NoKernelForGpu(), "no kernel for this GPU in the code that was run"),
    (says.DriverBehindRuntime(), "the NVIDIA driver is older than the CUDA runtime the code needs"),
    (says.CudaBuildsDiffer("13.0", "12.8"),
     "torchvision is built for CUDA 13.0, torch for CUDA 12.8"),
]

NOTES: list[tuple[says.Note, str]] = [
    (says.StandsIn("torch", "2.10.0"), "torch 2.10.0 stands in for the environment's (--with)"),
    (says.Installed("torch", "2.10.0"), "torch 2.10.0 is installed"),
    (says.NotInstalled("torch"), "torch is not installed in this environment"),
    (says.ReleaseChanged("torch", "2.10.0", "parameter 1: `int` → `long`", "f(long)"),
     "torch 2.10.0 changed it: parameter 1: `int` → `long`; from 2.10.0 it is f(long)"),
    (says.AgainstFormNeeded("same function f; parameter 1: `int` → `long`"),
     "against the form needed: same function f; parameter 1: `int` → `long`"),
    (says.BuiltAgainstOtherReleases("torch"),
     "the extension was built against other torch releases than these: more releases "
     "(--releases N) may find those that define it"),
    (says.ReleasesFit("sgl-kernel", "torch", "2.10.0", 3, ("0.3.21", "0.3.20")),
     "sgl-kernel releases that need only symbols torch 2.10.0 defines (of the 3 newest): "
     "0.3.21, 0.3.20"),
    (says.NoReleaseFits("sgl-kernel", "torch", None, 1, "0.3.21", 5, ("f()", "g()", "h()")),
     "none of the newest sgl-kernel releases needs only symbols torch defines: sgl-kernel "
     "0.3.21 needs 5 it lacks: f(); g(); h() (+2 more)"),
    (says.AskedFileMissing("/opt/libz.so.1"),
     "/opt/libz.so.1 is the file that was asked for: it is not there"),
    (says.FromElsewhere(),
     "the error came from another environment, or from a library that package code loads by "
     "name at run time (dlopen)"),
    (says.NeededHereBy(("a", "b", "c", "d", "e", "f", "g")),
     "needed here by a, b, c, d, e and 2 more"),
    (says.DamagedFile(),
     "the loader found the file and would not load it: it is damaged (cut short, overwritten) "
     "or not a shared object; reinstalling its package puts it back whole"),
    (says.CutShortKills(),
     "loading a library cut short does this: the loader maps pages past the end of the file "
     "and touching one raises SIGBUS, which no `except` catches"),
    (says.NumpyApiAtImport(),
     "NumPy's C API is a table the module takes from NumPy when it is imported: the loader "
     "cannot see a mismatch; the headers a module was built with decide which NumPy releases "
     "it imports beside"),
    (says.LoadLibraryHides(), "torch.ops.load_library hides the loader's error"),
    (says.RegisteredFrom("torchvision", "torchvision/_C*.so"),
     "torchvision registers it from torchvision/_C*.so; when that file does not load, the "
     "package goes on and fails later with this error"),
    (says.RegisteringLibraryFailed("torchvision"),
     "the library of torchvision that registers it did not load"),
    (says.LoaderErrorUnderneath("libz.so.1: cannot open shared object file"),
     "the loader's error underneath: libz.so.1: cannot open shared object file"),
    (says.KernelsCover(("sm_80", "sm_90")), "the installed torch's kernels cover sm_80 sm_90"),
    (says.CoverageFound("torch._C", "no-kernel-image", NoGpuCodeHeld()),
     "torch._C: no-kernel-image: the object carries no SASS and no PTX"),
    (says.NoGpuCode("sm_90"), "none of the objects checked carries GPU code (checked for sm_90)"),
    (says.NoGpuChecked("no GPU found"), "no GPU checked: no GPU found"),
    (says.DriverFound("570.124.06", None, "12.8"),
     "driver: 570.124.06, supports CUDA up to 12.8"),
    (says.DriverFound(None, "no /proc/driver/nvidia/version", None),
     "driver: no /proc/driver/nvidia/version"),
    (says.DriverFound(None, None, None), "driver: not found"),
    (says.InstalledReleases(("torch 2.10.0", "torchvision 0.25.0")),
     "installed: torch 2.10.0, torchvision 0.25.0"),
]


@pytest.mark.parametrize(("record", "text"), SUMMARIES,
                         ids=[f"{type(r).__name__}-{n}" for n, (r, _) in enumerate(SUMMARIES)])
def test_each_summary_says_its_line(record: says.Summary, text: str) -> None:
    """A summary record is written as the line abifit writes for it."""
    assert summary_text(record) == text


@pytest.mark.parametrize(("record", "text"), NOTES,
                         ids=[f"{type(r).__name__}-{n}" for n, (r, _) in enumerate(NOTES)])
def test_each_note_says_its_line(record: says.Note, text: str) -> None:
    """A note record is written as the line abifit writes for it."""
    assert note_text(record) == text


def test_every_kind_of_record_has_its_line_here() -> None:
    """The tables above cover every summary and every note an explanation may hold."""
    assert {type(r) for r, _ in SUMMARIES} == set(typing.get_args(says.Summary))
    assert {type(r) for r, _ in NOTES} == set(typing.get_args(says.Note))
