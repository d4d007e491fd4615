"""`abifit explain`: from a pasted error message to what is wrong and the fix.

The text is read for the messages abifit recognises (`abifit.formats.errortext`). For each, the
object it names is found in the environment (by its path, else by its file name among the
distributions' files), the distribution that owns it is simulated as `abifit doctor PKG` does,
and the explanation gathers doctor's findings about that object (the loader's error, the
symbol or library, its providers, the fix) with the demangled name. GPU and CUDA messages are
checked as `doctor --gpu` and `abifit cuda` check them.

Which releases of a package define a symbol comes through `SymbolHistory`: the command line
plugs `abifit history` in (the releases up to the one installed, or the one `--with` names,
read into the symbol store); without it, an undefined symbol of a package abifit knows by its
C++ namespace points at `abifit history`.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.engines import explanation as says
from abifit.engines.explanation import Note, Summary
from abifit.errors import UsageError
from abifit.formats.errortext import (
    BusError,
    Clue,
    CouldNotLoad,
    CudaMajorMismatch,
    DamagedObject,
    DriverTooOld,
    MissingLibrary,
    MissingOperator,
    MissingVersion,
    NoKernelImage,
    NumpyContract,
    UndefinedSymbol,
    UnsupportedArch,
    clue_kind,
)
from abifit.host.environment import Distribution, list_distributions, query_interpreter
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.gpu import GpuCheck
from abifit.sim.gputarget import GpuTarget, parse_gpu_option
from abifit.sim.imports import load_loading_rules
from abifit.sim.loader import crashes
from abifit.sim.process import ModuleStatus, Progress, load_soname_packages

if TYPE_CHECKING:
    from abifit.engines.cuda import CudaReport
    from abifit.engines.doctor import DoctorReport
    from abifit.engines.history import Fit, HistoryReport

# The package whose C++ namespace a symbol's owner is: a symbol of these namespaces that an
# object needs and nothing defines comes from another release of that package.
NAMESPACE_PACKAGES = {"c10": "torch", "at": "torch", "torch": "torch", "caffe2": "torch"}

# (symbol, package, the version in the environment or standing in for it) -> the history of
# the symbol in the package's releases; None when it could not be had. `abifit history`
# plugs in here.
SymbolHistory = Callable[[str, str, str | None], "HistoryReport | None"]

# (extension project, package, its version, which symbols are the package's) -> the newest
# releases of the extension, each with the package's symbols it needs that the version does
# not define; None when they could not be had. `abifit history`'s `fitting_releases`.
ExtensionFits = Callable[[str, str, str, Callable[[str], bool]], "tuple[Fit, ...] | None"]


def history_pointer(symbol: str, package: str) -> str:
    """The answer of `SymbolHistory` until `abifit history` is plugged in: where to ask."""
    return (f"defined by {package}; the release that defines it is found by "
            f"`abifit history {symbol} --in {package}`")


class Verdict(str, Enum):
    """What the environment says of a clue."""

    CONFIRMED = "confirmed"  # the simulation (or the GPU/CUDA check) shows the problem here
    FAILS_OTHERWISE = "fails-otherwise"  # the object fails here, for another reason
    LOADS_HERE = "loads-here"  # the object is here and loads: the error came from elsewhere
    NOT_IN_ENVIRONMENT = "not-in-environment"  # the object named is not in this environment
    NOT_NEEDED = "not-needed"  # no object of this environment needs the library named
    EXPLAINED = "explained"  # nothing here to check it against: the message alone explains it

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True, slots=True)
class Explanation:
    """One recognised message: what it means, what the environment says of it, the fix. The
    summary and the notes are records (`engines.explanation`), written by `report.explain`."""

    clue: Clue
    verdict: Verdict
    summary: Summary  # what the message says
    demangled: str | None = None  # the symbol's C++ (or Rust) name
    signature: str | None = None  # for a C++ function: its name and parameter types
    object: str | None = None  # the object named, as found in the environment
    located_by: str | None = None  # "path" or "file name"
    distribution: str | None = None  # "name version" of the distribution that owns it
    status: ModuleStatus | None = None  # the simulation of the module, when it is one
    findings: tuple[Finding, ...] = ()  # doctor's findings about it
    provider: str | None = None  # who should provide the symbol or library
    fix: str | None = None
    notes: tuple[Note, ...] = ()

    @property
    def kind(self) -> str:
        return clue_kind(self.clue)


@dataclass(frozen=True, slots=True)
class ExplainReport:
    """Everything `abifit explain` found in the text and the environment."""

    python: str
    python_version: str
    explanations: tuple[Explanation, ...]

    @property
    def problems(self) -> bool:
        return any(e.verdict in (Verdict.CONFIRMED, Verdict.FAILS_OTHERWISE)
                   for e in self.explanations)


@dataclass(frozen=True, slots=True)
class Located:
    """An object named in a message, in the environment."""

    path: str
    how: str  # "path" or "file name"
    distribution: Distribution | None


class TargetEnvironment:
    """The environment of `python` as explain asks it: its distributions, where an object is,
    and doctor's reports, each made once."""

    def __init__(self, python: str, *, environ: Mapping[str, str], cache_dir: Path | None,
                 progress: Progress, history: SymbolHistory | None,
                 standing_in: Mapping[str, str] | None = None,
                 fits: ExtensionFits | None = None) -> None:
        self.facts = query_interpreter(python)
        self.dists = list_distributions(self.facts)
        self.environ = environ
        self.cache_dir = cache_dir
        self.progress = progress
        self.history = history
        self.standing_in = dict(standing_in or {})  # canonical name -> version (--with)
        self.fits = fits
        self._doctors: dict[tuple[tuple[str, ...], tuple[GpuTarget, ...] | None],
                            DoctorReport | None] = {}
        self._cuda: CudaReport | None = None

    @functools.cached_property
    def _owners(self) -> dict[str, Distribution]:
        return {os.path.realpath(f): d for d in self.dists for f in d.files}

    def dist(self, name: str) -> Distribution | None:
        from packaging.utils import canonicalize_name

        return next((d for d in self.dists if d.key == canonicalize_name(name)), None)

    def version_of(self, name: str) -> tuple[str | None, Note]:
        """The version of `name` that explanations are about, and how it is known: the one
        `--with` stands in with, else the installed one."""
        from packaging.utils import canonicalize_name

        given = self.standing_in.get(canonicalize_name(name))
        if given is not None:
            return given, says.StandsIn(name, given)
        installed = self.dist(name)
        if installed is not None:
            return installed.version, says.Installed(name, installed.version)
        return None, says.NotInstalled(name)

    def locate(self, named: str) -> Located | None:
        """The object `named` (a path or a file name) in the environment: the file at that
        path, else the distributions' file of that name whose directories match the most of
        the path's (`/x/sgl_kernel/common_ops.so` is sgl_kernel's, not another package's)."""
        if "/" in named and os.path.isfile(named):
            return Located(named, "path", self._owners.get(os.path.realpath(named)))
        parts = named.split("/")
        best: tuple[int, str, Distribution] | None = None
        for d in self.dists:
            for f in d.files:
                if os.path.basename(f) != parts[-1] or not os.path.isfile(f):
                    continue
                shared = _common_tail(f.split("/"), parts)
                if best is None or shared > best[0]:
                    best = (shared, f, d)
        return Located(best[1], "file name", best[2]) if best else None

    def needing(self, soname: str) -> tuple[str, ...]:
        """The ELF files of the distributions that name `soname` in DT_NEEDED (their heads
        read, nothing else), in path order."""
        from abifit.host.localfs import LocalObjects, is_elf_file
        from abifit.host.natives import heads_or_none

        head = heads_or_none(LocalObjects())
        paths = sorted({f for d in self.dists for f in d.files if ".so" in os.path.basename(f)})
        return tuple(p for p in paths if is_elf_file(p)
                     and (image := head(p)) is not None and soname in image.needed)

    def locate_glob(self, pattern: str) -> Located | None:
        """The file of a distribution whose path below site-packages matches `pattern`."""
        for d in self.dists:
            site = str(d.metadata_dir.parent) + "/"
            for f in d.files:
                if f.startswith(site) and fnmatch.fnmatchcase(f[len(site):], pattern):
                    return Located(f, "file name", d)
        return None

    def doctor(self, packages: tuple[str, ...],
               gpus: tuple[GpuTarget, ...] | None = ()) -> DoctorReport | None:
        """`abifit doctor PACKAGES` of the environment (every module when empty); None when
        those distributions have no native modules."""
        from abifit.engines.doctor import doctor

        key = (packages, gpus)
        if key not in self._doctors:
            try:
                self._doctors[key] = doctor(
                    self.facts.executable, list(packages), verify=False, cache_dir=self.cache_dir,
                    environ=self.environ, progress=self.progress, gpus=gpus)
            except UsageError:  # no native modules in them
                self._doctors[key] = None
        return self._doctors[key]

    def cuda(self) -> CudaReport:
        from abifit.engines.cuda import cuda_report

        if self._cuda is None:
            self._cuda = cuda_report(self.facts.executable, environ=self.environ,
                                     cache_dir=self.cache_dir, progress=self.progress, gpus=())
        return self._cuda


