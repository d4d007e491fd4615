"""An ld.so simulation for a Python process: will this object load, and if not, what fails first.

This module is pure: it reads files only through an `ObjectSource` it is given, and host facts
(search paths, ld.so.cache) arrive as values. It follows glibc's `ld.so` for `dlopen(RTLD_NOW)`:

1. Mapping, breadth first over DT_NEEDED. A name without a slash first matches an object already
   in the process (by DT_SONAME, by a name it was loaded under, or by path); otherwise it is
   searched: DT_RPATH of the requesting object and of its loaders up to the caller of `dlopen`
   (an object with DT_RUNPATH contributes no DT_RPATH), the executable's DT_RPATH,
   LD_LIBRARY_PATH, DT_RUNPATH of the requesting object only, ld.so.cache, the system
   directories (the last two skipped under DF_1_NODEFLIB). `$ORIGIN`, `$LIB` and `$PLATFORM`
   expand; a file of the wrong ELF class or machine is skipped. Every path tried is recorded.
2. Version requirements (DT_VERNEED) of the new objects, in search-list order: the named library
   must define the version unless the requirement is weak.
3. Binding, dependencies first: every non-weak undefined symbol a relocation refers to must be
   defined in the global scope (the executable, its dependencies, LD_PRELOAD and RTLD_GLOBAL
   objects) or in the search list of the object passed to `dlopen`, with glibc's version rules.
   Each object's exports are indexed once, as sets of the names each kind of reference binds
   to (`Exports`), so binding is a few set operations per object of the scope, not a search of
   the scope per symbol.

A host profile may *assume* libraries that are not there (the NVIDIA driver's `libcuda.so.1` on a
machine without a GPU): such a soname, when the search finds nothing, maps to a placeholder that
defines the symbols matching a pattern (the driver API's `cu*` functions), so the rest of the
load can still be judged.

The first failure is reported with the text `dlerror()` gives; every other problem found is kept
too. A failed `dlopen` leaves the process as it was, as ld.so does.
"""

from __future__ import annotations

import posixpath
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import chain, compress
from typing import Protocol

from abifit.errors import ElfError, FormatError
from abifit.formats.elf import (
    DF_1_PIE,
    VERSYM_INDEX,
    Binding,
    ByteOrder,
    DynamicInfo,
    ElfClass,
    ElfImage,
    FileType,
    SymbolTable,
    SymbolType,
    Visibility,
)
from abifit.formats.objects import ObjectSource, RelocationSource
from abifit.sim.derivation import NumpyReason

DF_1_NODEFLIB = 0x800
# how a load that kills the process is said (`crashes`): a file cut short inside what the
# loader maps (`abifit.formats.elf.cut_short`)
CRASH = "the process is killed by SIGBUS (Bus error)"


def crashes(error: str | None) -> bool:
    """Whether a loader error is a load that kills the process (`CRASH`): no exception is
    raised, and no `try` around the import goes on after it."""
    return error is not None and CRASH in error

# auditwheel vendors a library as `<pkg>.libs/libz-<hash>.so.1` or `libz.<hash>.so.1`.
_VENDORED = re.compile(r"[-.][0-9a-f]{8}\.so")

_ALLOWED_TYPES = frozenset(
    {SymbolType.NOTYPE, SymbolType.OBJECT, SymbolType.FUNC, SymbolType.COMMON, SymbolType.TLS,
     SymbolType.GNU_IFUNC}
)
_EXPORTED_BINDINGS = frozenset({Binding.GLOBAL, Binding.WEAK, Binding.GNU_UNIQUE})


