"""Fresh venvs for tests that run a real interpreter on installed wheels, and the environment
those processes run with."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# what changes how the loader or Python searches: never passed on to the processes checked
LOADER_ENV = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
              "CONDA_PREFIX")


def clean_environ() -> dict[str, str]:
    """This process's environment without `LOADER_ENV`."""
    return {k: v for k, v in os.environ.items() if k not in LOADER_ENV}


def venv_with_wheels(env_dir: Path, wheels: Sequence[Path]) -> str:
    """A fresh venv of this interpreter at `env_dir` with `wheels` installed by pip (this
    interpreter's pip when it has one, else the venv's own), without their dependencies or
    an index; its interpreter."""
    python = str(env_dir / "bin" / "python")
    if importlib.util.find_spec("pip") is not None:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
        pip = [sys.executable, "-m", "pip", "--python", python]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
        pip = [python, "-m", "pip"]
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                    "--no-compile", "-q", *map(str, wheels)], check=True, env=clean_environ())
    return python
