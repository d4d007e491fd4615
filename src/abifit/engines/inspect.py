"""`abifit inspect`: what ELF objects need and provide, for a file, a directory, a wheel or an
installed distribution.

Targets are resolved here (the only place that decides what a name means); each ELF object becomes
an `ObjectReport`, or an `ObjectReport` with an error when it cannot be read, so one bad file never
stops the others.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from abifit.errors import FormatError, UsageError
from abifit.formats.elf import (
    SHN_UNDEF,
    Binding,
    ElfImage,
    ImageSummary,
    SymbolType,
    Visibility,
    enum_or_int,
    machine_name,
    might_be_elf,
    parse_elf,
    summarize_image,
    versioned_name,
)
from abifit.formats.fatbin import GpuCode, code_or_error
from abifit.formats.sources import ByteSource, FileSource
from abifit.formats.wheel import ZIP_MAGIC, WheelArchive, is_elf_member
from abifit.host.environment import InterpreterFacts, find_distribution
from abifit.host.localfs import is_elf_file, special_kind
from abifit.sim.gpu import ObjectCoverage, object_coverage
from abifit.sim.gputarget import GpuTarget

if TYPE_CHECKING:
    from abifit.remote.packageindex import IndexFile
    from abifit.remote.runcontext import RemoteContext

Progress = Callable[[str], None]





class SymbolSelection(Enum):
    """Which dynamic symbols a report lists (`--symbols`)."""

    NONE = "none"
    DEFINED = "defined"
    UNDEFINED = "undefined"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class SymbolFilter:
    """The symbols a report lists: a selection, and a glob their names match (`--match`)."""

    selection: SymbolSelection
    match: str | None


def symbol_filter(symbols: str | SymbolSelection | None, match: str | None) -> SymbolFilter:
    """The symbols `inspect` lists: those `symbols` selects (a `match` alone implies all)."""
    if isinstance(symbols, SymbolSelection):
        return SymbolFilter(symbols, match)
    try:
        return SymbolFilter(SymbolSelection(symbols or ("all" if match else "none")), match)
    except ValueError as e:
        names = ", ".join(s.value for s in SymbolSelection)
        raise UsageError(f"symbols {symbols!r}: expected one of {names}") from e


class SymbolRow(NamedTuple):
    """One dynamic symbol as the report shows it. A named tuple, not a frozen dataclass: a
    report lists up to 75,000 of them (libtorch_cpu.so), and a frozen dataclass's `__init__`
    sets each of its 12 fields through `object.__setattr__` (2.5x the time)."""

    name: str
    demangled: str | None
    version: str | None
    version_file: str | None
    hidden: bool
    defined: bool
    binding: str
    type: str
    visibility: str
    value: int
    size: int
    display_name: str


@dataclass(frozen=True, slots=True)
class RequiredVersions:
    """The version names an object requires from one library."""

    library: str
    versions: tuple[str, ...]
    weak: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ObjectReport:
    """One ELF object: its dynamic view in summary, or why it could not be read."""

    path: str
    member: str | None
    error: str | None = None
    elf_class: str | None = None
    byte_order: str | None = None
    machine: str | None = None
    file_type: str | None = None
    interpreter: str | None = None
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    flags: int = 0
    flags_1: int = 0
    defined: int = 0
    undefined: int = 0
    weak: int = 0
    required_versions: tuple[RequiredVersions, ...] = ()
    defined_versions: tuple[str, ...] = ()
    symbols: tuple[SymbolRow, ...] | None = None
    gpu_code: GpuCode | None = None
    gpu_error: str | None = None
    gpu: ObjectCoverage | None = None
    warnings: tuple[str, ...] = ()  # what reading the view had to assume

    @property
    def location(self) -> str:
        return f"{self.path}!{self.member}" if self.member else self.path


@dataclass(frozen=True, slots=True)
class InspectReport:
    """Everything `abifit inspect` found for its targets."""

    targets: tuple[str, ...]
    objects: tuple[ObjectReport, ...]
    symbols: SymbolSelection
    match: str | None
    gpu: GpuTarget | None = None

    @property
    def failed(self) -> int:
        return sum(1 for o in self.objects if o.error is not None)


def _name(value: object) -> str:
    return value.name if isinstance(value, Enum) else str(value)


# the names of the st_info and st_other values, by value (a number where no enum member has it)
_TYPE_NAMES = tuple(_name(enum_or_int(SymbolType, v)) for v in range(16))
_BINDING_NAMES = tuple(_name(enum_or_int(Binding, v)) for v in range(16))
_VISIBILITY_NAMES = tuple(_name(enum_or_int(Visibility, v)) for v in range(4))


def _symbol_rows(image: ElfImage, flt: SymbolFilter) -> tuple[SymbolRow, ...]:
    """The rows of the selected symbols, made from the table's columns (what `table[i]` gives,
    without building a `Symbol` and three enum members for each of 75,000 symbols)."""
    from abifit.formats.demangle import demangle_many

    table = image.symbols
    names, info, other, sections = table.names, table.info, table.other, table.section_indexes
    if flt.selection is SymbolSelection.ALL:
        wanted: Sequence[int] = range(len(table))
    else:
        defined = flt.selection is SymbolSelection.DEFINED
        wanted = [i for i, s in enumerate(sections) if (s != SHN_UNDEF) == defined]
    demangled = demangle_many(names[i] for i in wanted)
    raw_versions = table.versym
    version_of = {raw: table.version_of_raw(raw) for raw in set(raw_versions or ())}
    unversioned = (None, None, False)
    values, sizes, match = table.values, table.sizes, flt.match
    rows = []
    for i, text in zip(wanted, demangled, strict=True):
        name = names[i]
        if match and not (fnmatch.fnmatchcase(name, match) or fnmatch.fnmatchcase(text, match)):
            continue
        version, file, hidden = (version_of[raw_versions[i]] if raw_versions is not None
                                 else unversioned)
        section, kind = sections[i], info[i]
        rows.append(SymbolRow(
            name, text if text != name else None, version, file, hidden, section != SHN_UNDEF,
            _BINDING_NAMES[kind >> 4], _TYPE_NAMES[kind & 0xF], _VISIBILITY_NAMES[other[i] & 0x3],
            values[i], sizes[i],
            name if version is None else versioned_name(name, version, file, hidden, section)))
    return tuple(rows)


def summarize(image: ElfImage, path: str, member: str | None, flt: SymbolFilter) -> ObjectReport:
    """The report for one parsed ELF image."""
    report = summary_report(summarize_image(image), path, member)
    if flt.selection is SymbolSelection.NONE:
        return report
    return replace(report, symbols=_symbol_rows(image, flt))


def summary_report(summary: ImageSummary, path: str, member: str | None) -> ObjectReport:
    """The report for one ELF image without its symbols listed (`summarize_image`)."""
    dyn = summary.dynamic
    return ObjectReport(
        path=path,
        member=member,
        elf_class=summary.elf_class.name,
        byte_order=summary.byte_order.name.lower(),
        machine=machine_name(summary.machine),
        file_type=_name(summary.file_type),
        interpreter=summary.interpreter,
        soname=dyn.soname if dyn else None,
        needed=dyn.needed if dyn else (),
        warnings=summary.warnings,
        rpath=dyn.rpath if dyn else (),
        runpath=dyn.runpath if dyn else (),
        flags=dyn.flags if dyn else 0,
        flags_1=dyn.flags_1 if dyn else 0,
        defined=summary.defined,
        undefined=summary.undefined,
        weak=summary.weak,
        required_versions=tuple(
            RequiredVersions(
                need.file,
                tuple(v.name for v in need.versions),
                tuple(v.name for v in need.versions if v.weak),
            )
            for need in summary.version_needs
        ),
        defined_versions=tuple(d.name for d in summary.version_defs if not d.is_base),
    )


def _inspect_source(
    source: ByteSource, path: str, member: str | None, flt: SymbolFilter
) -> ObjectReport:
    try:
        image = parse_elf(source)
    except FormatError as e:
        return ObjectReport(path=path, member=member, error=str(e))
    return _with_gpu_code(summarize(image, path, member, flt), code_or_error(source, image))


def _with_gpu_code(report: ObjectReport, code: GpuCode | FormatError | None) -> ObjectReport:
    if isinstance(code, FormatError):
        return replace(report, gpu_error=str(code))
    return replace(report, gpu_code=code)


def _inspect_file(path: str, flt: SymbolFilter) -> ObjectReport:
    try:
        with FileSource(path) as source:
            return _inspect_source(source, path, None, flt)
    except OSError as e:
        return ObjectReport(path=path, member=None, error=f"{path}: {e.strerror or e}")


def _inspect_wheel(path: str, flt: SymbolFilter, progress: Progress) -> Iterator[ObjectReport]:
    with FileSource(path) as source:
        archive = WheelArchive(source)
        candidates = archive.candidates()
        for n, member in enumerate(candidates, 1):
            progress(f"{archive.filename}: member {n}/{len(candidates)} {member.path}")
            try:
                opened = archive.open(member)
                if not is_elf_member(opened):
                    continue
            except FormatError as e:
                yield ObjectReport(path=path, member=member.path, error=str(e))
                continue
            yield _inspect_source(opened, path, member.path, flt)


def _inspect_files(
    files: list[Path], flt: SymbolFilter, progress: Progress
) -> Iterator[ObjectReport]:
    elves = [f for f in files if f.is_file() and not f.is_symlink() and is_elf_file(str(f))]
    for n, f in enumerate(elves, 1):
        progress(f"object {n}/{len(elves)} {f}")
        yield _inspect_file(str(f), flt)


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        found.extend(Path(dirpath) / n for n in sorted(names))
    return found


def _looks_like_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ZIP_MAGIC
    except OSError:
        return False


def _inspect_requirement(
    text: str, flt: SymbolFilter, ctx: RemoteContext, progress: Progress, gpu_code: bool
) -> list[ObjectReport]:
    from abifit.remote.wheels import resolve

    return _inspect_index_file(resolve(text, ctx), flt, ctx, progress, gpu_code)


def _inspect_local_wheel(path: str, flt: SymbolFilter, ctx: RemoteContext,
                         progress: Progress) -> list[ObjectReport]:
    """A wheel named by its path, read in place like one on an index: only the bytes the
    dynamic views and fat binaries need, cached by the file's sha256."""
    from abifit.remote.packageindex import path_file

    return _inspect_index_file(path_file(path), flt, ctx, progress, gpu_code=True, label=path)


