"""`abifit doctor` on a real torch environment, its JSON, its cache, and its pure helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.host.natives import module_name
from abifit.sim.diagnose import newest_version
from abifit.sim.loader import SearchConfig, expand_path
from helpers import schema, validate

SCHEMA = schema("doctor")


def doctor(*args: str, cache: Path | None = None,
           workers: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    env = {**os.environ, **({"ABIFIT_WORKERS": workers} if workers is not None else {})}
    return subprocess.run([sys.executable, "-m", "abifit", "doctor", *args, *extra],
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.slow
def test_torch_environment_loads_and_json_validates(torch_venv: Path, tmp_path: Path) -> None:
    """Every native module of the torch 2.13.0 venv is predicted to load; exit 0; valid JSON."""
    done = doctor("--python", str(torch_venv / "bin" / "python"), "--json", cache=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    validate(doc, SCHEMA)
    modules = {m["module"]: m for m in doc["modules"]}
    assert modules["torch._C"]["loads"] is True
    assert doc["verdict"] == "fits" and doc["findings"] == []
    assert doc["summary"]["failing"] == 0
    assert doc["summary"]["libraries"] > 10  # torch/lib/*.so are libraries, not modules
    assert not any(m.startswith("torch.lib.") for m in modules)


@pytest.mark.slow
def test_warm_cache_gives_the_same_answer(torch_venv: Path, tmp_path: Path) -> None:
    """A second run is answered from the whole-run cache and reports the same modules; the
    parsed views of local files are not kept (parsing again costs less than keeping them), so
    a run the whole-run cache cannot answer (here: another cache directory holding only the
    first's parsed Python code) parses again, to the same answer."""
    py = str(torch_venv / "bin" / "python")
    first = doctor("--python", py, "--json", cache=tmp_path)
    assert not any(e.is_file() for e in (tmp_path / "elf-v2").rglob("*"))
    assert any(e.is_file() for e in (tmp_path / "runs-v1").rglob("*"))
    second = doctor("--python", py, "--json", cache=tmp_path)
    assert json.loads(first.stdout)["modules"] == json.loads(second.stdout)["modules"]
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "pycode-v2").rename(other / "pycode-v2")
    third = doctor("--python", py, "--json", cache=other)
    assert json.loads(first.stdout)["modules"] == json.loads(third.stdout)["modules"]


@pytest.mark.slow
def test_the_same_report_with_forked_workers_and_without(torch_venv: Path) -> None:
    """The command forks its worker processes, which read the Python code and parse the ELF
    files that this process has not taken back yet: the report is the one this process makes
    alone, byte for byte."""
    py = str(torch_venv / "bin" / "python")
    alone, forked = (doctor("--python", py, "--json", workers=n) for n in ("0", "2"))
    assert alone.returncode == 0, alone.stderr
    assert forked.stdout == alone.stdout and forked.returncode == 0


_WHOLE_PARSES = '''
import os, sys
from abifit import cli
from abifit.engines import doctor
from abifit.host import localfs
from abifit import workers

whole, forks = [], []
parse, fork_call = localfs._parse_and_keep, workers.fork_call


def parsing(path, *args, **kwargs):
    whole.append(path)
    return parse(path, *args, **kwargs)


def counted(function):
    fork = fork_call(function)
    forks.append(fork is not None)
    return fork


localfs._parse_and_keep, workers.fork_call = parsing, counted
doctor.MIN_SHARED = 1  # the venv has fewer modules than that
workers.fork_workers()
code = cli.main(sys.argv[1:])
programs = [p for p in whole if "/torch/bin/" in p]
sys.stderr.write(f"forks: {forks} programs parsed whole: {programs}\\n")
sys.exit(code)
'''


@pytest.mark.slow
def test_sharing_the_checks_parses_no_program_whole(torch_venv: Path, tmp_path: Path) -> None:
    """Weighing the distributions before the checks are shared with a fork reads what the
    scan read: torch's programs (torch/bin/*) by their heads, never parsed whole (the fork is
    asked for with fewer modules than the command wants, as the venv has)."""
    script = tmp_path / "whole.py"
    script.write_text(_WHOLE_PARSES)
    done = subprocess.run([sys.executable, str(script), "doctor", "--python",
                           str(torch_venv / "bin" / "python"), "--json", "--no-cache"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "ABIFIT_WORKERS": "2"}, check=False)
    assert done.returncode == 0, done.stderr
    assert "forks: [True] programs parsed whole: []" in done.stderr, done.stderr[-2000:]
    assert list((torch_venv / "lib").glob("python3*/site-packages/torch/bin/*"))


