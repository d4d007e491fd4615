"""What a finding's derivation states, as records: one frozen value per kind of sentence, holding
exactly the facts that sentence needs. Pure data, no English.

A `Finding` carries its derivation as a tuple of these (`Finding.derivation`): "because X
(pkg 1.0) needs `sym` and none of the 12 objects in its lookup scope defines it, the import
fails" is `NeedsSymbol(object=X, owner="pkg 1.0", symbol="sym", scope_size=12, ...)`. The
sentences people read are written from them in `abifit.report.derivation`, the one place the
words are; the layers below combine and cut derivations as tuples (`sim.process` drops the
index's fix where the cause changes it, `engines.snapshot` appends what the snapshot's machine
did), never as text.

A few records hold a text abifit did not compose for the derivation: the paragraph a package
index gave (`IndexFix`, `IndexMiss`), a name's history in CPython's C API (`SymbolNote`), and
the loader's, CUDA's, NumPy's or Python's own words (an error, what is printed, what a file
is). Each says where its text comes from. The GPU check's
reasons are records too (`ImageChoice`, `CoverageReason`): `sim.gpu` keeps them in its
verdicts, which `inspect` shows as well.

The records are data that `formats.datacodec` writes to abifit's cache and reads back; a change
to a record changes what a stored result holds, so the formats that store findings change too
(`engines.check.RESULT_FORMAT`, `engines.kept.RUN_FORMAT`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    """What a load problem leads to, the end of a derivation: the import fails, or, for a file
    package code does without, the file does not load."""

    IMPORT_FAILS = "import-fails"
    DOES_NOT_LOAD = "does-not-load"


@dataclass(frozen=True, slots=True)
class NearestDefinition:
    """A definition in a missing symbol's lookup scope that comes close to it
    (`formats.demangle.nearest`): its mangled name and demangled `text`, the file that defines
    it and the distribution that owns that file (`owner`: "torch 2.10.0"), whether it is the
    same function, each difference of its signature, and all of that as one line
    (`SignatureDiff.describe`)."""

    mangled: str
    text: str
    path: str
    owner: str | None
    same_function: bool
    differences: tuple[str, ...]
    description: str

    @property
    def change(self) -> str:
        """What differs, without the function's name ("parameter 4: `int` → `unsigned int`")."""
        from abifit.formats.demangle import describe_change  # ctypes only when it is asked

        return describe_change(self.differences, self.same_function)


# --- the loader's problems (sim.diagnose) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class NeedsSymbol:
    """`object` (owned by `owner`) needs `symbol` (C++: `demangled`), at `version` when
    versioned, and none of the `scope_size` objects in its lookup scope defines it; with
    `behind`, even once those missing libraries are found (`stand_ins` counted in the scope)."""

    object: str
    owner: str | None
    symbol: str
    demangled: str | None
    version: str | None
    scope_size: int
    outcome: Outcome
    behind: tuple[str, ...] = ()
    stand_ins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SymbolNote:
    """What is known of a missing name's history: `note` is `sim.pythonapi.history`'s phrase
    ("introduced in CPython 3.12"), given through `diagnose.Context.symbol_note`."""

    symbol: str
    note: str


@dataclass(frozen=True, slots=True)
class DefinedAtOtherVersion:
    """`holder`, in the scope, defines the missing name, but not at `version`."""

    holder: str
    version: str


@dataclass(frozen=True, slots=True)
class NearestLine:
    """A definition near the missing symbol (one of `Finding.nearest`)."""

    definition: NearestDefinition


@dataclass(frozen=True, slots=True)
class StringAbiDiffers:
    """The nearest definition before it differs from the symbol by its std::string ABI (one
    side built with `-D_GLIBCXX_USE_CXX11_ABI=0`)."""


@dataclass(frozen=True, slots=True)
class RequiresVersion:
    """`object` requires version node `version`, which the `library` the loader found does not
    define."""

    object: str
    owner: str | None
    version: str
    library: str
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class NewestVersion:
    """The newest version of the missing version's family that the library defines
    (`Finding.newest`)."""

    newest: str