class Cache(Protocol):
    """ld.so.cache as the loader consults it."""

    def lookup(
        self, soname: str, arch_flags: int, *, hwcaps_subdirs: Sequence[str] = (),
        legacy_hwcaps: Sequence[str] = ("tls",),
    ) -> str | None: ...


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Host facts the search needs."""

    ld_library_path: tuple[str, ...] = ()
    ld_preload: tuple[str, ...] = ()
    system_dirs: tuple[str, ...] = ("/lib", "/usr/lib")
    lib: str = "lib"
    platform: str = "x86_64"
    cache: Cache | None = None
    cache_id: Callable[[int, int], int] | None = None
    subdirs: tuple[str, ...] = ()
    hwcaps: tuple[str, ...] = ()
    legacy_hwcaps: tuple[str, ...] = ("tls",)
    assumed: tuple[tuple[str, str], ...] = ()  # (soname, regex of the names it defines)
    # names not checked when nothing defines them (the C API of a target Python that this
    # machine has no interpreter of): recorded in LoadResult.unchecked, not problems
    unchecked: str | None = None
    # a copy of a library the search did not find, located elsewhere (soname -> where it is
    # and its image), whose definitions count when the symbols are bound past that miss
    stand_in: Callable[[str], tuple[str, ElfImage] | None] | None = None


ASSUMED_DIR = "<assumed>"
# Libraries of the NVIDIA driver (not in any wheel), with the names they define: what
# `check` always assumes present (and reports), `doctor --assume-driver` when asked
DRIVER_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("libcuda.so.1", r"cu[A-Z]\w*"),
    ("libnvidia-ml.so.1", r"nvml[A-Z]\w*"),
)


def cached_paths(config: SearchConfig, names: Iterable[str], like: ElfImage) -> list[str]:
    """Where ld.so.cache puts the libraries `names` for an object of the class and machine of
    `like` (those it has), as the search below asks it: what a caller may read ahead of a
    simulation that will open them."""
    if config.cache is None or config.cache_id is None:
        return []
    flags = config.cache_id(like.elf_class, like.machine)
    found = (config.cache.lookup(name, flags, hwcaps_subdirs=config.hwcaps,
                                 legacy_hwcaps=config.legacy_hwcaps) for name in names)
    return [path for path in found if path is not None]


def placeholder_image(soname: str, like: ElfImage) -> ElfImage:
    """An empty object standing for an assumed library, of the class and machine of `like`."""
    empty = SymbolTable((), b"", b"", array("I"), array("Q"), array("Q"), None, {})
    return ElfImage(
        name=f"{ASSUMED_DIR}/{soname}", elf_class=like.elf_class, byte_order=like.byte_order,
        machine=like.machine, file_type=FileType.DYN, osabi=0, interpreter=None, loads=(),
        dynamic=DynamicInfo((), soname, (), (), 0, 0), symbols=empty, version_needs=(),
        version_defs=(), sections=(), section_problem=None,
    )


class Via(Enum):
    """Where a library was looked for or found."""

    LOADED = "already loaded"
    PATH = "path"
    RPATH = "DT_RPATH"
    EXE_RPATH = "DT_RPATH of the executable"
    LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
    RUNPATH = "DT_RUNPATH"
    CACHE = "ld.so.cache"
    SYSTEM = "system directory"
    ASSUMED = "assumed by the host profile"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One path the search tried, and what it found there; for a file the loader refuses,
    what glibc says of it (`said`), when abifit knows its words."""

    path: str
    via: Via
    owner: str | None
    outcome: str
    said: str | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one DT_NEEDED entry (or the dlopen argument) was resolved."""

    requester: str | None
    name: str
    path: str | None
    via: Via | None
    attempts: tuple[Attempt, ...]


class ProblemKind(Enum):
    MISSING_LIBRARY = "missing-library"
    WRONG_ELF_CLASS = "wrong-elf-class"
    UNREADABLE_OBJECT = "unreadable-object"
    MISSING_VERSION = "missing-version"
    UNDEFINED_SYMBOL = "undefined-symbol"
    # above the loader: the object loads, and its import raises (`sim.numpyabi`)
    NUMPY_C_API = "numpy-c-api"


# the problems of a library the search did not find (or found unusable)
_NOT_FOUND = frozenset({ProblemKind.MISSING_LIBRARY, ProblemKind.WRONG_ELF_CLASS,
                        ProblemKind.UNREADABLE_OBJECT})


@dataclass(frozen=True, slots=True)
class LoadProblem:
    """One reason an object does not load, with the text glibc prints for it."""

    kind: ProblemKind
    object: str
    message: str
    symbol: str | None = None
    version: str | None = None
    library: str | None = None
    resolution: Resolution | None = None
    scope: tuple[str, ...] = ()
    # an undefined symbol found past libraries the search did not find (glibc stops at the
    # first of those, so it would say this only once they are found): those sonames, and the
    # copies located elsewhere that stood in for them in the scope
    behind: tuple[str, ...] = ()
    stand_ins: tuple[str, ...] = ()
    # above the loader (`NUMPY_C_API`): why the import raises, and what is printed before it
    numpy_reason: NumpyReason | None = None
    printed: str | None = None


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The outcome of one simulated dlopen."""

    target: str
    loads: bool
    error: str | None
    problems: tuple[LoadProblem, ...]
    resolutions: tuple[Resolution, ...]
    search_list: tuple[str, ...]
    duplicates: tuple[tuple[str, str, str], ...] = ()
    unchecked: tuple[str, ...] = ()  # undefined names SearchConfig.unchecked let pass


@dataclass(frozen=True, slots=True)
class Exports:
    """What an object's definitions satisfy, by glibc's check_match, as sets of names: those
    an unversioned reference binds to, those any versioned reference binds to, and per version
    name those defined at it.

    A definition counts when other objects can bind to it: defined, not local, of an allowed
    type and visibility, with a value (or TLS). A versioned reference binds to a definition at
    its version, or to one whose version hash is 0 that is not hidden (index 0, or the base
    index 1 of an object that defines no versions); an unversioned one binds to a definition at
    index 0, 1 or 2, or to the only one of its name that is not hidden. An object without
    DT_VERSYM satisfies every reference to a name it exports.
    """

    plain: frozenset[str]
    any_version: frozenset[str]
    by_version: Mapping[str, frozenset[str]]

    def binds(self, name: str, version: str | None) -> bool:
        """Whether a reference to `name` (at `version`) binds to a definition here."""
        if version is None:
            return name in self.plain
        return name in self.any_version or name in self.by_version.get(version, ())


# per st_info byte: 1 for a binding and type other objects bind to; 1 for STT_TLS; 1 unless
# the binding is weak
_BINDABLE_INFO = bytes(int((b >> 4) in _EXPORTED_BINDINGS and (b & 0xF) in _ALLOWED_TYPES)
                       for b in range(256))
