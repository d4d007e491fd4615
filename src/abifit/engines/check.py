"""`abifit check`: would these wheels load together, before anything is installed?

The wheels that would be installed for the target (the requirements and local `.whl` files
given, the `--with` packages, and the dependencies among their Requires-Dist that carry native
code) are laid out as an installation would place them, under a site-packages directory that no
host has (`SITE`), so that `$ORIGIN`-relative RPATHs resolve. Nothing is extracted: the
simulation's `ObjectSource` is a `VirtualTree` that answers "is this a file" from the wheels'
directories and fetches a member's dynamic view only when the simulated loader opens it. Paths
outside `SITE` are this machine's (glibc, libstdc++, the driver): the host profile.

Then every extension module of the targets is simulated as `abifit doctor` simulates an
installed one (prerequisites first, same findings and explanations). The NVIDIA driver's
libraries are *assumed* when the host lacks them, so that "the ABI fits, but `libcuda.so.1` is
not on this machine" is told apart from an undefined symbol.
"""

from __future__ import annotations

import email.parser
import fnmatch
import functools
import hashlib
import os
import posixpath
import sys
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from packaging.utils import canonicalize_name, parse_wheel_filename

from abifit.errors import AbifitError, FormatError, UsageError, WheelError
from abifit.formats.elf import ElfImage, SymbolType, parse_elf
from abifit.formats.objects import ObjectSource
from abifit.formats.pins import Pin, holds  # Pin: a field's type (its hint must evaluate)
from abifit.formats.pylock import ModuleRecord
from abifit.formats.sources import FileSource
from abifit.formats.wheel import Member, WheelArchive, is_elf_member, python_members
from abifit.host.environment import Distribution, InterpreterFacts, interpreter_candidates
from abifit.host.localfs import is_elf_file
from abifit.host.natives import NativeFile, defines_init, mark_plugins, module_name
from abifit.host.profile import HostProfile
from abifit.sim import pythonapi
from abifit.sim.diagnose import Context
from abifit.sim.findings import Finding, FindingKind, Verdict
from abifit.sim.gpu import GpuCheck, check_gpu_code
from abifit.sim.gputarget import GpuTarget
from abifit.sim.imports import load_loading_rules, load_preload_rules
from abifit.sim.loader import ASSUMED_DIR, DRIVER_LIBRARIES, SearchConfig
from abifit.sim.process import (
    Environment,
    ImportVerdict,
    ModuleStatus,
    Simulation,
    Simulator,
    compile_findings,
    context,
    count_failing,
    import_verdicts,
    load_soname_packages,
    search_config,
    simulate_modules,
)
from abifit.sim.verdict import verdict

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from abifit.engines.doctor import LibrarySearchFn
    from abifit.formats.fatbin import GpuCode
    from abifit.formats.numpyapi import NumpyUse
    from abifit.remote.packageindex import IndexFile, Target
    from abifit.remote.runcontext import RemoteContext

# The doctor's library search and the import plans are imported where they are used: a check
# whose result the cache holds never needs them. (The field types of the dataclasses are
# imported above: their hints must evaluate, see `formats.datacodec.type_hints`.)

SITE = "/abifit-wheels/site-packages"
PREFETCH_JOBS = 6  # member views read at once before a simulation
MAX_RECHOICES = 8  # times the dependencies are chosen again, narrowed by a later requirement


Progress = Callable[[str], None]


_FORBIDDEN = " is checked: a pairing its metadata forbids"  # how a note ends that says so


def forbidden_pairings(notes: Sequence[str]) -> tuple[str, ...]:
    """The pairings the metadata forbids that the notes tell of ("extpkg 1.0 requires
    hostpkg==1.0, but hostpkg 2.0"), without the role of the release checked."""
    return tuple(n.removesuffix(_FORBIDDEN).rsplit(" (", 1)[0] for n in notes
                 if n.endswith(_FORBIDDEN))


class Role(Enum):
    TARGET = "target"
    WITH = "with"
    DEPENDENCY = "dependency"


class WheelSource(Protocol):
    """A wheel, read lazily: ELF candidates, a member's dynamic view, the core metadata."""

    def members(self) -> tuple[Member, ...]: ...

    def view(self, member: Member) -> ElfImage | FormatError | None: ...

    def prefetch_view(self, member: Member) -> None: ...

    def gpu_code(self, member: Member) -> GpuCode | FormatError | None: ...

    def numpy_use(self, member: Member) -> NumpyUse | FormatError | None: ...

    def metadata(self) -> str: ...

    def python_files(self) -> dict[str, bytes]: ...