@dataclass(frozen=True, slots=True)
class NeedsLibrary:
    """`object` needs `library`, and the loader did not find it in the `places` it looked
    (`Finding.trace`)."""

    object: str
    owner: str | None
    library: str
    places: int
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class WrongElfClass:
    """A file of the missing library's name is on the search path, built for the other ELF
    class (32-bit against 64-bit)."""


@dataclass(frozen=True, slots=True)
class FilesFound:
    """Files with the missing library's name elsewhere on the machine (`Finding.candidates`)."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NoFileFound:
    """No file with the missing library's name on the machine."""


@dataclass(frozen=True, slots=True)
class IndexFix:
    """The wheels on the package index that ship the missing library, how to install them and
    what makes the loader look where they land: `text` is the paragraph
    `remote.wheelfiles.render_library_fix` writes from the index search, kept as text because
    it is that search's own rendering (the report prefixes it with where it comes from)."""

    text: str


@dataclass(frozen=True, slots=True)
class IndexMiss:
    """Why the package index offers no wheel that ships the missing library: `reason` is the
    index search's own words (`remote.wheelfiles.LibrarySearch.reason`)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The loader found `path` (owned by `path_owner`) and cannot read it as a shared object,
    for `reason` (the loader's attempt's words: "file too short"); when `object`, which needs
    it as `library`, is another file, the derivation starts from that one."""

    object: str
    owner: str | None
    library: str
    path: str
    path_owner: str | None
    reason: str
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class CutShort:
    """The file ends inside what the loader maps: touching a page past its end raises SIGBUS,
    which kills the process."""


@dataclass(frozen=True, slots=True)
class OldHeaders:
    """The module was built with NumPy 1.x headers, and NumPy 2 changed the C API's layout
    (`numpy.dtype` shrank from `old_size` to `new_size` bytes): it cannot run beside numpy
    `numpy`."""

    numpy: str
    old_size: int
    new_size: int


@dataclass(frozen=True, slots=True)
class OlderCApi:
    """The module was built for NumPy `feature` or newer (its NPY_TARGET_VERSION), and numpy
    `numpy` has an older C API."""

    feature: str
    numpy: str


NumpyReason = OldHeaders | OlderCApi  # the import contract a module breaks (`sim.numpyabi`)


@dataclass(frozen=True, slots=True)
class UsesNumpyApi:
    """`object` uses NumPy's C API and breaks its import contract beside the NumPy installed,
    for `reason` (`sim.numpyabi.NumpyBreak.reason`; None where it is not known)."""

    object: str
    owner: str | None
    reason: NumpyReason | None
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class PrintedFirst:
    """What NumPy prints before the import raises (its banner, a RuntimeError)."""

    text: str


@dataclass(frozen=True, slots=True)
class ImportRaises:
    """The exception the import raises, as Python prints it."""

    error: str


# --- the process (sim.process) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DuplicateSoname:
    """`old` is in the process under `soname`, and loading `module` maps `new` as well."""

    old: str
    soname: str
    module: str
    new: str


@dataclass(frozen=True, slots=True)
class BlockedBy:
    """`module` needs `sonames` from `distribution`, whose `blocker` does not load (its
    loader's `error`): the libraries it would have brought are missing."""

    module: str
    sonames: tuple[str, ...]
    distribution: str
    blocker: str
    error: str | None


@dataclass(frozen=True, slots=True)
class OwnLoadFails:
    """The package's own code loads `path` before `module` (which finds it by its name
    `library`), and that library does not load."""

    path: str
    module: str
    library: str | None


@dataclass(frozen=True, slots=True)
class DoesNotCompile:
    """`path` (owned by `owner`), the first module of `import name`, does not compile under
    Python `python`: the import raises `error` (Python's own words) before any native file of
    it is loaded."""

    path: str
    owner: str
    python: str
    name: str
    error: str | None


# --- why a file does not load, as the verdict rule sees it (sim.verdict's Cause) -------------


@dataclass(frozen=True, slots=True)
class DefinedByPrerequisite:
    """It needs `symbol`, which `prerequisite` (outside the stack) defines."""

    symbol: str
    prerequisite: str


@dataclass(frozen=True, slots=True)
class NotDefinedInForm:
    """It needs `symbol`, which the stack does not define in that form."""

    symbol: str | None


