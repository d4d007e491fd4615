"""`abifit completion SHELL`: bash completes commands and options through the code it prints
(run in a real bash, which calls this venv's `abifit` as a shell does); zsh's and fish's code
names abifit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.cli import main

BIN = Path(sys.executable).parent
ABIFIT = shutil.which("abifit", path=str(BIN))
pytestmark = pytest.mark.skipif(ABIFIT is None, reason="needs the abifit command of this venv")


def completions(line: str, tmp_path: Path) -> list[str]:
    """What bash offers for `line` (the cursor at its end), through `abifit completion bash`."""
    script = """
eval "$(abifit completion bash)"
read -r -a COMP_WORDS <<< "$LINE"
case "$LINE" in *" ") COMP_WORDS+=(""); esac
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$LINE"
COMP_POINT=${#LINE}
_python_argcomplete abifit
printf '%s\\n' "${COMPREPLY[@]}"
"""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "LINE": line}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_completes_a_command(tmp_path: Path) -> None:
    assert completions("abifit ch", tmp_path) == ["check"]
    assert {"doctor", "resolve", "completion"} <= set(completions("abifit ", tmp_path))


def test_bash_completes_an_option_and_its_choices(tmp_path: Path) -> None:
    assert completions("abifit check --fail", tmp_path) == ["--fail-on"]
    assert sorted(completions("abifit check --fail-on ", tmp_path)) == [
        "degraded", "fails", "prerequisite"]


def test_bash_completes_file_names(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text("")
    assert completions("abifit check -r u", tmp_path) == ["uv.lock"]


@pytest.mark.parametrize(("shell", "marker"), [
    ("bash", "complete -o nospace -o default -o bashdefault -F _python_argcomplete abifit"),
    ("zsh", "#compdef abifit"),
    ("fish", "complete --command abifit"),
])
def test_each_shell_gets_code_for_abifit(shell: str, marker: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    assert marker in capsys.readouterr().out


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["completion", "tcsh"])
    assert stopped.value.code == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err