class LocalWheel:
    """A `.whl` file on this machine."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._source = FileSource(path)
        self._archive = WheelArchive(self._source)

    def members(self) -> tuple[Member, ...]:
        return tuple(self._archive.candidates())

    def view(self, member: Member) -> ElfImage | FormatError | None:
        try:
            opened = self._archive.open(member)
            if not is_elf_member(opened):
                return None
            return parse_elf(opened, sections=False)
        except FormatError as e:
            return e

    def prefetch_view(self, member: Member) -> None:
        """Nothing: views are read when the simulation asks for them."""

    def gpu_code(self, member: Member) -> GpuCode | FormatError | None:
        from abifit.formats.fatbin import read_gpu_code

        try:
            opened = self._archive.open(member)
            if not is_elf_member(opened):
                return None
            return read_gpu_code(opened, parse_elf(opened, relocations=False))
        except FormatError as e:
            return e

    def numpy_use(self, member: Member) -> NumpyUse | FormatError | None:
        from abifit.formats.numpyapi import read_numpy_use

        try:
            opened = self._archive.open(member)
            if not is_elf_member(opened):
                return None
            return read_numpy_use(opened, parse_elf(opened, relocations=False).sections)
        except FormatError as e:
            return e

    def python_files(self) -> dict[str, bytes]:
        return python_members(self._archive)

    def metadata(self) -> str:
        found = [m for m in self._archive.members if m.path.count("/") == 1
                 and m.path.endswith(".dist-info/METADATA")]
        if not found:
            raise FormatError(self.path, "no *.dist-info/METADATA member")
        source = self._archive.open(found[0])
        return source.read_at(0, source.size).decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Wheel:
    """A wheel of the virtual environment and why it is there."""

    name: str
    version: str
    filename: str
    role: Role
    requires: tuple[str, ...]
    source: WheelSource | None = field(compare=False, repr=False)  # None: not read
    size: int | None = None

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Everything `abifit check` found."""

    target: str
    wheels: tuple[Wheel, ...]
    notes: tuple[str, ...]
    modules: tuple[ModuleStatus, ...]
    findings: tuple[Finding, ...]
    host_missing: tuple[str, ...]  # driver sonames this machine lacks (assumed present)
    assumed_driver: str | None
    warnings: tuple[Finding, ...] = ()
    gpu: GpuCheck | None = None
    imports: tuple[ImportVerdict, ...] = ()
    file_pins: tuple[Pin, ...] = ()  # the pins of the `-r` files, with where each is written
    # each module's ABI record (`engines.fingerprints`), in the order of `modules`, when the
    # check was asked for them (`check(..., records=True)`: what `diff` compares a lock by)
    records: tuple[ModuleRecord, ...] = ()

    @property
    def failing(self) -> int:
        return count_failing(self.modules)

    @property
    def optional_failing(self) -> int:
        return count_failing(self.modules, optional=True)

    @property
    def verdict(self) -> str:
        """`fails`, `degraded` or `fits` (`sim.verdict`), `fits-but-host-lacks-driver` where
        it fits and this machine lacks the driver the modules need."""
        found = verdict(self.findings)
        if found is Verdict.FITS and self.host_missing:
            return "fits-but-host-lacks-driver"
        return found.value


# --- choosing the wheels ---------------------------------------------------------------------


def target_markers(target: Target) -> dict[str, str]:
    """Environment markers (PEP 508) of a target interpreter and platform, on Linux."""
    platform = target.expanded_platforms()[0] if target.platforms else "linux_x86_64"
    machine = next((m for m in ("x86_64", "aarch64", "ppc64le", "s390x", "armv7l", "i686")
                    if platform.endswith(m)), "x86_64")
    version = target.python
    implementation = {"cp": "cpython", "pp": "pypy"}.get(target.implementation, "cpython")
    return {
        "implementation_name": implementation, "implementation_version": f"{version}.0",
        "os_name": "posix", "platform_machine": machine, "platform_release": "",
        "platform_system": "Linux", "platform_version": "", "python_full_version":
        f"{version}.0", "platform_python_implementation": "CPython" if implementation ==
        "cpython" else "PyPy", "python_version": version, "sys_platform": "linux",
    }


def pip_refuses(filename: str, target: Target) -> str | None:
    """Why pip would not install a wheel file on the target's platform ("is not a supported
    wheel on this platform"): none of its platform tags is one the target accepts; a
    manylinux tag newer than the target's glibc is named. None when the platform is one pip
    accepts there (a Python or ABI tag the target lacks is left to the check, which names
    the C API symbols an older Python does not have)."""
    from abifit.remote.packageindex import manylinux_glibc

    tags = set(parse_wheel_filename(filename)[3])
    accepted = {*target.expanded_platforms(), "any"}
    if any(t.platform in accepted for t in tags):
        return None
    newest = max((manylinux_glibc(p) or (0, 0) for p in accepted), default=(0, 0))
    needs = [(g, t) for t in sorted(tags, key=str)
             if (g := manylinux_glibc(t.platform)) and g > newest]
    why = (f"its tag {needs[0][1]} needs glibc {needs[0][0][0]}.{needs[0][0][1]}, newer than "
           f"the target's {newest[0]}.{newest[1]}" if needs and newest > (0, 0)
           else f"none of its platform tags ({', '.join(sorted({t.platform for t in tags}))}) "
           f"is one the target accepts ({len(accepted)} platform tags)")
    return f"pip would refuse this wheel for {target} (not a supported wheel there): {why}"


def locked_targets(pins: Sequence[Pin], ctx: RemoteContext) -> list[str | IndexFile]:
    """What `check -r LOCK` checks for each pin: the file the lock names for the target
    (its URL, digest and size; the verdict is about that file), else, when the lock gives
    only digests (`--hash` in a requirements file), the index's file with one of them, else
    the requirement. A pin whose digests no file for the target has is refused: the verdict
    would be about another file."""
    from abifit.remote.packageindex import IndexFile, select_one

    out: list[str | IndexFile] = []
    for pin in pins:
        if not pin.files and not pin.hashes:
            out.append(pin.requirement)
            continue
        requirement = _requirement(pin.requirement)
        if pin.files:
            files = [IndexFile(f.filename, f.url, {"sha256": f.sha256} if f.sha256 else {},
                               size=f.size) for f in pin.files]
            where = "the lock names"
        else:
            allowed = set(pin.hashes)
            offered = ctx.index.project_files(requirement.name)
            files = [f for f in offered if f.sha256 in allowed]
            where = "the index serves with a sha256 the lock allows"
            if not files:
                raise UsageError(
                    f"{pin.requirement}: no file the index serves has a sha256 the lock "
                    f"allows ({', '.join(h[:12] + '...' for h in pin.hashes)}): a wrong hash, "
                    "or a file the index no longer offers; the verdict would be about another "
                    "file")
        try:
            out.append(select_one(files, requirement, ctx.target,
                                  prereleases=ctx.prereleases).file)
        except AbifitError as e:
            raise UsageError(f"{pin.requirement}: none of the files {where} fits the target: "
                             f"{str(e).splitlines()[0]}") from e
    return out


def requires_dist(metadata: str) -> tuple[str, ...]:
    """The Requires-Dist entries of core metadata."""
    message = email.parser.HeaderParser().parsestr(metadata)
    return tuple(message.get_all("Requires-Dist") or ())