@dataclass(frozen=True, slots=True)
class HostLacksVersion:
    """It needs version node `version` of `library`, which the host lacks."""

    version: str | None
    library: str | None


@dataclass(frozen=True, slots=True)
class NumpyMismatch:
    """It needs `requirement` ("numpy<2"), and the stack has numpy `numpy`."""

    requirement: str | None
    numpy: str | None


@dataclass(frozen=True, slots=True)
class CannotBeLoaded:
    """The file cannot be loaded as it is."""


@dataclass(frozen=True, slots=True)
class OwnFileFails:
    """Its own `soname` (a file of its distribution) does not load."""

    soname: str


@dataclass(frozen=True, slots=True)
class NotWhereLoaderLooks:
    """The stack has `soname` (in `holders`), but not where the loader looks."""

    soname: str
    holders: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OtherRelease:
    """It needs `soname`; the stack has `others`, another release of it."""

    soname: str
    others: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OtherBuild:
    """It needs `soname`, which the stack's `build` lacks: another build of it."""

    soname: str
    build: str


@dataclass(frozen=True, slots=True)
class DependencyShouldProvide:
    """Its declared dependency `dependency` should provide `soname`."""

    dependency: str
    soname: str


@dataclass(frozen=True, slots=True)
class NothingProvides:
    """It needs `soname`, which nothing in the stack provides."""

    soname: str


@dataclass(frozen=True, slots=True)
class NeededPackageFails:
    """A package it needs does not load."""


Reason = (DefinedByPrerequisite | NotDefinedInForm | HostLacksVersion | NumpyMismatch
          | CannotBeLoaded | OwnFileFails | NotWhereLoaderLooks | OtherRelease | OtherBuild
          | DependencyShouldProvide | NothingProvides | NeededPackageFails)


# --- GPU code (sim.gpu) ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PtxImage:
    """PTX for a virtual architecture (`compute_90`) in a release of the PTX ISA (`8.7`)."""

    virtual: str
    isa: str


@dataclass(frozen=True, slots=True)
class SassRuns:
    """The fat binary's SASS for `arch` runs on a GPU of compute capability `gpu`."""

    arch: str
    gpu: str


@dataclass(frozen=True, slots=True)
class PtxCompiles:
    """The fat binary's `ptx` is JIT-compiled for a GPU of compute capability `gpu`."""

    ptx: PtxImage
    gpu: str


@dataclass(frozen=True, slots=True)
class NoImageFits:
    """A fat binary has no SASS for `gpu` among its `sass` and no PTX of its `ptx` that can be
    JIT-compiled for it; with `driver_cuda`, the PTX that fits is newer than a driver of that
    CUDA release reads."""

    gpu: str
    sass: tuple[str, ...]
    ptx: tuple[PtxImage, ...]
    driver_cuda: str | None = None


ImageChoice = SassRuns | PtxCompiles | NoImageFits  # why one fat binary runs on a GPU, or not


@dataclass(frozen=True, slots=True)
class NoKernelsHeld:
    """The object's fat binaries hold no kernels (registration code only)."""


@dataclass(frozen=True, slots=True)
class NoGpuCodeHeld:
    """The object carries no SASS and no PTX."""


@dataclass(frozen=True, slots=True)
class NoneRun:
    """No fat binary of the object has code for `gpu`: `first`'s reason, shared by `alike` of
    its `total` fat binaries; a launch fails with `error`."""

    gpu: str
    first: ImageChoice
    alike: int
    total: int
    error: str | None


@dataclass(frozen=True, slots=True)
class SomeRun:
    """`covered` of the object's `total` fat binaries have code for `gpu`, by SASS (or, with
    `jit`, some by PTX the driver compiles); the object holds SASS for `sass` and PTX for
    `ptx` (virtual architectures)."""

    gpu: str
    covered: int
    total: int
    jit: bool
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EmbeddedNoneRun:
    """None of the `count` fat binaries a library keeps in `sections` (and loads itself) has
    code for `gpu`; they hold SASS for `sass` and PTX for `ptx`; a launch fails with `error`."""

    gpu: str
    count: int
    sections: tuple[str, ...]
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    error: str | None


