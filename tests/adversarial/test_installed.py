"""An installed environment with a FIFO where a distribution's METADATA should be: doctor
reads it without waiting for a writer (it hung before), and finishes with a verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_check import make_wheel
from test_locks import with_record
from venvs import clean_environ, venv_with_wheels


def test_a_fifo_metadata_does_not_hang_doctor(tmp_path: Path) -> None:
    name, data = make_wheel("plainpkg", "1.0", {"plainpkg/__init__.py": b""})
    wheel = tmp_path / name
    wheel.write_bytes(with_record(data))
    python = venv_with_wheels(tmp_path / "venv", [wheel])
    [metadata] = list((tmp_path / "venv").glob("lib/python3*/site-packages/"
                                                 "plainpkg-1.0.dist-info/METADATA"))
    metadata.unlink()
    os.mkfifo(metadata)
    done = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--no-index", "--no-cache"], capture_output=True, text=True,
                          env=clean_environ(), timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr
