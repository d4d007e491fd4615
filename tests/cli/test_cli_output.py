"""How the command line ends and what it writes where: one `error:` line and exit 2 for each bad
input, exit 3 for a bug, exit 130 at once on Ctrl-C, notes on stderr, --quiet and --verbose,
colour (`--color`, `NO_COLOR`) and wrapping on a terminal."""

from __future__ import annotations

import json
import os
import pty
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import abifit.engines.doctor
from abifit.cli import main
from fixtures.build import compile_c
from helpers import CHECK_SOURCES, TARGET, make_wheel
from httpserver import LoopbackIndex, LoopbackServer, Projects, publish_index

ESC = "\x1b["
HOST_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4", "2.0")


def environ(**extra: str) -> dict[str, str]:
    """This environment without pip's configuration or colour settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_")
           and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "TERM")}
    return {**env, "PIP_CONFIG_FILE": "/dev/null", **extra}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """abifit as a user runs it, its streams piped."""
    return subprocess.run([sys.executable, "-m", "abifit", *args], capture_output=True,
                          text=True, timeout=120, env=env or environ())


def run_on_terminal(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """abifit with stdout and stderr on a pseudo-terminal: its exit code and what the terminal
    showed."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "abifit", *args], stdin=subprocess.DEVNULL,
                               stdout=slave, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not data:
            break
        shown += data
    os.close(master)
    return process.wait(timeout=120), shown.decode().replace("\r\n", "\n")


# -- bad input: one error line, exit 2 ----------------------------------------------------------

BAD_INPUTS = {
    "check-python-missing": (["check", "pyyaml==6.0.2", "--python", "/nonexistent", "--offline"],
                             "--python /nonexistent is not a Python interpreter"),
    "matrix-python-missing": (["matrix", "sgl-kernel==0.3.21", "--against", "torch>=2.9,<2.10",
                               "--python", "/nonexistent", "--offline"], "/nonexistent"),
    "python-version": (["check", "pyyaml==6.0.2", "--python-version", "banana", "--offline"],
                       "'banana'"),
    "check-python-not-python": (["check", "pyyaml==6.0.2", "--python", "/bin/ls", "--offline"],
                                "/bin/ls is not a Python interpreter"),
    "doctor-python-not-python": (["doctor", "--python", "/bin/ls"], "/bin/ls is not a Python"),
    "cuda-python-not-python": (["cuda", "--python", "/bin/ls"], "/bin/ls is not a Python"),
    "inspect-python-not-python": (["inspect", "x", "--python", "/bin/ls"], "/bin/ls is not a"),
    "python-directory": (["check", "x==1", "--python", "{tmp}", "--offline"], "(a directory)"),
    "python-not-on-path": (["doctor", "--python", "no-such-python-xyz"], "no such command on PATH"),
    "implementation": (["check", "x==1", "--implementation", "xx"], "--implementation"),
    "jobs": (["matrix", "x==1", "--against", "y", "--jobs", "0"], "--jobs"),
    "matrix-pythons": (["matrix", "x", "y", "--against", "z", "--pythons", "3.11,3.x",
                        "--offline"], "not a Python version: '3.x'"),
    "matrix-pythons-empty": (["matrix", "x", "y", "--against", "z", "--pythons", ""],
                             "--pythons"),
    "color": (["inspect", "/dev/null", "--color", "sometimes"], "--color"),
    "inspect-device": (["inspect", "/dev/zero"], "/dev/zero: a character device"),
    "inspect-text-file": (["inspect", "{tmp}/notes.txt"], "not an ELF file"),
}


@pytest.mark.parametrize(("args", "needle"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_a_bad_input_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str],
                                                  needle: str) -> None:
    """Each bad input gives exit 2, one `error:` line on stderr (a `hint:` line at most beside
    it), no traceback, and no error on stdout."""
    (tmp_path / "notes.txt").write_text("hello\n")
    done = run(*(a.replace("{tmp}", str(tmp_path)) for a in args), "--cache-dir",
               str(tmp_path / "cache"))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and needle in errors[0], done.stderr
    assert all(line.startswith(("error: ", "hint: ")) for line in lines), done.stderr
    assert "error" not in done.stdout


@pytest.mark.parametrize("command", [["check", "x==1"], ["matrix", "x==1", "--against", "y"],
                                     ["resolve", "x"]], ids=lambda c: c[0])
