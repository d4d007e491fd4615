"""The C API each CPython minor version exports, for a target version with no interpreter here.

A module built for Python 3.12 binds `PyDict_Watch` to the interpreter it is imported into. To
check it for 3.12 where no 3.12 interpreter is installed, the process is started from this
machine's interpreter, and the definitions of its C API are those that CPython 3.12 exports:
`data/cpython_exports.json`, made by `tools/cpython_exports.py` from real libpython builds (the
file names them, with their releases and sha256; the script's docstring says why those and how
builds of one minor version differ). The table holds the names of `PATTERN`: `Py*`, `_Py*`
(`_Py_NoneStruct`), `PyExc_*`, `PY_TIMEOUT_MAX`; not `PyInit_*`, whose set is the build's choice.

`TableApiObjects` wraps an `ObjectSource`: the interpreter's images (the executable and its
libpython), when they export C API definitions, export the table's instead (functions as
functions, data as data), and keep every other symbol.

Pure: reads only the package's own data file, once.
"""

from __future__ import annotations

import functools
import json
import re
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from abifit.formats.elf import (
    SHN_UNDEF,
    VER_NDX_GLOBAL,
    Binding,
    ElfImage,
    SymbolTable,
    SymbolType,
    Visibility,
)
from abifit.formats.objects import ObjectSource

DATA = Path(__file__).parent.parent / "data"
PATTERN = r"(?!PyInit_)_?Py[A-Za-z_]\w*|PY_TIMEOUT_MAX"
LIBPYTHON = re.compile(r"libpython\d+\.\d+[a-z]*\.so(\.\d+)*")
_API = re.compile(PATTERN)
_TYPES = {"func": SymbolType.FUNC, "data": SymbolType.OBJECT, "notype": SymbolType.NOTYPE}
_EXPORTED = (Binding.GLOBAL, Binding.WEAK, Binding.GNU_UNIQUE)
_HIDDEN = (Visibility.HIDDEN, Visibility.INTERNAL)

Version = tuple[int, int]


@dataclass(frozen=True, slots=True)
class ApiSymbol:
    """One name of the table: its type, the first version of the table exporting it, and the
    versions that export it."""

    name: str
    type: SymbolType
    introduced: Version
    versions: tuple[Version, ...]


@dataclass(frozen=True, slots=True)
class ExportSource:
    """The file a version's names were read from."""

    version: Version
    release: str
    origin: str
    sha256: str


@dataclass(frozen=True, slots=True)
class ExportTable:
    """`data/cpython_exports.json`, read."""

    versions: tuple[Version, ...]
    sources: Mapping[Version, ExportSource]
    symbols: Mapping[str, ApiSymbol]


def _version(text: str) -> Version:
    major, minor = text.split(".")
    return int(major), int(minor)


def _expand(ranges: str, versions: tuple[Version, ...]) -> tuple[Version, ...]:
    """`3.9-3.10 3.12-3.14` -> the versions of the table in those ranges."""
    out: list[Version] = []
    for run in ranges.split():
        first, _, last = run.partition("-")
        low, high = _version(first), _version(last or first)
        out += [v for v in versions if low <= v <= high]
    return tuple(out)


@functools.cache
def load_table() -> ExportTable:
    """The bundled table; read once."""
    raw = json.loads((DATA / "cpython_exports.json").read_text("utf-8"))
    versions = tuple(_version(v) for v in raw["versions"])
    sources = {_version(s["version"]): ExportSource(_version(s["version"]), s["release"],
                                                    s["origin"], s["sha256"])
               for s in raw["sources"]}
    symbols = {name: ApiSymbol(name, _TYPES[entry["type"]], _version(entry["introduced"]),
                               _expand(entry["versions"], versions))
               for name, entry in raw["symbols"].items()}
    return ExportTable(versions, sources, symbols)


def source(version: Version) -> ExportSource | None:
    """The file the table read for `version` (None: the version is not in the table)."""
    return load_table().sources.get(version)


@functools.cache
def exports(version: Version) -> Mapping[str, SymbolType] | None:
    """The API names `version` exports, with their types; None outside the table."""
    table = load_table()
    if version not in table.sources:
        return None
    return MappingProxyType({s.name: s.type for s in table.symbols.values()
                             if version in s.versions})


def exported(version: Version) -> frozenset[str] | None:
    """The API names `version` exports; None outside the table."""
    names = exports(version)
    return None if names is None else frozenset(names)


def introduced(name: str) -> str | None:
    """The first version of the table that exports `name` ("3.12"); None for a name no
    version of the table exports. The table's first version means that one or earlier."""
    symbol = load_table().symbols.get(name)
    return None if symbol is None else "{}.{}".format(*symbol.introduced)