_TLS_INFO = bytes(int((b & 0xF) == SymbolType.TLS) for b in range(256))
_NOT_WEAK_INFO = bytes(int((b >> 4) != Binding.WEAK) for b in range(256))
# per st_other byte: 1 unless the visibility is hidden or internal
_VISIBLE_OTHER = bytes(int((b & 0x3) not in (Visibility.HIDDEN, Visibility.INTERNAL))
                       for b in range(256))


def _exported(table: SymbolTable) -> bytes:
    """1 for each entry of `table` that other objects can bind to, else 0: computed in bulk
    (libtorch has tens of thousands of symbols), each condition a mask of 0/1 bytes read as
    one integer."""
    defined = _nonzero(table.section_indexes)
    bindable = _bits(table.info.translate(_BINDABLE_INFO))
    visible = _bits(table.other.translate(_VISIBLE_OTHER))
    valued = _nonzero(table.values) | _bits(table.info.translate(_TLS_INFO))
    return (defined & bindable & visible & valued).to_bytes(len(table), "little")


def _bits(flags: bytes) -> int:
    return int.from_bytes(flags, "little")


_NONZERO_BYTE = bytes([0]) + bytes([1]) * 255


def _nonzero(column: array[int]) -> int:
    """A mask (one byte, 0 or 1, per entry, read as one integer) of the entries of `column`
    that are not 0: an entry is 0 when each of its bytes is, so the column's bytes are taken a
    byte position at a time (slices, in C), not an entry at a time."""
    raw, size = column.tobytes(), column.itemsize
    mask = 0
    for k in range(size):
        mask |= _bits(raw[k::size].translate(_NONZERO_BYTE))
    return mask


def _zero(column: array[int]) -> int:
    """The mask of the entries of `column` that are 0 (see `_nonzero`)."""
    return _nonzero(column) ^ _bits(b"\x01" * len(column))


@dataclass(frozen=True, slots=True)
class _Group:
    """The exported names of an object that carry one DT_VERSYM value."""

    version: str | None
    index: int
    hidden: bool
    names: list[str]


def exports_of(image: ElfImage) -> Exports:
    """The names `image` exports, for binding (see `Exports`)."""
    table = image.symbols
    mask = _exported(table)
    exported = list(compress(table.names, mask))
    whole = frozenset(exported)
    if table.versym is None:
        return Exports(whole, whole, {})
    own_versions = bool(image.version_defs)
    groups = _groups(table, table.versym, mask)
    if len(whole) == len(exported):  # each name once: every one not hidden is the only one
        plain = _union([g for g in groups if g.index <= 2 or not g.hidden], groups, whole)
    else:
        plain = (_union([g for g in groups if g.index <= 2], groups, whole)
                 | _once(chain.from_iterable(g.names for g in groups if not g.hidden)))
    hash_zero = [g for g in groups
                 if not g.hidden and (g.index == 0 or (g.index == 1 and not own_versions))]
    by_version: dict[str, list[_Group]] = {}
    for g in groups:
        if g.version is not None:
            by_version.setdefault(g.version, []).append(g)
    return Exports(plain, _union(hash_zero, groups, whole),
                   {version: _union(parts, groups, whole) for version, parts in by_version.items()})


def _groups(table: SymbolTable, versym: array[int], mask: bytes) -> list[_Group]:
    """The names of the entries `mask` picks, grouped by their DT_VERSYM value."""
    if len(set(compress(versym, mask))) == 1:  # the usual case: one value, grouped in bulk
        first = mask.index(1)
        return [_group(table, versym[first], first, list(compress(table.names, mask)))]
    entries: dict[int, list[int]] = {}
    for i in compress(range(len(versym)), mask):
        entries.setdefault(versym[i], []).append(i)
    return [_group(table, raw, at[0], [table.names[i] for i in at])
            for raw, at in entries.items()]


def _group(table: SymbolTable, raw: int, first: int, names: list[str]) -> _Group:
    version, _file, hidden = table.version_of(first)
    return _Group(version, raw & VERSYM_INDEX, hidden, names)


def _union(parts: list[_Group], groups: list[_Group], whole: frozenset[str]) -> frozenset[str]:
    """The names of `parts`, a selection of `groups`: `whole`, the names of all of them, when
    nothing was left out (no copy)."""
    if len(parts) == len(groups):
        return whole
    return frozenset(chain.from_iterable(g.names for g in parts))


def _once(names: Iterable[str]) -> frozenset[str]:
    """The names that occur once in `names`."""
    return frozenset(name for name, count in Counter(names).items() if count == 1)


Reference = tuple[str, str | None]  # an undefined symbol's name and version


@dataclass(frozen=True, slots=True)
class Needs:
    """The undefined symbols an object binds, as sets of names: those without a version, and
    per version name those required at it."""

    plain: frozenset[str]
    by_version: Mapping[str, frozenset[str]]


def needs_of(references: Iterable[Reference]) -> Needs:
    """The references as sets (their order matters only to the problems reported)."""
    plain: set[str] = set()
    by_version: dict[str, set[str]] = {}
    for name, version in references:
        if version is None:
            plain.add(name)
        else:
            by_version.setdefault(version, set()).add(name)
    return Needs(frozenset(plain), {v: frozenset(names) for v, names in by_version.items()})


