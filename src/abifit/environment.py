"""A Python environment, seen from outside: its interpreter's facts and its distributions' files.

The target interpreter is only asked for facts (paths, version, dlopen flags) in a subprocess that
imports nothing but `sys`, `sysconfig` and `json`; distributions are found by reading their
`*.dist-info` directories. Nothing of the environment is imported into abifit's own process.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from .errors import EnvironmentQueryError, UsageError

_FACTS_SCRIPT = """\
import json, sys, sysconfig
paths = sysconfig.get_paths()
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "implementation": sys.implementation.name,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "path": [p for p in sys.path if p],
    "purelib": paths["purelib"],
    "platlib": paths["platlib"],
    "dlopen_flags": sys.getdlopenflags(),
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
}))
"""


@dataclass(frozen=True, slots=True)
class InterpreterFacts:
    """What a target interpreter says about itself."""

    executable: str
    version: str
    implementation: str
    prefix: str
    base_prefix: str
    sys_path: tuple[str, ...]
    site_packages: tuple[str, ...]
    dlopen_flags: int
    ext_suffix: str


@dataclass(frozen=True, slots=True)
class Distribution:
    """An installed distribution and the files its RECORD lists."""

    name: str
    version: str
    metadata_dir: Path
    files: tuple[Path, ...]


def default_interpreter(env: Mapping[str, str]) -> str:
    """The active environment's interpreter: VIRTUAL_ENV, CONDA_PREFIX, else python3 on PATH."""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        root = env.get(var)
        if root:
            for name in ("python", "python3"):
                candidate = Path(root) / "bin" / name
                if candidate.exists():
                    return str(candidate)
    found = shutil.which("python3", path=env.get("PATH"))
    if found is None:
        raise EnvironmentQueryError("no Python interpreter: set VIRTUAL_ENV or use --python PATH")
    return found


def query_interpreter(python: str, timeout: float = 60.0) -> InterpreterFacts:
    """Ask `python` for its facts in a subprocess."""
    try:
        done = subprocess.run(
            [python, "-c", _FACTS_SCRIPT], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvironmentQueryError(f"cannot run the Python interpreter {python!r}: {e}") from e
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentQueryError(
            f"the Python interpreter {python!r} exited with {done.returncode}: {last}"
        )
    try:
        raw = json.loads(done.stdout)
        return InterpreterFacts(
            executable=raw["executable"],
            version=raw["version"],
            implementation=raw["implementation"],
            prefix=raw["prefix"],
            base_prefix=raw["base_prefix"],
            sys_path=tuple(raw["path"]),
            site_packages=tuple(dict.fromkeys((raw["purelib"], raw["platlib"]))),
            dlopen_flags=int(raw["dlopen_flags"]),
            ext_suffix=raw["ext_suffix"] or "",
        )
    except (ValueError, KeyError, TypeError) as e:
        raise EnvironmentQueryError(f"unexpected answer from {python!r}: {e}") from e


def _metadata_name(metadata_dir: Path) -> tuple[str, str] | None:
    """(name, version) from a dist-info's METADATA (or an egg-info's PKG-INFO)."""
    for fname in ("METADATA", "PKG-INFO"):
        try:
            text = (metadata_dir / fname).read_text("utf-8", "replace")
        except OSError:
            continue
        head = text.split("\n\n", 1)[0]
        fields = dict(
            line.split(":", 1) for line in head.splitlines() if ":" in line and line[0] != " "
        )
        if "Name" in fields:
            return fields["Name"].strip(), fields.get("Version", "").strip()
    return None


def _metadata_dirs(sys_path: tuple[str, ...]) -> list[Path]:
    dirs: list[Path] = []
    for entry in sys_path:
        root = Path(entry)
        if not root.is_dir():
            continue
        dirs.extend(sorted(root.glob("*.dist-info")))
        dirs.extend(sorted(root.glob("*.egg-info")))
    return dirs


def _record_files(metadata_dir: Path) -> tuple[Path, ...]:
    record = metadata_dir / "RECORD"
    if record.is_file():
        with open(record, newline="", encoding="utf-8", errors="replace") as f:
            rows = [row[0] for row in csv.reader(f) if row]
        base = metadata_dir.parent
    else:
        listed = metadata_dir / "installed-files.txt"
        if not listed.is_file():
            raise UsageError(f"{metadata_dir}: no RECORD, so its files cannot be listed")
        rows = listed.read_text("utf-8", "replace").splitlines()
        base = metadata_dir
    return tuple(Path(os.path.normpath(base / r)) for r in rows if r.strip())


def find_distribution(name: str, facts: InterpreterFacts) -> Distribution:
    """The installed distribution called `name` (any spelling), first on the interpreter's path."""
    wanted = canonicalize_name(name)
    for metadata_dir in _metadata_dirs(facts.sys_path):
        found = _metadata_name(metadata_dir)
        if found is not None and canonicalize_name(found[0]) == wanted:
            return Distribution(found[0], found[1], metadata_dir, _record_files(metadata_dir))
    raise UsageError(
        f"{name!r} is neither a file nor a distribution installed for {facts.executable}"
    )
