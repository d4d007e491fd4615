"""A command is its own modules: adding one edits nothing that lists the commands.

A command is a module of abifit/cli/ that defines `configure` (found by `cli.app.commands`,
listed by `abifit --help` at its `HELP_PLACE`). Its other parts are named after it:

- `engines/<command>.py`, the work and the report value, and `commands/<command>.py`, its
  options, `run_<command>` and the library function `<command>`, which abifit/__init__.py
  exports: an import under TYPE_CHECKING and its name in `__all__`, the one place outside a
  command's own files that names it (tests/project/test_api.py holds those to the modules);
- `report/<command>.py` (`<command>_text`, `<command>_json`), its schema
  `report/schemas/<command>.schema.json`, which pins the document's version
  (`report.json.schema_versions`), and golden files `tests/golden/<command>_*`.

No other module of src/ names the commands: a list of their names, an import of several
command modules, a command's `configure` called by name, each fails here. The checks read the
source (ast), so that they run on a copy of the package too: the last test adds a command to
a copy and runs it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import GOLDEN, SRC

PACKAGE = SRC / "abifit"

# the commands that lack a part, and why (a new command has every part)
NO_LIBRARY_FUNCTION = {
    "cache": "manages the cache directory",
    "index": "manages the symbol store",
    "completion": "prints shell code",
}
NO_DOCUMENT = {"completion": "prints shell code for the shell to run, no report"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"))


def _defined(path: Path) -> set[str]:
    """The names a module's body defines: its functions, classes and assigned names."""
    if not path.is_file():
        return set()
    names = set()
    for node in _tree(path).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def commands(package: Path) -> list[str]:
    """The commands: the modules of cli/ that define `configure`."""
    return sorted(p.stem for p in (package / "cli").glob("*.py") if "configure" in _defined(p))


def _help_places(package: Path) -> dict[str, object]:
    places = {}
    for command in commands(package):
        for node in _tree(package / "cli" / f"{command}.py").body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and any(isinstance(t, ast.Name) and t.id == "HELP_PLACE"
                            for t in node.targets)):
                places[command] = node.value.value
    return places


def _exported(package: Path) -> tuple[dict[str, str], list[str]]:
    """What abifit/__init__.py exports: name -> module of its imports under TYPE_CHECKING,
    and its `__all__`."""
    imports: dict[str, str] = {}
    listed: list[str] = []
    for node in _tree(package / "__init__.py").body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            imports |= {a.asname or a.name: n.module for n in node.body
                        if isinstance(n, ast.ImportFrom) and n.module for a in n.names}
        elif (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"
              and isinstance(node.value, ast.List)):
            listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return imports, listed


def _returns(path: Path, function: str) -> str | None:
    """The name of the type a module's function returns (its annotation)."""
    for node in _tree(path).body:
        if isinstance(node, ast.FunctionDef) and node.name == function and node.returns:
            return ast.unparse(node.returns)
    return None


def missing_parts(package: Path, golden: Path) -> list[str]:
    """What each command lacks of its parts, and the parts that belong to no command."""
    found = commands(package)
    places = _help_places(package)
    gaps = [f"cli/{c}.py sets no HELP_PLACE (an int)" for c in found
            if not isinstance(places.get(c), int)]
    gaps += [f"cli/{c}.py takes HELP_PLACE {p}, as another command does" for c, p in
             places.items() if list(places.values()).count(p) > 1]
    imports, listed = _exported(package)
    for command in found:
        if command not in NO_DOCUMENT:
            report = package / "report" / f"{command}.py"
            gaps += [f"report/{command}.py defines no {name}()" for name in
                     (f"{command}_text", f"{command}_json") if name not in _defined(report)]
            if not (package / "report/schemas" / f"{command}.schema.json").is_file():
                gaps.append(f"report/schemas/{command}.schema.json is missing")
            if not list(golden.glob(f"{command}_*.json")):
                gaps.append(f"tests/golden/ holds no {command}_*.json")
        if command in NO_LIBRARY_FUNCTION:
            continue
        module = package / "commands" / f"{command}.py"
        gaps += [f"commands/{command}.py defines no {name}()" for name in
                  (f"run_{command}", command) if name not in _defined(module)]
        report_type = _returns(module, command) if module.is_file() else None
        for name, home in ((command, f"abifit.commands.{command}"),
                           (report_type, f"abifit.engines.{command}")):
            if name is not None and (imports.get(name) != home or name not in listed):
                gaps.append(f"abifit/__init__.py does not export {name} (import it from {home} "
                            "under TYPE_CHECKING, and list it in __all__)")
    strays = [f"commands/{p.stem}.py" for p in (package / "commands").glob("*.py")
              if f"run_{p.stem}" in _defined(p) and p.stem not in found]
    strays += [f"report/{p.stem}.py" for p in (package / "report").glob("*.py")
               if f"{p.stem}_json" in _defined(p) and p.stem not in found]
    strays += [f"report/schemas/{p.name}" for p in (package / "report/schemas").glob("*.json")
               if p.name.split(".")[0] not in (*found, "common", "error")]
    return gaps + [f"{s} belongs to no command (no cli module defines its configure)"
                   for s in strays]


