"""What one explanation of `abifit explain` says, as records: its summary (what the message
says) and its notes (what the environment and the symbol's history add), each a frozen value
holding the facts of one kind of line. Pure data, no English: `report.explain` writes the words
(`summary_text`, `note_text`), as `report.derivation` writes a finding's.

The fix and the provider stay text: the fix is the action to take, like a finding's hint, and
the provider names who provides what is missing (from abifit's tables, or the releases a
symbol's history found).
"""

from __future__ import annotations

from dataclasses import dataclass

from abifit.sim.derivation import CoverageReason

# --- summaries: what the message says ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SymbolNeeded:
    """`symbol` is undefined, needed by `obj` when the message names it."""

    symbol: str
    obj: str | None


@dataclass(frozen=True, slots=True)
class LibraryNotFound:
    """`library` was not found, needed by `obj` when the message names it."""

    library: str
    obj: str | None


@dataclass(frozen=True, slots=True)
class LibraryNeededNowhere:
    """`library` was not found, and no object of this environment needs it."""

    library: str


@dataclass(frozen=True, slots=True)
class LibraryFoundHere:
    """`library` was not found elsewhere; here the objects that need it find it."""

    library: str


@dataclass(frozen=True, slots=True)
class LoaderRefuses:
    """The loader refuses `obj`, saying `said`."""

    obj: str
    said: str


@dataclass(frozen=True, slots=True)
class DiedOfSigbus:
    """The process died of SIGBUS; `path` is the library cut short, when one was found."""

    path: str | None


@dataclass(frozen=True, slots=True)
class NumpyApiMismatch:
    """A module built for another NumPy's C API is imported beside `numpy` (the release
    installed; None: no numpy); `modules` are those of the environment that do that."""

    numpy: str | None
    modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VersionNotFound:
    """Version node `version` was not found in `library`, required by `obj` (each when the
    message names it)."""

    version: str
    library: str | None
    obj: str | None


@dataclass(frozen=True, slots=True)
class LoadLibraryFailed:
    """`torch.ops.load_library` could not load `path`."""

    path: str


@dataclass(frozen=True, slots=True)
class OperatorNotRegistered:
    """The operator `namespace::name` is not registered."""

    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class ArchNotCovered:
    """Torch's kernels do not cover the GPU's `arch`."""

    arch: str


@dataclass(frozen=True, slots=True)
class NoKernelForGpu:
    """No kernel for this GPU in the code that was run."""


@dataclass(frozen=True, slots=True)
class DriverBehindRuntime:
    """The NVIDIA driver is older than the CUDA runtime the code needs."""


@dataclass(frozen=True, slots=True)
class CudaBuildsDiffer:
    """Torchvision is built for CUDA `vision_cuda`, torch for `torch_cuda`."""

    vision_cuda: str
    torch_cuda: str


Summary = (SymbolNeeded | LibraryNotFound | LibraryNeededNowhere | LibraryFoundHere
           | LoaderRefuses | DiedOfSigbus | NumpyApiMismatch | VersionNotFound | LoadLibraryFailed
           | OperatorNotRegistered | ArchNotCovered | NoKernelForGpu | DriverBehindRuntime
           | CudaBuildsDiffer)


# --- notes: what the environment and the symbol's history add ------------------------------


@dataclass(frozen=True, slots=True)
class StandsIn:
    """`name` `version` stands in for the environment's (`--with`)."""

    name: str
    version: str


@dataclass(frozen=True, slots=True)
class Installed:
    """`name` `version` is installed."""

    name: str
    version: str


@dataclass(frozen=True, slots=True)
class NotInstalled:
    """`name` is not installed in this environment."""

    name: str


@dataclass(frozen=True, slots=True)
class ReleaseChanged:
    """`package` `release` changed the symbol (`description`: how its signature changed); from
    that release it is `now` (demangled)."""

    package: str
    release: str
    description: str
    now: str


