"""A finding's derivation in words: the sentences people read, written from the records of facts
that `sim.derivation` defines ("Because X (pkg 1.0) needs `sym` and none of the 12 objects in
its lookup scope defines it, the import fails.").

Every sentence abifit writes about why a file does not load is here, one small function per
record; the layers below only choose and order the records. `explanation` is what the text
report prints under a finding and what a finding's JSON `explanation` holds: a sentence a line,
except the records that go on the line before them (`_GOES_ON`: what a snapshot's machine did).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from abifit.report.gpu import coverage_reason, image_choice
from abifit.sim.derivation import (
    BlockedBy,
    CannotBeLoaded,
    CutShort,
    DefinedAtOtherVersion,
    DefinedByPrerequisite,
    DependencyShouldProvide,
    DoesNotCompile,
    DriverTooOld,
    DuplicateSoname,
    FilesFound,
    FoundThroughLdConf,
    FoundThroughLdLibraryPath,
    GpuCodeUnreadable,
    HostLacksVersion,
    ImportDisagrees,
    ImportRaises,
    IndexFix,
    IndexMiss,
    KernelsMiss,
    LoadDisagrees,
    NearestLine,
    NeededPackageFails,
    NeedsLibrary,
    NeedsSymbol,
    NewestVersion,
    NoFileFound,
    NotDefinedInForm,
    NothingProvides,
    NotWhereLoaderLooks,
    NumpyMismatch,
    NumpyReason,
    OlderCApi,
    OldHeaders,
    OtherBuild,
    OtherRelease,
    Outcome,
    OwnFileFails,
    OwnLoadFails,
    PrintedFirst,
    Reason,
    RequiresVersion,
    RuntimeMix,
    Sentence,
    SkippedEntry,
    SomeKernelsMiss,
    StringAbiDiffers,
    SymbolNote,
    ToolkitNotSearched,
    Unreadable,
    UsesNumpyApi,
    WrongElfClass,
)
from abifit.sim.findings import Finding

INDEX_FIX = "From the index: "  # what begins the paragraph of the wheels an index offers


def explanation(finding: Finding) -> str:
    """The derivation of `finding`, in words: a sentence a line."""
    return derivation_text(finding.derivation)


def derivation_text(derivation: Iterable[Sentence]) -> str:
    """The sentences of `derivation`, a line each (a record of `_GOES_ON` on the line before)."""
    lines: list[str] = []
    for record in derivation:
        text = sentence(record)
        if isinstance(record, _GOES_ON):
            lines[-1:] = [f"{lines[-1] if lines else ''} {text}"]
        else:
            lines.append(text)
    return "\n".join(lines)


def _label(path: str, owner: str | None) -> str:
    """A file and the distribution that owns it: `/site/x.so (pkg 1.0)`."""
    return f"{path} ({owner})" if owner else path


_OUTCOMES = {Outcome.IMPORT_FAILS: "the import fails", Outcome.DOES_NOT_LOAD: "it does not load"}


def _joined(items: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    listed = list(items)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"


def _is(items: Collection[str]) -> str:
    return "is" if len(items) == 1 else "are"


def _names(items: Collection[str]) -> str:
    """Sorted and comma-separated, or "(nothing)"."""
    return ", ".join(sorted(items)) or "(nothing)"


# --- the loader's problems --------------------------------------------------------------------


def _needs_symbol(s: NeedsSymbol) -> str:
    outcome = _OUTCOMES[s.outcome]
    end = (f"{outcome} even once {_joined(s.behind)} {_is(s.behind)} found (counted in the "
           f"scope: {_joined(s.stand_ins)})." if s.behind else f"{outcome}.")
    version = f" at version {s.version}" if s.version else ""
    return (f"Because {_label(s.object, s.owner)} needs `{s.demangled or s.symbol}`{version} "
            f"and none of the {s.scope_size} objects in its lookup scope defines it, {end}")


def _nearest_line(s: NearestLine) -> str:
    d = s.definition
    return f"Nearest definition, in {_label(d.path, d.owner)}: `{d.text}` — {d.description}."


def _requires_version(s: RequiresVersion) -> str:
    return (f"Because {_label(s.object, s.owner)} requires version {s.version} and the "
            f"{s.library} that the loader found does not define it, {_OUTCOMES[s.outcome]}.")


def newest_sentence(s: NewestVersion) -> str:
    """The newest version of a family the library defines (a report that shows
    `Finding.newest` apart leaves this sentence out)."""
    return f"The newest {s.newest.split('_')[0]} version it defines is {s.newest}."


def _needs_library(s: NeedsLibrary) -> str:
    return (f"Because {_label(s.object, s.owner)} needs {s.library} and the loader did not "
            f"find it in the {s.places} places it looked (paths considered, in order, below), "
            f"{_OUTCOMES[s.outcome]}.")


def _unreadable(s: Unreadable) -> str:
    needer = "" if s.object == s.path else f"{_label(s.object, s.owner)} needs {s.library}, and "
    return (f"Because {needer}{_label(s.path, s.path_owner)} cannot be read as a shared object "
            f"({s.reason}), {_OUTCOMES[s.outcome]}.")


def numpy_reason(r: NumpyReason | None) -> str:
    """The import contract of NumPy's C API a module breaks, as a clause ("" when unknown)."""
    match r:
        case OldHeaders():
            return (f"it was built with NumPy 1.x headers, and NumPy 2 changed the C API's layout "
                    f"(numpy.dtype shrank from {r.old_size} to {r.new_size} bytes): it cannot "
                    f"run beside numpy {r.numpy}")
        case OlderCApi():
            return (f"it was built for NumPy {r.feature} or newer (its NPY_TARGET_VERSION), and "
                    f"numpy {r.numpy} has an older C API")
        case None:
            return ""


