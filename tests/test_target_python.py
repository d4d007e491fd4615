"""The target interpreter: a wheel checked for another Python than the one running abifit is
simulated in a process of that Python's interpreter when this machine has one (PATH, pyenv,
uv), else with that version's C API left unchecked, never reported as missing."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.host.environment import interpreter_candidates
from abifit.host.localfs import is_elf_file
from fixtures.build import compile_c
from test_check import make_wheel

SOURCE = Path(__file__).parent / "fixtures" / "target" / "ext312.c"
needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                               reason="the fixture needs a 3.12-only symbol absent from 3.11")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel whose extension module needs PyDict_Unwatch (CPython 3.12 and later)."""
    root = tmp_path_factory.mktemp("target")
    so = compile_c(SOURCE, root / "_ext312.abi3.so")
    name, data = make_wheel("ext312", "1.0", {"ext312/__init__.py": b"",
                                              "ext312/_ext312.abi3.so": so.read_bytes()},
                            tag="cp310-abi3-linux_x86_64")
    (root / name).write_bytes(data)
    return root / name


def _check(wheel: Path, version: str, capsys: pytest.CaptureFixture[str],
           ) -> tuple[int, dict[str, object]]:
    code = main(["check", str(wheel), "--python-version", version, "--platform",
                 "linux_x86_64", "--no-cache", "--offline", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _no_interpreters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))


@needs_311
def test_this_python_fails_on_the_newer_api(wheel: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """For the running 3.11, the module fails naming the 3.12 symbol it needs."""
    code, doc = _check(wheel, "3.11", capsys)
    assert code == 1 and doc["verdict"] == "fails"
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert {f["symbol"] for f in findings} == {"PyDict_Unwatch", "PyDict_Watch"}


@needs_311
def test_without_an_interpreter_the_api_is_not_checked(
        wheel: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """For 3.12 with no 3.12 interpreter here, the module fits and a note names the API
    symbols that were not checked."""
    _no_interpreters(monkeypatch, tmp_path)
    code, doc = _check(wheel, "3.12", capsys)
    assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    notes = [n for n in doc["notes"] if "not checked" in str(n)]  # type: ignore[union-attr]
    assert len(notes) == 1
    assert "no Python 3.12 interpreter" in notes[0] and "PyDict_Unwatch" in notes[0]


@needs_311
def test_a_found_interpreter_starts_the_process(
        wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """For 3.12 with a 3.12 interpreter on this machine, the process starts from it and the
    module's C API is bound against its symbols: it fits, with no symbol left unchecked."""
    found = [c for c in interpreter_candidates((3, 12), os.environ)
             if is_elf_file(os.path.realpath(c))]
    if not found:
        pytest.skip("no Python 3.12 interpreter on this machine")
    code, doc = _check(wheel, "3.12", capsys)
    assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    assert f"the target's interpreter: {os.path.realpath(found[0])}" in doc["notes"]
    assert not [n for n in doc["notes"] if "not checked" in str(n)]  # type: ignore[union-attr]


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_candidates_prefer_path_then_the_newest_managed_one(tmp_path: Path) -> None:
    """PATH's pythonX.Y first, then pyenv's and uv's installs of X.Y, newest patch first;
    other versions and missing files are not candidates."""
    bin_dir, pyenv, uv = tmp_path / "bin", tmp_path / "pyenv", tmp_path / "uv"
    for path in (bin_dir / "python3.12", pyenv / "versions/3.12.9/bin/python3.12",
                 pyenv / "versions/3.12.10/bin/python3.12",
                 pyenv / "versions/3.13.1/bin/python3.13",
                 uv / "cpython-3.12.4-linux-x86_64-gnu/bin/python3.12"):
        _executable(path)
    env = {"PATH": str(bin_dir), "PYENV_ROOT": str(pyenv), "UV_PYTHON_INSTALL_DIR": str(uv),
           "HOME": str(tmp_path)}
    assert interpreter_candidates((3, 12), env) == [
        str(bin_dir / "python3.12"), str(pyenv / "versions/3.12.10/bin/python3.12"),
        str(pyenv / "versions/3.12.9/bin/python3.12"),
        str(uv / "cpython-3.12.4-linux-x86_64-gnu/bin/python3.12")]
    assert interpreter_candidates((3, 14), env) == []