def unbound(needs: Sequence[Needs], scope: Sequence[Exports]) -> set[Reference]:
    """The references of `needs` that no object of `scope` satisfies (glibc's lookup stops at
    the first that does, so whether one does is all that matters): set operations per object
    of the scope, not a search of the scope per reference."""
    plain: set[str] = set().union(*(n.plain for n in needs))
    versioned: dict[str, set[str]] = {}
    for need in needs:
        for version, required in need.by_version.items():
            versioned.setdefault(version, set()).update(required)
    for exports in scope:
        if not plain and not versioned:
            break
        if plain:
            plain = plain - exports.plain
        for version, names in list(versioned.items()):
            left = names - exports.any_version if exports.any_version else names
            defined = exports.by_version.get(version)
            left = left - defined if defined else left
            if left:
                versioned[version] = left
            else:
                del versioned[version]
    return {(name, None) for name in plain} | {
        (name, version) for version, names in versioned.items() for name in names}


def _references(image: ElfImage) -> list[Reference]:
    """The undefined symbols a relocation of `image` binds, weak ones left out (they may stay
    undefined), in relocation order; all of them, in table order, when the image's relocations
    were not read."""
    table = image.symbols
    wanted = (_zero(table.section_indexes)  # SHN_UNDEF is 0
              & _bits(table.info.translate(_NOT_WEAK_INFO))).to_bytes(len(table), "little")
    refs = image.relocated_symbols
    names = table.names
    if refs is None:  # in table order, taken in bulk
        return list(zip(compress(names, wanted), table.versions(wanted), strict=True))
    undefined = [i for i in refs if wanted[i]]
    if table.versym is None:
        return [(names[i], None) for i in undefined]
    versions = table.versions()
    return list(zip(map(names.__getitem__, undefined), map(versions.__getitem__, undefined),
                    strict=True))


class _Symbols:
    """An image's symbols as binding uses them, each worked out once, on first use, for all
    processes (it holds the image, so the `id` it is memoized under stays its own)."""

    __slots__ = ("_exports", "_needs", "_references", "image")

    def __init__(self, image: ElfImage) -> None:
        self.image = image
        self._exports: Exports | None = None
        self._references: list[Reference] | None = None
        self._needs: Needs | None = None

    @property
    def exports(self) -> Exports:
        if self._exports is None:
            self._exports = exports_of(self.image)
        return self._exports

    @property
    def references(self) -> list[Reference]:
        if self._references is None:
            self._references = _references(self.image)
        return self._references

    @property
    def needs(self) -> Needs:
        if self._needs is None:
            self._needs = needs_of(self.references)
        return self._needs


@dataclass(eq=False)
class _Obj:
    """An object mapped into the simulated process."""

    path: str
    image: ElfImage
    loader: _Obj | None
    symbols_memo: dict[int, _Symbols] = field(default_factory=dict, repr=False)

    @property
    def soname(self) -> str | None:
        return self.image.soname

    def symbols(self) -> _Symbols:
        """The image's symbols for binding, shared by every process of the simulation."""
        key = id(self.image)
        symbols = self.symbols_memo.get(key)
        if symbols is None:
            symbols = self.symbols_memo[key] = _Symbols(self.image)
        return symbols


def expand_path(entry: str, origin: str, config: SearchConfig) -> str:
    """A DT_RPATH/DT_RUNPATH entry with $ORIGIN, $LIB and $PLATFORM substituted."""
    out = entry
    for token, value in (("ORIGIN", origin), ("LIB", config.lib), ("PLATFORM", config.platform)):
        out = out.replace("${" + token + "}", value).replace("$" + token, value)
    return out or "."


def _split_paths(entries: Iterable[str]) -> list[str]:
    return [part for entry in entries for part in entry.split(":")]