def _requirement(text: str) -> Requirement:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as e:
        reason = str(e).splitlines()[0] if str(e) else "not a requirement"
        raise UsageError(f"invalid requirement {text!r}: {reason}") from e


def _is_pure(file: IndexFile) -> bool:
    wheel = file.wheel()
    return wheel is not None and all(t.platform == "any" for t in wheel[3])


_RECHOOSE = Wheel("", "", "", Role.DEPENDENCY, (), None)  # `_dependency`: choose again


class Gatherer:
    """Chooses the wheels: the pinned ones first, then the native dependencies they require."""

    def __init__(self, ctx: RemoteContext | None, progress: Progress) -> None:
        self.ctx = ctx
        self.progress = progress
        self.chosen: dict[str, Wheel] = {}
        self.notes: list[str] = []
        self._skipped: set[str] = set()
        self._pure: dict[str, Wheel] = {}  # dependencies without native code: followed only
        # every specifier a dependency was required with, by project: a dependency chosen
        # before a later requirement narrowed it is chosen again, as pip's resolver would
        self._narrowed: dict[str, SpecifierSet] = {}

    def _remote(self) -> RemoteContext:
        if self.ctx is None:
            raise UsageError("requirements need an index: none is configured")
        return self.ctx

    def open(self, text: str | IndexFile, role: Role, skip_pure: bool = False
             ) -> Wheel | None:
        """A wheel named on the command line: a local `.whl` path or a requirement (None for
        a wheel without native code when `skip_pure`), or a file already chosen on the index."""
        if not isinstance(text, str):
            return self._remote_wheel(text, role)
        if text.endswith(".whl") and os.path.isfile(text):
            if self.ctx is not None:  # read in place like a wheel on an index, cached alike
                from abifit.remote.packageindex import path_file

                file = path_file(text)
                if file.wheel() is None:
                    raise WheelError(text, "not a wheel: its name is not NAME-VERSION[-BUILD]-"
                                     "PYTHON-ABI-PLATFORM.whl")
                refused = pip_refuses(file.filename, self.ctx.target)
                if refused is not None:
                    raise UsageError(f"{text}: {refused}")
                return self._remote_wheel(file, role)
            local = LocalWheel(text)
            name, version, _build, _tags = parse_wheel_filename(os.path.basename(text))
            return Wheel(name, str(version), os.path.basename(text), role,
                         requires_dist(local.metadata()), local, os.path.getsize(text))
        from abifit.remote.packageindex import select_one

        requirement = _requirement(text)
        ctx = self._remote()
        files = ctx.index.project_files(requirement.name)
        file = select_one(files, requirement, ctx.target, prereleases=ctx.prereleases).file
        if skip_pure and _is_pure(file):
            return None
        return self._remote_wheel(file, role)

    def _remote_wheel(self, file: IndexFile, role: Role) -> Wheel:
        from abifit.remote.wheels import shared_wheel

        ctx = self._remote()
        wheel = file.wheel()
        assert wheel is not None
        self.progress(f"metadata of {file.filename}")
        source = shared_wheel(file, ctx, relocations=role is Role.TARGET)
        return Wheel(wheel[0], str(wheel[1]), file.filename, role,
                     requires_dist(source.metadata()), source, file.size)

    def add(self, wheel: Wheel) -> None:
        known = self.chosen.get(wheel.key)
        if known is not None and known.version != wheel.version:
            raise UsageError(f"{wheel.name} is named twice: {known.version} and {wheel.version}")
        self.chosen[wheel.key] = wheel

    def close(self, markers: Mapping[str, str]) -> None:
        """Add the native dependencies of every chosen wheel, transitively. Dependencies
        without native code are not part of the environment, but their requirements (with the
        extras asked for, as in `cuda-toolkit[cublas,cufft]`) are followed: their metadata
        comes from the index (PEP 658) or from the wheel's end, a few kilobytes.

        A dependency is chosen by every requirement on it: when a later requirement excludes
        the release chosen for an earlier one (numba's `numpy<2.3` after another package's
        `numpy>=1.24`), the dependencies are chosen again with both, so the stack judged is
        one the requirements allow. A conflict with a release named on the command line stays
        a note."""
        named = dict(self.chosen)
        for _ in range(MAX_RECHOICES):
            self.chosen = dict(named)
            self._pure = {}
            self._skipped = set()
            notes = len(self.notes)
            if self._close_once(markers):
                return
            del self.notes[notes:]
        self._close_once(markers)

    def _close_once(self, markers: Mapping[str, str]) -> bool:
        """One pass of `close`; False when a dependency must be chosen again, narrowed."""
        queue: deque[tuple[Wheel, frozenset[str]]] = deque(
            (w, frozenset()) for w in self.chosen.values())
        done: dict[str, set[str]] = {}
        while queue:
            wheel, extras = queue.popleft()
            for text in wheel.requires:
                found = self._dependency(wheel, text, markers, extras)
                if found is None:
                    continue
                dep, wanted = found
                if dep is _RECHOOSE:
                    return False
                seen = done.setdefault(dep.key, set())
                if seen and wanted <= seen:
                    continue
                seen.update(wanted or {""})
                if dep.source is not None and dep.key not in self._pure:
                    self.chosen[dep.key] = dep
                queue.append((dep, wanted))
        return True

    def _dependency(self, wheel: Wheel, text: str, markers: Mapping[str, str],
                    extras: frozenset[str]) -> tuple[Wheel, frozenset[str]] | None:
        from packaging.version import Version

        try:
            requirement = _requirement(text)
        except UsageError:
            self.notes.append(f"{wheel.name} {wheel.version}: ignored an invalid requirement "
                              f"{text!r}")
            return None
        if not holds(requirement.marker, markers, extras):
            return None
        key = canonicalize_name(requirement.name)
        wanted = frozenset(requirement.extras)
        have = self.chosen.get(key) or self._pure.get(key)
        if have is not None:
            if not requirement.specifier.contains(Version(have.version), prereleases=True):
                if have.role is Role.DEPENDENCY and self._narrow(key, requirement):
                    return _RECHOOSE, wanted
                self.notes.append(
                    f"{wheel.name} {wheel.version} requires {requirement}, but {have.name} "
                    f"{have.version} ({have.role.value}){_FORBIDDEN}")
            return have, wanted
        if key in self._skipped or self.ctx is None:
            return None
        dep = self._resolve(wheel, requirement)
        return None if dep is None else (dep, wanted)

    def _resolve(self, wheel: Wheel, requirement: Requirement) -> Wheel | None:
        from abifit.remote.packageindex import select_one

        assert self.ctx is not None
        key = canonicalize_name(requirement.name)
        narrowed = self._narrowed.get(key)
        if narrowed is not None:
            requirement = _with_specifier(requirement, requirement.specifier & narrowed)
        try:
            files = self.ctx.index.project_files(requirement.name)
            file = select_one(files, requirement, self.ctx.target,
                              prereleases=self.ctx.prereleases).file
        except AbifitError as e:
            self._skipped.add(key)
            first = str(e).splitlines()[0]
            self.notes.append(f"{requirement} (required by {wheel.name}) not checked: {first}")
            return None
        if not _is_pure(file):
            return self._remote_wheel(file, Role.DEPENDENCY)
        from abifit.remote.wheels import shared_wheel

        self._skipped.add(key)
        parsed = file.wheel()
        assert parsed is not None
        try:
            metadata = shared_wheel(file, self.ctx).metadata()
        except AbifitError as e:
            self.notes.append(f"{requirement} (required by {wheel.name}): its requirements "
                              f"are not followed: {str(e).splitlines()[0]}")
            return None
        pure = Wheel(parsed[0], str(parsed[1]), file.filename, Role.DEPENDENCY,
                     requires_dist(metadata), None, file.size)
        self._pure[key] = pure
        return pure


    def _narrow(self, key: str, requirement: Requirement) -> bool:
        """Add `requirement`'s specifier to those `key` is chosen by; False when it adds
        nothing (the conflict is one no choice of this project can settle)."""
        from packaging.specifiers import SpecifierSet

        before = self._narrowed.get(key, SpecifierSet())
        after = before & requirement.specifier
        if str(after) == str(before):
            return False
        self._narrowed[key] = after
        return True


