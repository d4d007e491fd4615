"""Findings: the problems abifit found in what it could read. Data, never raised.

An *error* (`abifit.errors`) means something could not be analysed; a finding means it could
be, and something in it would fail (or deserves a warning). Every finding has a kind from
`FindingKind`, the object it is about, the loader's message, a derivation (the facts of
"Because X needs S and Y does not define it, the import fails", as `sim.derivation` records:
the sentences are written from them in `report.derivation`) and, where one exists, a hint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from abifit.sim.derivation import NearestDefinition, Sentence


class FindingKind(str, Enum):
    """What kind of problem a finding is; the values are what reports print and JSON holds."""

    # the loader (abifit.sim.loader's ProblemKind, one to one)
    MISSING_LIBRARY = "missing-library"
    WRONG_ELF_CLASS = "wrong-elf-class"
    UNREADABLE_OBJECT = "unreadable-object"
    NOT_A_FILE = "not-a-file"  # named like an extension module; the import system skips it
    MISSING_VERSION = "missing-version"
    UNDEFINED_SYMBOL = "undefined-symbol"
    # above the loader: the module loads, and its import raises (abifit.sim.numpyabi)
    NUMPY_C_API = "numpy-c-api"
    # Python code: the first module of an import does not compile under the target Python
    PYTHON_SYNTAX = "python-syntax"
    # the process
    BLOCKED_BY = "blocked-by"  # fails only because a package it needs did not load
    DUPLICATE_SONAME = "duplicate-soname"
    MODEL_DISAGREEMENT = "model-disagreement"
    # GPU code against a GPU
    NO_KERNEL_IMAGE = "no-kernel-image"
    PARTIAL_KERNEL_IMAGE = "partial-kernel-image"
    UNREADABLE_GPU_CODE = "unreadable-gpu-code"
    # the CUDA stack of a host
    DRIVER_TOO_OLD = "driver-too-old"
    CUDA_MAJOR_MIX = "cuda-major-mix"
    TOOLKIT_NOT_SEARCHED = "toolkit-not-searched"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Severity(str, Enum):
    """How much a finding matters: an `error` breaks an import; a `warning` or `info` is about
    something optional (a guarded backend, code loaded only on use) and fails nothing."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Effect(str, Enum):
    """What a file that does not load costs the user (`abifit.sim.verdict` decides it):

    - `fails`: an import the user runs raises;
    - `degrades`: every import works, but a part the package ships is lost because of the
      stack or the host (an ABI break, a library the stack has in another major, a library a
      declared dependency should provide, a glibc too old);
    - `prerequisite`: it loads once something outside the stack, which no metadata requires,
      is present (FFmpeg, TBB, an MPI library, the NVIDIA driver);
    - `unused`: a variant the package does not pick, because another one of its set loads
      (or the one the target selects does)."""

    FAILS = "fails"
    DEGRADES = "degrades"
    PREREQUISITE = "prerequisite"
    UNUSED = "unused"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Verdict(str, Enum):
    """The verdict on a stack: `fits` (exit 0, prerequisites listed), `degraded` (exit 1: every
    import works, a part is lost), `fails` (exit 1: an import raises)."""

    FITS = "fits"
    DEGRADED = "degraded"
    FAILS = "fails"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True, slots=True)
class SearchStep:
    """One path the loader's search for a library tried (`sim.loader.Attempt`): how it came to
    it (`via`: rpath, runpath, LD_LIBRARY_PATH, ld.so.cache, ...; `owner`: the object whose
    RPATH or RUNPATH named it), and what it found there."""

    path: str
    via: str
    owner: str | None
    outcome: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found: data, never raised. Besides the `message` (the loader's words) and
    the `derivation` (why it fails, as records of facts: `report.derivation.explanation` writes
    it for people), what a program needs is here as fields: the symbol and its demangled text,
    the library and version, the newest version of that family the library defines, the paths
    searched and the nearest definitions as records."""

    kind: FindingKind
    object: str
    message: str
    derivation: tuple[Sentence, ...]
    module: str | None = None
    symbol: str | None = None
    library: str | None = None
    version: str | None = None
    hint: str | None = None
    trace: tuple[SearchStep, ...] = ()  # the paths a library's search tried, in order
    candidates: tuple[str, ...] = ()
    nearest: tuple[NearestDefinition, ...] = field(default=())
    import_name: str | None = None  # the import it breaks or concerns (`torchvision`)
    severity: Severity = Severity.ERROR
    reachability: str | None = None  # how that import reaches the object (sim.imports)
    # an undefined symbol found past these missing libraries: it fails the load once they are
    # found (the loader names only the first missing library)
    behind: tuple[str, ...] = ()
    # what the failure of the object costs, for findings about a file that does not load
    effect: Effect | None = None
    prerequisite: str | None = None  # with effect `prerequisite`: what to install (`FFmpeg`)
    demangled: str | None = None  # the symbol's demangled text, where it is a C++ name
    # a missing version: the newest version of its family the library defines (GLIBCXX_3.4.30)
    newest: str | None = None

    @property
    def breaks(self) -> bool:
        """Whether it makes something fail (an optional finding does not)."""
        return self.severity is Severity.ERROR
