"""One extension wheel against one host wheel: the pairwise verdict that `matrix` (and `resolve`)
ask for, as a `Cell`.

A pair is a `check` of the extension's wheel with the host's wheel, so its result is the one
`check` keeps in the cache under a digest of every input (`commands.check._result_key`): a pair
asked again, in this run or a later one, costs neither a fetch nor a simulation. A failing cell
carries what a person needs to read the failure: the modules that fail, the libraries missing,
and each undefined symbol demangled with, where the process defines another form of the same
function (in practice the host release: the diagnosis searches the failing object's lookup
scope, the views read for the check), the parameter that changed
(`formats.demangle.compare_signatures`, through `Finding.nearest`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from abifit.engines.check import SITE, check
from abifit.errors import AbifitError
from abifit.formats.demangle import demangle
from abifit.host.profile import HostProfile
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.verdict import costs

if TYPE_CHECKING:
    from abifit.engines.check import CheckReport
    from abifit.remote.packageindex import IndexFile, Target
    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gputarget import GpuTarget

SYMBOL_KINDS = (FindingKind.UNDEFINED_SYMBOL, FindingKind.MISSING_VERSION)
# told apart in a cell already (a module blocked by another is not a cause of its own)
_TOLD = (*SYMBOL_KINDS, FindingKind.MISSING_LIBRARY, FindingKind.BLOCKED_BY)


@dataclass(frozen=True, slots=True)
class OtherForm:
    """Another form of a missing function that the process defines, and how it differs."""

    symbol: str  # mangled
    demangled: str
    change: str  # "parameter 4: `int` → `unsigned int`"
    where: str = ""  # the file that defines it, under site-packages ("torch/lib/libc10.so")
    owner: str = ""  # the project that file belongs to ("torch"), "" when none


@dataclass(frozen=True, slots=True)
class MissingSymbol:
    """A symbol that the failing modules need and no object in their lookup scope defines."""

    symbol: str  # mangled
    demangled: str
    version: str | None  # the version node needed (a missing-version finding), else None
    modules: tuple[str, ...]  # the modules that need it
    instead: tuple[OtherForm, ...]  # other forms of the same function defined, closest first


@dataclass(frozen=True, slots=True)
class Cell:
    """The answer for one host wheel (and, in a grid, one extension release)."""

    version: str  # the host release's public version
    variant: str  # the local label ("cu128"), or "" for none
    filename: str  # the host wheel
    fits: bool
    failing_modules: int
    symbols: tuple[str, ...]  # failing symbols, demangled, in order found
    sonames: tuple[str, ...]  # missing libraries
    notes: tuple[str, ...]
    error: str | None = None
    release: str = ""  # the extension's release in this cell's row; "" when given as is
    extension_filename: str = ""
    modules: tuple[str, ...] = ()  # the extension modules that fail
    missing: tuple[MissingSymbol, ...] = ()  # the failing symbols, with other forms
    problems: tuple[str, ...] = ()  # other problems that break a load (GPU code, ELF class)
    degraded: bool = False  # every import works, a part of the extension is lost

    @property
    def first(self) -> str | None:
        return (self.symbols or self.sonames or (None,))[0]

    @property
    def label(self) -> str:
        """The host wheel's version with its local label: `2.9.1+cu128`."""
        return self.version + (f"+{self.variant}" if self.variant else "")

    @property
    def outcome(self) -> str:
        """fits, degraded, fails or error (`sim.verdict`)."""
        if self.error:
            return "error"
        if self.degraded:
            return "degraded"
        return "fits" if self.fits else "fails"


@dataclass(frozen=True, slots=True)
class Setting:
    """What verdicts hold for: the target interpreter and platforms, the host, the GPU."""

    python: str  # "3.11 (cp311)"
    platforms: tuple[str, ...]  # the platform tags given, most specific first
    accepted: int  # how many platform tags the target accepts in all
    host: str  # "this machine (glibc 2.36)", a preset or a saved profile
    driver: str  # "assumed present", or the version given with --assume-driver
    gpu: str | None  # "sm_90 (driver CUDA 12.4)", None when GPU code was not checked


def other_forms(finding: Finding) -> tuple[OtherForm, ...]:
    """The other forms of the same function among a finding's nearest definitions, one per
    demangled text and change."""
    out: dict[tuple[str, str], OtherForm] = {}
    for near in finding.nearest:
        if not near.same_function:
            continue
        path = posixpath.normpath(near.path) if near.path else ""
        where = path[len(SITE) + 1:] if path.startswith(SITE + "/") else path
        owner = (near.owner or "").split(" ", 1)[0]  # "torch 2.10.0"
        out.setdefault((near.text, near.change),
                       OtherForm(near.mangled, near.text, near.change, where, owner))
    return tuple(out.values())


