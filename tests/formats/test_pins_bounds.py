"""`-r FILE` refuses what it cannot read in bounded time and memory, with one error line: a
device or FIFO (never read), a file over the size cap, bytes that are not UTF-8, TOML nested
past what the parser can follow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.formats.pins import MAX_PINS


def _check(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", "-r", path, "--offline", "--no-cache"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", ["device", "fifo", "too-big", "not-utf8", "nested"])
def test_a_bad_pins_file_is_one_error(case: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    if case == "device":
        path, expected = "/dev/zero", "not a regular file"
    elif case == "fifo":
        path, expected = str(tmp_path / "req.txt"), "not a regular file"
        os.mkfifo(path)  # opening it for reading would block for ever
    elif case == "too-big":
        path, expected = str(tmp_path / "req.txt"), "larger than"
        with open(path, "wb") as f:
            f.truncate(MAX_PINS + 1)
    elif case == "not-utf8":
        path, expected = str(tmp_path / "req.txt"), "not UTF-8 text"
        Path(path).write_bytes(b"\xff\xfe torch\n")
    else:
        path, expected = str(tmp_path / "pylock.toml"), "nested too deeply"
        Path(path).write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, err = _check(path, capsys)
    lines = err.strip().splitlines()
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
