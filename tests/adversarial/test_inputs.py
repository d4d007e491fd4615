"""Inputs that leaked or hung: a file that is not a requirements file given to `-r` (its text is
never printed), requirements files that include each other many times over (each read once,
bounded), and nvcc's temporary files (a private directory, never the shared one)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from abifit.cli import main


def test_a_file_that_is_not_a_requirements_file_is_not_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n")
    code = main(["check", "-r", str(secret), "--offline", "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{secret}, line 1: not a requirement" in err
    assert "root:x" not in err and "alice" not in err


def test_includes_of_includes_are_read_once(tmp_path: Path) -> None:
    """Ten files, each including the next ten times (10^10 inclusions if followed blindly):
    each file is read once, in well under a second, and its pins counted once."""
    from abifit.formats.pins import read_pins

    for n in range(10):
        lines = [f"pkg{n}==1.0"] + ([f"-r f{n + 1}.txt"] * 10 if n < 9 else [])
        (tmp_path / f"f{n}.txt").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    pins = read_pins(str(tmp_path / "f0.txt"))
    assert time.monotonic() - started < 5
    assert sorted(pins.requirements) == sorted(f"pkg{n}==1.0" for n in range(10))


def test_a_cycle_of_includes_is_an_error(tmp_path: Path) -> None:
    from abifit.errors import UsageError
    from abifit.formats.pins import read_pins

    (tmp_path / "a.txt").write_text("-r b.txt\n")
    (tmp_path / "b.txt").write_text("-r a.txt\n")
    with pytest.raises(UsageError, match="includes itself"):
        read_pins(str(tmp_path / "a.txt"))


def test_nvcc_runs_in_a_private_temporary_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """`nvcc --dryrun` names `tmpxft_*` files in its TMPDIR: abifit gives it a private one,
    removed after, never the shared /tmp."""
    import os

    from abifit.host import cudastack

    seen: dict[str, str] = {}

    def fake(argv: list[str], env: dict[str, str], cwd: str | None = None) -> None:
        seen.update(env)
        seen["cwd"] = cwd or ""
        return None

    monkeypatch.setattr(cudastack, "_run", fake)
    cudastack._nvcc_dryrun_root("/usr/local/cuda/bin/nvcc", {"PATH": "/usr/bin"})
    tmp = seen["TMPDIR"]
    assert os.path.basename(tmp).startswith("abifit-nvcc-") and seen["cwd"] == tmp
    assert not os.path.exists(tmp)


def test_names_from_outside_cannot_command_the_terminal(tmp_path: Path) -> None:
    """A file whose name carries escape sequences (set the window's title, erase the line and
    print a fake verdict): on a terminal abifit shows them as `\\x1b...`, never sends them."""
    import os
    import pty
    import subprocess
    import sys

    evil = tmp_path / "lib\x1b]0;pwned\x07\r\x1b[2Kfits: all good.so"
    evil.write_bytes(b"\x7fELF" + bytes(60))
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    process = subprocess.Popen([sys.executable, "-m", "abifit", "inspect", str(evil)],
                               stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:
            break
        if not data:
            break
        shown += data
    os.close(master)
    assert process.wait(timeout=60) == 2
    text = shown.decode("utf-8", "replace")
    assert "\x1b]0;" not in text and "\x1b[2K" not in text and "\x07" not in text
    assert "\\x1b]0;pwned\\x07\\x0d\\x1b[2Kfits: all good.so" in text


@pytest.mark.parametrize("token", ["x" * 50_000, "_Z" + "A" * 50_000, "/" + "a/" * 25_000])
def test_explain_is_linear_in_a_long_token(token: str, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    """A pasted text of one 50 KB token (quadratic before: 20 KB took 20 s): read in well
    under the time a quadratic reading takes (a few seconds on a slow machine)."""
    from abifit.formats.errortext import read_clues

    started = time.monotonic()
    assert read_clues(f"ImportError: {token}: cannot open shared object file") != ()
    assert read_clues(token) == ()
    assert time.monotonic() - started < 5