def _with_specifier(requirement: Requirement, specifier: SpecifierSet) -> Requirement:
    narrowed = _requirement(str(requirement))
    narrowed.specifier = specifier
    return narrowed


def gather(targets: Sequence[str | IndexFile], withs: Sequence[str | IndexFile],
           ctx: RemoteContext | None, markers: Mapping[str, str], progress: Progress,
           skip_pure: bool = False) -> tuple[list[Wheel], list[str]]:
    """The wheels of the virtual environment, targets first, and notes on how they were chosen.
    With `skip_pure`, targets without native code (by their tags) are left out."""
    g = Gatherer(ctx, progress)
    for text in withs:
        wheel = g.open(text, Role.WITH)
        if wheel is not None:
            g.add(wheel)
    for text in targets:
        wheel = g.open(text, Role.TARGET, skip_pure)
        if wheel is not None:
            g.add(wheel)
    with ThreadPoolExecutor(max_workers=PREFETCH_JOBS) as pool:
        _read_ahead([w for w in g.chosen.values() if w.role is Role.TARGET], pool)
        try:
            g.close(markers)
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    order = {Role.TARGET: 0, Role.WITH: 1, Role.DEPENDENCY: 2}
    wheels = sorted(g.chosen.values(), key=lambda w: order[w.role])
    return wheels, g.notes


def _read_ahead(targets: Sequence[Wheel], pool: ThreadPoolExecutor) -> None:
    """Start reading the views of the targets' members that the cache lacks, largest first:
    the simulation opens them all first, and reading them (CPU-bound, inflating in part off
    the GIL) then overlaps choosing the dependencies (index pages and metadata). A wheel
    whose members cannot be listed is left to fail where it did, after the dependencies."""
    members: list[tuple[WheelSource, Member]] = []
    for source in (w.source for w in targets if w.source is not None):
        try:
            members += [(source, m) for m in source.members()]
        except (AbifitError, OSError):
            continue
    for source, member in sorted(members, key=lambda sm: -sm[1].compressed_size):
        pool.submit(source.prefetch_view, member)


# --- the virtual environment -----------------------------------------------------------------


class VirtualTree:
    """The `ObjectSource` of a virtual environment: wheel members under SITE, the host elsewhere."""

    def __init__(self, host: ObjectSource) -> None:
        self.host = host
        self.files: dict[str, tuple[WheelSource, Member]] = {}
        self.packages: set[str] = set()  # top-level import packages

    def add(self, wheel: Wheel) -> list[str]:
        paths: list[str] = []
        source = wheel.source
        if source is None:
            return paths
        for member in source.members():
            path = posixpath.join(SITE, member.path)
            self.files[path] = (source, member)
            paths.append(path)
        return paths

    def is_file(self, path: str) -> bool:
        if path.startswith(SITE + "/"):
            return posixpath.normpath(path) in self.files
        return self.host.is_file(path)

    def identity(self, path: str) -> str:
        if path.startswith(SITE + "/"):
            return posixpath.normpath(path)
        return self.host.identity(path)

    def image(self, path: str) -> ElfImage:
        if not path.startswith(SITE + "/"):
            return self.host.image(path)
        found = self.files.get(posixpath.normpath(path))
        if found is None:
            raise FormatError(path, "no such member")
        view = found[0].view(found[1])
        if view is None:  # what glibc's loader says of it: too short, else not ELF
            from abifit.errors import ElfError

            raise ElfError(path, "not an ELF file", size=found[1].size,
                           refusal="invalid ELF header")
        if isinstance(view, FormatError):
            raise view
        return view

    def image_or_none(self, path: str) -> ElfImage | None:
        """The view of `path`, None when it cannot be read; a wheel pip refuses is an error."""
        try:
            return self.image(path)
        except (OSError, FormatError):
            return None

    def glob(self, directory: str, pattern: str) -> list[str]:
        if not directory.startswith(SITE):
            return []
        full = posixpath.join(directory, pattern)
        return sorted(p for p in self.files if fnmatch.fnmatchcase(p, full))

    def is_package_dir(self, directory: str) -> bool:
        """Whether a directory under SITE is an import package: its path is made of
        identifiers under a top-level package of a wheel (`__init__.py` is not among the
        members listed, so the top-level packages are the wheels' names and the directories
        holding their extension modules)."""
        relative = posixpath.relpath(directory, SITE)
        parts = relative.split("/")
        return (not relative.startswith("..") and parts[0] in self.packages
                and all(part.isidentifier() for part in parts))

    def named(self, soname: str) -> tuple[str, ...]:
        return tuple(p for p in self.files if posixpath.basename(p) == soname)


