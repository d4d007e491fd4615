"""abifit as a library: `abifit.check`, `abifit.doctor`, `abifit.inspect`, and what it exports:
each command's function, defined in its command's module and exported by name in
abifit/__init__.py, which type checkers read (`if TYPE_CHECKING:`) and `__all__` lists."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import abifit
from abifit.engines.check import CheckReport
from abifit.engines.doctor import DoctorReport
from abifit.engines.inspect import InspectReport
from fixtures.build import compile_c
from helpers import SRC, library_commands, make_wheel

EXTENSION = """\
int demo_answer(void) { return 42; }
void *PyInit__ext(void) { return 0; }
"""

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _abifit_modules_after(statement: str) -> list[str]:
    """The abifit modules a fresh interpreter holds after running `statement`."""
    code = f"{statement}; import sys; print(*sorted(m for m in sys.modules if 'abifit' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small extension module with the soname libdemo.so.1, compiled now."""
    root = tmp_path_factory.mktemp("api")
    (root / "ext.c").write_text(EXTENSION)
    return compile_c(root / "ext.c", root / "_ext.abi3.so", soname="libdemo.so.1")


def test_importing_abifit_imports_only_the_errors() -> None:
    """`import abifit` is cheap: the commands, the formats and the demangler load on first use."""
    assert _abifit_modules_after("import abifit") == ["abifit", "abifit.errors", "abifit.version"]


