"""One exception tree: every exception abifit defines is an AbifitError, drawn in errors.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import time
from pathlib import Path

import pytest

import abifit
from abifit import errors
from abifit.errors import AbifitError, EnvironmentQueryError, FormatError, UsageError
from abifit.formats.elf import parse_elf
from abifit.formats.sources import BytesSource
from abifit.formats.wheel import WheelArchive
from abifit.host.environment import InterpreterQuery, query_interpreter
from abifit.remote.http import HttpError
from abifit.remote.packageindex import IndexUnavailable, PackageNotFound

_TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ] {3})*)(?P<branch>[├└]── )?(?P<name>\w+)\s{2,}\S")


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of abifit, by name."""
    found: dict[str, type[BaseException]] = {}
    modules = [abifit.__name__] + [
        m.name for m in pkgutil.walk_packages(abifit.__path__, prefix="abifit.")
        if m.name != "abifit.__main__"  # runs the command line when imported
    ]
    for name in modules:
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if (inspect.isclass(cls) and issubclass(cls, BaseException)
                    and cls.__module__ == name):
                assert cls.__name__ not in found, f"two exception classes named {cls.__name__}"
                found[cls.__name__] = cls
    return found


def _drawn_tree() -> dict[str, str | None]:
    """The tree in errors.py's docstring: each class name -> the name of its parent."""
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 4 + (1 if match["branch"] else 0)
        del path[depth:]
        parents[match["name"]] = path[-1] if path else None
        path.append(match["name"])
    return parents


CLASSES = _exception_classes()


def test_the_walk_finds_the_exceptions_outside_errors() -> None:
    """The walk reaches the subpackages: it finds the errors the remote layer defines."""
    assert {"HttpError", "PackageNotFound", "_Retry", "_WorkerDied"} <= set(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_exception_is_an_abifit_error(name: str) -> None:
    """Every exception class abifit defines derives from AbifitError."""
    assert issubclass(CLASSES[name], AbifitError)


def test_the_docstring_draws_every_exception() -> None:
    """errors.py's tree names every exception class abifit defines, and nothing else."""
    assert set(_drawn_tree()) == set(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_drawn_parent_is_the_base_class(name: str) -> None:
    """Each class sits in the drawn tree under the class it derives from."""
    parent = _drawn_tree().get(name)
    bases = [b.__name__ for b in CLASSES[name].__bases__]
    assert bases == ([parent] if parent else ["Exception"])


@pytest.mark.parametrize("name", sorted(n for n, c in CLASSES.items()
                                        if c.__module__ != errors.__name__))
def test_the_docstring_names_where_each_is_defined(name: str) -> None:
    """For a class defined outside errors.py, the docstring names its module beside it."""
    module = CLASSES[name].__module__
    sentences = (errors.__doc__ or "").replace("\n", " ").split(". ")
    assert any(f"`{name}`" in s and f"`{module}`" in s for s in sentences)


@pytest.mark.parametrize(("error", "message"), [
    (UsageError("torch==99: no such version"), "torch==99: no such version"),
    (FormatError("a.whl!lib/x.so", "truncated dynamic section", 0x40),
     "a.whl!lib/x.so: truncated dynamic section at offset 0x40"),
    (HttpError("https://example.org/x.whl", "not found (HTTP 404 Not Found)", 404),
     "https://example.org/x.whl: not found (HTTP 404 Not Found)"),
    (IndexUnavailable("https://example.org/simple/torch/", "HTTP 503"),
     "https://example.org/simple/torch/: HTTP 503"),
    (PackageNotFound("torhc", ["https://pypi.org/simple"], ["torch"]),
     "no project 'torhc' on https://pypi.org/simple\nhint: did you mean 'torch'?"),
], ids=["usage", "format", "http", "index-unavailable", "package-not-found"])
def test_messages_name_the_input(error: AbifitError, message: str) -> None:
    """An error's message names the file, URL or name it is about, as given."""
    assert str(error) == message


def test_elf_error_names_the_file() -> None:
    """A file that is not ELF: the error starts with its name and quotes its first bytes."""
    with pytest.raises(FormatError) as caught:
        parse_elf(BytesSource(b"not an ELF file at all", "junk.so"))
    assert str(caught.value) == "junk.so: not an ELF file (starts with b'not ')"


def test_wheel_error_names_the_file() -> None:
    """A .whl that is not a zip: the error starts with the wheel's name."""
    with pytest.raises(FormatError) as caught:
        WheelArchive(BytesSource(b"not a zip " * 8, "junk-1.0-py3-none-any.whl"))
    assert str(caught.value).startswith("junk-1.0-py3-none-any.whl: not a valid zip file")


def test_interpreter_error_quotes_the_path() -> None:
    """An interpreter that cannot be run: the error quotes the path as given."""
    with pytest.raises(EnvironmentQueryError) as caught:
        query_interpreter("/nonexistent/bin/python3")
    assert "cannot run the Python interpreter '/nonexistent/bin/python3'" in str(caught.value)


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_an_interpreter_query_started_answers_later_with_the_same_errors(tmp_path: Path) -> None:
    """A query started (`InterpreterQuery`, which the `abifit` command makes before importing a
    command) runs beside the caller and answers when asked: this interpreter's facts, or the
    error `query_interpreter` gives: an interpreter that cannot run, one that fails (its last
    line quoted), one that answers nonsense, one that takes longer than its time."""
    started = time.monotonic()
    slow = InterpreterQuery(_script(tmp_path, f"sleep 0.5; exec {sys.executable} \"$@\"\n"))
    assert time.monotonic() - started < 0.4  # started, not waited for
    assert slow.facts() == query_interpreter(sys.executable)
    assert time.monotonic() - started >= 0.5
    with pytest.raises(EnvironmentQueryError, match="cannot run the Python interpreter"):
        InterpreterQuery(str(tmp_path / "absent")).facts()
    failing = _script(tmp_path, "echo 'ImportError: no site' >&2; exit 3\n")
    with pytest.raises(EnvironmentQueryError,
                       match=r"exited with 3 when asked for its facts: ImportError: no site$"):
        InterpreterQuery(failing).facts()
    with pytest.raises(EnvironmentQueryError, match="unexpected answer from"):
        InterpreterQuery(_script(tmp_path, "echo '{}'\n")).facts()
    hanging = InterpreterQuery(_script(tmp_path, "exec sleep 30\n"), timeout=0.3)
    with pytest.raises(EnvironmentQueryError, match=r"timed out after 0\.3 seconds"):
        hanging.facts()
