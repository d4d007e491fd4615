"""Binding past a missing library: the symbols that nothing would define, counting a copy of the
missing library located elsewhere (in check, a wheel's file the search does not reach), are
named beside the missing library; without such a copy nothing is guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.cli import main
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel

SOURCES = FIXTURES / "past"
TAG = "cp310-abi3-linux_x86_64"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two objects and two wheels: provpkg ships lib/libprov.so; pastpkg's _past needs it
    by soname with no RPATH, so the search never reaches provpkg's copy."""
    root = tmp_path_factory.mktemp("past")
    (root / "lib").mkdir()
    lib = compile_c(SOURCES / "libprov.c", root / "lib" / "libprov.so", soname="libprov.so")
    ext = compile_c(SOURCES / "past.c", root / "_past.abi3.so", libs=[lib])
    prov_name, prov = make_wheel("provpkg", "1.0", {"provpkg/__init__.py": b"",
                                                     "provpkg/lib/libprov.so": lib.read_bytes()},
                                 tag=TAG)
    past_name, past = make_wheel("pastpkg", "1.0", {"pastpkg/__init__.py":
                                                    b"from pastpkg import _past\n",
                                                    "pastpkg/_past.abi3.so": ext.read_bytes()},
                                 tag=TAG)
    (root / prov_name).write_bytes(prov)
    (root / past_name).write_bytes(past)
    return {"lib": lib, "ext": ext, "prov": root / prov_name, "past": root / past_name}


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["check", *args, "--python-version", "3.11", "--platform", "linux_x86_64",
                 "--no-cache", "--offline", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _dlopen_error(path: Path, library_path: str | None) -> str:
    """The error of a real dlopen(RTLD_NOW) of `path`, in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if library_path:
        env["LD_LIBRARY_PATH"] = library_path
    code = (f"import ctypes\ntry:\n    ctypes.CDLL({str(path)!r}, mode=ctypes.RTLD_GLOBAL | "
            f"{os.RTLD_NOW})\nexcept OSError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    return done.stdout.strip()


def test_the_real_loader_names_the_symbol_once_the_library_is_found(
        built: dict[str, Path]) -> None:
    """The fixture does what the tests below rely on: glibc names libprov.so first, and
    past_gone once libprov.so is found (prov_answer is then defined)."""
    assert "libprov.so: cannot open shared object file" in _dlopen_error(built["ext"], None)
    assert "undefined symbol: past_gone" in _dlopen_error(built["ext"],
                                                           str(built["lib"].parent))


def test_check_names_the_symbol_past_the_missing_library(
        built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """With provpkg beside it, _past's missing libprov.so is reported first (glibc's error),
    then past_gone, which provpkg's copy does not define; prov_answer, which it does, is not."""
    code, doc = _check(capsys, str(built["past"]), "--with", str(built["prov"]))
    assert code == 1
    findings = doc["findings"]
    assert isinstance(findings, list)
    mine = [f for f in findings if f["module"] == "pastpkg._past"]
    assert [f["kind"] for f in mine] == ["missing-library", "undefined-symbol"]
    assert mine[0]["library"] == "libprov.so"
    assert mine[1]["symbol"] == "past_gone" and mine[1]["behind"] == ["libprov.so"]
    assert "provpkg/lib/libprov.so" in mine[1]["explanation"]
    modules = doc["modules"]
    assert isinstance(modules, list)
    assert "libprov.so: cannot open shared object file" in modules[0]["error"]


def test_without_a_copy_nothing_is_guessed(
        built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Alone (offline, so no index to find libprov.so in), only the missing library: what it
    would define is unknown, so no symbol is reported."""
    code, doc = _check(capsys, str(built["past"]))
    assert code == 1
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert [f["kind"] for f in findings] == ["missing-library"]


def test_the_text_says_the_symbol_comes_after_the_library(
        built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    main(["check", str(built["past"]), "--with", str(built["prov"]), "--python-version", "3.11",
          "--platform", "linux_x86_64", "--no-cache", "--offline"])
    out = capsys.readouterr().out
    assert "undefined-symbol: pastpkg._past, once libprov.so is found" in out
    assert out.index("missing-library: pastpkg._past") < out.index("undefined-symbol: pastpkg")
