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

from abifit.errors import EnvironmentQueryError, UsageError

_FACTS_SCRIPT = """\
import importlib.machinery, json, os, platform, sys, sysconfig
paths = sysconfig.get_paths()
impl = sys.implementation
print(json.dumps({
    "extension_suffixes": importlib.machinery.EXTENSION_SUFFIXES,
    "markers": {
        "implementation_name": impl.name,
        "implementation_version": "%d.%d.%d" % impl.version[:3],
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": "%d.%d" % sys.version_info[:2],
        "sys_platform": sys.platform,
    },
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
    extension_suffixes: tuple[str, ...] = ()
    markers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Distribution:
    """An installed distribution and the files its RECORD lists."""

    name: str
    version: str
    metadata_dir: Path
    files: tuple[str, ...]
    requires: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)


def interpreter_candidates(version: tuple[int, int], env: Mapping[str, str],
                           home: Path | None = None) -> list[str]:
    """Where an interpreter of Python `version` may be on this machine, best first:
    `pythonX.Y` on PATH, then the pyenv- and uv-managed ones (their newest patch release)."""
    name = "python{}.{}".format(*version)
    found = [shutil.which(name, path=env.get("PATH"))]
    home = home or Path(env.get("HOME") or Path.home())
    pyenv = Path(env.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    uv = Path(env.get("UV_PYTHON_INSTALL_DIR") or home / ".local/share/uv/python")
    prefix = "{}.{}.".format(*version)
    for root, pattern in ((pyenv, f"{prefix}*"), (uv, f"cpython-{prefix}*")):
        for directory in sorted(root.glob(pattern), key=_patch_level, reverse=True):
            found.append(str(directory / "bin" / name))
    return [f for f in dict.fromkeys(found) if f and os.path.isfile(f) and os.access(f, os.X_OK)]


def _patch_level(directory: Path) -> tuple[int, ...]:
    digits = directory.name.split("-")[1 if directory.name.startswith("cpython-") else 0]
    return tuple(int(p) for p in digits.split(".") if p.isdigit())


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
            extension_suffixes=tuple(raw["extension_suffixes"]),
            markers=tuple(sorted(raw["markers"].items())),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise EnvironmentQueryError(f"unexpected answer from {python!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class _Metadata:
    name: str
    version: str
    requires: tuple[str, ...]


def _read_metadata(metadata_dir: Path) -> _Metadata | None:
    """Name, version and Requires-Dist from a dist-info's METADATA (or an egg-info's PKG-INFO)."""
    for fname in ("METADATA", "PKG-INFO"):
        try:
            text = (metadata_dir / fname).read_text("utf-8", "replace")
        except OSError:
            continue
        head = text.split("\n\n", 1)[0]
        pairs = [line.split(":", 1) for line in head.splitlines()
                 if ":" in line and line[:1] not in (" ", "\t")]
        fields = {k.strip(): v.strip() for k, v in pairs}
        if "Name" in fields:
            requires = tuple(v.strip() for k, v in pairs if k.strip() == "Requires-Dist")
            return _Metadata(fields["Name"], fields.get("Version", ""), requires)
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


def _record_files(metadata_dir: Path) -> tuple[str, ...]:
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
    prefix = str(base) + "/"
    return tuple(os.path.normpath(prefix + r) if "./" in r else prefix + r
                 for r in rows if r.strip())


def find_distribution(name: str, facts: InterpreterFacts) -> Distribution:
    """The installed distribution called `name` (any spelling), first on the interpreter's path."""
    wanted = canonicalize_name(name)
    for metadata_dir in _metadata_dirs(facts.sys_path):
        found = _read_metadata(metadata_dir)
        if found is not None and canonicalize_name(found.name) == wanted:
            return Distribution(found.name, found.version, metadata_dir,
                                _record_files(metadata_dir), found.requires)
    raise UsageError(
        f"{name!r} is neither a file nor a distribution installed for {facts.executable}"
    )


def list_distributions(facts: InterpreterFacts) -> list[Distribution]:
    """Every distribution the interpreter can import, first on its path wins; unlistable ones
    (no RECORD) are skipped."""
    found: dict[str, Distribution] = {}
    for metadata_dir in _metadata_dirs(facts.sys_path):
        meta = _read_metadata(metadata_dir)
        if meta is None or canonicalize_name(meta.name) in found:
            continue
        try:
            files = _record_files(metadata_dir)
        except UsageError:
            continue
        dist = Distribution(meta.name, meta.version, metadata_dir, files, meta.requires)
        found[dist.key] = dist
    return list(found.values())
