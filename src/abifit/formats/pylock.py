"""A known-good stack as a PEP 751 lock file (`pylock.toml`) with abifit's facts in `[tool.abifit]`.

The lock part is what installers read: every distribution with its version and its source, a
wheel (name, URL or path, sha256) where the installation or the index recorded one, else the
directory it was installed from (`direct_url.json`'s `dir_info`), else, for a distribution
whose origin nothing recorded, the directory it is installed in: still a valid entry, listed
in `[tool.abifit] unrecorded` so that a report can say it cannot be fetched again.

`[tool.abifit]` holds what made the stack work on its machine:

- `host`: the machine, glibc and libstdc++ releases, and the loader settings that mattered: each
  ld.so.conf directory (with the file and line that named it) and each `LD_LIBRARY_PATH`
  directory through which a library of the stack was found, with those libraries.
- `cuda`: the driver, the newest CUDA it supports, the toolkits the stack loaded from, the GPUs.
- `modules`: per native module an ABI fingerprint: the sonames its load mapped and where each
  was found (a path without a leading `/` is relative to the environment's site-packages), the
  version nodes it requires, how many undefined symbols it bound to which library, and the
  sha256 of the sorted `symbol@version -> soname` lines of those bindings.

Pure: `dumps` makes TOML text from a `Snapshot`, `loads` reads it back, checking every key it
uses (a malformed file is one `FormatError`), and executes nothing.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import tomli_w

from abifit.errors import FormatError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

LOCK_VERSION = "1.0"
FORMAT = 1  # of [tool.abifit]
_LOCK_NAME = re.compile(r"pylock(\.[^.]+)?\.toml")
_ENVIRONMENT_MARKERS = ("sys_platform", "platform_machine", "implementation_name",
                        "python_version")

T = TypeVar("T")
Table = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class WheelFile:
    """The wheel a distribution was installed from: its file name, where it is (a URL, or a
    path on this machine) and its sha256."""

    name: str
    sha256: str
    url: str | None = None
    path: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """One `[[packages]]` entry: a wheel, else a directory (its source tree, or where it is
    installed when `recorded` is false: nothing recorded where it came from)."""

    name: str
    version: str | None
    wheel: WheelFile | None = None
    directory: str | None = None
    recorded: bool = True


@dataclass(frozen=True, slots=True)
class LibraryDir:
    """A loader setting that found libraries of the stack: a directory and the sonames found in
    it; for an ld.so.conf directory, the file and line that name it."""

    directory: str
    libraries: tuple[str, ...]
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class HostRecord:
    """The machine's facts that the stack's loading depended on."""

    machine: str
    glibc: str | None
    libstdcxx: str | None  # the newest GLIBCXX_ version node of the libstdc++ loaded
    ld_so_conf: tuple[LibraryDir, ...] = ()
    ld_library_path: tuple[LibraryDir, ...] = ()


@dataclass(frozen=True, slots=True)
class Toolkit:
    version: str | None
    root: str


@dataclass(frozen=True, slots=True)
class GpuRecord:
    name: str
    arch: str | None  # sm_90


@dataclass(frozen=True, slots=True)
class CudaRecord:
    """The CUDA stack: the driver and the newest CUDA it supports, the toolkits whose libraries
    the stack loaded, the GPUs."""

    driver: str | None
    driver_cuda: str | None
    toolkits: tuple[Toolkit, ...] = ()
    gpus: tuple[GpuRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class Needed:
    """A soname the module's load mapped and where it was found (None: not found)."""

    soname: str
    path: str | None
    via: str | None


