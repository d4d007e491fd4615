"""`abifit history SYMBOL --in PACKAGE`: which releases of a package define a symbol, and where
its signature changed.

The releases come from the index (`--versions SPEC`, one wheel per release that the target
accepts, as `matrix` chooses them) or, without a specifier, from the symbol store. A release
whose wheel the store does not hold yet is read once, by range requests, and recorded
(`remote.store`); after that, history is a query. The symbol is given mangled, demangled, or as
a glob over either: a C++ function is followed under every form its name took, so a mangled
name that a later release no longer defines shows the form that replaced it, and the parameter
that changed (`formats.demangle.compare_signatures`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from abifit.errors import AbifitError, UsageError
from abifit.formats.demangle import compare_signatures, demangle, parse_signature
from abifit.remote.diskcache import Cache
from abifit.remote.packageindex import IndexFile
from abifit.remote.recording import is_recorded, record_views
from abifit.remote.runcontext import RemoteContext
from abifit.remote.store import StoredSymbol, SymbolStore
from abifit.remote.wheels import RemoteWheel

Progress = Callable[[str], None]
T = TypeVar("T")
NEWEST_BY_DEFAULT = 5  # releases read when neither --versions nor the store names any
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Form:
    """One mangled name the symbol takes, and the releases (of those examined) that define it."""

    name: str
    demangled: str
    releases: tuple[str, ...]  # oldest first
    versions: tuple[str, ...]  # the symbol version nodes it is defined under ("" for none)
    members: tuple[str, ...]  # the wheel members that define it


@dataclass(frozen=True, slots=True)
class Change:
    """Between two releases examined one after the other, a form gone and another come."""

    release: str  # the first release with `new`
    previous: str  # the release before it, which defines `old`
    old: str
    new: str
    description: str  # `SignatureDiff.describe()`, or what was added or removed


@dataclass(frozen=True, slots=True)
class HistoryReport:
    """What `abifit history` found."""

    query: str
    package: str
    releases: tuple[str, ...]  # the releases examined, oldest first
    forms: tuple[Form, ...]
    changes: tuple[Change, ...]
    read: tuple[str, ...]  # the releases read from the index in this run (not in the store)

    @property
    def found(self) -> bool:
        return bool(self.forms)


# ---------------------------------------------------------------------------------------------
# The query


def is_mangled(query: str) -> bool:
    """Whether `query` names symbols as the object files spell them (a C++ `_Z...` name, or a
    C name such as `PyInit_x`), not as demangled text."""
    return not any(c in query for c in " :(<,")


def candidates(store: SymbolStore, package: str, query: str) -> list[StoredSymbol]:
    """Every definition in the store of a symbol `query` names, under each form of its name."""
    if is_mangled(query):
        rows = store.symbols(package, query, defined=True)
        names = {r.name for r in rows}
        for qualified in {q for n in names if (q := _qualified(n))}:
            rows += _same_function(store, package, qualified, names)
        asked = _qualified(query) if not _GLOB.search(query) and not rows else None
        if asked:  # no release defines this form: those the function took
            rows += _same_function(store, package, asked, set())
        if not rows and not query.startswith("_Z") and _IDENTIFIER.fullmatch(query):
            rows = _named(store, package, query)  # no C symbol of that name: a C++ function's
        return rows
    return _matching_text(store, package, query)


def _named(store: SymbolStore, package: str, name: str) -> list[StoredSymbol]:
    """The definitions of the C++ functions called `name` in any namespace or class."""
    out = []
    for mangled in store.names_containing(package, name):
        qualified = _qualified(mangled)
        if qualified is not None and qualified.rsplit("::", 1)[-1] == name:
            out += store.symbols(package, mangled, defined=True)
    return out


def _qualified(name: str) -> str | None:
    signature = parse_signature(name)
    return signature.qualified_name if signature is not None and signature.is_function else None


def _same_function(store: SymbolStore, package: str, qualified: str,
                   known: set[str]) -> list[StoredSymbol]:
    """The definitions of the other forms of the function named `qualified`."""
    words = _IDENTIFIER.findall(qualified.rsplit("::", 1)[-1])
    if not words:
        return []
    out = []
    for name in store.names_containing(package, words[0]):
        if name not in known and _qualified(name) == qualified:
            out += store.symbols(package, name, defined=True)
    return out


def _matching_text(store: SymbolStore, package: str, query: str) -> list[StoredSymbol]:
    """Definitions whose demangled text matches `query`: the whole text when the query has a
    parameter list, else the qualified name; a glob when it holds * ? or [."""
    head = query.split("(", 1)[0]
    words = [w for w in _IDENTIFIER.findall(head.rsplit("::", 1)[-1]) if w]
    if not words:
        raise UsageError(f"history: {query!r} names no symbol (give a mangled name, a "
                         "demangled one such as 'c10::cuda::f(int)', or a glob)")
    glob = bool(_GLOB.search(query))
    out = []
    for name in store.names_containing(package, max(words, key=len)):
        text = demangle(name)
        subject = text if "(" in query else (_qualified(name) or text)
        if (fnmatch.fnmatchcase(subject, query) if glob else subject == _normalised(query)):
            out += store.symbols(package, name, defined=True)
    return out


def _normalised(text: str) -> str:
    """Demangled text as `c++filt` spaces it: ", " between parameters, no space inside parens."""
    text = re.sub(r"\s*,\s*", ", ", text.strip())
    return re.sub(r"\(\s+|\s+\)", lambda m: m.group(0).strip(), text)


# ---------------------------------------------------------------------------------------------
# Forms and changes (pure)


def forms_of(rows: Iterable[StoredSymbol], releases: Sequence[str]) -> tuple[Form, ...]:
    """The forms the rows define, each with the releases (of `releases`, in that order) that
    define it; ordered by the first release that defines each, then by name."""
    order = {r: i for i, r in enumerate(releases)}
    by_name: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for row in rows:
        if row.obj.version not in order:
            continue
        found, versions, members = by_name.setdefault(row.name, (set(), set(), set()))
        found.add(row.obj.version)
        versions.add(row.version or "")
        members.add(row.obj.member)
    forms = [Form(name, demangle(name), tuple(sorted(found, key=order.__getitem__)),
                  tuple(sorted(versions)), tuple(sorted(members)))
             for name, (found, versions, members) in by_name.items()]
    return tuple(sorted(forms, key=lambda f: (order[f.releases[0]], f.name)))


def changes_of(forms: Sequence[Form], releases: Sequence[str]) -> tuple[Change, ...]:
    """Where, from one release examined to the next, forms of the symbol went and came: a form
    gone and one come at the same release are a change of signature, described parameter by
    parameter; otherwise each is said alone."""
    defined = [{f.name for f in forms if r in f.releases} for r in releases]
    out: list[Change] = []
    for i in range(1, len(releases)):
        before, after = defined[i - 1], defined[i]
        if not before or not after:  # not defined at all on one side: nothing to compare
            continue
        gone, come = sorted(before - after), sorted(after - before)
        for old, new in _pairs(gone, come):
            out.append(Change(releases[i], releases[i - 1], old, new, _describe(old, new)))
    return tuple(out)


def ranges(found: Sequence[str], releases: Sequence[str]) -> str:
    """`found` as runs of consecutive releases of `releases`: "2.6.0-2.9.1, 2.11.0"."""
    position = {r: i for i, r in enumerate(releases)}
    runs: list[list[str]] = []
    for release in sorted(found, key=position.__getitem__):
        if runs and position[release] == position[runs[-1][-1]] + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def span(releases: Sequence[str]) -> str:
    """`3 releases, 2.9.0 to 2.10.0`."""
    if not releases:
        return "no releases"
    if len(releases) == 1:
        return f"1 release: {releases[0]}"
    return f"{len(releases)} releases, {releases[0]} to {releases[-1]}"


def _pairs(gone: list[str], come: list[str]) -> list[tuple[str, str]]:
    """Each form gone with the form come that is the same function, when there is one; the
    others with "" on their missing side."""
    pairs: list[tuple[str, str]] = []
    left = list(come)
    for old in gone:
        same = next((new for new in left if _qualified(new) and _qualified(new) == _qualified(old)),
                    None)
        if same is None and len(gone) == 1 and len(left) == 1:
            same = left[0]
        if same is not None:
            left.remove(same)
        pairs.append((old, same or ""))
    pairs += [("", new) for new in left]
    return pairs


def _describe(old: str, new: str) -> str:
    if not new:
        return f"no longer defined: {demangle(old)}"
    if not old:
        return f"defined from here: {demangle(new)}"
    diff = compare_signatures(old, new)
    return diff.describe() if diff is not None else f"{old} -> {new}"


# ---------------------------------------------------------------------------------------------
# The releases, read and recorded


def history(query: str, package: str, spec: str | None, ctx: RemoteContext,
            store: SymbolStore, progress: Progress, jobs: int = 4,
            newest: int | None = None) -> HistoryReport:
    """Which releases of `package` (those `spec` selects, the `newest` of them when given,
    else those the store holds, else the newest on the index) define the symbol `query`, and
    where its signature changed."""
    from abifit.engines.matrix import host_wheels

    name = canonicalize_name(package)
    recorded = store.releases(name) if spec is None else []
    if recorded:  # oldest first, a release once however many of its wheels are recorded
        versions = list(dict.fromkeys(version for version, _wheel in recorded))
        read: list[str] = []
    else:
        _check_specifier(spec)
        _, files = host_wheels(f"{package}{spec or ''}", ctx)  # newest first
        if spec is None or newest is not None:
            files = files[:newest or NEWEST_BY_DEFAULT]
        files.reverse()
        versions = [_version_of(f) for f in files]
        missing = [f for f in files if not is_recorded(store, f, ctx.cache)]
        read = [_version_of(f) for f in missing]
        _record(missing, ctx, store, progress, jobs)
    rows = candidates(store, name, query)
    forms = forms_of(rows, versions)
    return HistoryReport(query, name, tuple(versions), forms, changes_of(forms, versions),
                         tuple(read))


def history_store(cache: Cache | None) -> SymbolStore:
    """The symbol store history keeps what it reads in: the cache directory's (`CacheError`
    when it cannot be opened); a UsageError without a cache."""
    from abifit.engines.index import open_store

    if cache is None:
        raise UsageError("history keeps what it reads in the symbol store of the cache "
                         "directory: it cannot run with --no-cache")
    return open_store(cache.root)


def _check_specifier(spec: str | None) -> None:
    """A `--versions` that is not a version specifier is a usage error, said as such."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(spec or "")
    except InvalidSpecifier as e:
        raise UsageError(f"--versions {spec!r}: not a version specifier (e.g. '>=2.6,<2.11')",
                         ) from e