@dataclass(frozen=True, slots=True)
class AgainstFormNeeded:
    """How the form the releases define differs from the form needed (`description`)."""

    description: str


@dataclass(frozen=True, slots=True)
class BuiltAgainstOtherReleases:
    """The extension was built against other `package` releases than those examined."""

    package: str


@dataclass(frozen=True, slots=True)
class ReleasesFit:
    """Of the `examined` newest releases of `extension`, those (`fitting`) that need only
    symbols `package` `version` defines."""

    extension: str
    package: str
    version: str | None
    examined: int
    fitting: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NoReleaseFits:
    """None of the `examined` newest releases of `extension` needs only symbols `package`
    `version` defines: the newest, `release`, needs `count` it lacks (`shown`: the first,
    demangled)."""

    extension: str
    package: str
    version: str | None
    examined: int
    release: str
    count: int
    shown: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AskedFileMissing:
    """`path`, the file that was asked for, is not there."""

    path: str


@dataclass(frozen=True, slots=True)
class FromElsewhere:
    """The error came from another environment, or from a library package code loads by name."""


@dataclass(frozen=True, slots=True)
class NeededHereBy:
    """The objects of this environment that need the library (and find it)."""

    needers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DamagedFile:
    """The loader found the file and would not load it: it is damaged."""


@dataclass(frozen=True, slots=True)
class CutShortKills:
    """Loading a library cut short raises SIGBUS, which no `except` catches."""


@dataclass(frozen=True, slots=True)
class NumpyApiAtImport:
    """NumPy's C API is taken at import: the loader cannot see a mismatch."""


@dataclass(frozen=True, slots=True)
class LoadLibraryHides:
    """`torch.ops.load_library` hides the loader's error."""


@dataclass(frozen=True, slots=True)
class RegisteredFrom:
    """`namespace` registers the operator from `pattern` (`data/import_rules.json`); when that
    file does not load, the package goes on and fails later."""

    namespace: str
    pattern: str


@dataclass(frozen=True, slots=True)
class RegisteringLibraryFailed:
    """The library of `namespace` that registers the operator did not load."""

    namespace: str


@dataclass(frozen=True, slots=True)
class LoaderErrorUnderneath:
    """The loader's error under the package's own (`error`, as the simulation has it)."""

    error: str


@dataclass(frozen=True, slots=True)
class KernelsCover:
    """The installed torch's kernels cover `archs` (as the message lists them)."""

    archs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CoverageFound:
    """The GPU check's verdict on object `name` and its reason (`sim.gpu.ObjectCoverage`)."""

    name: str
    verdict: str
    reason: CoverageReason


@dataclass(frozen=True, slots=True)
class NoGpuCode:
    """None of the objects checked for `arch` carries GPU code."""

    arch: str


@dataclass(frozen=True, slots=True)
class NoGpuChecked:
    """No GPU was checked, for `reason` (the GPU probe's words)."""

    reason: str


@dataclass(frozen=True, slots=True)
class DriverFound:
    """The NVIDIA driver: its `version`, else why it is unknown (`reason`, the probe's words),
    and the newest CUDA it supports."""

    version: str | None
    reason: str | None
    supports: str | None


@dataclass(frozen=True, slots=True)
class InstalledReleases:
    """The distributions installed that the message is about, as "name version"."""

    releases: tuple[str, ...]


Note = (StandsIn | Installed | NotInstalled | ReleaseChanged | AgainstFormNeeded
        | BuiltAgainstOtherReleases | ReleasesFit | NoReleaseFits | AskedFileMissing
        | FromElsewhere | NeededHereBy | DamagedFile | CutShortKills | NumpyApiAtImport
        | LoadLibraryHides | RegisteredFrom | RegisteringLibraryFailed | LoaderErrorUnderneath
        | KernelsCover | CoverageFound | NoGpuCode | NoGpuChecked | DriverFound
        | InstalledReleases)