class Process:
    """A simulated Python process: the objects mapped so far and the global scope."""

    def __init__(self, source: ObjectSource, config: SearchConfig, executable: str) -> None:
        self._source = source
        self._config = config
        self._objects: list[_Obj] = []
        self._by_name: dict[str, _Obj] = {}
        self._by_identity: dict[str, _Obj] = {}
        self._global: list[_Obj] = []
        self._symbols: dict[int, _Symbols] = {}
        self.startup: LoadResult | None = None
        self._exe = self._start(executable)

    @property
    def executable(self) -> str:
        return self._exe.path

    @property
    def elf_class(self) -> ElfClass:
        return self._exe.image.elf_class

    def copy(self) -> Process:
        """An independent process in the same state (objects themselves are shared)."""
        clone = object.__new__(Process)
        clone._source = self._source
        clone._config = self._config
        clone._objects = list(self._objects)
        clone._by_name = dict(self._by_name)
        clone._by_identity = dict(self._by_identity)
        clone._global = list(self._global)
        clone._symbols = self._symbols
        clone.startup = self.startup
        clone._exe = self._exe
        return clone

    def loaded(self, name: str) -> str | None:
        """The path of the loaded object that a DT_NEEDED `name` would match, if any."""
        obj = self._by_name.get(name)
        return obj.path if obj else None

    @property
    def objects(self) -> tuple[str, ...]:
        return tuple(o.path for o in self._objects)

    def _machine_fits(self, image: ElfImage) -> bool:
        return image.machine == self._exe.image.machine

    def _start(self, executable: str) -> _Obj:
        image = self._source.image(executable)
        exe = _Obj(executable, image, None, self._symbols)
        self._exe = exe
        session = _Session(self, exe, caller=None)
        session.add(exe, executable)
        preloads = [p for p in self._config.ld_preload if p]
        session.map_all(exe, preloads)
        self.startup = session.finish(global_=True, target=executable)
        return exe

    def _relocate(self, obj: _Obj) -> bool:
        """Give `obj` the relocation tables its image left out, when the source reads them
        (`RelocationSource`); whether it did."""
        if obj.image.relocated_symbols is not None or not isinstance(self._source,
                                                                       RelocationSource):
            return False
        better = self._source.relocated(obj.path, obj.image)
        if better is None:
            return False
        obj.image = better
        return True

    def bindings(self, path: str) -> tuple[tuple[str, str | None, str], ...]:
        """(name, version, defining object's path) for each undefined symbol a relocation of
        the loaded object at `path` binds, in relocation order, as glibc's lookup finds them:
        the global scope first, then the object's breadth-first dependencies. A name defined
        by nothing (an assumed library's, or one `SearchConfig.unchecked` let pass) is left
        out; so is everything when `path` is not loaded."""
        root = self._by_name.get(path)
        if root is None:
            return ()
        self._relocate(root)
        order, seen = [root], {id(root)}
        for obj in order:  # grows while it is walked: breadth first
            for name in obj.image.needed:
                dep = self._by_name.get(name)
                if dep is not None and id(dep) not in seen:
                    seen.add(id(dep))
                    order.append(dep)
        scope = list({id(o): o for o in [*self._global, *order]}.values())
        exports = [(o.path, o.symbols().exports) for o in scope]
        out = []
        for name, version in root.symbols().references:
            provider = next((where for where, e in exports if e.binds(name, version)), None)
            if provider is not None:
                out.append((name, version, provider))
        return tuple(out)

    def promote(self, obj: _Obj) -> None:
        """`dlopen(RTLD_GLOBAL)` of an object already loaded: it and the objects it depends
        on, breadth first, join the global scope (glibc's `add_to_global` of its search
        list), so that objects loaded later bind to their symbols."""
        order, queue = [obj], [obj]
        while queue:
            for name in queue.pop(0).image.needed:
                dep = self._by_name.get(name)
                if dep is not None and dep not in order:
                    order.append(dep)
                    queue.append(dep)
        self._global.extend(o for o in order if o not in self._global)

    def dlopen(self, path: str, *, global_: bool = False) -> LoadResult:
        """Simulate `dlopen(path, RTLD_NOW | (RTLD_GLOBAL if global_ else RTLD_LOCAL))`."""
        caller = next((o for o in self._objects if (o.soname or "").startswith("libpython")),
                      self._exe)
        session = _Session(self, None, caller=caller)
        return session.open_root(path, global_=global_)


