"""Pinned requirements from files: `requirements.txt`, `uv.lock`, `pylock.toml` (PEP 751).

Pure parsing (text in, pins out) plus `read_pins`, which reads a file. Options of requirements
files other than `-r`/`-c` and `--hash` are ignored (they are about installing, not about what
is installed); editable and URL requirements cannot be checked from an index and are reported
back as skipped.

Given the target's environment markers, a pin whose marker does not hold there is left out,
as the installer leaves it out: a requirement's `; marker`, a pylock package's `marker`, and
in a `uv.lock` the markers of each dependency on the way from the project (a package locked
twice for two Python ranges, `resolution-markers`, is the one of the target's range). A pin
keeps what the lock says of its files: the sha256 digests a requirements file allows
(`--hash`), the files (URL, digest, size) a `uv.lock` or `pylock.toml` names, so that the
verdict is about those files. A pin also keeps where it was written (`file`, `line`), so that
a report can point at the line of the lock that pins a broken package: a requirements file's
physical line (the first of a requirement continued with `\\`), the line of a TOML lock's
`name = "..."` entry, found in the text (tomllib gives no positions).
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.errors import UsageError

if TYPE_CHECKING:
    from packaging.markers import Marker

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


@dataclass(frozen=True, slots=True)
class LockedFile:
    """A file a lock names for a pin."""

    filename: str
    url: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class Pin:
    """One pin: its requirement (`name==version`), the sha256 digests the lock allows for
    its file, the files the lock names (none: the index's), and where it was written: the
    file (as it was named) and the line (1-based), where known."""

    requirement: str
    hashes: tuple[str, ...] = ()
    files: tuple[LockedFile, ...] = ()
    file: str | None = None
    line: int | None = None

    @property
    def name(self) -> str:
        return re.split(r"[\s\[<>=!~;@(]", self.requirement, maxsplit=1)[0]


@dataclass(frozen=True, slots=True)
class Pins:
    """Requirement strings to check, and entries that could not be turned into one; `pins`
    holds the same requirements with what the lock says of their files."""

    requirements: tuple[str, ...]
    skipped: tuple[str, ...]
    pins: tuple[Pin, ...] = ()


Markers = Mapping[str, str]


def holds(marker: str | Marker | None, markers: Markers | None,
          extras: Iterable[str] = ()) -> bool:
    """Whether an environment marker (text, or a requirement's parsed one) holds for the
    target, with any of the `extras` asked for (always, without target markers or without a
    marker; a marker that cannot be evaluated does not hold)."""
    if not marker or markers is None:
        return True
    from packaging.markers import (
        InvalidMarker,
        Marker,
        UndefinedComparison,
        UndefinedEnvironmentName,
    )

    try:
        parsed = Marker(marker) if isinstance(marker, str) else marker
        return any(parsed.evaluate({**markers, "extra": extra}) for extra in (extras or ("",)))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return False


_HASH = re.compile(r"--hash[=\s]+sha256:([0-9a-fA-F]{64})")


def requirements_txt(text: str, markers: Markers | None = None, where: str = "",
                     ) -> tuple[list[Pin], list[str], list[str]]:
    """(pins, included files, skipped lines) of a requirements file's text; with `markers`, a
    requirement whose marker does not hold there is left out. A line that is not a
    requirement is an error that names `where` and the line's number, not its text (a file
    given by mistake, /etc/passwd, is not printed)."""
    pins: list[Pin] = []
    included: list[str] = []
    skipped: list[str] = []
    for number, raw in logical_lines(text):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "-c ", "--constraint ")):
            if line.startswith(("-r", "--requirement")):
                included.append(line.split(None, 1)[1].strip())
            continue
        if line.startswith("-"):
            if line.startswith(("-e", "--editable")):
                skipped.append(line)
            continue
        hashes = tuple(h.lower() for h in _HASH.findall(line))
        requirement = re.split(r"\s--hash\b", line, maxsplit=1)[0].strip()
        if "://" in requirement or requirement.startswith((".", "/")):
            skipped.append(line)
            continue
        requirement, _, marker = requirement.partition(";")
        if not _is_requirement(requirement.strip()):
            raise UsageError(f"{where or 'a requirements file'}, line {number}: not a "
                             "requirement (NAME, NAME==VERSION, NAME[EXTRA]>=VERSION, ...)")
        if not holds(marker.strip(), markers):
            continue
        pins.append(Pin(requirement.strip(), hashes, line=number))
    return pins, included, skipped


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a requirements file as pip reads them, a line that ends with `\\` joined
    to the next, each with the number of its first physical line."""
    parts: list[str] = []
    start = 1
    for number, raw in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        if raw.endswith("\\"):
            parts.append(raw[:-1])
            continue
        parts.append(raw)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def _is_requirement(text: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def _roots(packages: list[dict[str, object]]) -> list[dict[str, object]]:
    """The project's own packages in a uv.lock (workspace members: editable, virtual or
    directory sources)."""
    out = []
    for package in packages:
        source = package.get("source")
        if isinstance(source, dict) and {"editable", "virtual", "directory"} & set(source):
            out.append(package)
    return out


def _dependencies(package: dict[str, object]) -> list[dict[str, object]]:
    """A uv.lock package's dependencies and those of its `dev` group (which `uv sync`
    installs by default)."""
    found = package.get("dependencies")
    deps = [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []
    groups = package.get("dev-dependencies")
    if isinstance(groups, dict) and isinstance(groups.get("dev"), list):
        deps += [d for d in groups["dev"] if isinstance(d, dict)]
    return deps


def _applies(package: dict[str, object], markers: Markers | None) -> bool:
    """Whether a uv.lock package locked for some Python ranges only is locked for the
    target's (`resolution-markers`: any of them holds)."""
    forks = package.get("resolution-markers")
    if not isinstance(forks, list) or not forks or markers is None:
        return True
    return any(holds(str(m), markers) for m in forks)


def _uv_installed(packages: list[dict[str, object]], markers: Markers | None,
                  ) -> list[dict[str, object]]:
    """The uv.lock packages the target gets: from the project's packages, the dependencies
    whose markers hold there, each the version locked for the target's range; without
    project packages (or without markers), every package locked for the target's range."""
    roots = _roots(packages)
    if markers is None or not roots:
        return [p for p in packages if _applies(p, markers)]
    by_name: dict[str, list[dict[str, object]]] = {}
    for package in packages:
        by_name.setdefault(str(package.get("name", "")).lower(), []).append(package)
    seen: dict[int, dict[str, object]] = {}
    todo = list(roots)
    while todo:
        package = todo.pop()
        if id(package) in seen:
            continue
        seen[id(package)] = package
        for dep in _dependencies(package):
            marker = dep.get("marker")
            if not holds(str(marker) if marker else None, markers):
                continue
            version = dep.get("version")
            todo += [p for p in by_name.get(str(dep.get("name", "")).lower(), [])
                     if (p.get("version") == version if version else _applies(p, markers))]
    return [p for p in packages if id(p) in seen]


def _locked_files(entries: object, url_key: str = "url") -> tuple[LockedFile, ...]:
    """The files of a lock's `wheels` array: uv's `hash = "sha256:..."` or pylock's
    `hashes = {sha256 = ...}`; entries without a URL are left out."""
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get(url_key), str):
            continue
        url = str(entry[url_key])
        digest = entry.get("hash")
        hashes = entry.get("hashes")
        sha = (digest.split(":", 1)[1] if isinstance(digest, str) and digest.startswith("sha256:")
               else hashes.get("sha256") if isinstance(hashes, dict) else None)
        name = entry.get("name") if isinstance(entry.get("name"), str) else None
        size = entry.get("size")
        out.append(LockedFile(str(name or url.rsplit("/", 1)[-1].split("#")[0]), url,
                              str(sha).lower() if sha else None,
                              size if isinstance(size, int) else None))
    return tuple(out)


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(name|version)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def package_lines(text: str, table: str) -> dict[tuple[str, str | None], int]:
    """Where each entry of a TOML lock's array of tables `table` (`package` in a uv.lock,
    `packages` in a pylock.toml) names its package: the line of its `name = "..."`, by the
    canonical name and the version it locks, and by the name alone (None) for the first
    entry of that name. Read from the text, line by line: tomllib gives no positions."""
    from packaging.utils import canonicalize_name

    out: dict[tuple[str, str | None], int] = {}
    entry: dict[str, tuple[str, int]] | None = None

    def close() -> None:
        if entry and "name" in entry:
            name, number = canonicalize_name(entry["name"][0]), entry["name"][1]
            out.setdefault((name, entry["version"][0] if "version" in entry else None), number)
            out.setdefault((name, None), number)

    for number, raw in enumerate(text.splitlines(), 1):
        header = _HEADER.match(raw)
        if header:
            close()
            entry = {} if header.group(1) == "[[" and header.group(2) == table else None
            continue
        key = _KEY.match(raw)
        if entry is not None and key and key.group(1) not in entry:
            entry[key.group(1)] = (key.group(2) if key.group(2) is not None
                                   else key.group(3), number)
    close()
    return out


def _line_of(lines: Mapping[tuple[str, str | None], int], name: object,
             version: object) -> int | None:
    from packaging.utils import canonicalize_name

    key = canonicalize_name(str(name))
    return lines.get((key, str(version)), lines.get((key, None)))


def uv_lock(text: str, markers: Markers | None = None) -> Pins:
    """The registry packages of a `uv.lock` as `name==version` (workspace members skipped),
    each with the wheels the lock names and the line of its entry; with `markers`, only
    those the target gets."""
    pins, skipped = [], []
    lines = package_lines(text, "package")
    for package in _uv_installed(_tables(_toml(text, "uv.lock"), "package"), markers):
        name, version = package.get("name"), package.get("version")
        source = package.get("source")
        kinds = sorted(source) if isinstance(source, dict) else []
        if name and version and "registry" in kinds:
            files = _locked_files(package.get("wheels"))
            pins.append(Pin(f"{name}=={version}", tuple(f.sha256 for f in files if f.sha256),
                            files, line=_line_of(lines, name, version)))
        elif name:
            skipped.append(f"{name} (source {', '.join(kinds) or 'unknown'})")
    return Pins(tuple(p.requirement for p in pins), tuple(skipped), tuple(pins))


def pylock_toml(text: str, markers: Markers | None = None) -> Pins:
    """The packages of a PEP 751 `pylock.toml` that have wheels, as `name==version`, each
    with the wheels the lock names and the line of its entry; with `markers`, those whose
    marker holds there."""
    pins, skipped = [], []
    lines = package_lines(text, "packages")
    for package in _tables(_toml(text, "pylock.toml"), "packages"):
        name, version = package.get("name"), package.get("version")
        marker = package.get("marker")
        if not holds(str(marker) if marker else None, markers):
            continue
        if name and version and ("wheels" in package or "sdist" in package):
            files = _locked_files(package.get("wheels"))
            pins.append(Pin(f"{name}=={version}", tuple(f.sha256 for f in files if f.sha256),
                            files, line=_line_of(lines, name, version)))
        elif name:
            skipped.append(f"{name} (no version or no wheel)")
    return Pins(tuple(p.requirement for p in pins), tuple(skipped), tuple(pins))


def _toml(text: str, what: str) -> dict[str, object]:
    try:
        return dict(tomllib.loads(text))
    except RecursionError as e:  # tables or arrays nested past what the parser can follow
        raise UsageError(f"{what}: nested too deeply to read") from e
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{what}: not valid TOML ({e})") from e


def _tables(data: dict[str, object], key: str) -> list[dict[str, object]]:
    """The array of tables `key` (entries that are not tables are dropped)."""
    found = data.get(key)
    return [dict(t) for t in found if isinstance(t, dict)] if isinstance(found, list) else []


MAX_PINS = 16 << 20  # a requirements or lock file larger than this is refused


MAX_FILES = 1000  # requirements files one `-r` may bring in, includes of includes counted


def read_pins(path: str, markers: Markers | None = None,
              _seen: frozenset[str] = frozenset(),
              _read: dict[str, Pins] | None = None) -> Pins:
    """The requirements a file pins, by its name: `uv.lock`, a `*.toml` (PEP 751), else a
    requirements file (with its `-r` includes, each file read once however often it is
    included, and at most `MAX_FILES` of them); with `markers` (the target's), only those
    the target gets."""
    read = {} if _read is None else _read
    if path in read:
        return Pins((), ())  # its pins are there already, from its first inclusion
    if len(read) >= MAX_FILES:
        raise UsageError(f"{path}: more than {MAX_FILES} requirements files included")
    file = Path(path)
    try:
        if not stat.S_ISREG(file.stat().st_mode):
            raise UsageError(f"cannot read {path}: not a regular file")
        with file.open("rb") as f:
            data = f.read(MAX_PINS + 1)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from e
    if len(data) > MAX_PINS:
        raise UsageError(f"cannot read {path}: larger than {MAX_PINS >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read {path}: not UTF-8 text (byte {e.start})") from e
    if file.name == "uv.lock":
        return written_in(uv_lock(text, markers), path)
    if file.suffix == ".toml":  # pylock.toml, pylock.NAME.toml, or a copy named otherwise
        return written_in(pylock_toml(text, markers), path)
    read[path] = Pins((), ())
    pins, included, skipped = requirements_txt(text, markers, path)
    pins = [replace(pin, file=path) for pin in pins]
    for name in included:
        nested = str(file.parent / name)
        if nested in _seen or nested == path:
            raise UsageError(f"{path}: `-r {name}` includes itself")
        more = read_pins(nested, markers, _seen | {path}, read)
        pins += more.pins
        skipped += more.skipped
    found = Pins(tuple(p.requirement for p in pins), tuple(skipped), tuple(pins))
    read[path] = found
    return found


def written_in(pins: Pins, path: str) -> Pins:
    """`pins` with `path` as the file each was written in."""
    return replace(pins, pins=tuple(replace(pin, file=path) for pin in pins.pins))


def placed_in_lock(pins: Iterable[Pin], text: str, path: str) -> tuple[Pin, ...]:
    """Pins made from a PEP 751 lock (a snapshot's) elsewhere, with the lock's `path` and
    the line of each one's entry in its `text`."""
    lines = package_lines(text, "packages")
    out = []
    for pin in pins:
        name, _, version = pin.requirement.partition("==")
        out.append(replace(pin, file=path, line=_line_of(lines, name, version)))
    return tuple(out)