def test_the_command_line_loads_no_network_module_before_it_needs_one() -> None:
    """The command line, its reports and an HTTP client that has sent nothing hold neither
    urllib3 (the first request imports it, with http.client and ssl), the CUDA probes (`cuda`
    and --gpu auto need them) nor the doctor's modules (a check loads its library search only
    to simulate): a check or an inspect that the cache answers never pays for them."""
    unwanted = ("urllib3", "http.client", "ssl", "urllib.request", "abifit.engines.doctor",
                "abifit.commands.doctor", "abifit.engines.gpus", "abifit.engines.plans",
                "abifit.host.cudastack")
    code = ("import sys, abifit.cli, abifit.commands.check, abifit.report.check, "
            "abifit.report.inspect, abifit.remote.wheels, abifit.remote.recording, "
            "abifit.remote.pagefetch, abifit.remote.http as h; "
            "h.HttpClient().close(); "
            f"print(*sorted(m for m in sys.modules if m.split('.')[0] in {unwanted!r} "
            f"or m in {unwanted!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == []


def test_the_arguments_of_every_command_import_no_engine() -> None:
    """Every start makes the arguments of all commands (`cli.app.parser`): that imports no
    engine, simulation, reader or derivation record, which a warm doctor (it prints a kept
    run) never needs; on the GPU machine's image they cost 0.1 s of a 0.6 s run."""
    loaded = _abifit_modules_after("from abifit.cli import app; app.parser()")
    assert "abifit.cli.inspect" in loaded and "abifit.cli.matrix" in loaded
    heavy = ("abifit.engines.", "abifit.sim.", "abifit.formats.elf", "abifit.formats.fatbin",
             "abifit.host.cudastack")
    assert [m for m in loaded if m.startswith(heavy)] == []


def test_a_warm_doctor_imports_no_findings() -> None:
    """What a warm doctor asks and looks up (`engines.kept`, the GPU probe) imports neither the
    findings and their derivation records nor the fat-binary reader: the GPUs of its key are
    `sim.gputarget`'s."""
    loaded = _abifit_modules_after("import abifit.engines.kept, abifit.engines.gpus")
    assert "abifit.sim.gputarget" in loaded
    assert [m for m in loaded if m in ("abifit.sim.findings", "abifit.sim.derivation",
                                       "abifit.sim.gpu", "abifit.formats.fatbin")] == []


def test_the_symbol_choices_are_the_engines() -> None:
    from abifit.cli.inspect import SYMBOLS
    from abifit.engines.inspect import SymbolSelection

    assert tuple(s.value for s in SymbolSelection if s is not SymbolSelection.NONE) == SYMBOLS


def test_importing_the_elf_reader_stays_in_its_layer() -> None:
    """`import abifit.formats.elf` imports nothing above the formats layer."""
    loaded = _abifit_modules_after("import abifit.formats.elf")
    assert "abifit.formats.elf" in loaded
    assert [m for m in loaded
            if m.split(".")[1:2] not in ([], ["version"], ["errors"], ["formats"])] == []


def test_every_exported_name_resolves() -> None:
    """Each name of `__all__` is an attribute; the report types are the commands' own."""
    assert all(hasattr(abifit, name) for name in abifit.__all__)
    assert (abifit.CheckReport, abifit.DoctorReport, abifit.InspectReport) == (
        CheckReport, DoctorReport, InspectReport)
    assert abifit.demangle("_ZSt9terminatev") == "std::terminate()"


def library_gaps(module: types.ModuleType, exported: types.ModuleType) -> list[str]:
    """What a command's module (one that defines `run_<command>`) lacks for its library
    function: a documented function `<command>` of its own, returning the report
    `run_<command>` returns (or either of two: `MatrixReport | GridReport`), each exported by
    `exported` (the package abifit) under its name and listed in its `__all__`."""
    command = module.__name__.rpartition(".")[2]
    function = getattr(module, command, None)
    if not inspect.isfunction(function) or function.__module__ != module.__name__:
        return [f"{module.__name__} defines no library function {command}()"]
    gaps = [] if function.__doc__ else [f"{module.__name__}.{command} has no docstring"]
    report = inspect.signature(function).return_annotation
    if report != inspect.signature(getattr(module, f"run_{command}")).return_annotation:
        gaps.append(f"{module.__name__}.{command} returns {report}, not what run_{command} does")
    reports = [(name, getattr(module, name, None)) for name in report.split(" | ")]
    for name, value in ((command, function), *reports):
        if name not in getattr(exported, "__all__", ()):
            gaps.append(f"abifit.__all__ lacks {name!r}")
        elif getattr(exported, name, None) is not value:
            gaps.append(f"abifit.{name} is not {module.__name__}'s")
    return gaps


@pytest.mark.parametrize("command", library_commands())
def test_every_command_has_its_library_function(command: str) -> None:
    """Each module of abifit.commands that runs a command (`run_<command>`) defines the
    library function `abifit.<command>` beside it, documented, and abifit exports it and its
    report type: a new command's function cannot be forgotten."""
    module = importlib.import_module(f"abifit.commands.{command}")
    assert library_gaps(module, abifit) == []


def test_the_check_catches_a_command_without_its_function() -> None:
    """The check itself: a command module with `run_frob` and no `frob`, or one abifit does
    not export, is named."""
    module = types.ModuleType("abifit.commands.frob")
    exec("from __future__ import annotations\n"
         "class FrobReport: ...\n"
         "def run_frob(options, session) -> FrobReport: ...\n", module.__dict__)
    assert library_gaps(module, abifit) == ["abifit.commands.frob defines no library function "
                                            "frob()"]
    exec("from __future__ import annotations\n"
         "def frob() -> FrobReport:\n    'Frob.'\n", module.__dict__)
    assert library_gaps(module, abifit) == ["abifit.__all__ lacks 'frob'",
                                            "abifit.__all__ lacks 'FrobReport'"]


def _type_checked_imports() -> dict[str, str]:
    """name -> module of the imports under `if TYPE_CHECKING:` in abifit/__init__.py, each
    `from MODULE import NAME as NAME` (the form that re-exports for a type checker)."""
    tree = ast.parse((SRC / "abifit/__init__.py").read_text("utf-8"))
    [block] = [n for n in tree.body if isinstance(n, ast.If)
               and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"]
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, ast.unparse(node)
            found[alias.name] = node.module
    return found


def test_type_checkers_see_every_exported_name() -> None:
    """Every name of `__all__` that is imported on first use is imported for type checkers
    too (so they see `abifit.check` and its signature), from the module that the first use
    imports it from."""
    seen = _type_checked_imports()
    defined = {"AbifitError", "FormatError", "UsageError", "__version__"}
    assert sorted(seen) == sorted(set(abifit.__all__) - defined)
    for name, module in seen.items():
        assert getattr(abifit, name) is getattr(importlib.import_module(module), name), name


def test_the_functions_show_their_signatures() -> None:
    """`inspect.signature` and `help()` see each function's own parameters and docstring."""
    for command in library_commands():
        function = getattr(abifit, command)
        assert function.__doc__ and function.__name__ == command
        assert "progress" in inspect.signature(function).parameters
    parameters = inspect.signature(abifit.check).parameters
    assert list(parameters)[:2] == ["requirements", "with_"]
    assert parameters["index"].kind is inspect.Parameter.VAR_KEYWORD
    assert {"check", "doctor", "CheckReport"} <= set(dir(abifit))


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name abifit does not export raises AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(abifit, "nothing_here")  # noqa: B009


def test_doctor_agrees_with_the_command(tmp_path: Path) -> None:
    """`abifit.doctor` on this venv reports the modules and verdicts `abifit doctor --json` does."""
    report = abifit.doctor(python=sys.executable, no_index=True, cache_dir=tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", "--python", sys.executable, "--json",
         "--no-index", "--cache-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    document = json.loads(done.stdout)
    assert isinstance(report, DoctorReport) and report.modules
    assert [(m.module, m.loads) for m in report.modules] == [
        (m["module"], m["loads"]) for m in document["modules"]]
    assert (1 if report.problems else 0) == done.returncode


@needs_gcc
def test_inspect_reads_a_library(extension: Path) -> None:
    """`abifit.inspect` of one .so: its soname, and the symbols a glob matches."""
    report = abifit.inspect(str(extension), match="PyInit*")
    assert isinstance(report, InspectReport)
    assert report.targets == (str(extension),)
    [obj] = report.objects
    assert obj.soname == "libdemo.so.1" and obj.error is None
    assert [s.name for s in obj.symbols or ()] == ["PyInit__ext"]


def test_inspect_of_nothing_is_a_usage_error(tmp_path: Path) -> None:
    """A target that names no file raises the UsageError the command prints."""
    missing = str(tmp_path / "no-such.so")
    with pytest.raises(abifit.UsageError) as caught:
        abifit.inspect(missing)
    assert str(caught.value) == f"{missing}: no such file or directory"


def test_an_unknown_symbol_selection_is_a_usage_error() -> None:
    """`symbols` takes the values of `--symbols`; another value is quoted in the error."""
    with pytest.raises(abifit.UsageError, match="symbols 'some': expected one of"):
        abifit.inspect("/bin/sh", symbols="some")  # type: ignore[arg-type]


@needs_gcc
def test_check_of_a_local_wheel(extension: Path, tmp_path: Path) -> None:
    """`abifit.check` of a local wheel, offline: its extension module fits this machine."""
    filename, data = make_wheel("demo", "1.0", {"demo/__init__.py": b"",
                                                "demo/_ext.abi3.so": extension.read_bytes()},
                                tag="cp310-abi3-linux_x86_64")
    wheel = tmp_path / filename
    wheel.write_bytes(data)
    report = abifit.check(str(wheel), offline=True, cache_dir=tmp_path / "cache",
                          python_version="3.11", platforms=["linux_x86_64"])
    assert isinstance(report, CheckReport)
    assert report.target == "cp311 on linux_x86_64"
    assert [m.module for m in report.modules] == ["demo._ext"]
    assert report.verdict == "fits"