class _Session:
    """One dlopen in progress: the objects it maps, the search list and the problems found."""

    def __init__(self, process: Process, root: _Obj | None, caller: _Obj | None) -> None:
        self.p = process
        self.root = root
        self.caller = caller
        self.new: list[_Obj] = []
        self.new_names: dict[str, _Obj] = {}
        self.new_ids: dict[str, _Obj] = {}
        self.search_list: list[_Obj] = []
        self.deps: dict[int, list[_Obj]] = {}
        self.problems: list[LoadProblem] = []
        self.resolutions: list[Resolution] = []
        self.unchecked: list[str] = []

    # -- lookup of mapped objects -------------------------------------------------------------

    def find_loaded(self, name: str) -> _Obj | None:
        return self.new_names.get(name) or self.p._by_name.get(name)

    def add(self, obj: _Obj, requested: str) -> None:
        self.new.append(obj)
        self.new_ids[self.p._source.identity(obj.path)] = obj
        for name in (requested, obj.path, obj.soname):
            if name:
                self.new_names.setdefault(name, obj)

    # -- opening the root ---------------------------------------------------------------------

    def open_root(self, path: str, global_: bool) -> LoadResult:
        existing = self.find_loaded(path)
        if existing is None and self.p._source.is_file(path):
            existing = self.p._by_identity.get(self.p._source.identity(path))
        if existing is not None:
            if global_:
                self.p.promote(existing)
            return LoadResult(path, True, None, (), (), (existing.path,))
        attempt = self._open_candidate(path, Via.PATH, None, self.p.elf_class)
        if attempt[0] is None:
            problem = self._open_problem(path, path, None, Resolution(None, path, None, None,
                                                                      (attempt[1],)))
            return LoadResult(path, False, problem.message, (problem,), (), ())
        root = _Obj(path, attempt[0], self.caller, self.p._symbols)
        self.root = root
        self.add(root, path)
        self.map_all(root, [])
        return self.finish(global_=global_, target=path)

    def _open_candidate(
        self, path: str, via: Via, owner: str | None, elf_class: ElfClass
    ) -> tuple[ElfImage | None, Attempt]:
        if not self.p._source.is_file(path):
            return None, Attempt(path, via, owner, "not found")
        order = self.p._exe.image.byte_order
        try:
            image = self.p._source.image(path)
        except FormatError as e:
            if e.problem.startswith("unknown ELF class"):  # to glibc, of the other class
                return None, Attempt(path, via, owner,
                                     f"wrong ELF class: ELFCLASS{64 if elf_class == 1 else 32}")
            said = _glibc_open_error(e, elf_class, order)
            if said is None and isinstance(e, ElfError) and e.cut is not None:
                said = f"{CRASH}: {e.cut}"
            return None, Attempt(path, via, owner, f"unreadable: {e.problem}", said)
        if image.elf_class != elf_class:
            return None, Attempt(path, via, owner,
                                 f"wrong ELF class: ELFCLASS{32 if image.elf_class == 1 else 64}")
        if image.byte_order != order:
            said = _not_encoded(order)
            return None, Attempt(path, via, owner, f"unreadable: {said}", said)
        if not self.p._machine_fits(image):
            return None, Attempt(path, via, owner, f"wrong machine: {image.machine_name}")
        refused = _refused(image)
        if refused is not None:
            return None, Attempt(path, via, owner, f"unreadable: {refused}", refused)
        return image, Attempt(path, via, owner, "found")

    # -- mapping ------------------------------------------------------------------------------

    def map_all(self, root: _Obj, preloads: list[str]) -> None:
        """Breadth-first mapping of root's dependencies (and preloads, for the executable)."""
        queue = [root]
        seen = {id(root)}
        for pre in preloads:
            obj = self.map_needed(root, pre)
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                queue.append(obj)
        index = 0
        while index < len(queue):
            obj = queue[index]
            index += 1
            deps = []
            for name in obj.image.needed:
                dep = self.map_needed(obj, name)
                if dep is None:
                    continue
                deps.append(dep)
                if id(dep) not in seen:
                    seen.add(id(dep))
                    queue.append(dep)
            self.deps[id(obj)] = deps
        self.search_list = queue

    def map_needed(self, requester: _Obj, name: str) -> _Obj | None:
        found = self.find_loaded(name)
        if found is not None:
            self.resolutions.append(Resolution(requester.path, name, found.path, Via.LOADED, ()))
            return found
        attempts: list[Attempt] = []
        for path, via, owner in self._candidates(requester, name):
            image, attempt = self._open_candidate(path, via, owner, requester.image.elf_class)
            attempts.append(attempt)
            if image is None:
                if attempt.outcome.startswith("unreadable"):
                    break
                continue
            ident = self.p._source.identity(path)
            same = self.new_ids.get(ident) or self.p._by_identity.get(ident)
            if same is not None:  # the same file under another name
                self.new_names.setdefault(name, same)
                self.resolutions.append(Resolution(requester.path, name, same.path, via,
                                                   tuple(attempts)))
                return same
            obj = _Obj(path, image, requester, self.p._symbols)
            self.add(obj, name)
            self.resolutions.append(Resolution(requester.path, name, path, via, tuple(attempts)))
            return obj
        if name in dict(self.p._config.assumed):
            obj = _Obj(f"{ASSUMED_DIR}/{name}", placeholder_image(name, requester.image),
                       requester, self.p._symbols)
            self.add(obj, name)
            self.resolutions.append(Resolution(requester.path, name, obj.path, Via.ASSUMED,
                                               tuple(attempts)))
            return obj
        resolution = Resolution(requester.path, name, None, None, tuple(attempts))
        self.resolutions.append(resolution)
        self.problems.append(self._open_problem(name, requester.path, requester, resolution))
        return None

    def _open_problem(
        self, name: str, requester: str, obj: _Obj | None, resolution: Resolution
    ) -> LoadProblem:
        outcomes = [a.outcome for a in resolution.attempts]
        unreadable = next((o for o in outcomes if o.startswith("unreadable")), None)
        wrong = next((o for o in outcomes if o.startswith("wrong ELF class")), None)
        if unreadable is not None:
            bad = next(a for a in resolution.attempts if a.outcome == unreadable)
            said = bad.said or f"cannot be mapped: {unreadable.removeprefix('unreadable: ')}"
            return LoadProblem(ProblemKind.UNREADABLE_OBJECT, requester, f"{bad.path}: {said}",
                               library=name, resolution=resolution)
        if wrong is not None:
            return LoadProblem(ProblemKind.WRONG_ELF_CLASS, requester, f"{name}: {wrong}",
                               library=name, resolution=resolution)
        return LoadProblem(ProblemKind.MISSING_LIBRARY, requester,
                           f"{name}: cannot open shared object file: No such file or directory",
                           library=name, resolution=resolution)

    def _candidates(self, requester: _Obj, name: str) -> Iterator[tuple[str, Via, str | None]]:
        config = self.p._config
        if "/" in name:
            yield name, Via.PATH, None
            return
        image = requester.image
        runpath = image.dynamic.runpath if image.dynamic else ()
        if not runpath:
            chain = requester
            visited: set[int] = set()
            node: _Obj | None = chain
            while node is not None and id(node) not in visited:
                visited.add(id(node))
                yield from self._in_dirs(node, _rpath_of(node), name, Via.RPATH)
                node = node.loader
            exe = self.p._exe
            if id(exe) not in visited:
                yield from self._in_dirs(exe, _rpath_of(exe), name, Via.EXE_RPATH)
        exe_origin = posixpath.dirname(self.p._exe.path)
        for d in config.ld_library_path:
            directory = expand_path(d, exe_origin, config) if d else "."
            yield from self._in_dir(directory, name, Via.LD_LIBRARY_PATH, None)
        if runpath:
            yield from self._in_dirs(requester, _split_paths(runpath), name, Via.RUNPATH)
        nodeflib = bool(image.dynamic and image.dynamic.flags_1 & DF_1_NODEFLIB)
        if nodeflib:
            return
        if config.cache is not None and config.cache_id is not None:
            cached = config.cache.lookup(
                name, config.cache_id(image.elf_class, image.machine),
                hwcaps_subdirs=config.hwcaps, legacy_hwcaps=config.legacy_hwcaps,
            )
            if cached is not None:
                yield cached, Via.CACHE, None
        for d in config.system_dirs:
            yield from self._in_dir(d, name, Via.SYSTEM, None)

    def _in_dirs(
        self, owner: _Obj, dirs: list[str], name: str, via: Via
    ) -> Iterator[tuple[str, Via, str | None]]:
        origin = posixpath.dirname(owner.path)
        for d in dirs:
            yield from self._in_dir(expand_path(d, origin, self.p._config), name, via, owner.path)

    def _in_dir(
        self, directory: str, name: str, via: Via, owner: str | None
    ) -> Iterator[tuple[str, Via, str | None]]:
        """`directory/name`, after the hwcaps subdirectories ld.so tries first (only those that
        hold such a file are listed, to keep the trace readable)."""
        for subdir in self.p._config.subdirs:
            path = posixpath.join(directory, subdir, name)
            if self.p._source.is_file(path):
                yield path, via, owner
        yield posixpath.join(directory, name), via, owner

    # -- versions and symbols -----------------------------------------------------------------

    def check_versions(self) -> None:
        for obj in self.search_list:
            if obj not in self.new:
                continue
            for need in obj.image.version_needs:
                lib = self.find_loaded(need.file)
                if lib is None or not lib.image.version_defs:
                    continue
                defined = {d.name for d in lib.image.version_defs}
                for version in need.versions:
                    if version.name in defined or version.weak:
                        continue
                    self.problems.append(LoadProblem(
                        ProblemKind.MISSING_VERSION, obj.path,
                        f"{lib.path}: version `{version.name}' not found (required by "
                        f"{obj.path})",
                        version=version.name, library=lib.path,
                    ))

    def scope(self) -> list[_Obj]:
        out: list[_Obj] = []
        seen: set[int] = set()
        for obj in [*self.p._global, *self.search_list]:
            if id(obj) not in seen:
                seen.add(id(obj))
                out.append(obj)
        return out

    def bind_past_missing(self) -> None:
        """Bind as if the libraries the search did not find were there, each as the copy
        `SearchConfig.stand_in` locates: the symbols that nothing would define then fail the
        load once those libraries are found. Nothing is bound when one has no copy (what it
        would define is unknown)."""
        locate = self.p._config.stand_in
        missing = [p.library for p in self.problems if p.library and p.kind in _NOT_FOUND]
        if locate is None or not missing:
            return
        extra: list[_Obj] = []
        for soname in dict.fromkeys(missing):
            found = locate(soname)
            if found is None or found[1].elf_class != self.p.elf_class or \
                    not self.p._machine_fits(found[1]):
                return
            extra.append(_Obj(found[0], found[1], None, self.p._symbols))
        self.bind_symbols(extra, tuple(dict.fromkeys(missing)))

    def bind_symbols(self, extra: Sequence[_Obj] = (), behind: tuple[str, ...] = ()) -> None:
        scope = [*self.scope(), *extra]
        scope_paths = tuple(o.path for o in scope)
        assumed = dict(self.p._config.assumed)
        patterns = [re.compile(assumed[o.soname]) for o in scope
                    if o.path.startswith(ASSUMED_DIR) and o.soname in assumed]
        unchecked = (re.compile(self.p._config.unchecked) if self.p._config.unchecked
                     else None)
        objects = list(reversed(self._dependency_order()))
        binding = [obj.symbols() for obj in objects]
        missing = unbound([b.needs for b in binding], [o.symbols().exports for o in scope])
        if missing and self._with_relocations(objects, missing):
            binding = [obj.symbols() for obj in objects]
            missing = unbound([b.needs for b in binding], [o.symbols().exports for o in scope])
        if not missing:
            return
        for obj, symbols in zip(objects, binding, strict=True):
            for name, version in symbols.references:
                if (name, version) not in missing:
                    continue
                if any(p.fullmatch(name) for p in patterns):
                    continue
                if unchecked is not None and unchecked.fullmatch(name):
                    self.unchecked.append(name)
                    continue
                suffix = f", version {version}" if version else ""
                self.problems.append(LoadProblem(
                    ProblemKind.UNDEFINED_SYMBOL, obj.path,
                    f"{obj.path}: undefined symbol: {name}{suffix}",
                    symbol=name, version=version, scope=scope_paths, behind=behind,
                    stand_ins=tuple(o.path for o in extra),
                ))

    def _with_relocations(self, objects: list[_Obj], missing: set[Reference]) -> bool:
        """Give the objects that reference a `missing` symbol the relocations their images left
        out, when the source has them (`RelocationSource`): only the undefined symbols that
        relocations reference are bound, and in their order. Whether any was given."""
        given = False
        for obj in objects:
            if (obj.image.relocated_symbols is None
                    and not missing.isdisjoint(obj.symbols().references)):
                given = self.p._relocate(obj) or given
        return given

    def _dependency_order(self) -> list[_Obj]:
        """New objects with each one before its dependencies (glibc relocates in reverse)."""
        new_ids = {id(o) for o in self.new}
        order: list[_Obj] = []
        done: set[int] = set()

        def visit(obj: _Obj, stack: set[int]) -> None:
            if id(obj) in done or id(obj) in stack:
                return
            stack.add(id(obj))
            for dep in self.deps.get(id(obj), []):
                visit(dep, stack)
            done.add(id(obj))
            if id(obj) in new_ids:
                order.append(obj)

        for obj in self.search_list:
            visit(obj, set())
        order.reverse()
        return order

    # -- outcome ------------------------------------------------------------------------------

    def finish(self, global_: bool, target: str) -> LoadResult:
        mapped = not self.problems
        self.check_versions()
        if mapped:
            self.bind_symbols()
        else:
            self.bind_past_missing()
        problems = tuple(self.problems)
        loads = not problems
        duplicates = self._duplicates()
        if loads:
            self._commit(global_)
        return LoadResult(
            target=target,
            loads=loads,
            error=problems[0].message if problems else None,
            problems=problems,
            resolutions=tuple(self.resolutions),
            search_list=tuple(o.path for o in self.search_list),
            duplicates=duplicates,
            unchecked=tuple(dict.fromkeys(self.unchecked)),
        )

    def _duplicates(self) -> tuple[tuple[str, str, str], ...]:
        """(soname, new file, file already loaded) for each second copy of a library."""
        found = []
        for obj in self.new:
            if obj.soname is None or _VENDORED.search(posixpath.basename(obj.path)):
                continue  # auditwheel's renamed copies are meant to live beside the original
            other = self.p._by_name.get(obj.soname)
            if other is not None and other is not obj:
                found.append((obj.soname, obj.path, other.path))
        return tuple(found)

    def _commit(self, global_: bool) -> None:
        p = self.p
        p._objects.extend(self.new)
        for name, obj in self.new_names.items():
            p._by_name.setdefault(name, obj)
        p._by_identity.update(self.new_ids)
        if global_:
            for obj in self.search_list:
                if obj not in p._global:
                    p._global.append(obj)