def history(name: str, version: Version) -> str | None:
    """Why `version` lacks `name`, when the table knows: "introduced in CPython 3.12", "removed
    in CPython 3.13", "exported by CPython 3.9 to 3.10, 3.12 to 3.14"; None when `version`
    exports it, or the table does not know it or `version`."""
    table = load_table()
    symbol = table.symbols.get(name)
    if symbol is None or version not in table.sources or version in symbol.versions:
        return None
    if version < symbol.introduced:
        return "introduced in CPython {}.{}".format(*symbol.introduced)
    last = symbol.versions[-1]
    runs = _runs(symbol.versions, table.versions)
    if version > last and len(runs) == 1:
        following = table.versions[table.versions.index(last) + 1]
        return "removed in CPython {}.{}".format(*following)
    return "exported by CPython " + ", ".join(runs)


def _runs(present: tuple[Version, ...], versions: tuple[Version, ...]) -> list[str]:
    runs: list[list[Version]] = []
    for v in present:
        if runs and versions.index(v) == versions.index(runs[-1][-1]) + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ["{}.{}".format(*r[0]) + (" to {}.{}".format(*r[-1]) if len(r) > 1 else "")
            for r in runs]


# --- the interpreter's images with the table's API ------------------------------------------


def defines_api(image: ElfImage) -> bool:
    """Whether the image exports a definition of a C API name (libpython, or a statically
    linked interpreter)."""
    table = image.symbols
    return any(table.section_indexes[i] != SHN_UNDEF and (table.info[i] >> 4) in _EXPORTED
               and _API.fullmatch(name) for i, name in enumerate(table.names))


def with_api(image: ElfImage, names: Mapping[str, SymbolType]) -> ElfImage:
    """The image exporting exactly `names` of the C API: its API definitions outside `names`
    removed, the names it lacks added (global, default visibility, unversioned), its other
    symbols and references kept, in their order (relocations keep their meaning)."""
    table = image.symbols
    keep: list[int] = []
    have: set[str] = set()
    where: dict[int, tuple[int, int]] = {}  # type -> (section index, value) of a definition
    for i, name in enumerate(table.names):
        defined = table.section_indexes[i] != SHN_UNDEF
        if defined and (table.info[i] >> 4) in _EXPORTED and _API.fullmatch(name):
            where.setdefault(table.info[i] & 0xF, (table.section_indexes[i], table.values[i]))
            if name not in names or (table.other[i] & 0x3) in _HIDDEN:
                continue
            have.add(name)
        keep.append(i)
    added = sorted(n for n in names if n not in have)
    fallback = next(iter(where.values()), (1, 1))
    places = [where.get(names[n], fallback) for n in added]
    symbols = SymbolTable(
        names=tuple(table.names[i] for i in keep) + tuple(added),
        info=bytes(table.info[i] for i in keep)
        + bytes((Binding.GLOBAL << 4) | names[n] for n in added),
        other=bytes(table.other[i] for i in keep) + bytes(len(added)),
        section_indexes=_column(table.section_indexes, keep, [s for s, _v in places]),
        values=_column(table.values, keep, [v or 1 for _s, v in places]),
        sizes=_column(table.sizes, keep, [0] * len(added)),
        versym=None if table.versym is None
        else _column(table.versym, keep, [VER_NDX_GLOBAL] * len(added)),
        version_names=table.version_names,
    )
    relocated = image.relocated_symbols
    if relocated is not None:
        moved = {old: new for new, old in enumerate(keep)}
        relocated = array(relocated.typecode, (moved[i] for i in relocated if i in moved))
    return replace(image, symbols=symbols, relocated_symbols=relocated)


def _column(column: array[int], keep: Iterable[int], added: list[int]) -> array[int]:
    return array(column.typecode, [*(column[i] for i in keep), *added])


class TableApiObjects:
    """An `ObjectSource` whose interpreter exports the C API of another CPython version: the
    images of `executable` and of any libpython, when they export C API definitions, export
    `names` instead. Everything else is `base`'s."""

    def __init__(self, base: ObjectSource, executable: str,
                 names: Mapping[str, SymbolType]) -> None:
        self.base = base
        self.names = names
        self._executable = base.identity(executable)
        self._images: dict[str, ElfImage] = {}

    def is_file(self, path: str) -> bool:
        return self.base.is_file(path)

    def identity(self, path: str) -> str:
        return self.base.identity(path)

    def image(self, path: str) -> ElfImage:
        key = self.base.identity(path)
        known = self._images.get(key)
        if known is not None:
            return known
        image = self.base.image(path)
        if key != self._executable and not LIBPYTHON.fullmatch(image.soname or ""):
            return image
        if defines_api(image):
            image = with_api(image, self.names)
        self._images[key] = image
        return image
