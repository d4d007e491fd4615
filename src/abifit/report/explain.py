"""`abifit explain` rendered: one block per message recognised (what it means, the object in the
environment and what doctor's simulation says of it, who provides what is missing, the fix),
then one summary line; `--json` prints the same report as one versioned document.

An explanation's summary and notes are records (`engines.explanation`); their words are
written here (`summary_text`, `note_text`), one small function per kind where a line needs more
than a format.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.engines import explanation as says
from abifit.engines.explanation import Note, Summary
from abifit.report.doctor import module_json
from abifit.report.findings import finding_json, finding_text
from abifit.report.gpu import coverage_reason
from abifit.report.json import JsonObject, schema_version

if TYPE_CHECKING:
    from abifit.engines.explain import ExplainReport, Explanation

_VERDICTS = {
    "confirmed": "confirmed: abifit's simulation of this environment fails the same way",
    "fails-otherwise": "fails here, but not as the message says: see the simulated error",
    "loads-here": "not reproduced: here it loads, so the error came from another environment "
    "or process (LD_LIBRARY_PATH, LD_PRELOAD, what was imported first)",
    "not-in-environment": "not checked: the object the message names is not in this "
    "environment (give its interpreter with --python)",
    "not-needed": "not reproduced: no object of this environment needs that library",
    "explained": "not checked here: nothing in this environment shows it; the message alone "
    "explains it",
}


def explain_json(report: ExplainReport) -> JsonObject:
    """The `--json` document of `abifit explain`."""
    return {
        "schema_version": schema_version("explain"),
        "command": "explain",
        "verdict": "problems" if report.problems else "ok",
        "python": {"executable": report.python, "version": report.python_version},
        "explanations": [explanation_json(e) for e in report.explanations],
    }


def explanation_json(e: Explanation) -> JsonObject:
    clue = {key: list(value) if isinstance(value, tuple) else value
            for key, value in asdict(e.clue).items()}
    return {
        "kind": e.kind,
        "clue": clue,
        "verdict": str(e.verdict),
        "summary": summary_text(e.summary),
        "demangled": e.demangled,
        "signature": e.signature,
        "object": e.object,
        "located_by": e.located_by,
        "distribution": e.distribution,
        "module": module_json(e.status) if e.status else None,
        "findings": [finding_json(f) for f in e.findings],
        "provider": e.provider,
        "fix": e.fix,
        "notes": [note_text(n) for n in e.notes],
    }


def explanation_text(e: Explanation) -> list[str]:
    lines = [f"{e.kind}: {summary_text(e.summary)}"]
    if e.demangled:
        lines.append(f"  demangled: {e.demangled}")
    if e.signature and e.signature != e.demangled:
        lines.append(f"  signature: {e.signature}")
    if e.object:
        owner = f", of {e.distribution}" if e.distribution else ""
        lines.append(f"  object: {e.object} (found by {e.located_by}{owner})")
    elif e.distribution:
        lines.append(f"  installed: {e.distribution}")
    lines.append(f"  {_VERDICTS[str(e.verdict)]}")
    if e.status is not None and not e.findings:
        said = "loads" if e.status.loads else f"does not load: {e.status.error}"
        lines.append(f"  simulated: {e.status.module} {said}")
    for finding in e.findings:
        lines += [f"  {line}" for line in finding_text(finding) if "hint: " not in line]
    if e.provider:
        lines.append(f"  provided by: {e.provider}")
    lines += [f"  note: {note_text(note)}" for note in e.notes]
    if e.fix:
        lines.append(f"  fix: {e.fix}")
    return lines


def explain_text(report: ExplainReport) -> str:
    """The text rendering of `abifit explain`: a block per message, then one summary line."""
    blocks = ["\n".join(explanation_text(e)) for e in report.explanations]
    confirmed = sum(1 for e in report.explanations if str(e.verdict) == "confirmed")
    blocks.append(f"{report.python} ({report.python_version}): {len(report.explanations)} "
                  f"message(s) recognised, {confirmed} confirmed in this environment")
    return "\n\n".join(blocks) + "\n"


# --- the summary: what the message says --------------------------------------------------------


def _numpy_mismatch(s: says.NumpyApiMismatch) -> str:
    here = f"numpy {s.numpy}" if s.numpy else "no numpy"
    modules = (f": {len(s.modules)} module(s) of this environment do that, "
               f"{', '.join(s.modules[:5])}" + (" ..." if len(s.modules) > 5 else "")
               if s.modules else "")
    return f"a module built for another NumPy's C API is imported beside {here}{modules}"


def _version_not_found(s: says.VersionNotFound) -> str:
    return (f"version {s.version} not found" + (f" in {s.library}" if s.library else "")
            + (f" (required by {s.obj})" if s.obj else ""))


def summary_text(s: Summary) -> str:
    """The one line that says what a recognised message means."""
    match s:
        case says.SymbolNeeded():
            return s.symbol + (f" needed by {s.obj}" if s.obj else "")
        case says.LibraryNotFound():
            return f"{s.library} was not found" + (f" (needed by {s.obj})" if s.obj else "")
        case says.LibraryNeededNowhere():
            return f"{s.library} was not found, and no object of this environment needs it"
        case says.LibraryFoundHere():
            return (f"{s.library} was not found elsewhere; here the objects that need it find "
                    "it")
        case says.LoaderRefuses():
            return f"the loader refuses {s.obj}: {s.said}"
        case says.DiedOfSigbus():
            return "the process died of SIGBUS" + (f": {s.path} is cut short" if s.path else "")
        case says.NumpyApiMismatch():
            return _numpy_mismatch(s)
        case says.VersionNotFound():
            return _version_not_found(s)
        case says.LoadLibraryFailed():
            return f"torch.ops.load_library could not load {s.path}"
        case says.OperatorNotRegistered():
            return f"operator {s.namespace}::{s.name} is not registered"
        case says.ArchNotCovered():
            return f"torch's kernels do not cover the GPU's {s.arch}"
        case says.NoKernelForGpu():
            return "no kernel for this GPU in the code that was run"
        case says.DriverBehindRuntime():
            return "the NVIDIA driver is older than the CUDA runtime the code needs"
        case says.CudaBuildsDiffer():
            return f"torchvision is built for CUDA {s.vision_cuda}, torch for CUDA {s.torch_cuda}"


# --- the notes: what the environment and the symbol's history add ------------------------------


def _newest(examined: int) -> str:
    return f"the {examined} newest" if examined > 1 else "the newest"


def _against(package: str, version: str | None) -> str:
    return package + (f" {version}" if version else "")


def _releases_fit(n: says.ReleasesFit) -> str:
    return (f"{n.extension} releases that need only symbols {_against(n.package, n.version)} "
            f"defines (of {_newest(n.examined)}): {', '.join(n.fitting)}")


def _no_release_fits(n: says.NoReleaseFits) -> str:
    more = f" (+{n.count - 3} more)" if n.count > 3 else ""
    return (f"none of {_newest(n.examined)} {n.extension} releases needs only symbols "
            f"{_against(n.package, n.version)} defines: {n.extension} {n.release} needs "
            f"{n.count} it lacks: {'; '.join(n.shown)}{more}")


def _needed_here_by(n: says.NeededHereBy) -> str:
    shown = ", ".join(n.needers[:5]) + (f" and {len(n.needers) - 5} more"
                                        if len(n.needers) > 5 else "")
    return f"needed here by {shown}"


def _driver_found(n: says.DriverFound) -> str:
    return (f"driver: {n.version or n.reason or 'not found'}"
            + (f", supports CUDA up to {n.supports}" if n.supports else ""))


_FROM_ELSEWHERE = ("the error came from another environment, or from a library that package code "
                   "loads by name at run time (dlopen)")
_DAMAGED = ("the loader found the file and would not load it: it is damaged (cut short, "
            "overwritten) or not a shared object; reinstalling its package puts it back whole")
_CUT_SHORT = ("loading a library cut short does this: the loader maps pages past the end of the "
              "file and touching one raises SIGBUS, which no `except` catches")
_NUMPY_API = ("NumPy's C API is a table the module takes from NumPy when it is imported: the "
              "loader cannot see a mismatch; the headers a module was built with decide which "
              "NumPy releases it imports beside")


def note_text(n: Note) -> str:
    """One note of an explanation."""
    match n:
        case says.StandsIn():
            return f"{n.name} {n.version} stands in for the environment's (--with)"
        case says.Installed():
            return f"{n.name} {n.version} is installed"
        case says.NotInstalled():
            return f"{n.name} is not installed in this environment"
        case says.ReleaseChanged():
            return (f"{n.package} {n.release} changed it: {n.description}; from {n.release} it "
                    f"is {n.now}")
        case says.AgainstFormNeeded():
            return f"against the form needed: {n.description}"
        case says.BuiltAgainstOtherReleases():
            return (f"the extension was built against other {n.package} releases than these: "
                    "more releases (--releases N) may find those that define it")
        case says.ReleasesFit():
            return _releases_fit(n)
        case says.NoReleaseFits():
            return _no_release_fits(n)
        case says.AskedFileMissing():
            return f"{n.path} is the file that was asked for: it is not there"
        case says.FromElsewhere():
            return _FROM_ELSEWHERE
        case says.NeededHereBy():
            return _needed_here_by(n)
        case says.DamagedFile():
            return _DAMAGED
        case says.CutShortKills():
            return _CUT_SHORT
        case says.NumpyApiAtImport():
            return _NUMPY_API
        case says.LoadLibraryHides():
            return "torch.ops.load_library hides the loader's error"
        case says.RegisteredFrom():
            return (f"{n.namespace} registers it from {n.pattern}; when that file does not load, "
                    "the package goes on and fails later with this error")
        case says.RegisteringLibraryFailed():
            return f"the library of {n.namespace} that registers it did not load"
        case says.LoaderErrorUnderneath():
            return f"the loader's error underneath: {n.error}"
        case says.KernelsCover():
            return "the installed torch's kernels cover " + " ".join(n.archs)
        case says.CoverageFound():
            return f"{n.name}: {n.verdict}: {coverage_reason(n.reason)}"
        case says.NoGpuCode():
            return f"none of the objects checked carries GPU code (checked for {n.arch})"
        case says.NoGpuChecked():
            return f"no GPU checked: {n.reason}"
        case says.DriverFound():
            return _driver_found(n)
        case says.InstalledReleases():
            return f"installed: {', '.join(n.releases)}"
