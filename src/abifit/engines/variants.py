"""`abifit variants NAME==VERSION`: the wheels of one release, and how their binaries differ.

The wheels compared are those the target accepts (its Python, ABI and platforms, as `check`
chooses wheels), or every wheel of the release with `every`. Wheels whose binary members are
identical (same path, CRC-32 and size, after dropping the Python tag from extension module
names) form one group: a re-upload with a build tag, or an `abi3` wheel published under several
names. Between groups of one architecture, each member that differs is compared by content,
through its dynamic view: the libraries it needs, the symbols it leaves undefined and the
symbol versions it requires.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING

from abifit.errors import FormatError, UsageError
from abifit.formats.elf import ElfImage

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from abifit.formats.wheel import Member
    from abifit.remote.packageindex import IndexFile, Target
    from abifit.remote.runcontext import RemoteContext
    from abifit.remote.wheels import RemoteWheel

Progress = Callable[[str], None]
View = ElfImage | FormatError | None

READ_JOBS = 8  # wheels (directories) and members read at once
_PY_TAG = re.compile(r"\.(cpython-\d+|pypy\d+-pp\d+)-[\w-]+\.so$")


@dataclass(frozen=True, slots=True)
class Group:
    """Wheels with identical binary members."""

    filenames: tuple[str, ...]
    architecture: str
    members: int


@dataclass(frozen=True, slots=True)
class MemberDiff:
    """How one binary member of a group differs from the same member of the reference group."""

    path: str
    reference: str  # a wheel of the reference group
    other: str  # a wheel of this group
    same_needs: bool
    needed_added: tuple[str, ...] = ()
    needed_removed: tuple[str, ...] = ()
    undefined_added: tuple[str, ...] = ()
    undefined_removed: tuple[str, ...] = ()
    versions_added: tuple[str, ...] = ()
    versions_removed: tuple[str, ...] = ()
    only_in: str | None = None  # "reference" or "other" when the member is in one wheel only
    error: str | None = None


@dataclass(frozen=True, slots=True)
class VariantsReport:
    """The groups of the wheels compared and their differences. `target` is the target that
    chose the wheels (None when every wheel was compared); `left_out` are the wheels of the
    release it does not accept (with every wheel: those for macOS or Windows, whose modules
    are not ELF files)."""

    name: str
    version: str
    groups: tuple[Group, ...]
    differences: tuple[MemberDiff, ...]
    target: str | None
    left_out: tuple[str, ...]

    @property
    def compared(self) -> int:
        """How many wheels were compared."""
        return sum(len(g.filenames) for g in self.groups)


def normalized(path: str) -> str:
    """A member path with the Python tag of an extension module's suffix dropped."""
    return _PY_TAG.sub(".so", path)


def architecture(filename: str) -> str:
    """The machine of a wheel's platform tag(s): `x86_64`, `aarch64`, ... or `any`."""
    stem = filename[:-4] if filename.endswith(".whl") else filename
    platform = stem.rsplit("-", 1)[-1].split(".")[0]
    for arch in ("x86_64", "aarch64", "ppc64le", "s390x", "armv7l", "i686", "arm64", "amd64",
                 "win32", "universal2"):
        if platform.endswith(arch):
            return arch
    return platform


def _release(text: str, ctx: RemoteContext) -> tuple[Requirement, str, list[IndexFile]]:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    from abifit.remote.packageindex import nearest_versions, releases

    try:
        requirement = Requirement(text)
        pins = [s for s in requirement.specifier if s.operator in ("==", "===")]
        version = Version(pins[0].version) if len(pins) == 1 else None
    except (InvalidRequirement, InvalidVersion) as e:
        raise UsageError(f"invalid release {text!r}: expected NAME==VERSION") from e
    if version is None:
        raise UsageError(f"invalid release {text!r}: expected NAME==VERSION")
    found = releases(ctx.index.project_files(requirement.name), requirement.name)
    if version not in found:
        close = nearest_versions(found, requirement.specifier)
        hint = f"; nearest: {', '.join(map(str, close))}" if close else ""
        raise UsageError(f"{requirement.name} has no wheels for {version}{hint}")
    return requirement, str(version), found[version]


def _chosen(requirement: Requirement, files: list[IndexFile], target: Target
            ) -> tuple[list[IndexFile], tuple[str, ...]]:
    """The wheels of the release that `target` accepts, and the names of the others; no wheel
    accepted is an error that says what the release offers."""
    from abifit.remote.packageindex import NoMatchingWheel, no_matching_wheel, select

    accepted = {c.file.filename for c in select(files, requirement, target, prereleases=True)}
    if not accepted:
        error = no_matching_wheel(files, requirement, target, prereleases=True)
        hint = "; ".join(h for h in (error.hint, "--all compares every wheel") if h)
        raise NoMatchingWheel(error.line, hint, error.nearest, error.platforms)
    return ([f for f in files if f.filename in accepted],
            tuple(sorted({f.filename for f in files} - accepted)))


def _linux(filename: str) -> bool:
    """Whether a wheel is for Linux (or any platform): its modules are ELF files."""
    platforms = filename.removesuffix(".whl").split("-")[-1].split(".")
    return any(p == "any" or p.startswith(("linux_", "manylinux", "musllinux"))
               for p in platforms)


