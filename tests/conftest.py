"""Shared test fixtures: the torch test environments and a loopback package index.

Two venvs with a real torch live under ~/.cache/abifit-tests (or $ABIFIT_TEST_CACHE):

- `torch-2.13.0`: torch 2.13.0's CPU build, created by the first test that needs it (pip takes
  the CPU wheel from the configured index or find-links location, else from PyTorch's CPU
  index; about 200 MB). Tests that use it (`torch_venv`, `torch_dir`) are marked `slow`.
- `torch-2.14.1-cu`: torch 2.14.1's CUDA build from PyPI with torchvision, whose GPU libraries
  the fat-binary tests read. pip downloads about 3 GB for it (5.5 GB installed), so it is built
  only when pytest runs with `--run-cuda`; without it those tests are skipped and say so. Its
  tests are `slow` too.

A test that uses either venv without the `slow` marker stops the run at collection.

The binaries the tests use are compiled from the sources under tests/fixtures/ by
`fixtures.build.compile_c` (see tests/fixtures/build.py). The fixtures several test modules use
are here (`binaries`, `index_projects`, `loopback_index`, the torch venvs); the builders and
paths they share are in tests/helpers.py.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import check_binaries
from httpserver import LoopbackIndex, LoopbackServer, Projects, publish_index

TORCH_VERSION = "2.13.0"
CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# the CUDA venv: torch's PyPI build (CUDA 13) and the torchvision built for it
TORCH_CUDA_REQUIREMENTS = ("torch==2.14.1", "torchvision==0.29.1")
TORCH_CUDA_VENV = CACHE / "torch-2.14.1-cu"
# fixtures that create or read a torch venv: their tests must be marked slow
TORCH_FIXTURES = frozenset({"torch_venv", "torch_dir", "torch_cuda_venv"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-cuda", action="store_true",
        help=f"create the torch CUDA test venv {TORCH_CUDA_VENV} when it is missing (pip "
        f"install {' '.join(TORCH_CUDA_REQUIREMENTS)}: about 3 GB to download), for the tests "
        "that read its GPU libraries; without it they are skipped")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stop at collection when a test uses a torch venv but is not marked slow, so that
    `-m "not slow"` never builds one."""
    unmarked = [item.nodeid for item in items
                if TORCH_FIXTURES & set(getattr(item, "fixturenames", ()))
                and item.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError("these tests use a torch test venv but are not marked "
                                f"@pytest.mark.slow: {', '.join(unmarked)}")


def _python311() -> str | None:
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    return shutil.which("python3.11")


def _pip_install(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--only-binary", ":all:", *args], capture_output=True, text=True)


def _create_venv(venv: Path, python: str, install: Callable[[Path], None]) -> Path:
    """`venv`, created by `python` and filled by `install` once, then reused; creation is
    serialised with a file lock so that parallel test runs share one environment."""
    ready = venv / ".abifit-ready"
    if ready.exists():
        return venv
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(venv)], check=True)
            install(venv)
            ready.touch()
    return venv


def _install_torch_cpu(venv: Path) -> None:
    """torch 2.13.0's CPU build: from what pip is configured with, else from PyTorch's CPU
    index (never PyPI's CUDA build, which brings about 3 GB of nvidia-* wheels)."""
    wanted = f"torch=={TORCH_VERSION}+cpu"
    done = _pip_install(venv, wanted)
    if done.returncode != 0:
        done = _pip_install(venv, "--extra-index-url", TORCH_CPU_INDEX, wanted)
    if done.returncode != 0:
        pytest.fail(f"pip could not install {wanted} (also tried {TORCH_CPU_INDEX}):\n"
                    f"{done.stderr.strip()}")


def ensure_torch_venv() -> Path:
    """A venv with torch 2.13.0's CPU build, created once and reused."""
    venv = CACHE / f"torch-{TORCH_VERSION}"
    if (venv / ".abifit-ready").exists():
        return venv
    python = _python311()
    if python is None:
        pytest.skip("python3.11 is needed for the torch 2.13.0 test environment")
    return _create_venv(venv, python, _install_torch_cpu)


def _install_torch_cuda(venv: Path) -> None:
    done = _pip_install(venv, *TORCH_CUDA_REQUIREMENTS)
    if done.returncode != 0:
        pytest.fail(f"pip could not install {' '.join(TORCH_CUDA_REQUIREMENTS)}:\n"
                    f"{done.stderr.strip()}")
    if not any(venv.glob("lib/python3*/site-packages/torch/lib/libtorch_cuda.so")):
        pytest.fail(f"pip installed a torch without libtorch_cuda.so into {venv} (a CPU build "
                    "from a configured index?); PyPI's torch==2.14.1 is the CUDA build")


def ensure_torch_cuda_venv(build: bool) -> Path:
    """The torch CUDA test venv: there already (a venv made before `.abifit-ready` existed
    counts when it has torch), else built when `build` (`--run-cuda`), else a skip that says
    how to build it."""
    venv = TORCH_CUDA_VENV
    if (venv / ".abifit-ready").exists() or any(venv.glob("lib/python3*/site-packages/torch")):
        return venv
    if not build:
        pytest.skip(f"the torch CUDA test venv {venv} does not exist; `pytest --run-cuda` "
                    f"creates it (pip install {' '.join(TORCH_CUDA_REQUIREMENTS)}: about 3 GB to "
                    "download, 5.5 GB installed)")
    return _create_venv(venv, _python311() or sys.executable, _install_torch_cuda)


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


@pytest.fixture(scope="session")
def torch_cuda_venv(request: pytest.FixtureRequest) -> Path:
    """Root of the venv with torch's CUDA build and torchvision (see `--run-cuda`)."""
    return ensure_torch_cuda_venv(bool(request.config.getoption("--run-cuda")))


@pytest.fixture
def pip_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pip configuration of this machine (a module asks for it with
    `pytest.mark.usefixtures("pip_alone")`)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The binaries of the check world (`helpers.check_binaries`), built once per test module
    that uses them; a module may define its own (tests/commands/test_resolve.py does)."""
    return check_binaries(tmp_path_factory.mktemp("check"))


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