def extension_suffixes(target: Target) -> tuple[str, ...]:
    machine = target_markers(target)["platform_machine"]
    major, minor = target.python_version
    tag = f"cpython-{major}{minor}" if target.implementation == "cp" else \
        f"pypy{major}{minor}-pp73"
    return (f".{tag}-{machine}-linux-gnu.so", ".abi3.so", ".so")


def _natives(wheel: Wheel, paths: list[str], tree: VirtualTree,
             suffixes: tuple[str, ...]) -> list[NativeFile]:
    """The wheel's ELF candidates; extension modules are those at an importable name with an
    extension suffix (for a target also exporting `PyInit_*`; for another wheel, a plain `.so`
    does not count, so that its libraries need not be read)."""
    out = []
    for path in paths:
        name = module_name(path, [SITE], suffixes)
        if name is not None and wheel.role is Role.TARGET:
            image = tree.image_or_none(path)
            if image is not None and not defines_init(image, name):
                name = None  # an unreadable one stays a module: its load fails, said so
        elif name is not None and not path.endswith(suffixes[:2]):
            name = None
        out.append(NativeFile(path, wheel.key, name))
    return out


def build_environment(wheels: Sequence[Wheel], target: Target, executable: str,
                      tree: VirtualTree) -> Environment:
    markers = target_markers(target)
    suffixes = extension_suffixes(target)
    facts = InterpreterFacts(
        executable=executable, version=target.python,
        implementation=target.implementation, prefix=posixpath.dirname(SITE),
        base_prefix=posixpath.dirname(SITE), sys_path=(SITE,), site_packages=(SITE,),
        dlopen_flags=2, ext_suffix=suffixes[0], extension_suffixes=suffixes,
        markers=tuple(sorted(markers.items())),
    )
    dists = []
    natives: list[NativeFile] = []
    for wheel in wheels:
        paths = tree.add(wheel)
        dists.append(Distribution(wheel.name, wheel.version,
                                  Path(SITE) / f"{wheel.name}-{wheel.version}.dist-info",
                                  tuple(paths), wheel.requires))
        found = _natives(wheel, paths, tree, suffixes)
        tree.packages.add(wheel.key.replace("-", "_"))
        tree.packages.update(n.module.split(".")[0] for n in found if n.module)
        if wheel.role is Role.TARGET:
            found = mark_plugins(found, tree.image_or_none, [SITE], tree.is_package_dir)
        natives += found
    env = Environment(facts, dists, natives)
    if "numpy" in env.dists:
        env.numpy_uses.update(_numpy_uses(wheels, env, tree))
    return env


def _numpy_uses(wheels: Sequence[Wheel], env: Environment,
                tree: VirtualTree) -> dict[str, NumpyUse]:
    """What the files that take a capsule say of their use of NumPy's C API
    (`formats.numpyapi`), of every wheel that requires numpy (a target's import may run into
    a required package's module): each read from its `.rodata`."""
    from abifit.formats.numpyapi import NumpyUse
    from abifit.host.numpyuses import numpy_candidates

    targets = {w.key for w in wheels if "numpy" in env.declared(w.key)}
    out: dict[str, NumpyUse] = {}
    for path, _view in numpy_candidates([n for n in env.natives if n.distribution in targets],
                                        lambda _key: True, tree.image_or_none):
        source, member = tree.files[path]
        use = source.numpy_use(member)
        if isinstance(use, NumpyUse):
            out[path] = use
    return out


# --- checking --------------------------------------------------------------------------------


# The names of CPython's C API (Py*, _Py*, PyUnstable_*, PY_TIMEOUT_MAX): what a module built
# for another Python needs from its interpreter.
CPYTHON_API = r"_?Py[A-Za-z_]\w*|PY_TIMEOUT_MAX"


class ApiCheck(Enum):
    """What the simulated process's C API definitions are."""

    INTERPRETER = "interpreter"  # those of the interpreter that starts it, of the target version
    TABLE = "table"  # this machine's interpreter's, replaced by the table's for the target version
    UNCHECKED = "unchecked"  # this machine's interpreter's; C API names it lacks pass, noted


def api_table(target: Target) -> Mapping[str, SymbolType] | None:
    """The table's C API of the target version (`sim.pythonapi`); None for a version outside
    the table, or a target that is not CPython's default build."""
    if target.implementation != "cp" or any(a.endswith("t") for a in target.abis or ()):
        return None
    return pythonapi.exports(target.python_version)


def target_interpreter(target: Target, given: str | None,
                       environ: Mapping[str, str]) -> tuple[str, ApiCheck]:
    """The interpreter whose executable starts the simulated process, and where its C API
    comes from: the one given; this one for its own version; else one of the target's version
    found on this machine (PATH, pyenv, uv); else this one, with the C API of the target version
    from abifit's table of CPython's exports; else (a version outside the table) this one, with
    the C API of the target version not checked (never reported as missing)."""
    if given:
        return given, ApiCheck.INTERPRETER
    if target.python_version == sys.version_info[:2]:
        return sys.executable, ApiCheck.INTERPRETER
    for candidate in interpreter_candidates(target.python_version, environ):
        real = os.path.realpath(candidate)
        if is_elf_file(real):
            return real, ApiCheck.INTERPRETER
    if api_table(target) is not None:
        return sys.executable, ApiCheck.TABLE
    return sys.executable, ApiCheck.UNCHECKED