def _common_tail(left: list[str], right: list[str]) -> int:
    """How many path components two paths share at their ends."""
    count = 0
    for a, b in zip(reversed(left), reversed(right), strict=False):
        if a != b:
            break
        count += 1
    return count


def explain(clues: tuple[Clue, ...], python: str, *, environ: Mapping[str, str],
            cache_dir: Path | None, progress: Progress,
            history: SymbolHistory | None = None,
            standing_in: Mapping[str, str] | None = None,
            fits: ExtensionFits | None = None) -> ExplainReport:
    """Explain each clue against the environment of `python`; `history` says which releases
    of a package define a symbol (default: a pointer to `abifit history`); `standing_in` gives
    the versions (canonical name -> version) that stand in for the installed ones; `fits`
    says which releases of the extension need only what the package's version defines."""
    env = TargetEnvironment(python, environ=environ, cache_dir=cache_dir, progress=progress,
                            history=history, standing_in=standing_in, fits=fits)
    return ExplainReport(env.facts.executable, env.facts.version,
                         tuple(explain_clue(clue, env) for clue in clues))


def explain_clue(clue: Clue, env: TargetEnvironment) -> Explanation:
    """The explanation of one clue."""
    if isinstance(clue, UndefinedSymbol):
        return _undefined_symbol(clue, env)
    if isinstance(clue, MissingLibrary):
        return _missing_library(clue, env)
    if isinstance(clue, MissingVersion):
        return _missing_version(clue, env)
    if isinstance(clue, (MissingOperator, CouldNotLoad)):
        return _masked(clue, env)
    if isinstance(clue, (NoKernelImage, UnsupportedArch)):
        return _gpu(clue, env)
    if isinstance(clue, DriverTooOld):
        return _driver(clue, env)
    if isinstance(clue, DamagedObject):
        return _damaged(clue, env)
    if isinstance(clue, BusError):
        return _bus_error(clue, env)
    if isinstance(clue, NumpyContract):
        return _numpy(clue, env)
    return _cuda_majors(clue, env)


