"""The GitHub Action's install step (action.yml, "Install abifit"), run as the runner runs it:
in a fresh venv of this Python on PATH as `python`, with the action's directory (this checkout)
as GITHUB_ACTION_PATH. pip builds abifit from the checkout, with its build requirement and its
dependencies from the configured index (PyPI): a skip when that cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from abifit.version import __version__
from helpers import REPO

pytestmark = pytest.mark.network

UNREACHABLE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name",
               "No matching distribution found for setuptools")


def test_the_action_installs_abifit_from_its_own_revision(tmp_path: Path) -> None:
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    (install,) = [s for s in steps if s.get("name") == "Install abifit"]
    assert install["shell"] == "bash"
    venv = tmp_path / "runner"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "GITHUB_ACTION_PATH": str(REPO)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           install["run"]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    if done.returncode != 0 and any(word in done.stderr for word in UNREACHABLE):
        pytest.skip(f"the index cannot be reached: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    version = subprocess.run([str(venv / "bin" / "abifit"), "--version"], capture_output=True,
                             text=True, env=env, timeout=120, check=True)
    assert version.stdout.strip() == f"abifit {__version__}"
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import abifit, sys; print(abifit.__file__)"],
                               capture_output=True, text=True, env=env, timeout=120, check=True)
    assert installed.stdout.strip().startswith(str(venv))  # a copy, not this checkout