def _objects(host: HostProfile, executable: str, target: Target, api: ApiCheck,
             ) -> ObjectSource:
    """The host's files; for `ApiCheck.TABLE`, with the interpreter's C API the table's."""
    objects = host.objects(executable)
    names = api_table(target) if api is ApiCheck.TABLE else None
    return objects if names is None else pythonapi.TableApiObjects(objects, executable, names)


def _api_key(target: Target, api: ApiCheck) -> str:
    """What the C API of a run is, for the result's key (the table's file, for a table)."""
    if api is ApiCheck.INTERPRETER:
        return ""
    source = pythonapi.source(target.python_version)
    if api is ApiCheck.TABLE and source is not None:
        return f" api-table {source.release} {source.sha256}"
    return " unchecked"


def _api_note(target: Target, api: ApiCheck) -> str | None:
    source = pythonapi.source(target.python_version)
    if api is not ApiCheck.TABLE or source is None:
        return None
    version = target.python
    return (f"no Python {version} interpreter on this machine: its C API was checked against "
            f"abifit's table of CPython {version}'s exports ({source.release}); give --python "
            f"with a {version} interpreter to check against it")


def _config(host: HostProfile, unchecked: bool = False,
            stand_in: StandIn | None = None) -> SearchConfig:
    base = search_config(host.facts)
    return SearchConfig(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                           "assumed": DRIVER_LIBRARIES,
                           "unchecked": CPYTHON_API if unchecked else None,
                           "stand_in": stand_in})


StandIn = Callable[[str], "tuple[str, ElfImage] | None"]


def stand_ins(tree: VirtualTree, remote: RemoteContext | None,
              search: LibrarySearchFn | None) -> StandIn:
    """Where the copy of a library the search missed is, to bind past the miss: a file of that
    name in the wheels (one the search does not reach), else the library in the wheel on the
    index that ships it (`search`, shared with the fix; its view only, read once per soname)."""
    from abifit.engines.doctor import located_copy
    from abifit.remote.wheels import shared_wheel

    in_wheels = located_copy(tree.named, tree.image_or_none)

    @functools.cache
    def find(soname: str) -> tuple[str, ElfImage] | None:
        here = in_wheels(soname)
        if here is not None:
            return here
        found = search(soname) if search is not None else None
        if found is None or remote is None:
            return None
        for hit in found.wheels:
            if hit.file is None:
                continue
            wheel = shared_wheel(hit.file, remote)  # the one the search listed
            member = next((m for m in wheel.members() if m.path == hit.member), None)
            view = wheel.view(member) if member is not None else None
            if isinstance(view, ElfImage):
                return f"{hit.filename}!{hit.member}", view
        return None

    return find


def _context(sim: Simulator, tree: VirtualTree, target: Target,
             search: LibrarySearchFn | None, host: HostProfile | None = None) -> Context:
    from abifit.engines.doctor import index_library_fix

    fix = index_library_fix(search, [SITE]) if search is not None else None
    ctx = context(sim, tree.named, load_soname_packages(), fix)
    if host is not None and host.preset is not None:  # not this machine: say which host
        ctx = replace(ctx, where=f"on the {host.preset.name} host")
    elif host is not None and host.snapshot is not None:
        ctx = replace(ctx, where="on the profiled host")
    if target.implementation != "cp":
        return ctx
    return replace(ctx, symbol_note=lambda name: pythonapi.history(name, target.python_version))