# ---------------------------------------------------------------------------------------------
# The loader's messages


@dataclass(frozen=True, slots=True)
class Simulated:
    """What doctor says of an object: where it is, its status, the findings about it."""

    located: Located | None
    status: ModuleStatus | None
    findings: tuple[Finding, ...]
    searched: bool = False  # the whole environment was simulated for a message naming no object

    @property
    def verdict(self) -> Verdict:
        if self.located is None:
            return Verdict.LOADS_HERE if self.searched else Verdict.NOT_IN_ENVIRONMENT
        if any(f.breaks for f in self.findings):
            return Verdict.CONFIRMED
        if self.status is not None and not self.status.loads:
            return Verdict.FAILS_OTHERWISE
        return Verdict.LOADS_HERE

    def explanation(self, clue: Clue, summary: Summary, *, demangled: str | None = None,
                    signature: str | None = None, provider: str | None = None,
                    fix: str | None = None, notes: tuple[Note, ...] = ()) -> Explanation:
        """The explanation of `clue` with what the simulation found."""
        where = self.located
        dist = where.distribution if where else None
        return Explanation(clue, self.verdict, summary, demangled, signature,
                           where.path if where else None, where.how if where else None,
                           f"{dist.name} {dist.version}" if dist else None, self.status,
                           self.findings, provider, fix, notes)


