"""Installed environments that broke doctor: a FIFO where a distribution's METADATA should be
(it hung), RECORD files `csv` refuses or with NUL bytes (internal errors), an `__init__.py`
that does not compile (said to load), and SIGTERM while worker processes work (they were left
running)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import Built, module_fixture, wheel  # noqa: F401  (the fixture)

from helpers import make_wheel, with_record
from venvs import clean_environ, venv_with_wheels


def _plain_venv(tmp_path: Path, member: str) -> tuple[str, Path]:
    """A venv with a pure-Python package installed by pip; its interpreter, and the path of
    `member` of the package's .dist-info."""
    name, data = make_wheel("plainpkg", "1.0", {"plainpkg/__init__.py": b""})
    wheel = tmp_path / name
    wheel.write_bytes(with_record(data))
    python = venv_with_wheels(tmp_path / "venv", [wheel])
    [found] = list((tmp_path / "venv").glob("lib/python3*/site-packages/"
                                              f"plainpkg-1.0.dist-info/{member}"))
    return python, found


def _doctor(python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--no-index", "--no-cache"], capture_output=True, text=True,
                          env=clean_environ(), timeout=120, check=False)


def test_a_fifo_metadata_does_not_hang_doctor(tmp_path: Path) -> None:
    python, metadata = _plain_venv(tmp_path, "METADATA")
    metadata.unlink()
    os.mkfifo(metadata)
    done = _doctor(python)
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.parametrize("record", [
    b"plainpkg/__init__.py,sha256=" + b"a" * 200_000 + b",0\n",
    b'"' + b"b" * 200_000 + b'",,\nplainpkg/__init__.py,,\n',  # past csv's field limit
    b"plainpkg/__init__.py,\x00,0\nplain\x00pkg/x.py,,\n",
    bytes(range(256)) * 10,
    b'plainpkg/__init__.py,,\n"never closed,,\n',
], ids=["long-field", "field-past-csv-limit", "nul", "binary", "open-quote"])
def test_a_damaged_record_is_read_without_an_internal_error(record: bytes,
                                                            tmp_path: Path) -> None:
    """RECORD files that `csv` refuses or that name files no system has (a NUL byte): doctor
    finishes with a verdict (an internal error before)."""
    python, listed = _plain_venv(tmp_path, "RECORD")
    listed.write_bytes(record)
    done = _doctor(python)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and "fits:" in done.stdout


def test_an_init_that_does_not_compile_fails_its_import(module: Built, tmp_path: Path) -> None:
    """A package with a native module whose `__init__.py` does not compile: `import` raises
    SyntaxError (two real runs), and doctor says so (it said the import worked), its own
    verification agreeing."""
    filename, data = wheel("badsyn", [("badsyn/__init__.py", b"from . import _ext\ndef (:\n"),
                                      ("badsyn/_ext.abi3.so", module.small)])
    (tmp_path / filename).write_bytes(data)
    python = venv_with_wheels(tmp_path / "venv", [tmp_path / filename])
    real = [subprocess.run([python, "-c", "import badsyn"], capture_output=True, text=True,
                           env=clean_environ(), cwd="/", timeout=60, check=False)
            for _ in range(2)]
    said = [r.stderr.strip().splitlines()[-1] for r in real]
    assert said[0] == said[1] == "SyntaxError: invalid syntax"
    done = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--no-index", "--no-cache", "--verify", "--json"],
                          capture_output=True, text=True, env=clean_environ(), timeout=300,
                          check=False)
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and doc["verdict"] == "fails", done.stderr
    [verdict] = [v for v in doc["imports"] if v["name"] == "badsyn"]
    assert verdict["loads"] is False and verdict["error"] == said[0]
    assert [f["kind"] for f in doc["findings"]] == ["python-syntax"]
    assert all(c["agrees"] for c in doc["import_checks"])


def _descendants(pid: int) -> set[int]:
    """The processes below `pid` (its children, theirs, ...), from /proc."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(k) for k in (task / "children").read_text().split()}
                todo += sorted(kids - found)
                found |= kids
    return found


def test_sigterm_ends_abifit_and_its_workers(tmp_path: Path) -> None:
    """SIGTERM while doctor's worker processes work (each in a session of its own, so a
    signal to abifit's process group misses them): abifit kills them and ends with 143."""
    env = {**clean_environ(), "ABIFIT_WORKERS": "2"}
    process = subprocess.Popen([sys.executable, "-m", "abifit", "doctor", "--no-index",
                                "--no-cache", "--python", sys.executable],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    workers: set[int] = set()
    deadline = time.monotonic() + 30
    while len(workers) < 1 and time.monotonic() < deadline and process.poll() is None:
        workers = _descendants(process.pid)
        time.sleep(0.02)
    assert workers, "no worker started"
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 143 and err.decode().rstrip().endswith("terminated")
    time.sleep(0.5)
    alive = {pid for pid in workers if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[:1]}
    assert not alive, alive