def _assumed(results: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """The driver libraries the simulation had to assume (the host lacks them)."""
    drivers = {soname for soname, _names in DRIVER_LIBRARIES}
    found = {posixpath.basename(p) for paths in results for p in paths
             if p.startswith(ASSUMED_DIR) and posixpath.basename(p) in drivers}
    return tuple(sorted(found))


def prefetch_views(tree: VirtualTree, paths: Sequence[str], progress: Progress,
                   jobs: int = PREFETCH_JOBS) -> None:
    """Read the views of `paths` and of the members their DT_NEEDED names, transitively (what
    the simulated loader will open), `jobs` at a time, so that the simulation, which opens one
    object after another, finds them read. A member is asked for as soon as a view that needs
    it is read, not after the others of its level."""
    by_name: dict[str, list[str]] = {}
    for path in tree.files:
        by_name.setdefault(posixpath.basename(path), []).append(path)
    seen = set(paths)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {pool.submit(tree.image_or_none, p) for p in dict.fromkeys(paths)}
        read = 0
        while pending:
            progress(f"reading libraries ({read} of {len(seen)} so far)")
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            read += len(done)
            for future in done:
                image = future.result()
                for soname in image.needed if image is not None else ():
                    for path in by_name.get(soname, ()):
                        if path not in seen:
                            seen.add(path)
                            pending.add(pool.submit(tree.image_or_none, path))


def simulate(wheels: Sequence[Wheel], target: Target, host: HostProfile, executable: str,
             progress: Progress, remote: RemoteContext | None = None,
             api: ApiCheck = ApiCheck.INTERPRETER, *, gpu: bool = False,
             on_simulation: Callable[[Simulator, Simulation], None] | None = None,
             ) -> tuple[list[ModuleStatus], list[Finding], tuple[str, ...],
                        tuple[ImportVerdict, ...], tuple[str, ...]]:
    """Simulate every extension module of the target wheels in the virtual environment
    (`gpu`: for a machine with a GPU, which decides the variants some packages pick);
    `on_simulation` is shown the simulator of the statuses returned and their simulation (the
    targets' modules, as doctor's `on_simulation` shows its own)."""
    executable = host.executable or executable
    tree = VirtualTree(_objects(host, executable, target, api))
    for wheel in wheels:
        tree.add(wheel)
    first = [posixpath.join(SITE, m.path) for w in wheels if w.role is Role.TARGET and w.source
             for m in w.source.members()]
    prefetch_views(tree, first, progress)
    base = build_environment(wheels, target, executable, tree)
    from abifit.engines.doctor import library_search

    search = library_search(lambda: remote) if remote is not None else None
    config = _config(host, api is ApiCheck.UNCHECKED, stand_ins(tree, remote, search))

    targets = {w.key for w in wheels if w.role is Role.TARGET}
    # the extension modules of the packages the targets require (`--with` and dependency
    # wheels): an import of a target that imports one of them fails where it fails
    around = base.required_closure(targets) & {n.distribution for n in base.natives}

    def run(env: Environment) -> tuple[Simulator, Simulation]:
        modules = [n for n in env.natives if n.checked and (
            n.distribution in targets or (n.distribution in around and n.module is not None))]
        prefetch_views(tree, [n.path for n in modules], progress)
        sim = Simulator(env, tree, config, load_preload_rules(), glob=tree.glob)
        prefetch_views(tree, sim.opened(modules), progress)
        return sim, simulate_modules(sim, modules, _context(sim, tree, target, search, host),
                                     progress, gpu=gpu)

    # the Python code is read only when a module fails: it can only add libraries loaded
    # before the modules that need them, and place what fails in its imports (the code of a
    # required package, only when one of its modules fails)
    env = _planned(base, wheels, progress, read_code=False)
    sim, simulation = run(env)
    if not all(s.loads for s in simulation.statuses):
        failing = {s.distribution for s in simulation.statuses if not s.loads} & around
        env = _planned(base, wheels, progress, read_code=True, also=failing)
        sim, simulation = run(env)
    verdicts = [v for v in import_verdicts(env, simulation.statuses)
                if v.distribution in targets]
    simulation = _targets_only(simulation, targets, verdicts)
    if on_simulation is not None:
        on_simulation(sim, simulation)
    statuses, findings, results = (list(simulation.statuses), list(simulation.findings),
                                   simulation.results)
    findings += compile_findings(env, verdicts)
    searched = [tuple(r.path or "" for r in result.resolutions) for result in results]
    missing = () if host.assume_driver else _assumed(searched)
    skipped = tuple(dict.fromkeys(n for result in results for n in result.unchecked))
    if remote is not None and any(f.kind is FindingKind.NUMPY_C_API for f in findings):
        from abifit.engines.numpyfix import with_numpy2_releases

        owners = {n.path: (env.dists[n.distribution].name, env.dists[n.distribution].version,
                           posixpath.relpath(n.path, SITE))
                  for n in env.natives if n.distribution in env.dists}
        findings = with_numpy2_releases(findings, owners, remote)
    return statuses, findings, missing, tuple(verdicts), skipped


def _targets_only(simulation: Simulation, targets: set[str],
                  verdicts: Sequence[ImportVerdict]) -> Simulation:
    """The simulation of the targets' modules: a module of a required package is kept only
    where it fails an import of a target (`import sklearn` runs into scipy.sparse's module),
    its finding placed in that import."""
    causes = {v.cause: v.name for v in verdicts if not v.loads and v.cause}
    mine = {s.module for s in simulation.statuses if s.distribution in targets}
    keep = [n for n, s in enumerate(simulation.statuses) if s.module in mine or s.module in causes]
    # a required package's failure is a root cause: said before what it breaks
    findings = [*(replace(f, import_name=causes[f.module]) for f in simulation.findings
                  if f.module not in mine and f.module in causes),
                *(f for f in simulation.findings if f.module in mine)]
    return replace(simulation, statuses=tuple(simulation.statuses[n] for n in keep),
                   findings=tuple(findings),
                   results=tuple(simulation.results[n] for n in keep))


def _planned(env: Environment, wheels: Sequence[Wheel], progress: Progress,
             read_code: bool = True, also: set[str] | None = None) -> Environment:
    """The environment with the import plans of the target wheels, read from their Python
    members (the packages they need are imported by their own rules); without `read_code`,
    plans that know the top-level names of the extension modules only."""
    from abifit.engines.plans import mark_loaded, plan_for, python_modules

    rules = load_loading_rules()
    plans = {}
    for wheel in wheels:
        if ((wheel.role is not Role.TARGET and wheel.key not in (also or ()))
                or wheel.source is None):
            continue
        files: dict[str, bytes] = {}
        if read_code:
            progress(f"{wheel.filename}: Python code")
            files = {f"{SITE}/{path}": data
                     for path, data in wheel.source.python_files().items()}
        declared = [line.strip() for path, data in files.items()
                    if path.endswith("/top_level.txt")
                    for line in data.decode("utf-8", "replace").splitlines()]
        mine = [n for n in env.natives if n.distribution == wheel.key]
        plans[wheel.key] = plan_for(wheel.key, mine, python_modules(files, SITE), SITE,
                                    declared, files.get, rules)
    natives = mark_loaded(env.natives, plans, [SITE])
    return Environment(env.facts, list(env.dists.values()), natives, plans,
                       numpy_uses=env.numpy_uses)


def target_gpu_codes(wheels: Sequence[Wheel], progress: Progress,
                     ) -> list[tuple[str, str, GpuCode | FormatError]]:
    """(name, path, fat binaries) of every ELF member with GPU code of the target wheels (remote
    members are read whole, up to the end of their fat binaries)."""
    out: list[tuple[str, str, GpuCode | FormatError]] = []
    for wheel in wheels:
        if wheel.role is not Role.TARGET or wheel.source is None:
            continue
        members = wheel.source.members()
        for n, member in enumerate(members, 1):
            progress(f"{wheel.filename}: fat binaries, member {n}/{len(members)} {member.path} "
                     f"({member.compressed_size / 1e6:.1f} MB compressed)")
            code = wheel.source.gpu_code(member)
            if code is not None:
                out.append((f"{wheel.name} {member.path}", f"{SITE}/{member.path}", code))
    return out


# what a stored result holds changes with the simulation's model, not only with releases
RESULT_FORMAT = "verdict-10"
# a stored result: anything else in its place is a miss
_STORED = tuple[tuple[ModuleStatus, ...], tuple[Finding, ...], tuple[str, ...],
                tuple[ImportVerdict, ...], tuple[str, ...]]


# what the modules' records (`check(..., records=True)`) are kept under, beside the result
RECORDS_FORMAT = "module-records-1"
_RECORDS = tuple[ModuleRecord, ...]


def _records_key(key: str) -> str:
    return hashlib.sha256(f"{key} {RECORDS_FORMAT}".encode()).hexdigest()


def _result_key(wheels: Sequence[Wheel], target: Target, host: HostProfile,
                executable: str, gpu: bool = False) -> str | None:
    """The digest of every input of a simulation, or None when one is not content-addressed
    (a wheel whose index gives no hash, an unknown host). A wheel counts by what its views are
    cached under (`view_key`: its URL, size and sha256 on an index; its own sha256 here), and
    abifit's release and files (`runcache.fingerprint`)."""
    from abifit.remote.packageindex import IndexFile
    from abifit.remote.wheelcache import view_key
    from abifit.version import __version__

    hashes = []
    for wheel in wheels:
        file = getattr(wheel.source, "file", None)
        key = view_key(file) if isinstance(file, IndexFile) else None
        if wheel.source is not None and not key:
            return None
        hashes.append((wheel.key, wheel.role.value, wheel.filename, key or ""))
    if not host.fingerprint:
        return None
    from abifit.host.runcache import fingerprint

    # abifit's own files too: a changed rule or message in an unreleased checkout is a miss
    inputs = (__version__, fingerprint(), RESULT_FORMAT, str(target), target.platforms,
              host.assume_driver, host.fingerprint, executable, sorted(hashes), gpu)
    return hashlib.sha256(repr(inputs).encode()).hexdigest()


def check(targets: Sequence[str | IndexFile], withs: Sequence[str | IndexFile],
          ctx: RemoteContext | None, target: Target, host: HostProfile, progress: Progress,
          executable: str | None = None, skip_pure: bool = False,
          gpu: GpuTarget | None = None, *, records: bool = False) -> CheckReport:
    """Check that the targets' extension modules would load next to the `withs` and, with
    `gpu`, that the targets' GPU code runs on that GPU; with `records`, the report also holds
    each module's ABI record (`engines.fingerprints`, as a snapshot holds its modules'), made
    from the simulation and kept in the cache beside its result."""
    if not targets:
        raise UsageError("nothing to check: name a requirement or a .whl file")
    wheels, notes = gather(targets, withs, ctx, target_markers(target), progress, skip_pure)
    api = ApiCheck.INTERPRETER
    if host.executable is None:
        executable, api = target_interpreter(target, executable, os.environ)
    executable = executable or sys.executable
    key = _result_key(wheels, target, host, executable + _api_key(target, api), gpu is not None)
    cache = ctx.cache if ctx is not None and key else None
    stored = cache.get_result(key, _STORED) if cache is not None and key else None
    held = (cache.get_result(_records_key(key), _RECORDS)
            if cache is not None and key and records else None)
    made: tuple[ModuleRecord, ...] = ()
    if isinstance(stored, tuple) and len(stored) == 5 and (not records
                                                            or isinstance(held, tuple)):
        statuses, findings = list(stored[0]), list(stored[1])
        missing, imports, skipped = tuple(stored[2]), tuple(stored[3]), tuple(stored[4])
        made = tuple(held) if isinstance(held, tuple) else ()
    else:
        seen: list[tuple[ModuleRecord, ...]] = []

        def record(sim: Simulator, simulation: Simulation) -> None:
            from abifit.engines.fingerprints import module_records

            progress("fingerprints")
            seen.append(module_records(sim, simulation, [SITE]))

        statuses, findings, missing, imports, skipped = simulate(
            wheels, target, host, executable, progress, ctx, api, gpu=gpu is not None,
            on_simulation=record if records else None)
        made = seen[0] if seen else ()
        if cache is not None and key:
            cache.put_result(key, (tuple(statuses), tuple(findings), missing, imports,
                                   skipped))
            if records:
                cache.put_result(_records_key(key), made)
    if executable != sys.executable and host.executable is None:
        notes.append(f"the target's interpreter: {executable}")
    api_note = _api_note(target, api)
    if api_note is not None:
        notes.append(api_note)
    if skipped:
        version = target.python
        shown = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3
                                          else "")
        table = (f"{version} is not in abifit's table of CPython's exports"
                 if pythonapi.source(target.python_version) is None
                 else "abifit's table of CPython's exports is for CPython's default build only")
        notes.append(f"no Python {version} interpreter on this machine, and {table}: "
                     f"{len(skipped)} CPython API symbol(s) the modules need ({shown}) were not "
                     f"checked; give --python with a {version} interpreter to check them")
    if not statuses:
        notes.append("the targets hold no extension modules: nothing was simulated")
    if host.preset is not None:
        notes.append(f"host: the {host.preset.name} preset: glibc {host.preset.glibc} and "
                     f"the libstdc++ and libgcc_s of {host.preset.distribution}, as this "
                     "machine's copies limited to those versions, and this machine's copies of "
                     "the other libraries the policy allows (zlib to its ZLIB nodes); no other "
                     "system library")
    if host.snapshot is not None:
        snap = host.snapshot
        notes.append(f"host: a saved profile of an {snap.machine} machine ({snap.executable},"
                     f" {len(snap.libraries)} system libraries)")
    gpu_check = None
    if gpu is not None:
        gpu_check = check_gpu_code(target_gpu_codes(wheels, progress), gpu)
        findings += gpu_check.findings
        if not gpu_check.objects:
            notes.append(f"--gpu {gpu.arch}: the target wheels carry no GPU code")
    return CheckReport(str(target), tuple(wheels), tuple(notes), tuple(statuses),
                       tuple(findings), missing, host.assume_driver,
                       gpu_check.warnings if gpu_check else (), gpu_check, imports,
                       records=made)
