"""The library API and the command line give equal JSON for every command on the same inputs:
both build the command's one options value (`CheckOptions`, ...) and run `run_<command>`, so
that what one face checks, the other checks alike. The index is a real loopback index serving
the wheels of the check world (helpers.wheels: a host package whose 2.0 changes a parameter, an
extension built against 1.0); the environments are this test run's own. Every command that has
a library function (`helpers.library_commands`, found in abifit.commands) has a case here, and
its JSON is its report module's (`abifit.report.<command>.<command>_json`)."""

from __future__ import annotations

import importlib
import inspect
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import abifit
from abifit.cli import main
from abifit.report.check import check_json
from abifit.report.json import JsonObject, dumps
from helpers import library_commands, wheels
from httpserver import LoopbackIndex, Projects

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

TARGET = {"python_version": "3.11", "platforms": ["linux_x86_64"]}
TARGET_ARGS = ["--python-version", "3.11", "--platform", "linux_x86_64"]
OLD = "_ZN7hostlib10check_implEiPKcS2_ib"  # hostlib::check_impl(int, ..., int, bool) of 1.0

# what differs between two runs of one face too: when the run was made
VOLATILE = {"matrix": ("checked_at",)}


@pytest.fixture(scope="module")
def index_projects(binaries: dict[str, bytes]) -> Projects:
    return wheels(binaries)


@pytest.fixture(autouse=True)
def pip_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither face reads a pip configuration of this machine."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)


def command_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[JsonObject, int]:
    """What `abifit ARGS --json` prints, as a document, and its exit status."""
    capsys.readouterr()
    code = main([*args, "--json"])
    return json.loads(capsys.readouterr().out), code


def same(name: str, cli: JsonObject, api: JsonObject) -> None:
    """The two documents are equal, but for what the API does not report (the transfer line's
    figures) and what differs from run to run."""
    for doc in (cli, api):
        doc.pop("transfer", None)
        for key in VOLATILE.get(name, ()):
            assert key in doc, f"{name}: no {key!r} in the document"
            doc.pop(key)
    assert json.loads(dumps(api)) == cli


def report_json(command: str) -> Callable[[Any], JsonObject]:
    """The JSON of a command's report, as its report module writes it, without a transfer."""
    render = getattr(importlib.import_module(f"abifit.report.{command}"), f"{command}_json")
    if "transfer" in inspect.signature(render).parameters:
        return lambda report: render(report, None)
    return render


Case = tuple[list[str], Callable[[], object]]


def index_cases(url: str, cache: Callable[[str], str]) -> dict[str, Case]:
    """For each command that reads the index: its arguments, and the API call."""
    index = {**TARGET, "index_url": url}
    return {
        "check": (["check", "extpkg==1.0", "--with", "hostpkg==2.0"],
                  lambda: abifit.check("extpkg==1.0", with_="hostpkg==2.0",
                                       cache_dir=cache("check"), **index)),
        "resolve": (["resolve", "extpkg", "hostpkg"],
                    lambda: abifit.resolve(["extpkg", "hostpkg"], cache_dir=cache("resolve"),
                                           **index)),
        "matrix": (["matrix", "extpkg==1.0", "--against", "hostpkg"],
                   lambda: abifit.matrix("extpkg==1.0", "hostpkg", cache_dir=cache("matrix"),
                                         **index)),
        "variants": (["variants", "hostpkg==2.0", "--all"],
                     lambda: abifit.variants("hostpkg==2.0", every=True,
                                             cache_dir=cache("variants"), **index)),
        "history": (["history", "hostlib::check_impl", "--in", "hostpkg"],
                    lambda: abifit.history("hostlib::check_impl", "hostpkg",
                                           cache_dir=cache("history"), **index)),
        "inspect": (["inspect", "hostpkg==2.0", "--symbols", "defined"],
                    lambda: abifit.inspect("hostpkg==2.0", symbols="defined",
                                           cache_dir=cache("inspect"), **index)),
    }