def _uses_numpy_api(s: UsesNumpyApi) -> str:
    end = "the import fails" if s.outcome is Outcome.IMPORT_FAILS else "its import raises"
    return (f"Because {_label(s.object, s.owner)} uses NumPy's C API and "
            f"{numpy_reason(s.reason)}, {end}.")


_WRONG_ELF_CLASS = ("A file of that name exists on the search path but is built for another ELF "
                    "class (32-bit vs 64-bit).")
_STRING_ABI = ("The std::string ABIs differ: one side was built with -D_GLIBCXX_USE_CXX11_ABI=0 "
               "(the old ABI), the other with the cxx11 ABI.")
_CUT_SHORT = ("The file ends inside what the loader maps of it: touching a page past its end "
              "raises SIGBUS, which kills the process; no `except` around the import runs.")
_NO_FILE = "No file with that name was found on this machine."


# --- the process -------------------------------------------------------------------------------


def _duplicate_soname(s: DuplicateSoname) -> str:
    return (f"Because {s.old} is already in the process under the soname {s.soname} and "
            f"loading {s.module} maps {s.new} as well, two copies of that library live in one "
            "process; their global state (allocators, thread pools, registries) is not shared.")


def _blocked_by(s: BlockedBy) -> str:
    names = (", ".join(s.sonames[:3])
             + (f" and {len(s.sonames) - 3} more" if len(s.sonames) > 3 else ""))
    return (f"Because {s.module} needs {names} from {s.distribution}, whose {s.blocker} does "
            f"not load ({s.error}), the libraries it would have brought are missing: "
            f"{s.module} fails only as a consequence.")


def _own_load_fails(s: OwnLoadFails) -> str:
    return (f"Because the package's own code loads {s.path} before {s.module} (which finds it "
            f"by its name {s.library}), and that library does not load itself, {s.module} "
            "cannot find it: this is a consequence, the cause is that library's own problem.")


def _does_not_compile(s: DoesNotCompile) -> str:
    return (f"Because {s.path} ({s.owner}) does not compile under Python {s.python}, "
            f"`import {s.name}` raises {s.error} before any native file of it is loaded.")


def reason_text(r: Reason) -> str:
    """Why a file does not load, as the verdict rule sees it: a clause ("it needs X, which
    nothing in the stack provides"); `sentence` writes it as a sentence of a derivation."""
    match r:
        case DefinedByPrerequisite():
            return (f"it needs {r.symbol}, which {r.prerequisite} defines: the process must "
                    "have loaded it")
        case NotDefinedInForm():
            return f"it needs {r.symbol}, which the stack does not define in that form"
        case HostLacksVersion():
            return f"it needs {r.version} of {r.library}, which the host lacks"
        case NumpyMismatch():
            return f"it needs {r.requirement}, and the stack has numpy {r.numpy}"
        case CannotBeLoaded():
            return "the file cannot be loaded as it is"
        case OwnFileFails():
            return f"its own {r.soname} does not load"
        case NotWhereLoaderLooks():
            return (f"the stack has {r.soname} ({', '.join(r.holders)}), but not where the "
                    "loader looks")
        case OtherRelease():
            return (f"it needs {r.soname}, the stack has {', '.join(r.others)}: it was built "
                    "for another release")
        case OtherBuild():
            return (f"it needs {r.soname}, which the stack's {r.build} lacks: it is another "
                    "build of it (CPU, CUDA or ROCm)")
        case DependencyShouldProvide():
            return f"its dependency {r.dependency} should provide {r.soname}"
        case NothingProvides():
            return f"it needs {r.soname}, which nothing in the stack provides"
        case NeededPackageFails():
            return "a package it needs does not load"


def _reason_sentence(r: Reason) -> str:
    text = reason_text(r)
    return f"{text[:1].upper()}{text[1:]}."


# --- GPU code and the CUDA stack ---------------------------------------------------------------


def _some_kernels_miss(s: SomeKernelsMiss) -> str:
    reason = image_choice(s.reason) if s.reason is not None else None
    return (f"Because {reason}, a kernel of those fat binaries fails with '{s.error}' if it "
            "is launched; libraries often build such kernels for one architecture only and "
            "launch them only there, so this is a warning, not a failure.")


def _driver_too_old(s: DriverTooOld) -> str:
    return (f"Because {_names(s.users)} use {s.soname} (CUDA {s.major}) and the NVIDIA driver "
            f"{s.driver or '(version unknown)'} supports CUDA up to {s.supported} ({s.source}), "
            "CUDA calls fail with 'CUDA driver version is insufficient for CUDA runtime "
            "version'.")


