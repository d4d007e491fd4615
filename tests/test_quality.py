"""The project's own checks: lint and strict typing are part of the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean() -> None:
    """ruff finds nothing in src, tests, bench and tools."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "src", "tests", "bench",
                           "tools"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject.toml) finds nothing in the package."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
