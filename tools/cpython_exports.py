"""Write `src/abifit/data/cpython_exports.json`: the C API symbols each CPython minor exports.

    python tools/cpython_exports.py VERSION=SOURCE [VERSION=SOURCE ...] [-o OUTPUT]

VERSION is a minor version (`3.12`) or a release (`3.12.1`). SOURCE is a `libpythonX.Y.so`
file, a Debian package holding one (`.deb`, read with the standard library: an ar archive whose
`data.tar.{xz,gz,zst}` holds `usr/lib/<triplet>/libpythonX.Y.so.1.0`), or the http(s) URL of
such a package, read into memory. The release of a package is its Debian
version's upstream part; for a bare library it is VERSION when that names one, else the
`versions/X.Y.Z/` directory of a pyenv install the path lies under.

For every minor version the table records, per symbol: each dynamic symbol of libpython that
is defined, of global or weak binding, of default or protected visibility, whose name is in
CPython's namespaces (`_?Py[A-Za-z_]\\w*`, which covers `_Py_NoneStruct` and `PyExc_*`, and
`PY_TIMEOUT_MAX`, the one exported name outside it, data exported since 3.13), except
`PyInit_*`: the init functions of the standard modules built into libpython, which are a
choice of the build (Debian links some 30 more into libpython than a plain `./configure`), not
the C API; its type (`func`: STT_FUNC, `data`: STT_OBJECT, `notype`: STT_NOTYPE, which only
the perf trampoline's `_Py_trampoline_func_start`/`_end` labels are, since 3.12); the minor
versions exporting it, as ranges; and the first of them (`introduced`: the version that
introduced it, within the table; the table's first version means that version or an earlier
one). `sources` records, per version, the file read: its origin, the release, the count of
names, and its sha256 (for a package, also the package's sha256 and the library's path in it).
The script is not run by tests or at run time; its output is committed.

The committed table (3.9 to 3.14) was made from:

    python tools/cpython_exports.py \\
        3.9=~/.pyenv/versions/3.9.18/lib/libpython3.9.so.1.0 \\
        3.10=~/.pyenv/versions/3.10.13/lib/libpython3.10.so.1.0 \\
        3.11=~/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0 \\
        3.12=~/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0 \\
        3.13=~/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0 \\
        3.14=http://deb.debian.org/debian/pool/main/p/python3.14/libpython3.14_3.14.10-1_amd64.deb

Why these: 3.9 to 3.13 are pyenv builds on the generating machine (`pyenv install`: CPython's
own sources, `./configure --enable-shared`, GCC 12.2 on Debian 12, x86_64); one kind of source
for as many versions as possible, and Debian could not serve them all (no current suite has
3.10 or 3.12). 3.14 has no pyenv build there; Debian sid's libpython3.14 3.14.10-1 is the build
used (its package list: http://deb.debian.org/debian/dists/sid/main/binary-amd64/Packages.xz).
Which names a release exports is decided by CPython's sources (`PyAPI_FUNC`, `PyAPI_DATA`), not
by the build, apart from `PyInit_*`, left out. Comparing pyenv's builds with Debian's builds of
the same minor version (names this script keeps; the types never differed):

- 3.9: pyenv 3.9.18 (1643 names) and bullseye's 3.9.2-1 (1641): 4 differences, all private:
  only in 3.9.18 `_PyUnicode_DecodeRawUnicodeEscapeStateful`,
  `_PyUnicode_DecodeUnicodeEscapeInternal`, `_PyUnicode_DecodeUnicodeEscapeStateful`; only in
  3.9.2 `_PyUnicode_DecodeUnicodeEscape`.
- 3.11: pyenv 3.11.7 (1628) and bookworm's 3.11.2-6+deb12u8 (1628): 4, all private: only in
  3.11.7 `_PyModule_Add`, `_Py_UniversalNewlineFgetsWithSize`; only in Debian's
  `_PyBytes_DecodeEscape2`, `_PyUnicode_DecodeUnicodeEscapeInternal2` (the names of later
  upstream fixes, which Debian's security updates seem to have backported; not checked).
- 3.13: pyenv 3.13.0 (1644) and trixie's 3.13.5-2+deb13u5 (1652): 8, all only in Debian's,
  all private (`_PyBytes_DecodeEscape2`, `_PyErr_SetLocaleString`, `_PySys_GetOptionalAttr`,
  `_PySys_GetOptionalAttrString`, `_PySys_GetRequiredAttr`, `_PySys_GetRequiredAttrString`,
  `_PyType_GetModuleByDef3`, `_PyUnicode_DecodeUnicodeEscapeInternal2`); sid's 3.13.18-1
  (1654) has those and 2 more (`_PyEval_NoToolsForUnwind`, `_PyType_AllocNoTrack`): 10.

So the builds agree on every public name, and patch releases (or a distribution's backported
fixes) add, and rarely remove, a few private `_Py` names: the table is exact for the release
recorded in `sources`; for another release of that minor version it may miss, or keep, a few
private names. The table is read from x86_64 Linux builds; the C API's names are the same on
other architectures, except labels such as the perf trampoline's `_Py_trampoline_func_start`
and `_end` (3.12 and later), which exist only where CPython builds that support.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from abifit.formats.elf import Binding, SymbolType, Visibility, parse_elf
from abifit.formats.sources import BytesSource

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "src" / "abifit" / "data" / "cpython_exports.json"
API = re.compile(r"(?!PyInit_)_?Py[A-Za-z_]\w*|PY_TIMEOUT_MAX")
TYPES: dict[int, str] = {SymbolType.FUNC: "func", SymbolType.OBJECT: "data",
                         SymbolType.NOTYPE: "notype"}
EXPORTED = (Binding.GLOBAL, Binding.WEAK)
VISIBLE = (Visibility.DEFAULT, Visibility.PROTECTED)
AR_MAGIC = b"!<arch>\n"


@dataclass(frozen=True, slots=True)
class Library:
    """One libpython read: its bytes and where they came from."""

    minor: str
    release: str
    origin: str
    data: bytes
    package_sha256: str | None  # the .deb's, when the library came from one
    member: str | None  # the library's path inside the package


def ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each member of an ar archive (a .deb's container)."""
    if not data.startswith(AR_MAGIC):
        raise ValueError("not an ar archive (a .deb starts with '!<arch>')")
    at = len(AR_MAGIC)
    while at + 60 <= len(data):
        header = data[at:at + 60]
        if header[58:60] != b"`\n":
            raise ValueError(f"bad ar member header at offset {at}")
        name = header[:16].decode("ascii").rstrip().rstrip("/")
        size = int(header[48:58].decode("ascii"))
        yield name, data[at + 60:at + 60 + size]
        at += 60 + size + (size & 1)