@pytest.mark.slow
def test_torch_read_on_every_core_gives_the_report_made_alone(torch_venv: Path) -> None:
    """With workers, torch's Python code (over `SURVEY_IN_PARTS` modules) is read in parts on
    every core and the Requires-Dist parsed on one; the report is the one a process with no
    workers makes, byte for byte."""
    from abifit.engines.doctor import SURVEY_IN_PARTS
    from abifit.engines.plans import python_modules
    from abifit.host.environment import list_distributions, query_interpreter

    python = str(torch_venv / "bin" / "python")
    torch = next(d for d in list_distributions(query_interpreter(python)) if d.key == "torch")
    assert len(python_modules(torch.files, str(torch.metadata_dir.parent))) >= SURVEY_IN_PARTS
    alone = doctor("--python", python, "--json", workers="0")
    shared = doctor("--python", python, "--json", workers="2")
    assert alone.returncode == shared.returncode == 0, alone.stderr + shared.stderr
    assert shared.stdout == alone.stdout


@pytest.mark.slow
def test_verify_agrees_on_torch(torch_venv: Path) -> None:
    """--verify loads each module for real; every prediction agrees with the real loader."""
    done = doctor("torch", "--python", str(torch_venv / "bin" / "python"), "--json", "--verify")
    doc = json.loads(done.stdout)
    validate(doc, SCHEMA)
    assert doc["verification"], doc
    assert all(v["agrees"] and v["actual_loads"] for v in doc["verification"]), doc
    assert done.returncode == 0


@pytest.mark.slow
def test_text_summary_line(torch_venv: Path) -> None:
    """The text report ends with one summary line: modules checked, loading, failing."""
    done = doctor("--python", str(torch_venv / "bin" / "python"))
    last = done.stdout.strip().splitlines()[-1]
    assert "native modules checked" in last and "0 fail" in last


@pytest.mark.slow
def test_unknown_package_is_a_usage_error(torch_venv: Path) -> None:
    """Naming a package with no native modules is one error line and exit code 2."""
    done = doctor("no-such-package", "--python", str(torch_venv / "bin" / "python"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: no native modules found for no-such-package")
    assert "Traceback" not in done.stderr


def test_bad_interpreter_is_an_error() -> None:
    """An interpreter that cannot be run is one error line and exit code 2."""
    done = doctor("--python", "/bin/false")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/s/torch/_C.cpython-311-x86_64-linux-gnu.so", "torch._C"),
        ("/s/sgl_kernel/common_ops.abi3.so", "sgl_kernel.common_ops"),
        ("/s/markupsafe/_speedups.so", "markupsafe._speedups"),
        ("/s/torch/lib/libc10.so", "torch.lib.libc10"),
        ("/s/pkg/not-an-identifier.so", None),
        ("/elsewhere/x.cpython-311-x86_64-linux-gnu.so", None),
        ("/s/pkg/data.txt", None),
    ],
    ids=["cpython-tag", "abi3", "plain-so", "library-name", "bad-identifier", "outside",
         "not-so"],
)
def test_module_name(path: str, expected: str | None) -> None:
    """Importable names come from the path under a sys.path root and an extension suffix."""
    suffixes = [".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"]
    assert module_name(path, ["/s"], suffixes) == expected


@pytest.mark.parametrize(
    ("names", "like", "expected"),
    [
        (["GLIBCXX_3.4", "GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "GLIBCXX_3.4.29", "CXXABI_1.3.13"],
         "GLIBCXX_3.4.32", "GLIBCXX_3.4.30"),
        (["GLIBC_2.2.5", "GLIBC_2.36", "GLIBC_2.4", "GLIBC_PRIVATE"], "GLIBC_2.38", "GLIBC_2.36"),
        (["CXXABI_1.3", "CXXABI_1.3.13"], "GLIBCXX_3.4.1", None),
    ],
    ids=["glibcxx", "glibc", "other-family"],
)
def test_newest_version(names: list[str], like: str, expected: str | None) -> None:
    """The newest version of the same family is found by numeric order, not text order."""
    assert newest_version(names, like) == expected


def test_expand_path_tokens() -> None:
    """$ORIGIN, ${ORIGIN}, $LIB and $PLATFORM expand; an empty entry means the current dir."""
    config = SearchConfig(lib="lib/x86_64-linux-gnu", platform="x86_64")
    assert expand_path("$ORIGIN/../lib", "/a/b", config) == "/a/b/../lib"
    assert expand_path("${ORIGIN}/x:$LIB", "/o", config) == "/o/x:lib/x86_64-linux-gnu"
    assert expand_path("/p/$PLATFORM", "/o", config) == "/p/x86_64"
    assert expand_path("", "/o", config) == "."
