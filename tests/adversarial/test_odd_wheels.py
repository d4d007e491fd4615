"""Wheels whose extension module is not an ELF file: empty, or 100 bytes of text. pip installs
them; the real import fails with the loader's words ("file too short", "invalid ELF header"),
and so does `check` (never "fits: 0 extension module(s) checked")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from abifit.cli import main
from helpers import make_wheel, with_record
from venvs import clean_environ, venv_with_wheels


@pytest.mark.parametrize(("content", "said"), [(b"", "file too short"),
                                               (b"not a library " * 8, "invalid ELF header")])
def test_a_module_that_is_not_elf_fails_as_its_real_import(
        content: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, data = make_wheel("oddmod", "1.0", {"oddmod/__init__.py": b"from . import _ext\n",
                                              "oddmod/_ext.abi3.so": content},
                            tag="cp310-abi3-linux_x86_64")
    wheel = tmp_path / name
    wheel.write_bytes(with_record(data))
    python = venv_with_wheels(tmp_path / "venv", [wheel])
    runs = [subprocess.run([python, "-c", "import oddmod"], capture_output=True, text=True,
                           env=clean_environ(), cwd="/", timeout=60, check=False)
            for _ in range(2)]
    real = [r.stderr.strip().splitlines()[-1] for r in runs]
    assert real[0] == real[1] and real[0].endswith(f"_ext.abi3.so: {said}")
    code = main(["check", str(wheel), "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--offline", "--cache-dir", str(tmp_path / "c"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "fails"
    [verdict] = [i for i in doc["imports"] if i["name"] == "oddmod"]
    assert verdict["loads"] is False and verdict["error"].endswith(f"_ext.abi3.so: {said}")
    assert verdict["error"].startswith("ImportError: ") and real[0].startswith("ImportError: ")