def _not_encoded(order: ByteOrder) -> str:
    """glibc's words for a file of another byte order than its loader's."""
    return f"ELF file data encoding not {'little' if order is ByteOrder.LITTLE else 'big'}-endian"


def _glibc_open_error(error: FormatError, elf_class: ElfClass, order: ByteOrder) -> str | None:
    """What glibc's loader says of a file abifit cannot read, when it refuses it before mapping
    it (`open_verify` in elf/dl-load.c): a file shorter than the loader's ELF header is "too
    short", whatever it holds; then what the headers say (`ElfError.refusal`: "invalid ELF
    header" without the ELF magic, "cannot read file data" for program headers past the end of
    the file...). None for a file damaged further on: glibc maps it, and what happens then
    varies (its words, or the process dies), so abifit's reason is given."""
    if not isinstance(error, ElfError):
        return None
    header = 64 if elf_class is ElfClass.ELF64 else 52  # sizeof (ElfW(Ehdr))
    if error.size is not None and error.size < header:
        return "file too short"
    if error.refusal != "invalid ELF header" and error.encoding not in (None, order):
        return _not_encoded(order)  # checked before anything else of the header
    return error.refusal


def _refused(image: ElfImage) -> str | None:
    """What glibc's loader says of an ELF file of the right class and machine that it will not
    load: its refusal of the headers (`ElfImage.refusal`), else what `_dl_map_object_from_fd`
    does, in its order: refuse an executable or a file with nothing to map, die on a file cut
    short inside what it maps (`CRASH`), refuse a shared object without a dynamic section or a
    position-independent executable."""
    if image.refusal is not None:
        return image.refusal
    if image.file_type == FileType.EXEC:
        return "cannot dynamically load executable"
    if not image.loads:
        return "object file has no loadable segments"
    if image.cut is not None:
        return f"{CRASH}: {image.cut}"
    if image.dynamic is None:
        return "object file has no dynamic section" if image.file_type == FileType.DYN else None
    if image.dynamic.flags_1 & DF_1_PIE:
        return "cannot dynamically load position-independent executable"
    return None


def _rpath_of(obj: _Obj) -> list[str]:
    dyn = obj.image.dynamic
    if dyn is None or dyn.runpath:
        return []
    return _split_paths(dyn.rpath)