def _inspect_index_file(
    file: IndexFile, flt: SymbolFilter, ctx: RemoteContext, progress: Progress, gpu_code: bool,
    label: str | None = None,
) -> list[ObjectReport]:
    """Reports for the ELF members of a wheel, each under `label` (default: its file name).
    Without symbols to list, the summaries of their views are read (`RemoteWheel.summary`)."""
    from abifit.remote.memberreads import member_summaries, member_views
    from abifit.remote.wheels import RemoteWheel

    label = label or file.filename
    wheel = RemoteWheel(file, ctx)
    by_path = {m.path: m for m in wheel.members()}
    out = []
    found: Iterator[tuple[str, ElfImage | ImageSummary | FormatError]] = (
        member_summaries(file, ctx, progress, wheel) if flt.selection is SymbolSelection.NONE
        else member_views(file, ctx, progress, wheel))
    for member, view in found:
        if isinstance(view, FormatError):
            out.append(ObjectReport(path=label, member=member, error=str(view)))
            continue
        report = (summary_report(view, label, member) if isinstance(view, ImageSummary)
                  else summarize(view, label, member, flt))
        if gpu_code:
            progress(f"{file.filename}: fat binaries of {member} "
                     f"({by_path[member].compressed_size / 1e6:.1f} MB compressed)")
            report = _with_gpu_code(report, wheel.gpu_code(by_path[member]))
        out.append(report)
    return out


