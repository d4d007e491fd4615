"""Checking the stack a lock will install: markers evaluated for the target, the lock's own
files, hashes that must match.

A real uv project (`uv lock` against a loopback index) whose lock pins hostpkg 1.0 for
Python < 3.12 and hostpkg 2.0 for Python >= 3.12 beside extfree, whose module was built against
hostpkg 1.0's library (and needs a symbol 2.0 dropped). The same lock exported by uv as
requirements.txt (with hashes) and pylock.toml. For cp311 the set fits; for cp312 it fails:
the verdict follows the target's markers, never "named twice" nor "no wheel fits".
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.formats.pins import holds, requirements_txt, uv_lock
from helpers import UV, lock_world, lock_world_venv, make_wheel, uv_project
from httpserver import LoopbackIndex, LoopbackServer, publish_index

pytestmark = pytest.mark.skipif(UV is None, reason="needs uv")


@pytest.fixture(scope="module")
def index(binaries: dict[str, bytes]) -> Iterator[LoopbackIndex]:
    with LoopbackServer() as server:
        yield publish_index(server, lock_world(binaries))


@pytest.fixture(scope="module")
def project(index: LoopbackIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uv project, locked by uv, and its lock exported as requirements.txt and
    pylock.toml."""
    return uv_project(tmp_path_factory.mktemp("uvproject"), index.url,
                      '"extfree", "hostpkg==1.0; python_version < \'3.12\'",\n'
                      '                "hostpkg==2.0; python_version >= \'3.12\'"')


