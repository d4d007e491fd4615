"""Never silently drop: an extension module that cannot be read (empty, truncated) is a finding
and fails its import, in doctor (checked against the real loader with --verify) and in check;
a FIFO named like one is never opened (reading it would block)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.cli import main
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel, venv_with_package

SOURCE = FIXTURES / "past" / "libprov.c"
SUFFIX = ".cpython-311-x86_64-linux-gnu.so"
needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11) or sys.platform != "linux",
                               reason="the venv is of this CPython 3.11 on Linux")


@pytest.fixture(scope="module")
def broken_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv whose package holds an empty module, a truncated one and a FIFO named like one."""
    root = tmp_path_factory.mktemp("unreadable")
    package = venv_with_package(root, "brokenpkg")
    (package / f"_empty{SUFFIX}").write_bytes(b"")
    whole = compile_c(SOURCE, root / f"_whole{SUFFIX}").read_bytes()
    (package / f"_trunc{SUFFIX}").write_bytes(whole[:len(whole) // 3])
    os.mkfifo(package / f"_fifo{SUFFIX}")
    return root / "venv" / "bin" / "python"


@needs_311
def test_doctor_reports_unreadable_modules_and_verify_agrees(broken_venv: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", str(broken_venv),
                           "--json", "--no-cache", "--no-index", "--verify"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    modules = {m["module"]: m for m in doc["modules"]}
    assert set(modules) == {"brokenpkg._empty", "brokenpkg._trunc"}  # the FIFO is not opened
    assert not modules["brokenpkg._empty"]["loads"]
    assert modules["brokenpkg._empty"]["error"].endswith(": file too short")
    kinds = {(f["kind"], f["module"]) for f in doc["findings"]}
    assert kinds == {("unreadable-object", "brokenpkg._empty"),
                     ("unreadable-object", "brokenpkg._trunc")}
    verification = {v["module"]: v for v in doc["verification"]}
    assert all(v["agrees"] for v in verification.values()), verification
    # glibc's own words for the empty file
    assert verification["brokenpkg._empty"]["actual_error"].endswith(": file too short")


def test_check_fails_on_an_unreadable_member(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A wheel whose extension module is truncated does not fit: it is not dropped into
    `fits: 0 extension module(s) checked`."""
    whole = compile_c(SOURCE, tmp_path / "_m.abi3.so").read_bytes()
    name, data = make_wheel("truncpkg", "1.0", {"truncpkg/__init__.py": b"",
                                                "truncpkg/_m.abi3.so": whole[:len(whole) // 3]},
                            tag="cp310-abi3-linux_x86_64")
    (tmp_path / name).write_bytes(data)
    code = main(["check", str(tmp_path / name), "--python-version", "3.11", "--platform",
                 "linux_x86_64", "--offline", "--no-cache", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["verdict"] == "fails"
    (finding,) = doc["findings"]
    assert finding["kind"] == "unreadable-object" and finding["module"] == "truncpkg._m"


def test_doctor_reports_entries_named_like_modules_that_are_not_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory, a FIFO and a symbolic-link loop that the installation recorded under an
    extension module's name: the import system skips each (checked by importing them for real:
    ModuleNotFoundError), and doctor says so for each, where it said "all load". A directory
    beside a `.py` of the same module is no problem: the import finds the `.py`."""
    import sysconfig

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    package = venv_with_package(tmp_path, "notpkg")
    site = package.parent
    (package / f"_dir{suffix}").mkdir()
    os.mkfifo(package / f"_fifo{suffix}")
    (package / f"_loop{suffix}").symlink_to(f"_loop{suffix}")
    (package / f"_shadow{suffix}").mkdir()
    (package / "_shadow.py").write_text("")
    info = site / "notpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notpkg\nVersion: 1.0\n")
    listed = ["notpkg/__init__.py", "notpkg/_shadow.py",
              *(f"notpkg/_{n}{suffix}" for n in ("dir", "fifo", "loop", "shadow"))]
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in listed))
    python = str(tmp_path / "venv" / "bin" / "python")
    for name, found in (("_dir", False), ("_fifo", False), ("_loop", False), ("_shadow", True)):
        done = subprocess.run([python, "-c", f"import notpkg.{name}"], capture_output=True,
                              text=True, cwd="/", check=False)
        assert (done.returncode == 0) is found, done.stderr
        if not found:
            assert f"ModuleNotFoundError: No module named 'notpkg.{name}'" in done.stderr
    code = main(["doctor", "--python", python, "--json", "--no-cache"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    found_kinds = {f["module"]: f for f in doc["findings"] if f["kind"] == "not-a-file"}
    assert set(found_kinds) == {"notpkg._dir", "notpkg._fifo", "notpkg._loop"}
    assert found_kinds["notpkg._dir"]["message"].endswith(": a directory, not a file")
    assert found_kinds["notpkg._fifo"]["message"].endswith(": a named pipe, not a file")
    assert found_kinds["notpkg._loop"]["message"].endswith(": a symbolic link loop, not a file")
    assert "ModuleNotFoundError: No module named 'notpkg._dir'" in \
        found_kinds["notpkg._dir"]["explanation"]


@needs_311
def test_a_guarded_import_of_a_file_cut_short_kills_the_process(tmp_path: Path) -> None:
    """`try: from . import _cut` / `except ImportError:` does not survive a module cut short
    inside what the loader maps: the loader touches a page past the end of the file and the
    process dies of SIGBUS (checked for real), so the import fails, with a Bus error; an empty
    module in the same place fails with an ImportError the package catches, and its import
    works. Doctor predicts both, and --verify agrees."""
    whole = compile_c(SOURCE, tmp_path / f"_whole{SUFFIX}").read_bytes()
    assert len(whole) > 3 * 4096  # its data lies past the first page
    site = venv_with_package(tmp_path, "guardpkg").parent
    guarded = "try:\n    from . import {0}\nexcept ImportError:\n    {0} = None\n"
    (site / "guardpkg" / "__init__.py").write_text(guarded.format("_cut"))
    (site / "guardpkg" / f"_cut{SUFFIX}").write_bytes(whole[:4096])
    (site / "softpkg").mkdir()
    (site / "softpkg" / "__init__.py").write_text(guarded.format("_empty"))
    (site / "softpkg" / f"_empty{SUFFIX}").write_bytes(b"")
    for name in ("guardpkg", "softpkg"):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        listed = [f"{name}/__init__.py", *(f"{name}/{p.name}" for p in (site / name).glob("_*"))]
        (info / "RECORD").write_text("".join(f"{p},,\n" for p in listed))
    python = str(tmp_path / "venv" / "bin" / "python")
    real = {name: subprocess.run([python, "-c", f"import {name}"], capture_output=True,
                                 text=True, cwd="/", check=False) for name in ("guardpkg",
                                                                                "softpkg")}
    assert real["guardpkg"].returncode == -signal.SIGBUS, real["guardpkg"]
    assert real["softpkg"].returncode == 0, real["softpkg"].stderr
    done = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--json", "--no-cache", "--no-index", "--verify"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    modules = {m["module"]: m for m in doc["modules"]}
    cut, empty = modules["guardpkg._cut"], modules["softpkg._empty"]
    assert (cut["reachability"], empty["reachability"]) == ("guarded", "guarded")
    assert "the process is killed by SIGBUS (Bus error): the file ends at byte 4,096" in \
        cut["error"]
    assert empty["error"].endswith(": file too short")
    imports = {v["name"]: v for v in doc["imports"]}
    assert not imports["guardpkg"]["loads"] and imports["guardpkg"]["error"].startswith(
        "Bus error")
    assert imports["softpkg"]["loads"] and imports["softpkg"]["optional_failures"] == [
        "softpkg._empty"]
    severity = {f["module"]: f["severity"] for f in doc["findings"]}
    assert severity == {"guardpkg._cut": "error", "softpkg._empty": "warning"}
    explanation = next(f["explanation"] for f in doc["findings"] if f["severity"] == "error")
    assert "raises SIGBUS, which kills the process; no `except` around the import runs" in \
        explanation
    verification = {v["module"]: v for v in doc["verification"]}
    assert all(v["agrees"] for v in verification.values()), verification
    assert verification["guardpkg._cut"]["note"] == \
        "the real load crashed the process, as predicted"
    text = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--no-cache", "--no-index"], capture_output=True, text=True,
                          timeout=120, check=False).stdout
    assert "`import softpkg` works without it" in text
    assert "`import guardpkg` works without it" not in text
    assert "import guardpkg: fails (guardpkg)\n  the user sees: Bus error" in text
    checks = {c["name"]: c for c in doc["import_checks"]}
    assert checks["guardpkg"]["agrees"] and checks["guardpkg"]["actual_error"] == "Bus error"
    assert checks["guardpkg"]["note"].startswith("the process was killed by SIGBUS")
    assert checks["softpkg"]["agrees"] and checks["softpkg"]["actual_works"]
