"""Odd wheels judged as pip and a real import judge them: member names that install to one path
(`pkg/./_ext.so`, `pkg//_ext.so`, `pkg/x/../_ext.so`: the last one written wins), members
compressed with LZMA or BZIP2 (which pip reads), an encrypted member, a `.dist-info` directory
of another project or two of them (which pip refuses), and a wheel of 300,000 members (ZIP64).
Each wheel is installed by pip into a fresh venv and imported twice; `check` of the wheel file
and of the same wheel on an index gives the verdict those give, or, where pip refuses the wheel,
exit 2 with pip's reason."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from builders import Built, module_fixture, wheel  # noqa: F401  (the fixture)

from httpserver import LoopbackServer, publish_index
from venvs import clean_environ, venv_with_wheels

TARGET = ["--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
          "--platform", "linux_x86_64"]


def encrypted(data: bytes, member: str) -> bytes:
    """The archive with the encryption flag set on `member` (central and local headers)."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        length = struct.unpack_from("<H", out, at + 28)[0]
        if bytes(out[at + 46:at + 46 + length]) == member.encode():
            out[at + 8] |= 1
            out[struct.unpack_from("<L", out, at + 42)[0] + 6] |= 1
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


@dataclass(frozen=True)
class Real:
    installed: bool
    error: str | None  # the import's last line when it raised


def real(tmp_path: Path, filename: str, data: bytes, project: str) -> Real:
    """pip install of the wheel in a fresh venv, then its import, twice (the two must agree)."""
    path = tmp_path / filename
    path.write_bytes(data)
    try:
        python = venv_with_wheels(tmp_path / "venv", [path])
    except subprocess.CalledProcessError:
        return Real(False, None)
    runs = [subprocess.run([python, "-c", f"import {project}"], capture_output=True, text=True,
                           env=clean_environ(), cwd="/", timeout=60, check=False)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [runs[0].returncode] * 2 and \
        runs[0].stderr == runs[1].stderr
    if runs[0].returncode == 0:
        return Real(True, None)
    return Real(True, runs[0].stderr.strip().splitlines()[-1])


def checks(tmp_path: Path, filename: str, data: bytes, project: str
           ) -> list[subprocess.CompletedProcess[str]]:
    """`check` of the wheel file, and of the project on an index serving it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    path = tmp_path / "served" / filename
    path.parent.mkdir()
    path.write_bytes(data)
    common = [*TARGET, "--no-cache", "--json"]
    with LoopbackServer() as server:
        index = publish_index(server, {project: [(filename, data)]})
        return [subprocess.run([sys.executable, "-m", "abifit", "check", *target, *common],
                               capture_output=True, text=True, env=env, timeout=300,
                               check=False)
                for target in ([str(path)], [f"{project}==1.0", "--index-url", index.url])]


def assert_agrees(found: Real, runs: list[subprocess.CompletedProcess[str]],
                  refusal: str | None = None) -> None:
    for run in runs:
        assert "internal error" not in run.stderr
        if not found.installed:
            assert run.returncode == 2 and refusal is not None and refusal in run.stderr, \
                run.stderr
            continue
        doc = json.loads(run.stdout)
        if found.error is None:
            assert run.returncode == 0 and doc["verdict"] == "fits", run.stdout
        else:
            assert run.returncode == 1 and doc["verdict"] == "fails", run.stdout
            said = [i["error"] for i in doc["imports"] if i["loads"] is False]
            assert said and said[0].split(": ")[-1] == found.error.split(": ")[-1], (said, found)


@pytest.mark.parametrize(("same", "last"), [
    ("pkg/./_ext.abi3.so", "empty"), ("pkg/./_ext.abi3.so", "module"),
    ("pkg//_ext.abi3.so", "empty"), ("pkg/x/../_ext.abi3.so", "empty"),
    ("pkg/x/../_ext.abi3.so", "module"),
])
def test_members_installed_to_one_path(same: str, last: str, module: Built,
                                       tmp_path: Path) -> None:
    """Two members that pip installs to pkg/_ext.abi3.so, the module and an empty file: the
    one written last is what imports (or fails: 'file too short')."""
    project = f"dup{len(same)}{last[0]}"
    members = [(f"{project}/_ext.abi3.so", module.small), (same.replace("pkg", project), b"")]
    if last == "module":
        members.reverse()
    filename, data = wheel(project, [(f"{project}/__init__.py", b"from . import _ext\n"),
                                     *members])
    found = real(tmp_path, filename, data, project)
    assert found.installed and (found.error is None) == (last == "module"), found
    assert_agrees(found, checks(tmp_path, filename, data, project))


@pytest.mark.parametrize("method", [zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2], ids=["lzma", "bzip2"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_members_compressed_as_pip_reads_them(method: int, size: str, module: Built,
                                              tmp_path: Path) -> None:
    """An LZMA or BZIP2 module (once called damaged), small or stored past 256 KiB: it
    imports, and `check` says it fits."""
    project = f"comp{method}{size[0]}"
    filename, data = wheel(project, [(f"{project}/__init__.py", b"from . import _ext\n"),
                                     (f"{project}/_ext.abi3.so", getattr(module, size))],
                           method=method)
    found = real(tmp_path, filename, data, project)
    assert found == Real(True, None)
    assert_agrees(found, checks(tmp_path, filename, data, project))


@pytest.mark.parametrize("case", ["encrypted", "other-dist-info", "two-dist-infos"])
def test_wheels_pip_refuses(case: str, module: Built, tmp_path: Path) -> None:
    """pip will not install these (once `fits`): `check` refuses each with pip's reason."""
    project = "refused"
    members = [(f"{project}/__init__.py", b"from . import _ext\n"),
               (f"{project}/_ext.abi3.so", module.small)]
    if case == "encrypted":
        filename, data = wheel(project, members)
        data = encrypted(data, f"{project}/_ext.abi3.so")
        refusal = "is encrypted: pip cannot install this wheel"
    elif case == "other-dist-info":
        filename, data = wheel(project, members, dist="other-1.0.dist-info")
        refusal = ".dist-info directory 'other-1.0.dist-info' does not start with 'refused'"
    else:
        filename, data = wheel(project, [*members, ("zzz-1.0.dist-info/METADATA", b"Name: z\n")])
        refusal = "multiple .dist-info directories found"
    found = real(tmp_path, filename, data, project)
    assert not found.installed
    assert_agrees(found, checks(tmp_path, filename, data, project), refusal)


def test_a_wheel_of_300000_members(module: Built, tmp_path: Path) -> None:
    """More members than a zip's end record can count (ZIP64's record counts them): once 'not
    a valid zip file'."""
    project = "many"
    filename, data = wheel(project, [(f"{project}/__init__.py", b"from . import _ext\n"),
                                     (f"{project}/_ext.abi3.so", module.small)], extra=300_000)
    found = real(tmp_path, filename, data, project)
    assert found == Real(True, None)
    assert_agrees(found, checks(tmp_path, filename, data, project))