def _version_of(file: IndexFile) -> str:
    wheel = file.wheel()
    assert wheel is not None  # host_wheels gives wheels only
    return str(wheel[1])


def _record(files: Sequence[IndexFile], ctx: RemoteContext, store: SymbolStore,
            progress: Progress, jobs: int) -> None:
    """Read the ELF members of each wheel (range requests, through the views cache) and record
    them in the store, `jobs` wheels at a time."""
    def one(file: IndexFile) -> None:
        progress(f"reading {file.filename}")
        record_views(RemoteWheel(file, ctx), store, progress)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, files))


# ---------------------------------------------------------------------------------------------
# The reverse question: which releases of an extension fit a release of the package it needs


@dataclass(frozen=True, slots=True)
class Fit:
    """One release of an extension against one release of the package whose symbols it needs:
    how many of those it needs, and those the package's release does not define."""

    release: str
    needed: int
    missing: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.missing


def fitting_releases(extension: str, owner: str, version: str, owns: Callable[[str], bool],
                     ctx: RemoteContext, store: SymbolStore, progress: Progress,
                     newest: int = NEWEST_BY_DEFAULT, jobs: int = 4) -> tuple[Fit, ...]:
    """The `newest` releases of `extension` on the index, newest first, each with the symbols
    it needs that `owns` says are `owner`'s (its C++ namespaces) and that `owner==version` does
    not define. The wheels are read into the store first (those it lacks)."""
    from abifit.engines.matrix import host_wheels

    _, files = host_wheels(extension, ctx)
    files = files[:newest]
    _, owner_files = host_wheels(f"{owner}=={version}", ctx)
    wanted = [f for f in [*owner_files[:1], *files] if not is_recorded(store, f, ctx.cache)]
    _record(wanted, ctx, store, progress, jobs)
    defined = store.defined_names(owner, version)
    fits = []
    for file in files:
        release = _version_of(file)
        needed = sorted(n for n in store.needed_from(extension, release, ()) if owns(n))
        fits.append(Fit(release, len(needed), tuple(n for n in needed if n not in defined)))
    return tuple(fits)