def missing_symbols(findings: Iterable[Finding]) -> tuple[MissingSymbol, ...]:
    """The undefined symbols and missing version nodes of breaking findings, one entry per
    symbol (and version) with every module that needs it."""
    found: dict[tuple[str, str | None], MissingSymbol] = {}
    for f in findings:
        if f.kind not in SYMBOL_KINDS or not f.symbol or not costs(f):
            continue
        key = (f.symbol, f.version)
        module = f.module or f.object
        known = found.get(key)
        if known is None:
            found[key] = MissingSymbol(f.symbol, demangle(f.symbol), f.version, (module,),
                                       other_forms(f))
        elif module not in known.modules:
            found[key] = replace(known, modules=(*known.modules, module),
                                 instead=known.instead or other_forms(f))
    return tuple(found.values())


def _owned(missing: tuple[MissingSymbol, ...], report: CheckReport
           ) -> tuple[MissingSymbol, ...]:
    """`missing`, each other form that the diagnosis placed in a wheel's member but did not
    name an owner of given the wheel's project (the members listed are the wheels' cached
    directories: nothing is read)."""
    if all(o.owner or not o.where for m in missing for o in m.instead):
        return missing
    owners = {member.path: wheel.name for wheel in report.wheels if wheel.source is not None
              for member in wheel.source.members()}

    def own(other: OtherForm) -> OtherForm:
        return other if other.owner else replace(other, owner=owners.get(other.where, ""))

    return tuple(replace(m, instead=tuple(own(o) for o in m.instead)) for m in missing)


def cell_of(file: IndexFile, report: CheckReport | None, error: str | None,
            release: str = "", extension_filename: str = "") -> Cell:
    """The cell of a host wheel from its check (or the error that stopped it)."""
    wheel = file.wheel()
    assert wheel is not None
    version = wheel[1]
    base = Cell(version.public, version.local or "", file.filename, False, 0, (), (), (),
                release=release, extension_filename=extension_filename)
    if report is None:
        return replace(base, error=error)
    breaking = [f for f in report.findings if costs(f)]
    missing = _owned(missing_symbols(breaking), report)
    sonames = tuple(dict.fromkeys(f.library for f in breaking
                                  if f.kind == FindingKind.MISSING_LIBRARY and f.library))
    problems = tuple(dict.fromkeys(f"{f.kind}: {f.message}" for f in breaking
                                   if f.kind not in _TOLD))
    modules = tuple(m.module for m in report.modules if m.costs)
    return replace(base, fits=report.verdict not in ("fails", "degraded"),
                   degraded=report.verdict == "degraded",
                   failing_modules=sum(1 for m in report.modules if m.costs),
                   symbols=tuple(dict.fromkeys(m.demangled for m in missing)), sonames=sonames,
                   notes=report.notes, modules=modules, missing=missing, problems=problems)


def check_pair(extension: str | IndexFile, host_file: IndexFile, ctx: RemoteContext,
               target: Target, host: HostProfile, executable: str | None = None,
               gpu: GpuTarget | None = None, release: str = "") -> Cell:
    """The verdict on `extension` (a requirement, a local wheel or a wheel chosen on the index)
    next to `host_file`: a `check` whose result the cache keeps, so asking again is free. An
    error that stops the check is the cell's error, not the caller's."""
    filename = extension if isinstance(extension, str) else extension.filename
    try:
        report = check([extension], [host_file], ctx, target, host, lambda _m: None,
                       executable, gpu=gpu)
    except AbifitError as e:
        return cell_of(host_file, None, str(e).splitlines()[0], release, filename)
    targets = [w.filename for w in report.wheels if w.role.value == "target"]
    return cell_of(host_file, report, None, release, targets[0] if targets else filename)


def host_description(host: HostProfile) -> str:
    """The host of the checks in words."""
    if host.preset is not None:
        return (f"the {host.preset.name} preset (glibc {host.preset.glibc}, the C++ runtime "
                f"of {host.preset.distribution})")
    if host.snapshot is not None:
        return (f"a saved profile of an {host.snapshot.machine} machine "
                f"({host.snapshot.executable})")
    glibc = host.facts.defaults.glibc
    return "this machine" + (f" (glibc {glibc.major}.{glibc.minor})" if glibc else "")


def setting_of(target: Target, host: HostProfile, gpu: GpuTarget | None) -> Setting:
    """The `Setting` of checks for `target` on `host`, with `gpu` when its code is checked."""
    major, minor = target.python_version
    platforms = tuple(p for p in target.platforms if not p.startswith("linux_")) \
        or tuple(target.platforms)
    gpu_text = None
    if gpu is not None:
        gpu_text = gpu.arch + (f" (driver CUDA {gpu.driver_release})"
                               if gpu.driver_release else "")
    driver = (f"{host.assume_driver} (assumed)" if host.assume_driver
              and host.assume_driver != "assumed" else "assumed present")
    # counted as the target's text counts them (`cp311 on manylinux_2_36_x86_64 (and 34
    # older)`): the generic linux_ tag is not one of them
    accepted = [p for p in target.expanded_platforms() if not p.startswith("linux_")]
    return Setting(f"{major}.{minor} ({target.interpreter})", platforms[:1],
                   len(accepted) or len(target.expanded_platforms()), host_description(host),
                   driver, gpu_text)


def labels(cells: Sequence[Cell]) -> list[str]:
    """The host labels of `cells`, once each, in order."""
    return list(dict.fromkeys(c.label for c in cells))
