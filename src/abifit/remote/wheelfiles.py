"""Which wheel on the index ships a library: for a soname nothing provides, the wheels whose file
lists hold a file of that name, and the fix as a command.

Candidates come from a table (`data/library_wheels.json`): rules of soname patterns and the
requirements of the wheels that may ship them. For each candidate requirement the newest wheel that
fits the target is chosen and its zip directory is read (a range request or two, cached by the
wheel's sha256 like every other directory abifit reads); a member counts when its file name *is*
the soname. A wheel holds no symlinks, so `libfoo.so.13.0.88` does not provide `libfoo.so.13`: the
loader opens the name it was given, and only ldconfig would make the link.

A second search for the same soname is served from the cache: index pages while they are fresh
(`remote.PAGE_MAX_AGE`), directories for good, since a wheel's sha256 names its content. Offline
(`ctx.client` None) pages of any age are used.

Nothing here raises for what the index does: a project it lacks, no wheel for the target, an index
that cannot be reached, a directory not cached while offline. Each becomes a line in
`LibrarySearch.misses`, for the explanation.
"""

from __future__ import annotations

import json
import posixpath
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from abifit.errors import AbifitError, FormatError, first_line
from abifit.remote.packageindex import IndexFile, select_one
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheels import shared_wheel

DATA = Path(__file__).parent.parent / "data"
TABLE = DATA / "library_wheels.json"


# --- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WheelCandidate:
    """A requirement whose wheels may ship a library; `cuda` is the CUDA major they are built
    for, when they are built for one. In a rule the requirement may hold `{fields}` of the
    pattern; `LibraryTable.candidates` fills them in."""

    requirement: str
    cuda: int | None = None


@dataclass(frozen=True, slots=True)
class LibraryRule:
    """Soname patterns and the wheels to look in; `note` says why there is none to look in."""

    sonames: tuple[str, ...]
    wheels: tuple[WheelCandidate, ...]
    note: str | None = None

    def matches(self, soname: str) -> bool:
        """Whether one of the rule's patterns matches `soname`."""
        return any(_match(pattern, soname) is not None for pattern in self.sonames)


@dataclass(frozen=True, slots=True)
class LibraryTable:
    """The rules, in the order they are tried."""

    rules: tuple[LibraryRule, ...]

    def candidates(self, soname: str) -> tuple[WheelCandidate, ...]:
        """The concrete requirements to look in for `soname`, in table order, without repeats."""
        found: dict[str, WheelCandidate] = {}
        for rule in self.rules:
            for pattern in rule.sonames:
                fields = _match(pattern, soname)
                if fields is None:
                    continue
                for wheel in rule.wheels:
                    text = wheel.requirement.format_map(fields)
                    found.setdefault(text, WheelCandidate(text, wheel.cuda))
        return tuple(found.values())

    def note(self, soname: str) -> str | None:
        """Why no wheel ships `soname`, when the table says so."""
        return next((rule.note for rule in self.rules
                     if rule.note is not None and rule.matches(soname)), None)


_TOKEN = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}|\*")


@cache
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """`*` matches any run of characters but `/`, `{name}` a run of digits; the rest is literal."""
    parts, at = [], 0
    for token in _TOKEN.finditer(pattern):
        parts.append(re.escape(pattern[at:token.start()]))
        name = token.group(1)
        parts.append(f"(?P<{name}>[0-9]+)" if name else "[^/]*")
        at = token.end()
    parts.append(re.escape(pattern[at:]))
    return re.compile("".join(parts))


def _match(pattern: str, soname: str) -> dict[str, str] | None:
    found = _pattern_regex(pattern).fullmatch(soname)
    return None if found is None else found.groupdict()


def _template_fields(template: str) -> set[str]:
    return {name for _text, name, _spec, _conv in string.Formatter().parse(template)
            if name is not None}


