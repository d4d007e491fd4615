"""The library API and the command line give equal JSON for every command on the same inputs:
both build the command's one options value (`CheckOptions`, ...) and run `run_<command>`, so
that what one face checks, the other checks alike. The index is a real loopback index serving
the wheels of the check world (helpers.wheels: a host package whose 2.0 changes a parameter, an
extension built against 1.0); the environments are this test run's own."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import abifit
from abifit.cli import main
from abifit.report.check import check_json
from abifit.report.cuda import cuda_json
from abifit.report.diff import diff_json
from abifit.report.doctor import doctor_json
from abifit.report.explain import explain_json
from abifit.report.history import history_json
from abifit.report.inspect import inspect_json
from abifit.report.json import JsonObject, dumps
from abifit.report.matrix import matrix_json
from abifit.report.resolve import resolve_json
from abifit.report.snapshot import snapshot_json
from abifit.report.variants import variants_json
from helpers import wheels
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


Case = tuple[list[str], Callable[..., object], Callable[..., JsonObject]]


def index_cases(url: str, cache: Callable[[str], str]) -> dict[str, Case]:
    """For each command that reads the index: its arguments, the API call, the report's JSON."""
    index = {**TARGET, "index_url": url}
    return {
        "check": (["check", "extpkg==1.0", "--with", "hostpkg==2.0"],
                  lambda: abifit.check("extpkg==1.0", with_="hostpkg==2.0",
                                       cache_dir=cache("check"), **index),
                  lambda r: check_json(r, None)),
        "resolve": (["resolve", "extpkg", "hostpkg"],
                    lambda: abifit.resolve(["extpkg", "hostpkg"], cache_dir=cache("resolve"),
                                           **index),
                    lambda r: resolve_json(r, None)),
        "matrix": (["matrix", "extpkg==1.0", "--against", "hostpkg"],
                   lambda: abifit.matrix("extpkg==1.0", "hostpkg", cache_dir=cache("matrix"),
                                         **index),
                   lambda r: matrix_json(r, None)),
        "variants": (["variants", "hostpkg==2.0", "--all"],
                     lambda: abifit.variants("hostpkg==2.0", every=True,
                                             cache_dir=cache("variants"), **index),
                     lambda r: variants_json(r, None)),
        "history": (["history", "hostlib::check_impl", "--in", "hostpkg"],
                    lambda: abifit.history("hostlib::check_impl", "hostpkg",
                                           cache_dir=cache("history"), **index),
                    lambda r: history_json(r, None)),
        "inspect": (["inspect", "hostpkg==2.0", "--symbols", "defined"],
                    lambda: abifit.inspect("hostpkg==2.0", symbols="defined",
                                           cache_dir=cache("inspect"), **index),
                    lambda r: inspect_json(r, None)),
    }


@pytest.mark.parametrize("name", ["check", "resolve", "matrix", "variants", "history",
                                  "inspect"])
def test_the_api_and_the_command_agree_on_the_index(
        name: str, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    def cache(face: str) -> Callable[[str], str]:
        return lambda command: str(tmp_path / face / command)

    args, _, _ = index_cases(loopback_index.url, cache("cli"))[name]
    cli, code = command_json(capsys, *args, *TARGET_ARGS, "--index-url", loopback_index.url,
                             "--cache-dir", cache("cli")(name))
    _, call, render = index_cases(loopback_index.url, cache("api"))[name]
    api = render(call())
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
    lock = tmp_path / "pylock.toml"
    message = f"ImportError: /venv/site-packages/extpkg/_ops.abi3.so: undefined symbol: {OLD}"
    cases: list[tuple[str, list[str], Callable[[], JsonObject]]] = [
        ("doctor", ["doctor", "--python", python, "--no-index", "--cache-dir",
                    str(tmp_path / "cli")],
         lambda: doctor_json(abifit.doctor(python, no_index=True,
                                           cache_dir=tmp_path / "api"))),
        ("cuda", ["cuda", "--python", python, "--no-cache"],
         lambda: cuda_json(abifit.cuda(python, no_cache=True))),
        ("snapshot", ["snapshot", "--python", python, "--no-index", "--no-cache"],
         lambda: snapshot_json(abifit.snapshot(python, no_index=True, no_cache=True))),
        ("diff", ["diff", str(lock), python, "--no-cache"],
         lambda: diff_json(abifit.diff(lock, python, no_cache=True))),
        ("explain", ["explain", message, "--python", python, "--no-cache"],
         lambda: explain_json(abifit.explain(message, python, no_cache=True))),
    ]
    abifit.snapshot(python, output=lock, no_index=True, no_cache=True)  # diff's side A
    for name, args, api in cases:
        cli, code = command_json(capsys, *args)
        assert code in (0, 1), f"{name} exited {code}"
        same(name, cli, api())


def test_an_unknown_keyword_is_a_type_error() -> None:
    """A misspelt index option fails as any unknown argument does, naming it."""
    with pytest.raises(TypeError, match="check\\(\\) got an unexpected keyword argument "
                                        "'index_uri'"):
        abifit.check("extpkg==1.0", index_uri="http://127.0.0.1:1/simple")