def _runtime_mix(s: RuntimeMix) -> str:
    wanted = "/".join(map(str, s.majors))
    sources = "; ".join(f"{p.soname} from {_names(p.providers)}" for p in s.sources)
    tail = (f" {_names(s.missing)} {_is(s.missing)} not provided, so loading fails with "
            "'cannot open shared object file'." if s.missing else
            f" Both CUDA {wanted} and CUDA {s.stack_major} runtimes end up in one process.")
    return (f"Because {s.needer} was built against CUDA {wanted} and needs {_names(s.sonames)}, "
            f"while the environment's CUDA runtime is CUDA {s.stack_major} ({sources}).{tail}")


def _toolkit_not_searched(s: ToolkitNotSearched) -> str:
    why = ("is listed in ld.so.conf but not in /etc/ld.so.cache (ldconfig has not run since)"
           if s.in_ld_so_conf else
           "is not in LD_LIBRARY_PATH, not in /etc/ld.so.cache and not a default directory")
    return (f"Because {_names(s.needers)} need {s.soname}, no toolkit directory that ld.so "
            f"searches holds it, and {s.directory}, which does, {why}, loading fails with "
            f"'{s.soname}: cannot open shared object file' unless another search path (an "
            "RPATH, a pip package already loaded) provides it.")


# --- doctor and snapshots ----------------------------------------------------------------------


def _skipped_entry(s: SkippedEntry) -> str:
    return (f"The import system skips {s.what} named like an extension module, so "
            f"`import {s.module}` fails with ModuleNotFoundError: No module named '{s.module}'.")


_IMPORT_DISAGREES = ("abifit predicted what `import` shows and a fresh process of the target "
                     "interpreter showed something else: abifit's model of this package is wrong.")
_LOAD_DISAGREES = ("abifit predicted one outcome and the real loader, in a fresh process of the "
                   "target interpreter, gave another: abifit's model of this case is wrong.")


def _found_through_ld_conf(s: FoundThroughLdConf) -> str:
    where = f"{s.file} (line {s.line})" if s.file else "ld.so.conf"
    return (f"On the snapshot's machine {s.library} was found through the ld.so cache in "
            f"{s.directory}, a directory that {where} names; this host's loader configuration "
            "does not find it.")


def _found_through_ld_library_path(s: FoundThroughLdLibraryPath) -> str:
    return (f"On the snapshot's machine {s.library} was found through LD_LIBRARY_PATH, in "
            f"{s.directory}.")


_GOES_ON = (FoundThroughLdConf, FoundThroughLdLibraryPath)


def sentence(s: Sentence) -> str:
    """The sentence one record of a derivation states."""
    match s:
        case NeedsSymbol():
            return _needs_symbol(s)
        case SymbolNote():
            return f"{s.symbol}: {s.note}."
        case DefinedAtOtherVersion():
            return f"{s.holder} defines that name, but not at version {s.version}."
        case NearestLine():
            return _nearest_line(s)
        case StringAbiDiffers():
            return _STRING_ABI
        case RequiresVersion():
            return _requires_version(s)
        case NewestVersion():
            return newest_sentence(s)
        case NeedsLibrary():
            return _needs_library(s)
        case WrongElfClass():
            return _WRONG_ELF_CLASS
        case FilesFound():
            return "Files with that name on this machine: " + ", ".join(s.paths) + "."
        case NoFileFound():
            return _NO_FILE
        case IndexFix():
            return INDEX_FIX + s.text
        case IndexMiss():
            return s.reason.rstrip(".") + "."
        case Unreadable():
            return _unreadable(s)
        case CutShort():
            return _CUT_SHORT
        case UsesNumpyApi():
            return _uses_numpy_api(s)
        case PrintedFirst():
            return f"Printed first: {s.text}"
        case ImportRaises():
            return f"The import raises: {s.error}"
        case DuplicateSoname():
            return _duplicate_soname(s)
        case BlockedBy():
            return _blocked_by(s)
        case OwnLoadFails():
            return _own_load_fails(s)
        case DoesNotCompile():
            return _does_not_compile(s)
        case KernelsMiss():
            return coverage_reason(s.reason)
        case SomeKernelsMiss():
            return _some_kernels_miss(s)
        case GpuCodeUnreadable():
            return (f"The fat binaries of {s.name} could not be read, so whether its kernels "
                    "run on the GPU is unknown.")
        case DriverTooOld():
            return _driver_too_old(s)
        case RuntimeMix():
            return _runtime_mix(s)
        case ToolkitNotSearched():
            return _toolkit_not_searched(s)
        case SkippedEntry():
            return _skipped_entry(s)
        case ImportDisagrees():
            return _IMPORT_DISAGREES
        case LoadDisagrees():
            return _LOAD_DISAGREES
        case FoundThroughLdConf():
            return _found_through_ld_conf(s)
        case FoundThroughLdLibraryPath():
            return _found_through_ld_library_path(s)
        case _:
            return _reason_sentence(s)