def _rule(entry: object, where: str) -> LibraryRule:
    if not isinstance(entry, dict):
        raise FormatError(where, f"a rule is not an object: {entry!r}")
    sonames, wheels, note = entry.get("sonames"), entry.get("wheels"), entry.get("note")
    if (not isinstance(sonames, list) or not sonames
            or not all(isinstance(s, str) and s for s in sonames)):
        raise FormatError(where, f"a rule's 'sonames' is not a list of patterns: {sonames!r}")
    if not isinstance(wheels, list) or (not wheels and not isinstance(note, str)):
        raise FormatError(where, f"the rule for {sonames[0]!r} has neither wheels nor a note")
    fields = set.intersection(*(set(_pattern_regex(p).groupindex) for p in sonames))
    return LibraryRule(tuple(sonames), tuple(_candidate(w, fields, where) for w in wheels),
                       note if isinstance(note, str) else None)


def _candidate(entry: object, fields: set[str], where: str) -> WheelCandidate:
    if not isinstance(entry, dict) or not isinstance(entry.get("requirement"), str):
        raise FormatError(where, f"a wheel entry lacks a 'requirement': {entry!r}")
    text: str = entry["requirement"]
    cuda = entry.get("cuda")
    if cuda is not None and (not isinstance(cuda, int) or isinstance(cuda, bool)):
        raise FormatError(where, f"{text!r}: 'cuda' is not a number: {cuda!r}")
    unknown = _template_fields(text) - fields
    if unknown:
        raise FormatError(where, f"{text!r} uses {', '.join(sorted(unknown))}, which not every "
                                 "pattern of its rule captures")
    try:
        Requirement(text.format_map(dict.fromkeys(fields, "0")))
    except InvalidRequirement as e:
        raise FormatError(where, f"invalid requirement {text!r}: {e}") from e
    return WheelCandidate(text, cuda)


def parse_library_table(document: object, where: str) -> LibraryTable:
    """The table from its JSON document: `{"libraries": [{"sonames": [...], "wheels":
    [{"requirement": ..., "cuda": ...}], "note": ...}]}`."""
    rules = document.get("libraries") if isinstance(document, dict) else None
    if not isinstance(rules, list):
        raise FormatError(where, "no 'libraries' list")
    return LibraryTable(tuple(_rule(entry, where) for entry in rules))


@cache
def load_library_table() -> LibraryTable:
    """The table abifit ships."""
    return parse_library_table(json.loads(TABLE.read_text("utf-8")), str(TABLE))


# --- looking in wheels ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LibraryWheel:
    """A wheel whose file list holds the soname: `member` is its path inside the wheel, which is
    also where it lands under site-packages."""

    soname: str
    project: str
    version: str
    filename: str
    member: str
    requirement: str  # the candidate that chose this wheel
    cuda: int | None = None
    file: IndexFile | None = field(default=None, compare=False, repr=False)  # to read it

    @property
    def directory(self) -> str:
        """The directory under site-packages, e.g. `nvidia/cu13/lib`."""
        return posixpath.dirname(self.member)

    @property
    def command(self) -> str:
        """The pip command that installs this wheel's version."""
        return f"pip install '{self.project}=={self.version}'"


@dataclass(frozen=True, slots=True)
class LibrarySearch:
    """What a search found: the wheels that ship the soname, one line per candidate that did not
    (and why), and the table's note when it knows no wheel ships it."""

    soname: str
    wheels: tuple[LibraryWheel, ...]
    misses: tuple[str, ...] = ()
    note: str | None = None

    @property
    def reason(self) -> str:
        """Why nothing was found, in one line (empty when something was)."""
        if self.wheels:
            return ""
        if self.note is not None:
            return f"no wheel ships {self.soname}: {self.note}"
        if not self.misses:
            return f"abifit knows no wheel that may ship {self.soname}"
        return f"abifit found no wheel that ships {self.soname} ({'; '.join(self.misses)})"


def _silent(_message: str) -> None:
    return None


def find_library_wheels(soname: str, ctx: RemoteContext, *, table: LibraryTable | None = None,
                        cuda_major: int | None = None,
                        progress: Callable[[str], None] = _silent) -> LibrarySearch:
    """The wheels on ctx's index whose newest release for ctx.target ships `soname`.

    With `cuda_major`, candidates built for another CUDA major are left out, unless that would
    leave none (a soname such as `libcudart.so.13` names its major itself).
    """
    table = load_library_table() if table is None else table
    candidates = _for_cuda(table.candidates(soname), cuda_major)
    found: list[LibraryWheel] = []
    misses: list[str] = []
    for candidate in candidates:
        try:
            hits = _look_in(soname, candidate, ctx, progress)
        except AbifitError as e:
            misses.append(f"{candidate.requirement}: {first_line(e)}")
            continue
        if isinstance(hits, str):
            misses.append(hits)
        else:
            found += hits
    return LibrarySearch(soname, tuple(found), tuple(misses), table.note(soname))