def _untar(name: str, blob: bytes) -> tarfile.TarFile:
    if name.endswith(".zst"):
        try:
            from compression import zstd  # type: ignore[import-not-found]
        except ImportError:
            from backports import zstd
        blob = zstd.decompress(blob)
    return tarfile.open(fileobj=io.BytesIO(blob), mode="r:*")


def deb_library(data: bytes, minor: str) -> tuple[str, str, bytes]:
    """(upstream version, member path, bytes) of `libpythonX.Y.so.1.0` in a .deb."""
    members = dict(ar_members(data))
    control = next((v for k, v in members.items() if k.startswith("control.tar")), None)
    payload = next(((k, v) for k, v in members.items() if k.startswith("data.tar")), None)
    if control is None or payload is None:
        raise ValueError("a .deb needs control.tar.* and data.tar.* members")
    with _untar(next(k for k in members if k.startswith("control.tar")), control) as tar:
        text = _read(tar, next(m for m in tar.getnames() if m.endswith("control"))).decode()
    version = re.search(r"^Version: (?:\d+:)?([^-\s]+)", text, re.M)
    if version is None:
        raise ValueError("the package's control file has no Version")
    wanted = f"libpython{minor}.so.1.0"
    with _untar(*payload) as tar:
        found = [m for m in tar.getmembers() if m.isfile() and m.name.endswith("/" + wanted)]
        if len(found) != 1:
            raise ValueError(f"the package holds {len(found)} files named {wanted}")
        return version.group(1), found[0].name.removeprefix("."), _read(tar, found[0].name)


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    extracted = tar.extractfile(name)
    if extracted is None:
        raise ValueError(f"{name} is not a file")
    return extracted.read()


def _release(minor: str, given: str, path: str) -> str:
    if given != minor:
        return given
    found = re.search(rf"/versions/({re.escape(minor)}\.\d+)/", path)
    if found is None:
        raise ValueError(f"{path}: give the release ({minor}.N={path}), it cannot be read here")
    return found.group(1)


