"""Shared test fixtures: the torch test environment and the ELF fixtures compiled from sources."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TORCH_VERSION = "2.13.0"
CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))


def _python311() -> str | None:
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    return shutil.which("python3.11")


def ensure_torch_venv() -> Path:
    """A venv with torch==2.13.0 (the CPU wheel on this machine's disk), created once and reused.

    Creation is serialised with a file lock so parallel test runs share one environment.
    """
    venv = CACHE / f"torch-{TORCH_VERSION}"
    ready = venv / ".abifit-ready"
    if ready.exists():
        return venv
    python = _python311()
    if python is None:
        pytest.skip("python3.11 is needed for the torch 2.13.0 test environment")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"torch-{TORCH_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                 "--only-binary", ":all:", f"torch=={TORCH_VERSION}"],
                check=True,
            )
            ready.touch()
    return venv


@pytest.fixture(scope="session")
def torch_venv() -> Path:
    """Root of a venv with torch installed."""
    return ensure_torch_venv()


@pytest.fixture(scope="session")
def torch_dir(torch_venv: Path) -> Path:
    """The installed torch package directory."""
    found = sorted(torch_venv.glob("lib/python3*/site-packages/torch"))
    assert found, f"torch is not installed in {torch_venv}"
    return found[0]
