"""The package's layers: every module imports only from its own layer or the layers below it.

    cli -> report -> commands -> engines -> sim -> host -> remote -> formats -> workers
        -> errors -> version

(`abifit/__init__.py`, the public API, sits on top, and nothing below imports it; the version
is `abifit.version`, under every layer. `abifit.workers`, the worker processes that local
parsing, the reading of remote members and the engines hand CPU-bound calls to, is a layer of
one module, as errors and version are.) A module that imports from a layer above it fails
here, lazy imports inside functions and imports under TYPE_CHECKING included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import SRC

PACKAGE = SRC / "abifit"
LAYERS = ("version", "errors", "workers", "formats", "remote", "host", "sim", "engines", "commands",
          "report", "cli")
RANK = {name: rank for rank, name in enumerate(LAYERS)}
TOP = len(LAYERS)  # abifit/__init__.py and __main__.py


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _rank(module: str) -> int:
    """The layer of a module of abifit (`abifit.sim.loader` -> sim)."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return TOP
    return RANK[parts[1]]


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import of an abifit module, wherever it is in the file."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "abifit":  # a name of the public API, or a layer's package
                found += [(node.lineno, f"abifit.{a.name}" if a.name in RANK else "abifit")
                          for a in node.names]
            elif node.module.startswith("abifit."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name == "abifit" or a.name.startswith("abifit.")]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def upward_imports(me: str, source: str) -> list[str]:
    """The imports of module `me` (its source text) from layers above its own."""
    tree = ast.parse(source)
    return [f"{me}:{line} imports {other}" for line, other in _imports(tree)
            if _rank(other) > _rank(me)]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module_name(p))
def test_imports_point_down(path: Path) -> None:
    """A module imports nothing from a layer above its own."""
    assert upward_imports(_module_name(path), path.read_text("utf-8")) == []


def test_no_relative_imports() -> None:
    """Imports name their layer (`from abifit.sim.loader import ...`), never `from .x`."""
    relative = [f"{_module_name(p)}:{n.lineno}" for p in MODULES
                for n in ast.walk(ast.parse(p.read_text("utf-8")))
                if isinstance(n, ast.ImportFrom) and n.level > 0]
    assert relative == []


def test_every_module_has_a_layer() -> None:
    """Every subpackage is one of the layers; nothing sits beside them unplaced."""
    top = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert top <= set(LAYERS)
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__", "errors",
                                                       "version", "workers"}
    assert loose == set()


def test_the_check_catches_an_upward_import() -> None:
    """The check itself: lazy and type-only imports from above are caught; down is fine."""
    source = ("from abifit.errors import FormatError\n"
              "from abifit.version import __version__\n"
              "if TYPE_CHECKING:\n    from abifit.sim.loader import Process\n"
              "def f():\n    import abifit.engines.check\n"
              "from abifit import __version__, check\n")
    assert sorted(upward_imports("abifit.formats.elf", source)) == [
        "abifit.formats.elf:4 imports abifit.sim.loader",
        "abifit.formats.elf:6 imports abifit.engines.check",
        "abifit.formats.elf:7 imports abifit",
        "abifit.formats.elf:7 imports abifit",
    ]
    assert upward_imports("abifit.__main__", source) == []