@dataclass(frozen=True, slots=True)
class ModuleRecord:
    """A native module's ABI fingerprint."""

    module: str
    distribution: str
    file: str  # relative to site-packages when inside it
    loads: bool
    error: str | None
    needed: tuple[Needed, ...]
    versions: tuple[str, ...]  # "libstdc++.so.6:GLIBCXX_3.4.30"
    providers: tuple[tuple[str, int], ...]  # (soname, undefined symbols bound to it)
    bindings_sha256: str
    # its use of NumPy's C API (`formats.numpyapi`): the headers' major release, and the oldest
    # NumPy a 2.x build accepts; None for a module that shows none
    numpy_headers: int | None = None
    numpy_feature: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A stack: the lock (packages) and, for a snapshot abifit wrote, the facts of its machine
    (`host` None: a lock file without them)."""

    created_by: str
    packages: tuple[LockedPackage, ...]
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    python: str | None = None
    python_version: str | None = None
    host: HostRecord | None = None
    cuda: CudaRecord | None = None
    modules: tuple[ModuleRecord, ...] = ()

    @property
    def unrecorded(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.packages if not p.recorded)


def is_lock_name(name: str) -> bool:
    """Whether a file name is one PEP 751 installers read: `pylock.toml`, `pylock.NAME.toml`."""
    return _LOCK_NAME.fullmatch(name) is not None


def target_of(markers: Mapping[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """A lock's `requires-python` and `environments` for the interpreter and platform that
    these environment markers (PEP 508) describe."""
    minor = markers.get("python_version")
    environment = " and ".join(f"{k} == '{markers[k]}'" for k in _ENVIRONMENT_MARKERS
                               if k in markers)
    return (f"=={minor}.*" if minor else None), ((environment,) if environment else ())


def bindings_digest(lines: Iterable[tuple[str, str | None, str]]) -> str:
    """sha256 of the sorted `symbol@version -> soname` lines (no `@` for an unversioned one)."""
    text = "\n".join(sorted(f"{name}{'@' + version if version else ''} -> {soname}"
                            for name, version, soname in lines))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


# --- writing ---------------------------------------------------------------------------------


def _drop_none(table: Mapping[str, object]) -> dict[str, object]:
    return {k: v for k, v in table.items() if v is not None and v != [] and v != {}}


def _package(p: LockedPackage) -> dict[str, object]:
    out: dict[str, object] = {"name": p.name, "version": p.version}
    if p.wheel is not None:
        w = p.wheel
        out["wheels"] = [_drop_none({"name": w.name, "url": w.url, "path": w.path,
                                     "size": w.size, "hashes": {"sha256": w.sha256}})]
    elif p.directory is not None:
        out["directory"] = {"path": p.directory}
    else:
        raise ValueError(f"{p.name}: a locked package needs a wheel or a directory")
    return _drop_none(out)


def _dirs(dirs: tuple[LibraryDir, ...]) -> list[dict[str, object]]:
    return [_drop_none({"directory": d.directory, "file": d.file, "line": d.line,
                        "libraries": list(d.libraries)}) for d in dirs]


def _tool(s: Snapshot) -> dict[str, object]:
    out: dict[str, object] = {"format": FORMAT, "python": s.python,
                              "python-version": s.python_version,
                              "unrecorded": list(s.unrecorded)}
    out = _drop_none(out)
    if s.host is not None:  # kept when empty: an empty record is not no record
        h = s.host
        out["host"] = _drop_none({"machine": h.machine, "glibc": h.glibc,
                                  "libstdcxx": h.libstdcxx, "ld-so-conf": _dirs(h.ld_so_conf),
                                  "ld-library-path": _dirs(h.ld_library_path)})
    if s.cuda is not None:
        c = s.cuda
        out["cuda"] = _drop_none({
            "driver": c.driver, "driver-cuda": c.driver_cuda,
            "toolkits": [_drop_none({"version": t.version, "root": t.root}) for t in c.toolkits],
            "gpus": [_drop_none({"name": g.name, "arch": g.arch}) for g in c.gpus]})
    out["modules"] = [_drop_none({
        "module": m.module, "distribution": m.distribution, "file": m.file, "loads": m.loads,
        "error": m.error,
        "needed": [_drop_none({"soname": n.soname, "path": n.path, "via": n.via})
                   for n in m.needed],
        "versions": list(m.versions),
        "providers": [{"soname": soname, "symbols": count} for soname, count in m.providers],
        "bindings-sha256": m.bindings_sha256, "numpy-headers": m.numpy_headers,
        "numpy-feature": m.numpy_feature}) for m in s.modules]
    return out


def dumps(snapshot: Snapshot) -> str:
    """The snapshot as `pylock.toml` text."""
    doc: dict[str, object] = {"lock-version": LOCK_VERSION,
                              "environments": list(snapshot.environments),
                              "requires-python": snapshot.requires_python,
                              "created-by": snapshot.created_by,
                              "packages": [_package(p) for p in snapshot.packages]}
    doc = _drop_none(doc)
    doc["packages"] = [_package(p) for p in snapshot.packages]  # required, even when empty
    if snapshot.host is not None or snapshot.modules or snapshot.python is not None:
        doc["tool"] = {"abifit": _tool(snapshot)}
    return tomli_w.dumps(doc)


# --- reading ---------------------------------------------------------------------------------


class _Reader:
    """Typed access to the tables of one file, each problem a `FormatError` that names the key."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, where: str, problem: str) -> FormatError:
        return FormatError(self.name, f"{where}: {problem}" if where else problem)

    def get(self, table: Table, key: str, kind: type[T], where: str,
            default: T | None = None, required: bool = False) -> T | None:
        if key not in table:
            if required:
                raise self.fail(where, f"missing required key `{key}`")
            return default
        value = table[key]
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise self.fail(f"{where}.{key}" if where else key,
                            f"expected {_kind(kind)}, not {_kind(type(value))}")
        return value

    def need(self, table: Table, key: str, kind: type[T], where: str) -> T:
        value = self.get(table, key, kind, where, required=True)
        assert value is not None
        return value

    def strings(self, table: Table, key: str, where: str) -> tuple[str, ...]:
        items = self.get(table, key, list, where, [])
        assert items is not None
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.fail(f"{where}.{key}[{i}]", f"expected a string, not "
                                f"{_kind(type(item))}")
        return tuple(items)

    def tables(self, table: Table, key: str, where: str, required: bool = False,
               ) -> list[tuple[str, Table]]:
        items = self.get(table, key, list, where, [], required=required)
        assert items is not None
        out: list[tuple[str, Table]] = []
        for i, item in enumerate(items):
            at = f"{where + '.' if where else ''}{key}[{i}]"
            if not isinstance(item, dict):
                raise self.fail(at, f"expected a table, not {_kind(type(item))}")
            out.append((at, item))
        return out

    def table(self, table: Table, key: str, where: str) -> Table | None:
        return self.get(table, key, dict, where)

    def each(self, table: Table, key: str, where: str,
             make: Callable[[str, Table], T]) -> tuple[T, ...]:
        return tuple(make(at, item) for at, item in self.tables(table, key, where))


