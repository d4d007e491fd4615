"""The project's own checks: lint and strict typing are part of the test suite, and test modules
share only through tests/helpers.py (builders, paths) and tests/conftest.py (fixtures)."""

from __future__ import annotations

import ast
import subprocess
import sys

from helpers import REPO, TESTS


def test_ruff_is_clean() -> None:
    """ruff finds nothing in src, tests, bench and tools."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "src", "tests", "bench",
                           "tools"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject.toml) finds nothing in the package."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def imports_of_test_modules(source: str) -> list[str]:
    """`line: module` for each import of a test module (`test_*`) in `source`, lazy imports
    inside functions included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0].startswith("test_")]
    return [f"{line}: {name}" for line, name in sorted(found)]


def test_no_test_module_imports_another() -> None:
    """A test module takes what it shares from helpers.py or conftest.py, never from another
    test module, so that each runs alone and can move within tests/."""
    found = [f"{path.relative_to(REPO)}:{hit}"
             for path in sorted(TESTS.rglob("test_*.py")) if "fixtures" not in path.parts
             for hit in imports_of_test_modules(path.read_text("utf-8"))]
    assert found == []


def test_the_check_catches_an_import_of_a_test_module() -> None:
    source = ("from helpers import make_wheel\nimport test_remote\n\n\ndef f() -> None:\n"
              "    from test_check import wheels\n    import os.path, test_x.sub\n"
              "    from . import test_y\n")
    assert imports_of_test_modules(source) == [
        "2: test_remote", "6: test_check", "7: test_x.sub", "8: test_y"]
