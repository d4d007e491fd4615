"""Where else a library exists on this machine (I/O): toolkit directories, the library directories
of this and other Python environments, conda prefixes.

The candidate directories are collected once (a bounded walk of known places), then each query is
one `isfile` per directory.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from abifit.host import observe

_FIXED = (
    "/usr/local/cuda*/lib64", "/usr/local/cuda*/lib", "/usr/local/cuda*/targets/*/lib",
    "/usr/local/cuda*/compat", "/usr/local/lib", "/usr/local/lib64", "/opt/*/lib", "/opt/*/lib64",
    "/usr/lib/wsl/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib64/nvidia",
)
_ENV_ROOTS = (
    "~/.pyenv/versions/*", "~/.pyenv/versions/*/envs/*", "~/miniconda3", "~/miniconda3/envs/*",
    "~/anaconda3", "~/anaconda3/envs/*", "~/miniforge3", "~/miniforge3/envs/*", "~/.conda/envs/*",
    "~/.virtualenvs/*", "~/.local", "/opt/conda", "/opt/conda/envs/*",
)


def _site_library_dirs(site: str) -> list[str]:
    """Library directories in a site-packages: pkg/lib, nvidia/x/lib, nvidia/cu13/lib, *.libs."""
    dirs = []
    for pattern in ("*/lib", "*/*/lib", "*/*/*/lib", "*.libs", "*/lib64"):
        dirs.extend(_glob(os.path.join(glob.escape(site), pattern)))
    return dirs


ENV_VARIABLES = ("HOME", "CONDA_PREFIX", "VIRTUAL_ENV", "CUDA_HOME", "CUDA_PATH")


def library_dirs(sys_path: Iterable[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """Every directory worth looking in for a library of a given name (`env`: the variables
    `ENV_VARIABLES`, those set, are all it reads)."""
    dirs: list[str] = []
    for pattern in _FIXED:
        dirs.extend(_glob(pattern))
    home = env.get("HOME") or os.path.expanduser("~")
    roots = [home + r[1:] if r.startswith("~/") else r for r in _ENV_ROOTS]
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV", "CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            roots.append(env[var])
    prefixes: list[str] = []
    for pattern in roots:
        prefixes.extend(_glob(pattern))
    sites = [p for p in sys_path if observe.isdir(p)]
    for prefix in prefixes:
        dirs.extend(_glob(os.path.join(glob.escape(prefix), "lib")))
        dirs.extend(_glob(os.path.join(glob.escape(prefix), "lib64")))
        sites.extend(_glob(os.path.join(glob.escape(prefix), "lib/python3*/site-packages")))
    for site in dict.fromkeys(sites):
        dirs.extend(_site_library_dirs(site))
    return tuple(dict.fromkeys(os.path.normpath(d) for d in dirs if observe.isdir(d)))


def library_dirs_seen(sys_path: Iterable[str], env: Mapping[str, str]
                      ) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, str], observe.Seen], ...]]:
    """`library_dirs` with the answers of the reads it made (`observe.Recorder.seen`): a
    function another process can run."""
    with observe.recording() as recorder:
        dirs = library_dirs(sys_path, env)
    return dirs, tuple(recorder.seen.items())


def _glob(pattern: str) -> list[str]:
    """`glob.glob(pattern)`; nothing for a relative pattern (a relative CONDA_PREFIX, say,
    names no place of its own)."""
    return observe.glob(pattern, hidden=False) if pattern.startswith("/") else []


class Locator:
    """Finds files of a given name in the candidate directories, collected on first use."""

    def __init__(self, dirs: Callable[[], Iterable[str]]) -> None:
        self._collect = dirs
        self._dirs: tuple[str, ...] | None = None

    def __call__(self, name: str) -> tuple[str, ...]:
        if "/" in name:
            return ()
        if self._dirs is None:
            self._dirs = tuple(self._collect())
        return tuple(str(Path(d) / name) for d in self._dirs
                     if observe.isfile(os.path.join(d, name)))
