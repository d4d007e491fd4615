"""A Python environment, seen from outside: its interpreter's facts and its distributions' files.

The target interpreter is only asked for facts (paths, version, dlopen flags) in a subprocess that
imports nothing but `sys`, `sysconfig` and `json`; distributions are found by reading their
`*.dist-info` and `*.egg-info` metadata. Nothing of the environment is imported into abifit's own
process.

A distribution's files come from the list it installed: a dist-info's RECORD, an egg-info's
`installed-files.txt` (paths relative to the egg-info). An egg-info without one (Debian's
`python3-*` packages; a single-file `*.egg-info`, which is only PKG-INFO) lists no files: they are
inferred from the top-level names it declares (`top_level.txt`, else its own name), as the package
directories and modules of those names beside it. Its `SOURCES.txt` is not used: it lists the
sources of a build, relative to the project, not what was installed.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from abifit.errors import EnvironmentQueryError, UsageError
from abifit.host import observe

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
    "stdlib": [paths["stdlib"], paths["platstdlib"],
               sysconfig.get_config_var("DESTSHARED") or ""],
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
    # the interpreter's own module directories (stdlib, lib-dynload): part of the interpreter
    stdlib_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Distribution:
    """An installed distribution and its files: those its RECORD (or installed-files.txt)
    lists, or, when `inferred`, those of the top-level names an egg-info declares.

    `metadata_dir` is the `*.dist-info` or `*.egg-info` directory, or a single-file
    `*.egg-info` (its PKG-INFO)."""

    name: str
    version: str
    metadata_dir: Path
    files: tuple[str, ...]
    requires: tuple[str, ...] = ()
    inferred: bool = False

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


def default_interpreter(env: Mapping[str, str], cwd: Path | None = None) -> str:
    """The active environment's interpreter: VIRTUAL_ENV, CONDA_PREFIX; else, as uv finds a
    project's environment, `.venv` in the working directory `cwd` or the nearest directory
    above it that has one; else python3 on PATH."""
    roots = [env.get(var) for var in ("VIRTUAL_ENV", "CONDA_PREFIX")]
    here = cwd if cwd is not None else Path.cwd()
    roots += [str(d / ".venv") for d in (here, *here.parents)]
    for root in roots:
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
    return InterpreterQuery(python, timeout).facts()


class InterpreterQuery:
    """`query_interpreter`, started: `python` answers in a subprocess while the caller goes on
    (the `abifit` command imports the rest of a command meanwhile); `facts` waits for the
    answer, once."""

    def __init__(self, python: str, timeout: float = 60.0) -> None:
        self.python = python
        self._timeout = timeout
        self._started: subprocess.Popen[str] | OSError
        try:
            self._started = subprocess.Popen([python, "-c", _FACTS_SCRIPT],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True)
        except OSError as e:  # said by `facts`, as the answer
            self._started = e

    def facts(self) -> InterpreterFacts:
        """The interpreter's facts; raises EnvironmentQueryError when it gives none."""
        python, process = self.python, self._started
        if isinstance(process, OSError):
            raise EnvironmentQueryError(f"cannot run the Python interpreter {python!r}: "
                                        f"{process}") from process
        try:
            stdout, stderr = process.communicate(timeout=self._timeout)
        except subprocess.TimeoutExpired as e:
            process.kill()
            process.communicate()
            raise EnvironmentQueryError(f"cannot run the Python interpreter {python!r}: "
                                        f"{e}") from e
        if process.returncode != 0:
            last = (stderr.strip().splitlines() or [""])[-1]
            said = f": {last}" if last and len(last) <= 200 else ""  # not an echo of the script
            raise EnvironmentQueryError(f"the Python interpreter {python!r} exited with "
                                        f"{process.returncode} when asked for its facts{said}")
        try:
            raw = json.loads(stdout)
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
                stdlib_dirs=tuple(dict.fromkeys(p for p in raw["stdlib"] if p)),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise EnvironmentQueryError(f"unexpected answer from {python!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class _Metadata:
    name: str
    version: str
    requires: tuple[str, ...]


def _read_metadata(metadata_dir: Path) -> _Metadata | None:
    """Name, version and Requires-Dist from a dist-info's METADATA, an egg-info's PKG-INFO
    (with its requires.txt when PKG-INFO has no Requires-Dist), or a single-file egg-info."""
    names = ("METADATA", "PKG-INFO") if observe.isdir(str(metadata_dir)) else ("",)
    for fname in names:
        try:
            text = observe.read_text(str(metadata_dir / fname if fname else metadata_dir))
        except OSError:
            continue
        head = text.split("\n\n", 1)[0]
        pairs = [line.split(":", 1) for line in head.splitlines()
                 if ":" in line and line[:1] not in (" ", "\t")]
        fields = {k.strip(): v.strip() for k, v in pairs}
        if "Name" in fields:
            requires = tuple(v.strip() for k, v in pairs if k.strip() == "Requires-Dist")
            if not requires and fname == "PKG-INFO":
                requires = egg_info_requires(_read_text(metadata_dir / "requires.txt"))
            return _Metadata(fields["Name"], fields.get("Version", ""), requires)
    return None


def _read_text(path: Path) -> str:
    """A metadata file's text; empty when it is absent or unreadable."""
    try:
        return observe.read_text(str(path))
    except OSError:
        return ""


def egg_info_requires(text: str) -> tuple[str, ...]:
    """An egg-info's requires.txt as Requires-Dist lines: a `[extra]`, `[:marker]` or
    `[extra:marker]` section adds its condition to the marker of each line under it."""
    out: list[str] = []
    condition = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            condition = " and ".join([*([f"({marker.strip()})"] if marker.strip() else []),
                                      *([f'extra == "{extra.strip()}"'] if extra.strip() else [])])
            continue
        requirement, _, own = line.partition(";")
        conditions = [f"({own.strip()})"] if own.strip() else []
        conditions += [condition] if condition else []
        out.append(f"{requirement.strip()}; {' and '.join(conditions)}" if conditions
                   else requirement.strip())
    return tuple(out)


def _metadata_dirs(sys_path: tuple[str, ...]) -> list[Path]:
    dirs: list[Path] = []
    for entry in sys_path:
        root = os.path.abspath(entry)
        if not observe.isdir(root):
            continue
        for pattern in ("*.dist-info", "*.egg-info"):
            found = observe.glob(os.path.join(glob.escape(root), pattern), hidden=True)
            dirs.extend(sorted(Path(p) for p in found))
    return dirs


def record_paths(text: str) -> list[str]:
    """The first field of each row of a RECORD, as `csv.reader` reads it, rows with no field
    left out (and rows with a NUL byte: no file has one in its name; a RECORD that `csv`
    cannot read is read by lines). Without a quote or a carriage return in the text, a row is
    a line and its first field what comes before the first comma: split so, in a third of the
    time (torch's RECORD has 15,000 rows, and every run reads it first)."""
    if "\x00" in text:  # no file's name holds a NUL: such rows name nothing (binary junk)
        text = "\n".join(line for line in text.split("\n") if "\x00" not in line)
    if '"' in text or "\r" in text:
        try:
            return [row[0] for row in csv.reader(io.StringIO(text, newline="")) if row]
        except csv.Error:  # a field past csv's limit, a quote never closed: read it by lines
            pass
    return [line.split(",", 1)[0] for line in text.split("\n") if line]


def _listed_files(metadata_dir: Path) -> tuple[str, ...] | None:
    """The files a distribution's RECORD (or an egg-info's installed-files.txt) lists; None
    when it has neither."""
    record = str(metadata_dir / "RECORD")
    if observe.isfile(record):
        rows = record_paths(observe.read_bytes(record).decode("utf-8", "replace"))
        base = metadata_dir.parent
    else:
        listed = str(metadata_dir / "installed-files.txt")
        if not observe.isfile(listed):
            return None
        rows = observe.read_text(listed).splitlines()
        base = metadata_dir
    prefix = str(base) + "/"
    return tuple(os.path.normpath(prefix + r) if "./" in r else prefix + r
                 for r in rows if r.strip())


def top_level_names(metadata_dir: Path, name: str) -> list[str]:
    """The top-level import names an egg-info declares (`top_level.txt`), else the one its
    distribution name spells (`python-foo` -> `python_foo`)."""
    declared = [n.strip() for n in _read_text(metadata_dir / "top_level.txt").splitlines()
                if n.strip()]
    names = declared or [name.replace("-", "_").replace(".", "_")]
    return [n for n in names if all(part.isidentifier() for part in n.split("/"))]


def inferred_files(site: Path, names: list[str], suffixes: tuple[str, ...]) -> tuple[str, ...]:
    """The files of top-level `names` in `site`: every file under a package directory of that
    name (but `__pycache__`), and the module files `NAME.py`, `NAME<extension suffix>`."""
    out: list[str] = []
    for name in names:
        top = str(site / name)
        if observe.isdir(top):
            for directory, subdirs, files in observe.walk(top):
                subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                out += [os.path.join(directory, f) for f in sorted(files)]
        out += [str(site / (name + s)) for s in (".py", *suffixes)
                if observe.isfile(str(site / (name + s)))]
    return tuple(dict.fromkeys(out))


def _distribution(metadata_dir: Path, meta: _Metadata,
                  suffixes: tuple[str, ...]) -> Distribution:
    """The distribution of a metadata directory: its listed files, else (an egg-info) the
    files its top-level names infer; a dist-info without RECORD raises `UsageError`."""
    listed = _listed_files(metadata_dir) if observe.isdir(str(metadata_dir)) else None
    if listed is not None:
        return Distribution(meta.name, meta.version, metadata_dir, listed, meta.requires)
    if metadata_dir.suffix != ".egg-info":
        raise UsageError(f"{metadata_dir}: no RECORD, so its files cannot be listed")
    files = inferred_files(metadata_dir.parent, top_level_names(metadata_dir, meta.name),
                           suffixes)
    return Distribution(meta.name, meta.version, metadata_dir, files, meta.requires, True)


def find_distribution(name: str, facts: InterpreterFacts) -> Distribution:
    """The installed distribution called `name` (any spelling), first on the interpreter's path."""
    wanted = canonicalize_name(name)
    for metadata_dir in _metadata_dirs(facts.sys_path):
        found = _read_metadata(metadata_dir)
        if found is not None and canonicalize_name(found.name) == wanted:
            return _distribution(metadata_dir, found, facts.extension_suffixes)
    raise UsageError(
        f"{name!r} is neither a file nor a distribution installed for {facts.executable}"
    )


def list_distributions(facts: InterpreterFacts) -> list[Distribution]:
    """Every distribution the interpreter can import (dist-info and egg-info), first on its
    path wins; unlistable ones (a dist-info without RECORD) are skipped."""
    found: dict[str, Distribution] = {}
    for metadata_dir in _metadata_dirs(facts.sys_path):
        meta = _read_metadata(metadata_dir)
        if meta is None or canonicalize_name(meta.name) in found:
            continue
        try:
            dist = _distribution(metadata_dir, meta, facts.extension_suffixes)
        except UsageError:
            continue
        found[dist.key] = dist
    return list(found.values())