def test_a_script_is_no_executable_for_check(command: list[str], tmp_path: Path) -> None:
    """`check --python` of a script (pyenv's shims are scripts) says how to find the executable
    it starts, as do matrix and resolve, which simulate a process of it too; doctor, which only
    asks the interpreter its facts, accepts it."""
    shim = tmp_path / "python-shim"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    done = run(*command, "--python", str(shim), "--offline")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    error, hint = done.stderr.splitlines()
    assert error == f"error: --python {shim} is not a Python interpreter (a script that starts " \
                    "one, not its executable)"
    assert hint.startswith(f"hint: give the interpreter it starts: {shim} -c")
    done = run("doctor", "--python", str(shim), "--no-index", "no-such-distribution")
    assert "not a Python interpreter" not in done.stderr


# -- a bug: exit 3 -------------------------------------------------------------------------------

def test_a_bug_is_exit_3_with_its_traceback_only_with_verbose(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An exception abifit did not mean to raise is an internal error: exit 3, a short message
    and a hint; its traceback only with --verbose."""
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom\nand more")

    monkeypatch.setattr(abifit.engines.doctor, "doctor", broken)
    args = ["doctor", "--no-index", "--python", sys.executable]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err
    first, hint = err.splitlines()
    assert first == "error: internal error: RuntimeError: boom"
    assert hint.startswith("hint: this is a bug in abifit") and "--verbose" in hint
    assert main([*args, "--verbose"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "RuntimeError: boom" in err and "error: internal error: RuntimeError: boom" in err


def test_a_keyboard_interrupt_is_exit_130(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A KeyboardInterrupt raised inside a command is exit 130 and one line, no traceback."""
    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(abifit.engines.doctor, "doctor", interrupted)
    assert main(["doctor", "--no-index", "--python", sys.executable]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# -- a loopback index: notes, --quiet, --verbose, colour, Ctrl-C -------------------------------

@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """hostpkg 1.0 to 1.4 (one library), 2.0 (a parameter changed), extpkg built against 1.0.
    The library of 1.x carries a MiB of random bytes, so that its members are read by decoding
    their tails in worker processes."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    root = tmp_path_factory.mktemp("output")
    host = "libhost.so"
    (root / "pad.bin").write_bytes(random.Random(16).randbytes(1 << 20))
    (root / "pad.cpp").write_text(  # read-only data, before the dynamic section
        f'__asm__(".section .rodata\\n.incbin \\"{root / "pad.bin"}\\"\\n.previous");\n')
    v1 = compile_c([CHECK_SOURCES / "host_v1.cpp", root / "pad.cpp"], root / "v1" / host, cxx=True,
                   soname=host)
    v2 = compile_c(CHECK_SOURCES / "host_v2.cpp", root / "v2" / host, cxx=True, soname=host)
    ext = compile_c(CHECK_SOURCES / "ext.cpp", root / "_ops.abi3.so", cxx=True,
                    flags=[f"-L{root / 'v1'}", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"],
                    libs=["-lhost"])
    init = {"hostpkg/__init__.py": b""}
    return {
        "hostpkg": [make_wheel("hostpkg", v, {**init, "hostpkg/lib/libhost.so":
                                              (v2 if v == "2.0" else v1).read_bytes()})
                    for v in HOST_VERSIONS],
        "extpkg": [make_wheel("extpkg", "1.0", {"extpkg/__init__.py": b"",
                                                "extpkg/_ops.abi3.so": ext.read_bytes()},
                              requires=("hostpkg==1.0",), tag="cp310-abi3-linux_x86_64")],
    }


def check_args(index: str, cache: Path, *extra: str) -> list[str]:
    """`check extpkg==1.0 --with hostpkg==2.0` on the index: it fails, with a note."""
    return ["check", "extpkg==1.0", "--with", "hostpkg==2.0", "--index-url", index, *TARGET,
            "--cache-dir", str(cache), *extra]


@pytest.fixture
def pip_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.usefixtures("pip_free")
def test_notes_go_to_stderr_and_json_keeps_them(loopback_index: LoopbackIndex, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """check's notes are `note:` lines on stderr, not in the report on stdout; --json holds
    them."""
    assert main(check_args(loopback_index.url, tmp_path)) == 1
    out, err = capsys.readouterr()
    assert "note:" not in out and out.rstrip().splitlines()[-1].startswith("fails: ")
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert any("forbids" in n for n in notes)
    assert main(check_args(loopback_index.url, tmp_path, "--json")) == 1
    out, err = capsys.readouterr()
    assert any("forbids" in n for n in json.loads(out)["notes"]) and "note:" not in err


@pytest.mark.usefixtures("pip_free")
def test_a_file_that_cannot_be_written_is_an_error(loopback_index: LoopbackIndex,
                                                  tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`matrix --html` into a missing directory: one error line naming the file and the
    directory, exit 2, before the matrix is worked out."""
    page = tmp_path / "missing" / "m.html"
    code = main(["matrix", "extpkg==1.0", "--against", "hostpkg>=2", "--index-url",
                 loopback_index.url, *TARGET, "--cache-dir", str(tmp_path), "--html", str(page)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: --html {page}: the directory {page.parent} does not exist\n"


@pytest.mark.usefixtures("pip_free")
@pytest.mark.parametrize("before", [False, True], ids=["after-the-command", "before-it"])
def test_quiet_prints_the_verdict_only(loopback_index: LoopbackIndex, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str], before: bool) -> None:
    """-q (before or after the command's name): the verdict line on stdout, nothing on stderr,
    the same exit code."""
    args = check_args(loopback_index.url, tmp_path)
    assert main(["-q", *args] if before else [*args, "-q"]) == 1
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("fails: ")
    assert err == ""


@pytest.mark.usefixtures("pip_free")
def test_very_verbose_logs_each_http_request(loopback_index: LoopbackIndex, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """-vv writes a line per HTTP request on stderr; without it, none."""
    assert main(check_args(loopback_index.url, tmp_path / "a")) == 1
    assert "http: " not in capsys.readouterr().err
    assert main(check_args(loopback_index.url, tmp_path / "b", "-vv")) == 1
    requests = [line for line in capsys.readouterr().err.splitlines() if line.startswith("http:")]
    assert any("GET /simple/extpkg/" in line for line in requests)
    assert any("GET /files/hostpkg-2.0" in line for line in requests)


def test_color_follows_the_option_and_no_color(tmp_path: Path) -> None:
    """Piped, there is no colour unless --color always (which NO_COLOR does not override);
    --color never has none."""
    assert ESC not in run("inspect", "/dev/zero").stderr
    always = run("inspect", "/dev/zero", "--color", "always", env=environ(NO_COLOR="1"))
    assert always.stderr.startswith(f"{ESC}1;31merror:{ESC}0m /dev/zero: ")
    assert ESC not in run("inspect", "/dev/zero", "--color", "never").stderr


def test_force_color_colours_piped_output_unless_no_color() -> None:
    """FORCE_COLOR (as CI logs want): colour without a terminal; NO_COLOR still wins; an
    empty FORCE_COLOR is unset."""
    forced = run("inspect", "/dev/zero", env=environ(FORCE_COLOR="1"))
    assert forced.stderr.startswith(f"{ESC}1;31merror:{ESC}0m /dev/zero: ")
    assert ESC not in run("inspect", "/dev/zero",
                          env=environ(FORCE_COLOR="1", NO_COLOR="1")).stderr
    assert ESC not in run("inspect", "/dev/zero", env=environ(FORCE_COLOR="")).stderr


def test_a_terminal_gets_colour_unless_no_color(loopback_index: LoopbackIndex,
                                                tmp_path: Path) -> None:
    """On a terminal, labels and the verdict are coloured; NO_COLOR (or --color never) leaves
    the same words without colour."""
    args = check_args(loopback_index.url, tmp_path)
    code, shown = run_on_terminal(*args, env=environ())
    assert code == 1
    assert f"{ESC}1;31mfails{ESC}0m: " in shown and f"{ESC}1mnote:{ESC}0m" in shown
    for plain in (run_on_terminal(*args, env=environ(NO_COLOR="1")),
                  run_on_terminal(*args, "--color", "never", env=environ())):
        assert plain[0] == 1 and ESC not in plain[1].replace("\r\x1b[K", "")
        assert "fails: " in plain[1] and "note: " in plain[1]


def test_a_terminal_gets_lines_wrapped_to_its_width(loopback_index: LoopbackIndex,
                                                    tmp_path: Path) -> None:
    """On a terminal of 60 columns, every line that has a space to break at fits in 60;
    piped, the explanation lines stay whole."""
    args = check_args(loopback_index.url, tmp_path, "--color", "never")
    piped = run(*args, env=environ(COLUMNS="60"))
    assert max(len(line) for line in piped.stdout.splitlines()) > 100
    code, shown = run_on_terminal(*args, env=environ(COLUMNS="60"))
    assert code == 1
    lines = [line.replace("\r\x1b[K", "") for line in shown.splitlines()]
    assert all(len(line) <= 60 or " " not in line.strip() for line in lines), lines
    assert sum(1 for line in lines if line.startswith("    ")) > 2  # continuation lines


# -- Ctrl-C ------------------------------------------------------------------------------------

@pytest.fixture
def slow_index(index_projects: Projects) -> Iterator[LoopbackIndex]:
    """The projects on a server that holds every request for 0.3 s."""
    with LoopbackServer(delay_s=0.3) as server:
        yield publish_index(server, index_projects)


def _matrix(index: str, cache: Path) -> list[str]:
    return [sys.executable, "-m", "abifit", "matrix", "extpkg==1.0", "--against", "hostpkg>=1",
            "--index-url", index, *TARGET, "--cache-dir", str(cache), "--jobs", "2", "--json"]


def _answer(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    doc = json.loads(done.stdout)
    assert isinstance(doc, dict)
    doc.pop("transfer")
    doc.pop("checked_at", None)  # the minute it ran: two runs may straddle one
    return doc


def test_ctrl_c_ends_a_matrix_at_once(slow_index: LoopbackIndex, tmp_path: Path) -> None:
    """SIGINT to the process group of a running matrix (what Ctrl-C sends): abifit and its
    worker processes are gone within 1 s, exit 130, no traceback; a second run over the same
    cache gives the answer of a run never interrupted."""
    env = environ(ABIFIT_WORKERS="2")
    process = subprocess.Popen(_matrix(slow_index.url, tmp_path / "cache"), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_children(process.pid)) < 2 and process.poll() is None:  # the workers started
        assert time.monotonic() < deadline, "the matrix started no worker processes"
        time.sleep(0.01)
    assert process.poll() is None, "the matrix ended before it was interrupted"
    workers = _children(process.pid)
    os.killpg(process.pid, signal.SIGINT)
    sent = time.monotonic()
    process.wait(timeout=10)
    ended = time.monotonic() - sent
    left = [pid for pid in workers if not _gone(pid, sent + 1.0)]
    out, err = process.communicate()
    assert process.returncode == 130, err
    assert ended < 1.0, f"took {ended:.2f} s"
    assert not left, f"worker processes {left} outlived abifit"
    assert "Traceback" not in err and err.splitlines()[-1] == "interrupted"
    assert out == ""

    slow_index.server.delay_s = 0
    again = subprocess.run(_matrix(slow_index.url, tmp_path / "cache"), env=env,
                           capture_output=True, text=True, timeout=120)
    fresh = subprocess.run(_matrix(slow_index.url, tmp_path / "fresh"), env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == fresh.returncode == 0, (again.stderr, fresh.stderr)
    assert _answer(again) == _answer(fresh)
    assert _answer(fresh)["fits"] == ["1.4", "1.3", "1.2", "1.1", "1.0"]


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (abifit's worker processes), from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int, until: float) -> bool:
    """Whether the process has ended (and been reaped) by `until`."""
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > until:
            return False
        time.sleep(0.01)


def test_a_matrix_shows_its_cells_done_and_its_rate(loopback_index: LoopbackIndex,
                                                     tmp_path: Path) -> None:
    """On a terminal, the matrix's status line counts the cells done out of all of them, with
    the bytes fetched and their rate; piped, a final line on stderr says what was fetched, in
    how long and how fast."""
    args = ["matrix", "extpkg==1.0", "--against", "hostpkg", "--index-url", loopback_index.url,
            *TARGET, "--cache-dir", str(tmp_path / "t")]
    code, shown = run_on_terminal(*args, env=environ())
    total = len(HOST_VERSIONS)
    assert f"cell {total}/{total} done; checked; " in shown and " MB/s" in shown
    piped = run("matrix", "extpkg==1.0", "--against", "hostpkg", "--index-url",
                loopback_index.url, *TARGET, "--cache-dir", str(tmp_path / "p"))
    last = piped.stderr.strip().splitlines()[-1]
    assert last.startswith("fetched ") and " s, " in last and last.endswith("MB/s)")
    assert code == piped.returncode