def _kind(kind: type) -> str:
    return {str: "a string", int: "an integer", bool: "a boolean", list: "an array",
            dict: "a table", float: "a number"}.get(kind, kind.__name__)


def loads(text: str, name: str = "pylock.toml") -> Snapshot:
    """A `pylock.toml` read back; `FormatError` for text that is not TOML, a lock version other
    than 1.x, a missing required key, or a value of the wrong type (in `[tool.abifit]` too)."""
    try:
        doc = tomllib.loads(text)
    except RecursionError as e:
        raise FormatError(name, "nested too deeply to read") from e
    except tomllib.TOMLDecodeError as e:
        raise FormatError(name, f"not valid TOML ({e})") from e
    r = _Reader(name)
    version = r.need(doc, "lock-version", str, "")
    if version.split(".")[0] != "1":
        raise r.fail("lock-version", f"{version!r} is not a PEP 751 lock version abifit reads "
                     "(1.x)")
    tool = r.table(doc, "tool", "") or {}
    abifit = r.table(tool, "abifit", "tool")
    r.tables(doc, "packages", "", required=True)  # PEP 751 requires the array
    base = Snapshot(
        created_by=r.need(doc, "created-by", str, ""),
        packages=r.each(doc, "packages", "", lambda at, t: _read_package(r, at, t)),
        requires_python=r.get(doc, "requires-python", str, ""),
        environments=r.strings(doc, "environments", ""),
    )
    return base if abifit is None else _read_tool(r, base, abifit)


