"""What a verdict command refuses before it works: a target platform it does not check (never
`fits` for Windows or macOS wheels), an output file it could not write (a resolve that ran for
minutes must not end with nothing); and, with --json, an error is a JSON document on stdout
(`schemas/error.schema.json`), as a result is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from abifit.cli import main
from helpers import schema, validate

ERROR_SCHEMA = schema("error")


@pytest.mark.parametrize("command", [
    ["check", "numpy==2.2.6"],
    ["matrix", "torchvision==0.24.1", "--against", "torch"],
    ["resolve", "numpy"],
])
@pytest.mark.parametrize("platform", ["win_amd64", "macosx_11_0_arm64"])
def test_a_platform_that_is_not_checked_is_said_not_checked(
        command: list[str], platform: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--platform for Windows or macOS: exit 2 and "not checked", before the index is asked
    (offline, with an empty cache: no network is needed to refuse); the JSON error document
    follows its schema."""
    code = main([*command, "--platform", platform, "--offline", "--cache-dir", str(tmp_path),
                 "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert f"error: not checked: --platform {platform}" in captured.err
    doc = json.loads(captured.out)
    validate(doc, ERROR_SCHEMA)
    assert doc["command"] == command[0] and doc["error"]["kind"] == "error"
    assert doc["error"]["message"].startswith("not checked:")


@pytest.mark.parametrize(("command", "option"), [
    (["resolve", "numpy"], ["-o", "{missing}/pylock.toml"]),
    (["resolve", "numpy"], ["--html", "{missing}/page.html"]),
    (["matrix", "torchvision==0.24.1", "--against", "torch"], ["--html", "{missing}/m.html"]),
    (["resolve", "numpy"], ["-o", "{directory}"]),
])
def test_an_output_that_cannot_be_written_is_refused_first(
        command: list[str], option: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An output in a directory that does not exist, or a directory in its place: exit 2 at
    once (offline with an empty cache, which would fail later: the refusal comes first)."""
    place = [o.format(missing=tmp_path / "missing", directory=tmp_path) for o in option]
    started = time.monotonic()
    code = main([*command, *place, "--offline", "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - started < 5
    assert f"error: {option[0]} {place[1]}: " in err
    assert ("does not exist" in err) if "missing" in option[1] else ("a directory" in err)


def test_an_error_of_the_work_itself_is_a_json_document_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A requirement that does not parse, with --json: the `error:` line on stderr and the
    error document on stdout say the same."""
    code = main(["check", "numpy===", "--offline", "--cache-dir", str(tmp_path), "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    validate(doc, ERROR_SCHEMA)
    assert code == 2 and captured.err.startswith(f"error: {doc['error']['message']}")


def test_a_wheel_pip_would_refuse_on_the_target_is_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A local wheel tagged manylinux_2_34 checked for a manylinux_2_28 target: pip would
    refuse it there ("not a supported wheel on this platform"), so the check says so (exit 2,
    naming the glibc its tag needs) instead of judging its modules; for manylinux_2_34 it is
    judged."""
    from helpers import make_wheel

    name, data = make_wheel("newglibc", "1.0", {"newglibc/__init__.py": b""},
                            tag="cp39-abi3-manylinux_2_34_x86_64")
    wheel = tmp_path / name
    wheel.write_bytes(data)
    args = ["check", str(wheel), "--python-version", "3.11", "--offline", "--cache-dir",
            str(tmp_path / "c")]
    code = main([*args, "--platform", "manylinux_2_28_x86_64"])
    err = capsys.readouterr().err
    assert code == 2
    assert ("pip would refuse this wheel for cp311 on manylinux_2_28_x86_64" in err
            and "needs glibc 2.34, newer than the target's 2.28" in err)
    assert main([*args, "--platform", "manylinux_2_34_x86_64"]) == 0