@dataclass(frozen=True, slots=True)
class EmbeddedSomeRun:
    """`covered` of the `count` fat binaries a library keeps in `sections` (and chooses from by
    the GPU) have code for `gpu`; they hold SASS for `sass` and PTX for `ptx`."""

    gpu: str
    covered: int
    count: int
    sections: tuple[str, ...]
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


# why an object's kernels run on a GPU, or not: the GPU check's verdict's derivation
CoverageReason = (NoKernelsHeld | NoGpuCodeHeld | NoneRun | SomeRun | EmbeddedNoneRun
                  | EmbeddedSomeRun)


@dataclass(frozen=True, slots=True)
class KernelsMiss:
    """No kernel of an object runs on the GPU: the GPU check's `reason` for its verdict
    (`sim.gpu.ObjectCoverage.reason`)."""

    reason: CoverageReason


@dataclass(frozen=True, slots=True)
class SomeKernelsMiss:
    """Some fat binaries of an object carry no code for the GPU: `reason` is why the first of
    them does not (`ObjectCoverage.uncovered_reason`), `error` what a launch of one fails
    with."""

    reason: ImageChoice | None
    error: str


@dataclass(frozen=True, slots=True)
class GpuCodeUnreadable:
    """The fat binaries of `name` could not be read."""

    name: str


# --- the CUDA stack (sim.cudaproblems) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DriverTooOld:
    """`users` use `soname`, of CUDA `major`, and the NVIDIA driver `driver` supports CUDA up
    to `supported` (as `source` tells)."""

    users: tuple[str, ...]
    soname: str
    major: int
    driver: str | None
    supported: str
    source: str


@dataclass(frozen=True, slots=True)
class ProvidedBy:
    """A CUDA runtime soname and what provides it."""

    soname: str
    providers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RuntimeMix:
    """`needer` was built against CUDA `majors` and needs `sonames`, while the environment's
    CUDA runtime is `stack_major` (`sources`); `missing` are the sonames nothing provides."""

    needer: str
    majors: tuple[int, ...]
    sonames: tuple[str, ...]
    stack_major: int
    sources: tuple[ProvidedBy, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ToolkitNotSearched:
    """`needers` need `soname`, which only `directory` holds, and the loader does not search
    it: listed in ld.so.conf but not in the cache (`in_ld_so_conf`), or named nowhere."""

    needers: tuple[str, ...]
    soname: str
    directory: str
    in_ld_so_conf: bool


# --- doctor (engines.doctor) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkippedEntry:
    """The import system skips an entry named like an extension module that is `what` ("a
    directory", from `host.natives`), so `import module` fails."""

    what: str
    module: str


@dataclass(frozen=True, slots=True)
class ImportDisagrees:
    """A real import showed something else than abifit predicted (`doctor --verify`)."""


@dataclass(frozen=True, slots=True)
class LoadDisagrees:
    """The real loader gave another outcome than abifit predicted (`doctor --verify`)."""


# --- a snapshot's machine (engines.snapshot) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class FoundThroughLdConf:
    """On the snapshot's machine `library` was found through the ld.so cache in `directory`,
    which `file` (at `line`; None: ld.so.conf itself) names; this host does not find it.
    It goes on the derivation's last line."""

    library: str
    directory: str
    file: str | None
    line: int | None


@dataclass(frozen=True, slots=True)
class FoundThroughLdLibraryPath:
    """On the snapshot's machine `library` was found through LD_LIBRARY_PATH, in `directory`.
    It goes on the derivation's last line."""

    library: str
    directory: str


Sentence = (NeedsSymbol | SymbolNote | DefinedAtOtherVersion | NearestLine | StringAbiDiffers
            | RequiresVersion | NewestVersion | NeedsLibrary | WrongElfClass | FilesFound
            | NoFileFound | IndexFix | IndexMiss | Unreadable | CutShort | UsesNumpyApi
            | PrintedFirst | ImportRaises | DuplicateSoname | BlockedBy | OwnLoadFails
            | DoesNotCompile | Reason
            | KernelsMiss | SomeKernelsMiss | GpuCodeUnreadable | DriverTooOld | RuntimeMix
            | ToolkitNotSearched | SkippedEntry | ImportDisagrees | LoadDisagrees
            | FoundThroughLdConf | FoundThroughLdLibraryPath)

Derivation = tuple[Sentence, ...]