def _needs(image: ElfImage) -> tuple[set[str], set[str], set[str]]:
    table = image.symbols
    undefined = set(compress(table.names, map(operator.not_, table.section_indexes)))
    versions = {f"{n.file}:{v.name}" for n in image.version_needs for v in n.versions}
    return set(image.needed), undefined, versions


def _sorted(items: set[str]) -> tuple[str, ...]:
    return tuple(sorted(items))


def compare(path: str, reference: tuple[str, ElfImage | Exception | None],
            other: tuple[str, ElfImage | Exception | None]) -> MemberDiff:
    """The difference of needs between two views of one member."""
    (ref_name, ref_view), (other_name, other_view) = reference, other
    for view in (ref_view, other_view):
        if not isinstance(view, ElfImage):
            problem = str(view) if view is not None else "not an ELF file"
            return MemberDiff(path, ref_name, other_name, False, error=problem)
    assert isinstance(ref_view, ElfImage) and isinstance(other_view, ElfImage)
    a, b = _needs(ref_view), _needs(other_view)
    return MemberDiff(
        path, ref_name, other_name, a == b,
        needed_added=_sorted(b[0] - a[0]), needed_removed=_sorted(a[0] - b[0]),
        undefined_added=_sorted(b[1] - a[1]), undefined_removed=_sorted(a[1] - b[1]),
        versions_added=_sorted(b[2] - a[2]), versions_removed=_sorted(a[2] - b[2]),
    )


def variants(text: str, ctx: RemoteContext, progress: Progress, *,
             every: bool = False) -> VariantsReport:
    """Group the wheels of one release that `ctx.target` accepts (all of them with `every`) by
    identical binaries, and compare the groups."""
    from abifit.remote.wheels import RemoteWheel

    requirement, version, files = _release(text, ctx)
    left_out: tuple[str, ...] = ()
    if not every:
        files, left_out = _chosen(requirement, files, ctx.target)
    else:  # every Linux wheel: another platform's modules are not ELF files (not compared)
        left_out = tuple(sorted(f.filename for f in files if not _linux(f.filename)))
        files = [f for f in files if _linux(f.filename)]
    wheels = {f.filename: RemoteWheel(f, ctx) for f in files}
    members: dict[str, dict[str, Member]] = {}
    grouped: dict[tuple[tuple[str, tuple[int, int]], ...], list[str]] = {}
    references: dict[str, str] = {}  # architecture -> the first wheel of its first group
    pending: list[list[Pending]] = []
    # the directories are read at once, and taken in the order of the wheels' names: a wheel
    # that starts a group sends its differing members to `pool` at once, while the directories
    # after it are still coming
    with ThreadPoolExecutor(max_workers=READ_JOBS) as lister, \
            ThreadPoolExecutor(max_workers=READ_JOBS) as pool:
        listings = lister.map(lambda w: w.members(), [wheels[f] for f in sorted(wheels)])
        for n, (filename, listing) in enumerate(zip(sorted(wheels), listings, strict=True), 1):
            progress(f"directory {n}/{len(wheels)} {filename}")
            listed = {normalized(m.path): m for m in listing}
            members[filename] = listed
            key = tuple(sorted((p, (m.crc, m.size)) for p, m in listed.items()))
            names = grouped.setdefault(key, [])
            names.append(filename)
            if len(names) == 1:  # a group starts: its wheel is compared with the reference
                ref = references.setdefault(architecture(filename), filename)
                if ref != filename:
                    pending.append(_group_diff(wheels, members, ref, filename, pool))
        differences = [d for diffs in pending for d in _finished(diffs, progress)]
    groups = tuple(Group(tuple(names), architecture(names[0]), len(members[names[0]]))
                   for names in grouped.values())
    return VariantsReport(requirement.name, version, groups, tuple(differences),
                          None if every else str(ctx.target), left_out)


# a member whose comparison waits on its two views being read: (path, ref, other, views)
Pending = MemberDiff | tuple[str, str, str, Future[View], Future[View]]


def _group_diff(wheels: dict[str, RemoteWheel], members: dict[str, dict[str, Member]],
                ref: str, other: str, pool: ThreadPoolExecutor) -> list[Pending]:
    """The members that differ between two wheels: by CRC and size first, then, for those
    that differ, by their dynamic views, read by `pool` (the comparisons wait in the list)."""
    a, b = members[ref], members[other]
    out: list[Pending] = []
    for path in sorted(set(a) | set(b)):
        if path not in b or path not in a:
            out.append(MemberDiff(path, ref, other, False,
                                  only_in="reference" if path in a else "other"))
        elif (a[path].crc, a[path].size) != (b[path].crc, b[path].size):
            out.append((path, ref, other, pool.submit(wheels[ref].view, a[path]),
                        pool.submit(wheels[other].view, b[path])))
    return out


def _finished(diffs: list[Pending], progress: Progress) -> list[MemberDiff]:
    out = []
    for diff in diffs:
        if isinstance(diff, MemberDiff):
            out.append(diff)
            continue
        path, ref, other, mine, theirs = diff
        progress(f"comparing {path}")
        out.append(compare(path, (ref, mine.result()), (other, theirs.result())))
    return out