def open_source(version: str, source: str) -> Library:
    """The library a `VERSION=SOURCE` argument names."""
    minor = ".".join(version.split(".")[:2])
    if re.fullmatch(r"3\.\d+", minor) is None:
        raise ValueError(f"{version!r} is not a CPython version")
    origin = source
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source) as response:
            data = response.read()
    else:
        path = os.path.expanduser(source)
        data = Path(path).read_bytes()
        home = os.path.expanduser("~")
        origin = "~" + path[len(home):] if path.startswith(home + "/") else path
    if data.startswith(AR_MAGIC):
        release, member, library = deb_library(data, minor)
        if version != minor and version != release:
            raise ValueError(f"{source} holds {release}, not {version}")
        return Library(minor, release, origin, library, hashlib.sha256(data).hexdigest(),
                       member)
    return Library(minor, _release(minor, version, origin), origin, data, None, None)


def exports(library: Library) -> dict[str, str]:
    """The API names the library exports, with their types ("func" or "data")."""
    image = parse_elf(BytesSource(library.data, library.origin), relocations=False,
                      sections=False)
    out: dict[str, str] = {}
    for symbol in image.symbols:
        if not (symbol.defined and symbol.binding in EXPORTED
                and symbol.visibility in VISIBLE and API.fullmatch(symbol.name)):
            continue
        kind = TYPES.get(symbol.type)
        if kind is None:
            raise ValueError(f"{library.origin}: {symbol.name} has type {symbol.type!r}")
        out[symbol.name] = kind
    return out


def _ranges(present: Sequence[bool], minors: Sequence[str]) -> str:
    """`3.9-3.10 3.12-3.14` for the runs of True."""
    runs: list[str] = []
    start: int | None = None
    for i, here in enumerate([*present, False]):
        if here and start is None:
            start = i
        elif not here and start is not None:
            runs.append(f"{minors[start]}-{minors[i - 1]}")
            start = None
    return " ".join(runs)


def table(libraries: Sequence[Library]) -> dict[str, object]:
    """The JSON document of the libraries' exports."""
    ordered = sorted(libraries, key=lambda lib: tuple(map(int, lib.minor.split("."))))
    minors = [lib.minor for lib in ordered]
    if len(set(minors)) != len(minors):
        raise ValueError("one source per minor version")
    per_version = [exports(lib) for lib in ordered]
    symbols: dict[str, dict[str, str]] = {}
    for name in sorted(set().union(*per_version)):
        types = {names[name] for names in per_version if name in names}
        if len(types) != 1:
            raise ValueError(f"{name} changes type between versions: {sorted(types)}")
        present = [name in names for names in per_version]
        symbols[name] = {"type": types.pop(), "introduced": minors[present.index(True)],
                         "versions": _ranges(present, minors)}
    sources = []
    for lib, names in zip(ordered, per_version, strict=True):
        entry: dict[str, object] = {
            "version": lib.minor, "release": lib.release, "origin": lib.origin,
            "sha256": hashlib.sha256(lib.data).hexdigest(), "symbols": len(names)}
        if lib.package_sha256 is not None:
            entry |= {"member": lib.member or "", "package_sha256": lib.package_sha256}
        sources.append(entry)
    return {
        "comment": "The CPython C API symbols (names matching `pattern`) that libpython exports "
                   "in each minor version, read from the files in `sources` by "
                   "tools/cpython_exports.py (its docstring says why these files). Per "
                   "symbol: its type (func: STT_FUNC, data: STT_OBJECT, notype: STT_NOTYPE), "
                   "`introduced`, the "
                   "first version of the table exporting it (the first version of the table "
                   "means that one or earlier), and `versions`, the ranges of versions "
                   "exporting it. PyInit_* (standard modules built into libpython) are left out: "
                   "which ones are is the build's choice. Do not edit by hand: run the script.",
        "pattern": API.pattern,
        "versions": minors,
        "sources": sources,
        "symbols": symbols,
    }


def render(document: dict[str, object]) -> str:
    """The document as JSON with one line per symbol (small, and diffs read per symbol)."""
    head = {k: v for k, v in document.items() if k != "symbols"}
    text = json.dumps(head, indent=2, sort_keys=False)[:-2]
    symbols = document["symbols"]
    assert isinstance(symbols, dict)
    lines = [f"    {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}"
             for name, entry in symbols.items()]
    return text + ',\n  "symbols": {\n' + ",\n".join(lines) + "\n  }\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="VERSION=SOURCE")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    libraries = []
    for argument in args.sources:
        version, sep, source = argument.partition("=")
        if not sep:
            parser.error(f"{argument!r} is not VERSION=SOURCE")
        libraries.append(open_source(version, source))
        print(f"{version}: {libraries[-1].origin}", file=sys.stderr)
    text = render(table(libraries))
    json.loads(text)  # the hand-made layout is valid JSON
    args.output.write_text(text, "utf-8")
    print(f"{args.output}: {len(text)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
