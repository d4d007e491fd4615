"""Shared test fixtures: the torch test environment and a loopback package index.

The binaries the tests use are compiled from the sources under tests/fixtures/ by
`fixtures.build.compile_c` (see tests/fixtures/build.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from httpserver import LoopbackIndex, LoopbackServer, Projects, publish_index

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


@pytest.fixture(scope="module")
def index_projects() -> Projects:
    """What `loopback_index` serves: project -> [(wheel filename, bytes)]; a test module that
    uses the index defines its own."""
    return {}


@pytest.fixture(scope="module")
def loopback_index(index_projects: Projects) -> Iterator[LoopbackIndex]:
    """A PEP 503 index on 127.0.0.1 serving the module's `index_projects`, with sha256 in every
    link (as PyPI gives) and `Range` honoured; one server per test module."""
    with LoopbackServer() as server:
        yield publish_index(server, index_projects)