def _same(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def simulate(located: Located | None, env: TargetEnvironment,
             relevant: Callable[[Finding], bool]) -> Simulated:
    """Doctor's verdict on the located object: the distribution that owns it simulated, its
    module status, and the `relevant` findings about it (about the object, or the module)."""
    if located is None:
        return Simulated(None, None, ())
    report = env.doctor((located.distribution.key,) if located.distribution else ())
    if report is None:
        return Simulated(located, None, ())
    status = next((s for s in report.modules if _same(s.path, located.path)), None)
    findings = tuple(f for f in report.findings
                     if relevant(f) and (_same(f.object, located.path)
                                         or (status is not None and f.module == status.module)))
    return Simulated(located, status, findings)


def _search_all(env: TargetEnvironment, relevant: Callable[[Finding], bool]) -> Simulated:
    """For a message that names no object: the first object of the whole environment with a
    `relevant` finding, as doctor finds it."""
    report = env.doctor(())
    found = [f for f in report.findings if relevant(f)] if report else []
    if not found or report is None:
        return Simulated(None, None, (), searched=True)
    first = found[0]
    located = env.locate(first.object)
    status = next((s for s in report.modules if _same(s.path, first.object)
                   or s.module == first.module), None)
    return Simulated(located, status, tuple(f for f in found if f.object == first.object))


def _symbol_names(symbol: str) -> tuple[str | None, str | None, str | None]:
    """(demangled name, function signature, owner namespace) of a symbol; Nones for a C name."""
    from abifit.formats.demangle import demangle, parse_signature

    text = demangle(symbol)
    if text == symbol:
        return None, None, None
    sig = parse_signature(symbol)
    signature = None
    name = text
    if sig is not None:
        name = sig.qualified_name
        if sig.is_function and sig.parameters is not None:
            signature = f"{sig.qualified_name}({', '.join(sig.parameters)})"
    top = re.match(r"(\w+)::", name)
    return text, signature, top[1] if top else None


def _undefined_symbol(clue: UndefinedSymbol, env: TargetEnvironment) -> Explanation:
    demangled, signature, namespace = _symbol_names(clue.symbol)

    def relevant(f: Finding) -> bool:
        return f.kind is FindingKind.UNDEFINED_SYMBOL and f.symbol == clue.symbol

    sim = (simulate(env.locate(clue.obj), env, relevant) if clue.obj
           else _search_all(env, relevant))
    package = NAMESPACE_PACKAGES.get(namespace or "")
    notes: list[Note] = []
    provider = None
    releases: ReleasesSay | None = None
    version: str | None = None
    if package is not None:
        version, how = env.version_of(package)
        notes.append(how)
        found = env.history(clue.symbol, package, version) if env.history else None
        if found is not None:
            releases = releases_say(found, clue.symbol)
            notes += releases.notes
        provider = releases.provider if releases else history_pointer(clue.symbol, package)
    hint = next((f.hint for f in sim.findings if f.hint), None)
    fix = hint
    if fix is None and package is not None:
        dist = sim.located.distribution if sim.located else None
        obj = dist.name if dist else "the extension"
        against = f"{package}" + (f" {version}" if version else "")
        if releases is not None and releases.newest is not None:
            fix = (f"`pip install {package}=={releases.newest}` (the newest release examined "
                   f"that defines it), or rebuild {obj} against {against}")
        else:
            fix = (f"install the {package} release that defines it, or rebuild {obj} against "
                   f"{against}")
        extension = _extension_project(clue.obj, dist)
        if version is not None and extension is not None and env.fits is not None:
            fitting = env.fits(extension, package, version, _owned_by(package))
            if fitting:
                good = [f.release for f in fitting if f.fits]
                notes.append(_fits_note(extension, package, version, fitting, good))
                if good:
                    fix += (f", or `pip install {extension}=={good[0]}` (the newest {extension} "
                            f"release that needs only symbols {against} defines)")
    return sim.explanation(
        clue, says.SymbolNeeded(clue.symbol, clue.obj), demangled=demangled,
        signature=signature, provider=provider, fix=fix, notes=tuple(notes))


def _extension_project(obj: str | None, dist: Distribution | None) -> str | None:
    """The project an object belongs to: its distribution's, else the package directory the
    path names under site-packages (`.../site-packages/sgl_kernel/x.so` -> sgl-kernel)."""
    from packaging.utils import canonicalize_name

    if dist is not None:
        return dist.name
    parts = (obj or "").split("/")
    for i, part in enumerate(parts[:-2]):
        if part in ("site-packages", "dist-packages") and parts[i + 1].isidentifier():
            return canonicalize_name(parts[i + 1])
    return None


def _owned_by(package: str) -> Callable[[str], bool]:
    """Whether a symbol is of `package`'s C++ namespaces (`NAMESPACE_PACKAGES`)."""
    def owns(symbol: str) -> bool:
        return NAMESPACE_PACKAGES.get(_symbol_names(symbol)[2] or "") == package

    return owns


def _fits_note(extension: str, package: str, version: str | None, fitting: tuple[Fit, ...],
               good: list[str]) -> Note:
    """Which of the newest releases of the extension need only symbols `package` `version`
    defines, or what the newest needs that it lacks."""
    from abifit.formats.demangle import demangle

    if good:
        return says.ReleasesFit(extension, package, version, len(fitting), tuple(good))
    last = fitting[0]
    return says.NoReleaseFits(extension, package, version, len(fitting), last.release,
                              len(last.missing), tuple(demangle(m) for m in last.missing[:3]))


@dataclass(frozen=True, slots=True)
class ReleasesSay:
    """What a symbol's history says for an explanation: who provides it, the newest release
    examined that defines it, and notes on where its signature changed."""

    provider: str
    newest: str | None
    notes: tuple[Note, ...]


def releases_say(found: HistoryReport, symbol: str) -> ReleasesSay:
    """The provider line, the release to install and the notes that `found` (the history of
    `symbol` in its package) gives."""
    from abifit.engines.history import ranges, span
    from abifit.formats.demangle import compare_signatures, demangle

    package, examined = found.package, found.releases
    form = next((f for f in found.forms if f.name == symbol), None)
    notes: list[Note] = [says.ReleaseChanged(package, c.release, c.description, demangle(c.new))
                         for c in found.changes if c.old == symbol and c.new]
    if form is not None:
        provider = (f"{package} {ranges(form.releases, examined)} define it (of "
                    f"{span(examined)})")
        return ReleasesSay(provider, form.releases[-1], tuple(notes))
    provider = f"no release of {package} examined defines it ({span(examined)})"
    other = found.forms[-1] if found.forms else None
    if other is not None:  # another form of the function: built against other releases
        provider += (f"; {package} {ranges(other.releases, examined)} define "
                     f"{other.demangled} instead")
        diff = compare_signatures(symbol, other.name)
        if diff is not None:
            notes.append(says.AgainstFormNeeded(diff.describe()))
        notes.append(says.BuiltAgainstOtherReleases(package))
    return ReleasesSay(provider, None, tuple(notes))


def _missing_library(clue: MissingLibrary, env: TargetEnvironment) -> Explanation:
    library = os.path.basename(clue.library)

    def relevant(f: Finding) -> bool:
        return f.kind is FindingKind.MISSING_LIBRARY and f.library == library

    sim = (simulate(env.locate(clue.obj), env, relevant) if clue.obj
           else _search_all(env, relevant))
    package = load_soname_packages().get(library)
    if sim.located is None and sim.searched:  # nothing here fails on it: who needs it?
        return _needed_by(clue, library, env.needing(library), package)
    provider = f"the pip package {package}" if package else None
    hint = next((f.hint for f in sim.findings if f.hint), None)
    fix = hint or (f"`pip install {package}`" if package else None)
    notes: tuple[Note, ...] = ()
    if sim.located is None and "/" in clue.library:
        notes = (says.AskedFileMissing(clue.library),)
    return sim.explanation(clue, says.LibraryNotFound(library, clue.obj), provider=provider,
                           fix=fix, notes=notes)


def _needed_by(clue: MissingLibrary, library: str, needers: tuple[str, ...],
               package: str | None) -> Explanation:
    """A message naming only a soname that no object of the environment fails on: the objects
    that need it (they find it here), or that none does."""
    fix = f"`pip install {package}`" if package else None
    provider = f"the pip package {package}" if package else None
    if not needers:
        return Explanation(clue, Verdict.NOT_NEEDED, says.LibraryNeededNowhere(library),
                           provider=provider, fix=fix, notes=(says.FromElsewhere(),))
    return Explanation(clue, Verdict.LOADS_HERE, says.LibraryFoundHere(library),
                       provider=provider, fix=fix, notes=(says.NeededHereBy(needers),))


def _unreadable(f: Finding) -> bool:
    return f.kind is FindingKind.UNREADABLE_OBJECT


def _damaged(clue: DamagedObject, env: TargetEnvironment) -> Explanation:
    sim = simulate(env.locate(clue.obj), env, _unreadable)
    fix = next((f.hint for f in sim.findings if f.hint), None)
    return sim.explanation(clue, says.LoaderRefuses(clue.obj, clue.said), fix=fix,
                           notes=(says.DamagedFile(),))


def _bus_error(clue: BusError, env: TargetEnvironment) -> Explanation:
    """A process SIGBUS killed: while importing, the loader touching a page past the end of a
    library cut short; the first such library of the environment, as doctor finds it."""
    sim = _search_all(env, lambda f: _unreadable(f) and crashes(f.message))
    fix = next((f.hint for f in sim.findings if f.hint), None)
    summary = says.DiedOfSigbus(sim.located.path if sim.located else None)
    return sim.explanation(clue, summary, fix=fix, notes=(says.CutShortKills(),))


def _numpy(clue: NumpyContract, env: TargetEnvironment) -> Explanation:
    """An import broke NumPy's C-API contract: the message names no file; the modules of the
    environment that break it beside its NumPy, as doctor finds them, the first named."""
    said = clue.said.split(" (")[0].split(", may")[0]  # "numpy.dtype size changed", ...

    def same_error(f: Finding) -> bool:
        return f.kind is FindingKind.NUMPY_C_API and said in f.message

    sim = _search_all(env, same_error)  # the modules that raise this very error first
    if sim.located is None:
        sim = _search_all(env, lambda f: f.kind is FindingKind.NUMPY_C_API)
    report = env.doctor(()) if sim.located else None
    modules = list(dict.fromkeys(f.module or f.object for f in (report.findings if report else ())
                                 if f.kind is FindingKind.NUMPY_C_API))
    numpy = env.dist("numpy")
    summary = says.NumpyApiMismatch(numpy.version if numpy else None, tuple(modules))
    fix = next((f.hint for f in sim.findings if f.hint), None)
    return sim.explanation(clue, summary, fix=fix, notes=(says.NumpyApiAtImport(),))


_VERSION_OWNERS = (("GLIBCXX_", "libstdc++ (GCC's C++ runtime)"),
                   ("CXXABI_", "libstdc++ (GCC's C++ runtime)"),
                   ("GLIBC_", "glibc, the system's C library"),
                   ("GCC_", "libgcc_s (GCC's runtime)"))


def _missing_version(clue: MissingVersion, env: TargetEnvironment) -> Explanation:
    def relevant(f: Finding) -> bool:
        return f.kind is FindingKind.MISSING_VERSION and f.version == clue.version

    sim = (simulate(env.locate(clue.obj), env, relevant) if clue.obj
           else _search_all(env, relevant))
    provider = next((owner for prefix, owner in _VERSION_OWNERS
                     if clue.version.startswith(prefix)), None)
    if provider is None and clue.library:
        provider = f"a newer {os.path.basename(clue.library)}"
    fix = next((f.hint for f in sim.findings if f.hint), None)
    if fix is None and clue.version.startswith(("GLIBCXX_", "CXXABI_")):
        fix = ("use a libstdc++.so.6 that defines it: `conda install -c conda-forge "
               "'libstdcxx-ng>=13'` in a conda environment, or a newer GCC's on the system")
    elif fix is None and clue.version.startswith("GLIBC_"):
        fix = "use a wheel built for this system's glibc (an older manylinux tag), or a newer OS"
    return sim.explanation(clue, says.VersionNotFound(clue.version, clue.library, clue.obj),
                           provider=provider, fix=fix)


def _masked_file(clue: MissingOperator) -> str | None:
    """The file whose failed load a package rewrites into this operator's error
    (`data/import_rules.json`)."""
    said = f"operator {clue.namespace}::{clue.name} does not exist"
    for rule in load_loading_rules().values():
        for pattern, error in (*rule.fails_import, *rule.loads):
            if error and said in error:
                return pattern
    return None


def _masked(clue: MissingOperator | CouldNotLoad, env: TargetEnvironment) -> Explanation:
    summary: Summary
    hidden: Note
    if isinstance(clue, CouldNotLoad):
        located = env.locate(clue.path)
        summary, hidden = says.LoadLibraryFailed(clue.path), says.LoadLibraryHides()
    else:
        pattern = _masked_file(clue)
        located = env.locate_glob(pattern) if pattern else None
        summary = says.OperatorNotRegistered(clue.namespace, clue.name)
        hidden = (says.RegisteredFrom(clue.namespace, pattern) if pattern
                  else says.RegisteringLibraryFailed(clue.namespace))
    sim = simulate(located, env, lambda f: True)
    cause = sim.status.error if sim.status and not sim.status.loads else None
    notes = [hidden] + ([says.LoaderErrorUnderneath(cause)] if cause else [])
    fix = next((f.hint for f in sim.findings if f.hint), None)
    return sim.explanation(clue, summary, notes=tuple(notes), fix=fix)


# ---------------------------------------------------------------------------------------------
# GPU and CUDA messages


def _gpu_fields(checks: tuple[GpuCheck, ...], reason: str | None) -> tuple[list[Note], bool]:
    """Notes on what the GPU check found in torch's code, and whether it found no kernel."""
    notes: list[Note] = []
    broken = False
    for check in checks:
        for o in check.objects:
            if o.coverage is not None and not o.coverage.verdict.startswith("runs"):
                broken = broken or o.coverage.verdict == "no-kernel-image"
                notes.append(says.CoverageFound(o.name, o.coverage.verdict, o.coverage.reason))
        if not check.objects:
            notes.append(says.NoGpuCode(check.target.arch))
    if reason:
        notes.append(says.NoGpuChecked(reason))
    return notes, broken


def _gpu(clue: NoKernelImage | UnsupportedArch, env: TargetEnvironment) -> Explanation:
    torch = env.dist("torch")
    packages = ("torch",) if torch is not None else ()
    notes: list[Note] = []
    summary: Summary
    if isinstance(clue, UnsupportedArch):
        targets: tuple[GpuTarget, ...] | None = (parse_gpu_option(clue.arch),)
        summary = says.ArchNotCovered(clue.arch)
        if clue.supported:
            notes.append(says.KernelsCover(clue.supported))
        fix = (f"install a torch build whose CUDA release compiles for {clue.arch} (for a "
               "Blackwell GPU, CUDA 12.8 or newer: `pip install torch --index-url "
               "https://download.pytorch.org/whl/cu128`)" if clue.arch.startswith("sm_12")
               or clue.arch.startswith("sm_10") else
               f"install a torch build with kernels for {clue.arch} (see "
               "https://pytorch.org/get-started/locally/)")
    else:
        targets = None  # this machine's GPUs
        summary = says.NoKernelForGpu()
        fix = ("install builds of the packages with GPU code that carry SASS or PTX for this "
               "GPU (`abifit doctor` names them)")
    report = env.doctor(packages, gpus=targets)
    checks = report.gpu if report else ()
    found, broken = _gpu_fields(checks, report.gpu_reason if report else None)
    notes += found
    findings = tuple(f for f in (report.findings if report else ())
                     if f.kind is FindingKind.NO_KERNEL_IMAGE)
    fix = next((f.hint for f in findings if f.hint), fix)
    verdict = Verdict.CONFIRMED if broken or findings else Verdict.EXPLAINED
    return Explanation(clue, verdict, summary, findings=findings, fix=fix,
                       distribution=f"torch {torch.version}" if torch else None,
                       notes=tuple(notes))


def _driver(clue: DriverTooOld, env: TargetEnvironment) -> Explanation:
    report = env.cuda()
    findings = tuple(f for f in report.findings if f.kind is FindingKind.DRIVER_TOO_OLD)
    driver = report.stack.driver
    supports = str(driver.cuda_version) if driver.cuda_version else None
    notes: tuple[Note, ...] = (says.DriverFound(driver.version, driver.reason, supports),)
    fix = next((f.hint for f in findings if f.hint),
               "upgrade the NVIDIA driver, or install builds made for the CUDA release the "
               "driver supports (`abifit cuda` shows both)")
    return Explanation(clue, Verdict.CONFIRMED if findings else Verdict.EXPLAINED,
                       says.DriverBehindRuntime(), findings=findings,
                       provider="the NVIDIA driver (not a pip package)", fix=fix, notes=notes)


def _cuda_majors(clue: CudaMajorMismatch, env: TargetEnvironment) -> Explanation:
    torch = env.dist("torch")
    major, _, minor = clue.torch_cuda.partition(".")
    index = f"https://download.pytorch.org/whl/cu{major}{minor.split('.')[0] or '0'}"
    pin = f"torch=={torch.version.split('+')[0]} " if torch else ""
    report = env.cuda()
    findings = tuple(f for f in report.findings if f.kind is FindingKind.CUDA_MAJOR_MIX)
    vision = env.dist("torchvision")
    installed = says.InstalledReleases(tuple(f"{d.name} {d.version}" for d in (torch, vision)
                                             if d))
    return Explanation(
        clue, Verdict.CONFIRMED if findings else Verdict.EXPLAINED,
        says.CudaBuildsDiffer(clue.vision_cuda, clue.torch_cuda),
        findings=findings, provider=f"a torchvision build for CUDA {clue.torch_cuda}",
        fix=f"`pip install --force-reinstall {pin}torchvision --index-url {index}`",
        notes=(installed,))