def _for_cuda(candidates: tuple[WheelCandidate, ...], major: int | None
              ) -> tuple[WheelCandidate, ...]:
    if major is None:
        return candidates
    kept = tuple(c for c in candidates if c.cuda in (None, major))
    return kept or candidates


def _look_in(soname: str, candidate: WheelCandidate, ctx: RemoteContext,
             progress: Callable[[str], None]) -> list[LibraryWheel] | str:
    """The hits in the newest wheel the candidate selects, or a line saying it has none."""
    requirement = Requirement(candidate.requirement)
    files = ctx.index.project_files(requirement.name)
    chosen = select_one(files, requirement, ctx.target, prereleases=ctx.prereleases)
    progress(f"{soname}: reading the file list of {chosen.file.filename}")
    members = shared_wheel(chosen.file, ctx).members()
    hits = [LibraryWheel(soname, requirement.name, str(chosen.version), chosen.file.filename,
                         m.path, candidate.requirement, candidate.cuda, chosen.file)
            for m in members if posixpath.basename(m.path) == soname]
    if not hits:
        return f"{requirement.name} {chosen.version} has no file named {soname}"
    return hits


# --- the fix, in words ----------------------------------------------------------------------------


def origin_path(module: str, directory: str) -> str:
    """The `$ORIGIN`-relative RPATH entry that leads from a module to a directory (both relative
    to site-packages): `torch/lib/libtorch_cuda.so`, `nvidia/cu13/lib` ->
    `$ORIGIN/../../nvidia/cu13/lib`."""
    relative = posixpath.relpath(directory, posixpath.dirname(module) or ".")
    return "$ORIGIN" if relative == "." else f"$ORIGIN/{relative}"


def render_library_fix(search: LibrarySearch, *, site_packages: str = "<site-packages>",
                       needed_by: str | None = None) -> str:
    """The fix for a missing soname as text: the pip command for each wheel that ships it, where
    the file lands, and what makes the loader look there. `needed_by` is the path (relative to
    site-packages) of the module that needs it, to name the RPATH entry that would reach it."""
    if not search.wheels:
        return search.reason
    lines = []
    if len(search.wheels) > 1:
        cuda_lines = len({w.cuda for w in search.wheels}) > 1
        which = ("the one built for the CUDA the rest of the environment uses" if cuda_lines
                 else "one of them")
        lines.append(f"{search.soname} is in {_joined(_label(w) for w in search.wheels)}; "
                     f"install {which}:")
    width = max(len(w.command) for w in search.wheels)
    for wheel in search.wheels:
        lines.append(f"{wheel.command:<{width}}  # puts {site_packages}/{wheel.member}")
    directories = list(dict.fromkeys(w.directory for w in search.wheels))
    lines.append(_search_note(directories, needed_by))
    return "\n".join(lines)


def _label(wheel: LibraryWheel) -> str:
    cuda = f" (CUDA {wheel.cuda})" if wheel.cuda is not None else ""
    return f"{wheel.project} {wheel.version}{cuda}"


def _joined(items: Iterable[str]) -> str:
    listed = list(items)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"


def _search_note(directories: list[str], needed_by: str | None) -> str:
    where, it = ("that directory", "it") if len(directories) == 1 else ("those directories", "them")
    if needed_by is not None:
        entries = ":".join(origin_path(needed_by, d) for d in directories)
        rpath = f"the RPATH or RUNPATH of {needed_by} reaches {it} ({entries})"
    else:
        rpath = (f"the RPATH or RUNPATH of the module that needs it reaches {it} "
                 f"($ORIGIN/../{directories[0]} from a module one directory below site-packages)")
    loaded = "when a library of that soname is already loaded"
    if all(d.startswith("nvidia/") for d in directories):
        loaded += " (importing torch loads the NVIDIA libraries torch links)"
    return (f"The loader looks in {where} only when {rpath}, when LD_LIBRARY_PATH names {it}, "
            f"or {loaded}.")
