"""The package's layers: every module imports only from its own layer or the layers below it.

    cli -> report -> commands -> engines -> sim -> host -> remote -> formats -> workers
        -> errors -> version

(`abifit/__init__.py`, the public API, sits on top, and nothing below imports it; the version
is `abifit.version`, under every layer. `abifit.workers`, the worker processes that local
parsing, the reading of remote members and the engines hand CPU-bound calls to, is a layer of
one module, as errors and version are.) A module that imports from a layer above it fails
here, lazy imports inside functions and imports under TYPE_CHECKING included.

Within a layer, the imports have no cycle: not those a module runs when it is imported (a
cycle there makes one of them see the other half-initialised), nor those inside functions
(a cycle there is two modules that need each other, waiting to be imported at the top).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
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


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_imports(nodes: list[ast.stmt] | list[ast.AST], lazy: bool) -> Iterator[ast.AST]:
    """The import statements among `nodes` that run: those of the module's body (in its
    `if`, `try` and class bodies too), with `lazy` also those inside functions; never those
    under `if TYPE_CHECKING:`, which no interpreter runs."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node):
            yield from _run_imports(node.orelse, lazy)
        elif lazy or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _run_imports(list(ast.iter_child_nodes(node)), lazy)


def import_graph(sources: dict[str, str], lazy: bool) -> dict[str, set[str]]:
    """Module -> the abifit modules its run imports name (`from abifit.cli import ci` names
    the module `abifit.cli.ci`; `from abifit.sim.loader import Process`, `abifit.sim.loader`)."""
    graph: dict[str, set[str]] = {}
    for me, source in sources.items():
        named = set()
        for node in _run_imports(ast.parse(source).body, lazy):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in sources
                          else node.module for a in node.names}
            elif isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
        graph[me] = {other for other in named if other in sources and other != me}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle of the graph, as the path around it from its first module (one per set of
    modules that reach each other: Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                found.append(_path_around(sorted(component), graph))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def _path_around(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A path from the component's first module back to it, through the component."""
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for module in frontier:
            for other in sorted(graph[module] & set(component)):
                if other == start:
                    return [*paths[module], start]
                if other not in paths:
                    paths[other] = [*paths[module], other]
                    step.append(other)
        frontier = step
    return component


SOURCES = {_module_name(p): p.read_text("utf-8") for p in MODULES}


@pytest.mark.parametrize("lazy", [False, True], ids=["at-import", "inside-functions-too"])
def test_imports_have_no_cycle(lazy: bool) -> None:
    """No abifit module reaches itself through the imports it runs when imported, nor through
    those inside its functions."""
    assert [" -> ".join(c) for c in cycles(import_graph(SOURCES, lazy))] == []


def test_the_check_catches_a_cycle() -> None:
    """The check itself: a cycle through a lazy import is found only with `lazy`; an import
    under TYPE_CHECKING is no edge; `from package import module` names the module."""
    sources = {
        "abifit.remote": "",
        "abifit.remote.wheels": ("if TYPE_CHECKING:\n    from abifit.remote.recording import R\n"
                                 "def record():\n    from abifit.remote import recording\n"),
        "abifit.remote.recording": "from abifit.remote.memberreads import member_reads\n",
        "abifit.remote.memberreads": "from abifit.remote.wheels import RemoteWheel\n",
    }
    assert cycles(import_graph(sources, lazy=False)) == []
    assert cycles(import_graph(sources, lazy=True)) == [[
        "abifit.remote.memberreads", "abifit.remote.wheels", "abifit.remote.recording",
        "abifit.remote.memberreads"]]
