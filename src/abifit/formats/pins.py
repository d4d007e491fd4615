"""Pinned requirements from files: `requirements.txt`, `uv.lock`, `pylock.toml` (PEP 751).

Pure parsing (text in, requirement strings out) plus `read_pins`, which reads a file. Options
of requirements files other than `-r`/`-c` are ignored (they are about installing, not about
what is installed); editable and URL requirements cannot be checked from an index and are
reported back as skipped.
"""

from __future__ import annotations

import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from abifit.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]


@dataclass(frozen=True, slots=True)
class Pins:
    """Requirement strings to check, and entries that could not be turned into one."""

    requirements: tuple[str, ...]
    skipped: tuple[str, ...]


def requirements_txt(text: str) -> tuple[list[str], list[str], list[str]]:
    """(requirements, included files, skipped lines) of a requirements file's text."""
    requirements: list[str] = []
    included: list[str] = []
    skipped: list[str] = []
    joined = text.replace("\\\n", " ")
    for raw in joined.splitlines():
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
        requirement = line.split(" --hash", 1)[0].strip()
        if "://" in requirement or requirement.startswith((".", "/")):
            skipped.append(line)
            continue
        requirements.append(requirement)
    return requirements, included, skipped


def uv_lock(text: str) -> Pins:
    """The registry packages of a `uv.lock` as `name==version` (workspace members skipped)."""
    out, skipped = [], []
    for package in _tables(_toml(text, "uv.lock"), "package"):
        name, version = package.get("name"), package.get("version")
        source = package.get("source")
        kinds = sorted(source) if isinstance(source, dict) else []
        if name and version and "registry" in kinds:
            out.append(f"{name}=={version}")
        elif name:
            skipped.append(f"{name} (source {', '.join(kinds) or 'unknown'})")
    return Pins(tuple(out), tuple(skipped))


def pylock_toml(text: str) -> Pins:
    """The packages of a PEP 751 `pylock.toml` that have wheels, as `name==version`."""
    out, skipped = [], []
    for package in _tables(_toml(text, "pylock.toml"), "packages"):
        name, version = package.get("name"), package.get("version")
        if name and version and ("wheels" in package or "sdist" in package):
            out.append(f"{name}=={version}")
        elif name:
            skipped.append(f"{name} (no version or no wheel)")
    return Pins(tuple(out), tuple(skipped))


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


def read_pins(path: str, _seen: frozenset[str] = frozenset()) -> Pins:
    """The requirements a file pins, by its name: `uv.lock`, `pylock*.toml`, else a
    requirements file (with its `-r` includes)."""
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
        return uv_lock(text)
    if file.name.startswith("pylock") and file.suffix == ".toml":
        return pylock_toml(text)
    requirements, included, skipped = requirements_txt(text)
    for name in included:
        nested = str(file.parent / name)
        if nested in _seen:
            raise UsageError(f"{path}: `-r {name}` includes itself")
        more = read_pins(nested, _seen | {str(file)})
        requirements += more.requirements
        skipped += more.skipped
    return Pins(tuple(requirements), tuple(skipped))