def lists_of_commands(path: Path, source: str, names: set[str]) -> list[str]:
    """Where a module of src/ names the commands: a list, tuple, set or dict of two or more of
    their names, an import of two or more command modules, a command module's `configure`
    called by name. The public API's `__all__` is the one list allowed (test_api.py checks
    it against the commands)."""
    tree = ast.parse(source)
    allowed = {id(node.value) for node in tree.body
               if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"}
    found = []
    imported: set[str] = set()
    for node in ast.walk(tree):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        items: list[ast.expr | None] = []
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and id(node) not in allowed:
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        named = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
        if len(named) >= 2:
            found.append(f"{where} lists the commands {', '.join(named)}")
        if isinstance(node, ast.ImportFrom) and node.module == "abifit.cli":
            imported |= {a.name for a in node.names} & names
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = [node.module] if isinstance(node, ast.ImportFrom) else [
                a.name for a in node.names]
            imported |= {m.split(".")[2] for m in modules if m and m.startswith("abifit.cli.")
                         and m.split(".")[2] in names}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "configure" and isinstance(node.func.value, ast.Name)
                and node.func.value.id in names):
            found.append(f"{where} calls {node.func.value.id}.configure by name")
    if len(imported) >= 2 and not path.name.startswith(tuple(names)):
        found.append(f"{path} imports the command modules {', '.join(sorted(imported))}")
    return found


def _lists_in(package: Path) -> list[str]:
    names = set(commands(package))
    return [hit for p in sorted(package.rglob("*.py"))
            for hit in lists_of_commands(p.relative_to(package.parent), p.read_text("utf-8"),
                                         names)]


def test_every_command_has_its_parts() -> None:
    """Each command's cli module has its report module, schema, goldens, command module and
    library function (but for the parts `NO_DOCUMENT` and `NO_LIBRARY_FUNCTION` explain), and
    every such part belongs to a command."""
    assert missing_parts(PACKAGE, GOLDEN) == []
    assert {"check", "doctor", "cache", "completion"} <= set(commands(PACKAGE))


def test_the_help_lists_the_commands_in_their_places() -> None:
    """`abifit --help` lists every command once, in the order of their `HELP_PLACE`."""
    from abifit.cli.app import commands as found
    from abifit.cli.app import parser

    places = _help_places(PACKAGE)
    in_order = sorted(places, key=places.__getitem__)
    assert [m.__name__.rpartition(".")[2] for m in found()] == in_order
    [sub] = [a for a in parser()._actions if a.dest == "command"]
    assert list(sub.choices or ()) == in_order


def test_nothing_else_lists_the_commands() -> None:
    """No module of src/ lists the commands' names, imports several command modules or
    configures a command by name: the commands are found from their modules."""
    assert _lists_in(PACKAGE) == []


def test_the_check_catches_a_list_of_commands() -> None:
    """The check itself: the command line as it was, naming each command, is caught; one
    command module imported for what else it does (completion) is not."""
    names = {"check", "doctor", "matrix", "completion"}
    source = ("from abifit.cli import check, completion, doctor\n"
              "def parser(sub):\n    check.configure(sub)\n    doctor.configure(sub)\n"
              "def interpreter(args):\n    return args.command in ('check', 'matrix')\n")
    assert lists_of_commands(Path("abifit/cli/app.py"), source, names) == [
        "abifit/cli/app.py:3 calls check.configure by name",
        "abifit/cli/app.py:4 calls doctor.configure by name",
        "abifit/cli/app.py:6 lists the commands check, matrix",
        "abifit/cli/app.py imports the command modules check, completion, doctor",
    ]
    assert lists_of_commands(Path("abifit/cli/app.py"), "from abifit.cli import completion\n"
                             "__all__ = ['check', 'doctor']\n", names) == []