def _read_package(r: _Reader, at: str, t: Table) -> LockedPackage:
    name = r.need(t, "name", str, at)
    version = r.get(t, "version", str, at)
    wheels = r.tables(t, "wheels", at)
    directory = r.table(t, "directory", at)
    sources = [k for k in ("vcs", "directory", "archive", "sdist") if k in t] + (
        ["wheels"] if wheels else [])
    if not sources:
        raise r.fail(at, f"package {name!r} has no source (wheels, sdist, archive, directory "
                     "or vcs)")
    wheel = None
    if wheels:
        wat, w = wheels[0]
        hashes = r.table(w, "hashes", wat)
        if hashes is None:
            raise r.fail(wat, "missing required key `hashes`")
        url, path = r.get(w, "url", str, wat), r.get(w, "path", str, wat)
        if url is None and path is None:
            raise r.fail(wat, "a wheel needs `url` or `path`")
        file = r.get(w, "name", str, wat) or (url or path or "").rsplit("/", 1)[-1]
        wheel = WheelFile(file, r.need(hashes, "sha256", str, f"{wat}.hashes"), url, path,
                          r.get(w, "size", int, wat))
    return LockedPackage(name, version, wheel,
                         r.need(directory, "path", str, f"{at}.directory")
                         if directory is not None else None)


def _read_dir(r: _Reader, at: str, t: Table) -> LibraryDir:
    return LibraryDir(r.need(t, "directory", str, at), r.strings(t, "libraries", at),
                      r.get(t, "file", str, at), r.get(t, "line", int, at))


def _read_module(r: _Reader, at: str, t: Table) -> ModuleRecord:
    needed = r.each(t, "needed", at, lambda nat, n: Needed(
        r.need(n, "soname", str, nat), r.get(n, "path", str, nat), r.get(n, "via", str, nat)))
    providers = r.each(t, "providers", at, lambda pat, p: (
        r.need(p, "soname", str, pat), r.need(p, "symbols", int, pat)))
    return ModuleRecord(r.need(t, "module", str, at), r.need(t, "distribution", str, at),
                        r.need(t, "file", str, at), r.need(t, "loads", bool, at),
                        r.get(t, "error", str, at), needed, r.strings(t, "versions", at),
                        providers, r.need(t, "bindings-sha256", str, at),
                        r.get(t, "numpy-headers", int, at), r.get(t, "numpy-feature", str, at))


def _read_tool(r: _Reader, base: Snapshot, t: Table) -> Snapshot:
    at = "tool.abifit"
    fmt = r.need(t, "format", int, at)
    if fmt != FORMAT:
        raise r.fail(f"{at}.format", f"{fmt} is not a format this abifit reads ({FORMAT})")
    unrecorded = set(r.strings(t, "unrecorded", at))
    packages = tuple(LockedPackage(p.name, p.version, p.wheel, p.directory,
                                   p.name not in unrecorded) for p in base.packages)
    host = r.table(t, "host", at)
    cuda = r.table(t, "cuda", at)
    hat, cat = f"{at}.host", f"{at}.cuda"
    return Snapshot(
        base.created_by, packages, base.requires_python, base.environments,
        r.get(t, "python", str, at), r.get(t, "python-version", str, at),
        HostRecord(r.need(host, "machine", str, hat), r.get(host, "glibc", str, hat),
                   r.get(host, "libstdcxx", str, hat),
                   r.each(host, "ld-so-conf", hat, lambda a, d: _read_dir(r, a, d)),
                   r.each(host, "ld-library-path", hat, lambda a, d: _read_dir(r, a, d)))
        if host is not None else None,
        CudaRecord(r.get(cuda, "driver", str, cat), r.get(cuda, "driver-cuda", str, cat),
                   r.each(cuda, "toolkits", cat, lambda a, k: Toolkit(
                       r.get(k, "version", str, a), r.need(k, "root", str, a))),
                   r.each(cuda, "gpus", cat, lambda a, g: GpuRecord(
                       r.need(g, "name", str, a), r.get(g, "arch", str, a))))
        if cuda is not None else None,
        r.each(t, "modules", at, lambda a, m: _read_module(r, a, m)),
    )