# ---------------------------------------------------------------------------------------------
# The seams `explain` asks the releases through


def release_seams(remote: Callable[[], RemoteContext], store_root: Path, releases: int,
                  progress: Progress,
                  ) -> tuple[Callable[[str, str, str | None], HistoryReport | None],
                             Callable[[str, str, str, Callable[[str], bool]],
                                      tuple[Fit, ...] | None]]:
    """`explain`'s `SymbolHistory` and `ExtensionFits` over the index `remote` makes and the
    symbol store under `store_root`: `history` over the `releases` newest releases up to the
    version asked about, and the `releases` newest releases of the extension with what they
    need of that version. A seam answers None when the store cannot be opened or the index
    cannot say: the explanation goes on without it."""
    from abifit.engines.index import open_store

    def with_store(ask: Callable[[SymbolStore], T]) -> T | None:
        try:
            with open_store(store_root) as store:
                return ask(store)
        except AbifitError:
            return None

    def defining(symbol: str, package: str, version: str | None) -> HistoryReport | None:
        public = version.split("+", 1)[0] if version else None
        return with_store(lambda store: history(
            symbol, package, f"<={public}" if public else None, remote(), store, progress,
            newest=releases))

    def fitting(extension: str, package: str, version: str,
                owns: Callable[[str], bool]) -> tuple[Fit, ...] | None:
        return with_store(lambda store: fitting_releases(
            extension, package, version, owns, remote(), store, progress, newest=releases))

    return defining, fitting