MESSAGE = f"ImportError: /venv/site-packages/extpkg/_ops.abi3.so: undefined symbol: {OLD}"


def environment_cases(python: str, tmp_path: Path) -> dict[str, Case]:
    """For each command that reads an environment (this test run's): its arguments, and the
    API call; diff's side A is the snapshot `tmp_path / "pylock.toml"`."""
    lock = tmp_path / "pylock.toml"
    return {
        "doctor": (["doctor", "--python", python, "--no-index", "--cache-dir",
                    str(tmp_path / "cli")],
                   lambda: abifit.doctor(python, no_index=True, cache_dir=tmp_path / "api")),
        "cuda": (["cuda", "--python", python, "--no-cache"],
                 lambda: abifit.cuda(python, no_cache=True)),
        "snapshot": (["snapshot", "--python", python, "--no-index", "--no-cache"],
                     lambda: abifit.snapshot(python, no_index=True, no_cache=True)),
        "diff": (["diff", str(lock), python, "--no-cache"],
                 lambda: abifit.diff(lock, python, no_cache=True)),
        "explain": (["explain", MESSAGE, "--python", python, "--no-cache"],
                    lambda: abifit.explain(MESSAGE, python, no_cache=True)),
    }


INDEX_COMMANDS = sorted(index_cases("", str))
ENVIRONMENT_COMMANDS = sorted(environment_cases("", Path()))


def test_every_library_function_has_a_case() -> None:
    """Each command with a library function is compared here, on the index or on an
    environment: a new command's function needs its case."""
    assert sorted([*INDEX_COMMANDS, *ENVIRONMENT_COMMANDS]) == library_commands()


@pytest.mark.parametrize("name", INDEX_COMMANDS)
def test_the_api_and_the_command_agree_on_the_index(
        name: str, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    def cache(face: str) -> Callable[[str], str]:
        return lambda command: str(tmp_path / face / command)

    args, _ = index_cases(loopback_index.url, cache("cli"))[name]
    cli, code = command_json(capsys, *args, *TARGET_ARGS, "--index-url", loopback_index.url,
                             "--cache-dir", cache("cli")(name))
    _, call = index_cases(loopback_index.url, cache("api"))[name]
    api = report_json(name)(call())
    assert code in (0, 1), f"{name} exited {code}"
    same(name, cli, api)


def test_the_api_and_the_command_agree_on_a_host_preset(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`host="manylinux_2_28"` picks that preset's platform for the wheels in both faces
    (before the options were shared, the API kept this machine's platforms)."""
    cli, _ = command_json(capsys, "check", "extpkg==1.0", "--with", "hostpkg==1.0", "--host",
                          "manylinux_2_28", "--python-version", "3.11", "--index-url",
                          loopback_index.url, "--cache-dir", str(tmp_path / "cli"))
    report = abifit.check("extpkg==1.0", with_="hostpkg==1.0", host="manylinux_2_28",
                          python_version="3.11", index_url=loopback_index.url,
                          cache_dir=tmp_path / "api")
    assert "manylinux_2_28" in report.target
    same("check", cli, check_json(report, None))


def test_the_api_and_the_command_agree_on_an_environment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """doctor, cuda, snapshot, diff and explain of this test run's own environment."""
    python = sys.executable
    abifit.snapshot(python, output=tmp_path / "pylock.toml", no_index=True,
                    no_cache=True)  # diff's side A
    for name, (args, call) in environment_cases(python, tmp_path).items():
        cli, code = command_json(capsys, *args)
        assert code in (0, 1), f"{name} exited {code}"
        same(name, cli, report_json(name)(call()))


def test_an_unknown_keyword_is_a_type_error() -> None:
    """A misspelt index option fails as any unknown argument does, naming it."""
    with pytest.raises(TypeError, match="check\\(\\) got an unexpected keyword argument "
                                        "'index_uri'"):
        abifit.check("extpkg==1.0", index_uri="http://127.0.0.1:1/simple")