def check(lock: Path, python: str, index: LoopbackIndex, tmp_path: Path,
          capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object], str]:
    code = main(["check", "-r", str(lock), "--python-version", python, "--platform",
                 "linux_x86_64", "--index-url", index.url, "--cache-dir", str(tmp_path),
                 "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("lock", ["uv.lock", "requirements.txt", "pylock.toml"])
def test_the_markers_of_a_lock_are_those_of_the_target(
        lock: str, project: Path, index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The uv lock and its two exports: for cp311 hostpkg 1.0 is checked beside extfree
    (fits), for cp312 hostpkg 2.0 (fails, extfree's module needs what 2.0 dropped)."""
    for python, version, verdict, code_wanted in (("3.11", "1.0", "fits", 0),
                                                   ("3.12", "2.0", "fails", 1)):
        code, doc, err = check(project / lock, python, index, tmp_path / python, capsys)
        assert code == code_wanted, err
        assert doc["verdict"] == verdict
        wheels = {w["name"]: w["version"] for w in doc["wheels"]}  # type: ignore[union-attr]
        assert wheels["hostpkg"] == version and wheels["extfree"] == "1.0"


def test_the_lock_exports_carry_hashes_and_files(project: Path, index: LoopbackIndex) -> None:
    """What is read of each form: the requirements file's --hash digests, the uv.lock's
    wheels (URL and digest) for the target's range only."""
    digest = hashlib.sha256(index.files["hostpkg-1.0-py3-none-linux_x86_64.whl"]).hexdigest()
    markers = {"python_version": "3.11", "python_full_version": "3.11.0",
               "sys_platform": "linux", "platform_machine": "x86_64",
               "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "os_name": "posix", "platform_system": "Linux"}
    pins, _inc, _skip = requirements_txt((project / "requirements.txt").read_text(), markers)
    host = next(p for p in pins if p.name == "hostpkg")
    assert host.requirement == "hostpkg==1.0" and host.hashes == (digest,)
    locked = uv_lock((project / "uv.lock").read_text(), markers)
    assert sorted(locked.requirements) == ["extfree==1.0", "hostpkg==1.0"]
    [file] = next(p for p in locked.pins if p.name == "hostpkg").files
    assert file.sha256 == digest and file.url.endswith("/hostpkg-1.0-py3-none-linux_x86_64.whl")
    assert holds("python_version >= '3.12'", {**markers, "python_version": "3.12"})


def test_a_wrong_hash_is_refused(project: Path, index: LoopbackIndex, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A requirements file whose --hash for hostpkg is not the digest of any file the index
    serves: exit 2, naming the pin, never a verdict about another file."""
    text = (project / "requirements.txt").read_text()
    digest = hashlib.sha256(index.files["hostpkg-1.0-py3-none-linux_x86_64.whl"]).hexdigest()
    assert digest in text
    wrong = tmp_path / "requirements.txt"
    wrong.write_text(text.replace(digest, "0" * 64))
    code = main(["check", "-r", str(wrong), "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--index-url", index.url, "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2
    assert "hostpkg==1.0: no file the index serves has a sha256 the lock allows" in err


def test_a_lock_is_judged_by_the_files_it_names(
        project: Path, index: LoopbackIndex, binaries: dict[str, bytes],
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A uv.lock whose hostpkg 1.0 wheel URL points elsewhere on the host, at a file of that
    name built with hostpkg 2.0's library: the check reads the lock's URL, so the verdict is
    about the file the lock names (fails), not the index's (fits); with the digest of the
    index's file, the file read is not the one the lock names: an error. A lock whose only
    file for a pin is another release's: refused (exit 2)."""
    lock = (project / "uv.lock").read_text()
    one = "/files/hostpkg-1.0-py3-none-linux_x86_64.whl"
    assert one in lock
    name, data = make_wheel("hostpkg", "1.0", {"hostpkg/__init__.py": b"",
                                               "hostpkg/lib/libhost.so": binaries["v2"]})
    index.server.add_file(f"/elsewhere/{name}", data)
    old_digest = hashlib.sha256(index.files[one.rsplit("/", 1)[1]]).hexdigest()
    moved = tmp_path / "moved" / "uv.lock"
    moved.parent.mkdir()
    moved.write_text(lock.replace(one, f"/elsewhere/{name}").replace(
        old_digest, hashlib.sha256(data).hexdigest()))
    code, doc, err = check(moved, "3.11", index, tmp_path / "c1", capsys)
    assert code == 1 and doc["verdict"] == "fails", err
    # the same URL with the digest of the index's file: the file read whole (it is small)
    # does not have it, and that is an error, not a verdict
    stale = tmp_path / "stale" / "uv.lock"
    stale.parent.mkdir()
    stale.write_text(lock.replace(one, f"/elsewhere/{name}"))
    code = main(["check", "-r", str(stale), "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--index-url", index.url, "--cache-dir", str(tmp_path / "c3")])
    assert code == 2 and "sha256 mismatch" in capsys.readouterr().err
    other = tmp_path / "other" / "uv.lock"
    other.parent.mkdir()
    other.write_text(lock.replace(one, "/files/hostpkg-2.0-py3-none-linux_x86_64.whl"))
    code = main(["check", "-r", str(other), "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--index-url", index.url, "--cache-dir", str(tmp_path / "c2")])
    err = capsys.readouterr().err
    assert code == 2 and "hostpkg==1.0: none of the files the lock names fits" in err


def test_diff_reads_a_lock_for_the_environment_beside_it(
        project: Path, index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`diff ENV uv.lock`, ENV a venv of this Python with what the lock pins for it: no
    version changes (the lock's pin for the other Python range is not this environment's)."""
    python = lock_world_venv(tmp_path, index)
    if sys.version_info >= (3, 12):
        pytest.skip("the lock pins hostpkg 1.0 for Python < 3.12 only")
    code = main(["diff", python, str(project / "uv.lock"), "--json", "--no-cache"])
    doc = json.loads(capsys.readouterr().out)
    hostpkg = [c for c in doc["versions"] if c["subject"] == "hostpkg"]
    assert code in (0, 1) and hostpkg == [], hostpkg
    assert not [c for c in doc["versions"] if c["subject"] == "extfree"]

