"""The suite's own rules, from tests/conftest.py: a test that uses a torch test venv is marked
`slow` (else collection stops), and the torch CUDA venv is built only with `--run-cuda`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

import conftest


@dataclass
class _Item:
    """What the collection hook reads of a test item."""

    nodeid: str
    fixturenames: list[str]
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def _check(*items: _Item) -> None:
    conftest.pytest_collection_modifyitems(None, list(items))  # type: ignore[arg-type]


@pytest.mark.parametrize("fixture", sorted(conftest.TORCH_FIXTURES))
def test_unmarked_test_of_a_torch_venv_stops_collection(fixture: str) -> None:
    """A test that uses torch_venv, torch_dir or torch_cuda_venv without `slow` is a usage
    error that names it."""
    with pytest.raises(pytest.UsageError, match=r"test_x\.py::test_y"):
        _check(_Item("tests/test_x.py::test_y", ["tmp_path", fixture]))


def test_marked_and_unrelated_tests_pass_collection() -> None:
    """Marked torch tests and tests without a torch venv pass the check."""
    _check(_Item("a::slow", ["torch_dir", "torch_venv"], {"slow"}),
           _Item("a::fast", ["tmp_path"]))


def test_missing_cuda_venv_is_a_skip_that_says_how_to_build_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --run-cuda a missing CUDA venv is never built: the test is skipped, and the
    reason names the venv, the option and the download."""
    venv = tmp_path / "torch-cu"
    monkeypatch.setattr(conftest, "TORCH_CUDA_VENV", venv)
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest.ensure_torch_cuda_venv(build=False)
    reason = str(skipped.value)
    assert str(venv) in reason and "pytest --run-cuda" in reason and "3 GB" in reason
    assert not venv.exists()


def test_existing_cuda_venv_is_used_without_the_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA venv that is there (with torch installed) is used as it is."""
    venv = tmp_path / "torch-cu"
    (venv / "lib" / "python3.11" / "site-packages" / "torch").mkdir(parents=True)
    monkeypatch.setattr(conftest, "TORCH_CUDA_VENV", venv)
    assert conftest.ensure_torch_cuda_venv(build=False) == venv