def _file_kind(path: Path) -> str:
    """What a file that is neither a regular file nor a directory is."""
    return special_kind(path.stat().st_mode) or "not a regular file"


def inspect_target(
    target: str,
    flt: SymbolFilter,
    facts: Callable[[], InterpreterFacts],
    progress: Progress,
    remote: Callable[[], RemoteContext] | None = None,
    remote_gpu_code: bool = False,
) -> list[ObjectReport]:
    """Reports for every ELF object a target names: a file, a directory, a wheel, a distribution.
    The fat binaries of a remote wheel's members are read only with `remote_gpu_code`."""
    path = Path(target)
    if path.is_dir():
        return list(_inspect_files(_walk(path), flt, progress))
    if path.is_file():
        if path.suffix == ".whl" and remote is not None:
            return _inspect_local_wheel(target, flt, remote(), progress)
        if path.suffix == ".whl" or _looks_like_zip(path):
            return list(_inspect_wheel(target, flt, progress))
        return [_inspect_file(target, flt)]
    if path.exists():
        raise UsageError(f"{target}: {_file_kind(path)}, not an ELF file, a directory or a wheel")
    if "/" in target or os.sep in target:
        raise UsageError(f"{target}: no such file or directory")
    if any(c in target for c in "=<>!~ ;@"):
        if remote is None:
            raise UsageError(f"{target!r} is a requirement, and no index is configured")
        return _inspect_requirement(target, flt, remote(), progress, remote_gpu_code)
    dist = find_distribution(target, facts())
    files = [Path(f) for f in dist.files if might_be_elf(os.path.basename(f))]
    return list(_inspect_files(files, flt, progress))


def inspect(
    targets: list[str],
    flt: SymbolFilter,
    facts: Callable[[], InterpreterFacts],
    progress: Progress,
    remote: Callable[[], RemoteContext] | None = None,
    gpu: GpuTarget | None = None,
) -> InspectReport:
    """Inspect every target; raises UsageError/FormatError only for a target that names nothing
    readable (a bad file inside a readable target is an object report with an error). With
    `gpu`, each object that carries GPU code gets its verdict for that GPU."""
    objects: list[ObjectReport] = []
    for target in targets:
        objects.extend(inspect_target(target, flt, facts, progress, remote, gpu is not None))
    if gpu is not None:
        objects = [replace(o, gpu=object_coverage(o.gpu_code, gpu)) if o.gpu_code else o
                   for o in objects]
    return InspectReport(tuple(targets), tuple(objects), flt.selection, flt.match, gpu)