# a new command, `abifit frob`, as its own files: an engine, the command and its library
# function, the command line, the report and its schema, a golden document
FROB = {
    "engines/frob.py": '''"""What `abifit frob` works out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FrobReport:
    frobbed: int


def frob(times: int) -> FrobReport:
    return FrobReport(times)
''',
    "commands/frob.py": '''"""`abifit frob`: its options, its run, `abifit.frob`."""

from __future__ import annotations

from dataclasses import dataclass

from abifit.commands.contexts import Progress, Session, run_as_library
from abifit.engines import frob as engine
from abifit.engines.frob import FrobReport


@dataclass(frozen=True)
class FrobOptions:
    times: int = 1


def run_frob(options: FrobOptions, session: Session) -> FrobReport:
    return engine.frob(options.times)


def frob(times: int = 1, *, progress: Progress | None = None) -> FrobReport:
    """Frob the stack `times` times."""
    return run_as_library(run_frob, FrobOptions(times), progress)
''',
    "cli/frob.py": '''"""`abifit frob`: frob the stack."""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers
from abifit.cli.shared import run_command

HELP_PLACE = 75


def configure(sub: Subparsers) -> None:
    f = sub.add_parser("frob", help="frob the stack", description="Frob the stack.")
    f.add_argument("--times", type=int, default=1)
    f.add_argument("--json", action="store_true", help="print one JSON document")
    f.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.frob import FrobOptions, run_frob
    from abifit.report.frob import frob_json, frob_text
    from abifit.report.json import dumps

    report, _session = run_command(run_frob, FrobOptions(args.times), args, err)
    out.write(dumps(frob_json(report)) + "\\n" if args.json else frob_text(report))
    return 0
''',
    "report/frob.py": '''"""`abifit frob`'s report."""

from __future__ import annotations

from abifit.engines.frob import FrobReport
from abifit.report.json import JsonObject, schema_version


def frob_text(report: FrobReport) -> str:
    return f"frobbed {report.frobbed} time(s)\\n"


def frob_json(report: FrobReport) -> JsonObject:
    return {"schema_version": schema_version("frob"), "command": "frob",
            "frobbed": report.frobbed}
''',
    "report/schemas/frob.schema.json": json.dumps({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "abifit frob --json, schema_version 1", "type": "object",
        "required": ["schema_version", "command", "frobbed"], "additionalProperties": False,
        "properties": {"schema_version": {"const": 1}, "command": {"const": "frob"},
                       "frobbed": {"type": "integer"}}}, indent=2) + "\n",
}


def _abifit(src: Path, *args: str) -> str:
    """What `python -m abifit ARGS` prints with the package under `src`."""
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_new_command_is_its_own_files(tmp_path: Path) -> None:
    """`abifit frob` added to a copy of the package as its own files, and nothing else: the
    command line lists it at its place and runs it, its document carries the version its
    schema pins, and the one part missing is its export in abifit/__init__.py; with that,
    `abifit.frob` runs it as a library function."""
    package = tmp_path / "src/abifit"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in FROB.items():
        (package / name).write_text(text, "utf-8")
    golden = tmp_path / "golden"
    shutil.copytree(GOLDEN, golden)
    (golden / "frob_once.json").write_text(
        '{\n  "schema_version": 1,\n  "command": "frob",\n  "frobbed": 1\n}\n', "utf-8")

    help_text = _abifit(package.parent, "-m", "abifit", "--help")
    listed = [line.split()[0] for line in help_text.splitlines() if line.startswith("    ")
              and not line.startswith("     ")]
    assert listed[listed.index("check") + 1] == "frob"
    assert listed[listed.index("frob") + 1] == "snapshot"
    assert _abifit(package.parent, "-m", "abifit", "frob", "--json") == (
        golden / "frob_once.json").read_text("utf-8")
    assert _abifit(package.parent, "-m", "abifit", "frob", "--times", "3") == (
        "frobbed 3 time(s)\n")
    assert _lists_in(package) == []
    assert missing_parts(package, golden) == [
        "abifit/__init__.py does not export frob (import it from abifit.commands.frob under "
        "TYPE_CHECKING, and list it in __all__)",
        "abifit/__init__.py does not export FrobReport (import it from abifit.engines.frob "
        "under TYPE_CHECKING, and list it in __all__)"]

    init = package / "__init__.py"
    text = init.read_text("utf-8")
    text = text.replace("if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n"
                        "    from abifit.commands.frob import frob as frob\n"
                        "    from abifit.engines.frob import FrobReport as FrobReport\n", 1)
    text = text.replace("__all__ = [\n", '__all__ = [\n    "FrobReport",\n    "frob",\n', 1)
    init.write_text(text, "utf-8")
    assert missing_parts(package, golden) == []
    assert _abifit(package.parent, "-c", "import abifit, inspect; "
                   "print(inspect.signature(abifit.frob), abifit.frob(2))") == (
        "(times: 'int' = 1, *, progress: 'Progress | None' = None) -> 'FrobReport' "
        "FrobReport(frobbed=2)\n")


@pytest.mark.parametrize("part", ["cli/frob.py", "report/frob.py"])
def test_a_part_without_its_command_is_named(part: str, tmp_path: Path) -> None:
    """Half a command is caught: a cli module without its report, or a report module without
    its cli module."""
    package = tmp_path / "abifit"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / part).write_text(FROB[part], "utf-8")
    gaps = missing_parts(package, GOLDEN)
    assert gaps and all("frob" in gap for gap in gaps)
    if part == "report/frob.py":
        assert gaps == ["report/frob.py belongs to no command (no cli module defines its "
                        "configure)"]
