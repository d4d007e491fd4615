"""Per-import verdicts of `abifit doctor`, against real imports, one fixture package per pattern.

The packages of tests/fixtures/imports/ (sources and `build.py` there) are compiled once per
module, installed as wheels into a fresh venv of this CPython 3.11, and checked with
`abifit doctor --json --no-index --verify`: the verdict of each `import X` (works, or the
exception the user sees), the severity and reachability of each finding, the exit code, and the
real imports and loads of `--verify`, every one of which must agree with the prediction.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.imports import build
from helpers import schema, validate
from venvs import LOADER_ENV, clean_environ, venv_with_wheels

Json = dict[str, object]
SCHEMA = schema("doctor")
EXT = sysconfig.get_config_var("EXT_SUFFIX")
NO_GONE = "libgone.so: cannot open shared object file: No such file or directory"

# The doctor runs, all made once for the module: everything (the exit code of each filtered run
# is that of its package alone), and the text rendering.
ALL, TEXT, TEXT_VERIFY = "all", "text", "text-verify"
RUNS: dict[str, tuple[str, ...]] = {
    ALL: ("--json", "--verify"),
    "ownlib": ("ownlib", "--json", "--verify"),
    "optback": ("optback", "--json", "--verify"),
    "onuse": ("onuse", "--json", "--verify"),
    "unreached": ("unreached", "--json", "--verify"),
    TEXT: ("masked", "ownbad"),
    TEXT_VERIFY: ("optback", "onuse", "--verify"),
}
JSON_RUNS = [name for name, args in RUNS.items() if "--json" in args]


@dataclass(frozen=True, slots=True)
class Expected:
    """What `import name` really does in the fixture venv: works, or raises `error`."""

    id: str
    name: str
    works: bool
    error: str | None = None


EXPECTED = (
    Expected("own-library-loaded-first", "ownlib", True),
    Expected("own-library-fails", "ownbad", False, f"OSError: {NO_GONE}"),
    Expected("handler-masks-error", "masked", False,
             "RuntimeError: operator masked::op does not exist"),
    Expected("guarded-backend", "optback", True),
    Expected("imported-on-use", "onuse", True),
    Expected("package-of-unreached-module", "unreached", True),
)


@dataclass(frozen=True, slots=True)
class Venv:
    """The fixture venv: its interpreter and site-packages."""

    python: str
    site: Path


@dataclass(frozen=True, slots=True)
class Run:
    """One `abifit doctor` run: exit code, stdout, stderr, and the document when --json."""

    returncode: int
    stdout: str
    stderr: str
    doc: Json

    def entries(self, key: str) -> list[Json]:
        entries = self.doc[key]
        assert isinstance(entries, list), self.doc
        return entries

    def verdict(self, name: str) -> Json:
        """The verdict of `import name`."""
        found = [v for v in self.entries("imports") if v["name"] == name]
        assert len(found) == 1, f"no single verdict for import {name}: {self.entries('imports')}"
        return found[0]

    def check(self, name: str) -> Json:
        """The real `import name` of --verify."""
        found = [c for c in self.entries("import_checks") if c["name"] == name]
        assert len(found) == 1, f"no single check of import {name}: {self.doc}"
        return found[0]

    def finding(self, module: str) -> Json:
        """The one finding about `module` (an extension module's name or a library's label)."""
        found = [f for f in self.entries("findings") if f["module"] == module]
        assert len(found) == 1, f"no single finding for {module}: {self.entries('findings')}"
        return found[0]

    def status(self, module: str) -> Json:
        found = [m for m in self.entries("modules") if m["module"] == module]
        assert len(found) == 1, f"no single status for {module}: {self.entries('modules')}"
        return found[0]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv of this interpreter holding the fixture packages, installed by pip."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the fixture wheels are tagged cp311: CPython 3.11 is needed")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fixtures")
    root = tmp_path_factory.mktemp("import-verdicts")
    wheels = build.build_wheels(root, sys.executable)
    env_dir = root / "venv"
    python = venv_with_wheels(env_dir, wheels)
    return Venv(python, next((env_dir / "lib").glob("python3*/site-packages")))


def run_doctor(venv: Venv, *args: str) -> Run:
    """`abifit doctor ARGS --python VENV --no-index --no-cache`."""
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", *args, "--python", venv.python, "--no-index",
         "--no-cache"],
        capture_output=True, text=True, env=clean_environ(), timeout=300, check=False)
    doc: Json = {}
    if "--json" in args and done.stdout.strip():
        doc = json.loads(done.stdout)
    return Run(done.returncode, done.stdout, done.stderr, doc)


@pytest.fixture(scope="module")
def runs(venv: Venv) -> dict[str, Run]:
    """Every run of `RUNS`, made in parallel once for the module."""
    with ThreadPoolExecutor(max_workers=len(RUNS)) as pool:
        done = dict(zip(RUNS, pool.map(lambda args: run_doctor(venv, *args), RUNS.values()),
                        strict=True))
    for name, run in done.items():
        assert run.returncode in (0, 1), f"doctor {name} failed: {run.stderr}"
    return done


@pytest.mark.parametrize("expected", EXPECTED, ids=[e.id for e in EXPECTED])
def test_verdict_is_what_the_real_import_shows(expected: Expected, runs: dict[str, Run]) -> None:
    """Each import's predicted verdict and user-visible error are those of a real import."""
    run = runs[ALL]
    check = run.check(expected.name)
    assert (check["actual_works"], check["actual_error"]) == (expected.works, expected.error), (
        f"the fixture misbehaves: {check}")
    verdict = run.verdict(expected.name)
    assert (verdict["loads"], verdict["error"]) == (expected.works, expected.error), verdict
    assert check["agrees"] is True, check


@pytest.mark.parametrize("name", JSON_RUNS)
def test_every_real_import_and_load_agrees(name: str, runs: dict[str, Run]) -> None:
    """--verify imports every import with a verdict and loads every module; all agree."""
    run = runs[name]
    checks = run.entries("import_checks")
    assert sorted(c["name"] for c in checks) == sorted(v["name"] for v in run.entries("imports"))
    assert checks and all(c["agrees"] is True for c in checks), checks
    verification = run.entries("verification")
    assert sorted(v["module"] for v in verification) == sorted(
        m["module"] for m in run.entries("modules"))
    assert verification and all(v["agrees"] is True for v in verification), verification
    assert not [f for f in run.entries("findings") if f["kind"] == "model-disagreement"]


def test_imports_are_checked_while_the_modules_load(
        venv: Venv, runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--verify starts the real imports without waiting for the modules' real loads to end, and
    reports the same checks and loads as a run of its own."""
    import abifit.host.realload as realload
    from abifit.cli import main

    importing = threading.Event()
    overlapped: list[bool] = []
    real_import, real_loads = realload.real_import, realload.real_loads

    def spied_import(python: str, name: str, timeout: float = 300.0) -> realload.RealImport:
        importing.set()
        return real_import(python, name, timeout)

    def spied_loads(python: str, jobs: Sequence[realload.LoadJob],
                    **options: Any) -> list[realload.RealLoad]:
        overlapped.append(importing.wait(30))  # an import began while the loads still run
        return real_loads(python, jobs, **options)

    monkeypatch.setattr(realload, "real_import", spied_import)
    monkeypatch.setattr(realload, "real_loads", spied_loads)
    for name in LOADER_ENV:
        monkeypatch.delenv(name, raising=False)
    code = main(["doctor", "--python", venv.python, "--no-index", "--no-cache", "--json",
                 "--verify"])
    assert overlapped == [True]
    doc = json.loads(capsys.readouterr().out)
    whole = runs[ALL]
    assert code == whole.returncode
    assert doc["import_checks"] == whole.doc["import_checks"]
    assert doc["verification"] == whole.doc["verification"]


@pytest.mark.parametrize("name", JSON_RUNS)
def test_documents_follow_the_schema(name: str, runs: dict[str, Run]) -> None:
    """Each --json document, with its imports and import checks, is valid for the schema."""
    validate(runs[name].doc, SCHEMA)


def test_own_library_loaded_first_is_found_by_soname(venv: Venv, runs: dict[str, Run]) -> None:
    """An extension without RPATH finds the library its package loaded itself: no finding."""
    run = runs["ownlib"]
    assert run.returncode == 0, run.doc
    assert run.status("ownlib.lib._ext")["loads"] is True  # not "cannot find libown.so"
    library = run.status("ownlib/lib/libown.so")
    assert (library["kind"], library["loads"]) == ("plugin", True)
    assert library["path"] == str(venv.site / "ownlib" / "lib" / "libown.so")
    assert run.entries("findings") == []
    assert run.verdict("ownlib")["optional_failures"] == []


def test_own_library_failure_is_the_cause(venv: Venv, runs: dict[str, Run]) -> None:
    """A failing own library is what `import` shows; its extension's finding is a consequence."""
    run = runs[ALL]
    verdict = run.verdict("ownbad")
    assert (verdict["cause"], verdict["cause_error"]) == ("ownbad/lib/libown2.so", NO_GONE)
    cause = run.finding("ownbad/lib/libown2.so")
    assert (cause["kind"], cause["library"], cause["message"]) == (
        "missing-library", "libgone.so", NO_GONE)
    consequence = run.finding("ownbad.lib._ext")
    assert (consequence["kind"], consequence["library"]) == ("missing-library", "libown2.so")
    assert "consequence" in consequence["explanation"]
    assert str(venv.site / "ownbad" / "lib" / "libown2.so") in consequence["explanation"]
    for finding in (cause, consequence):
        assert (finding["import"], finding["severity"], finding["reachability"]) == (
            "ownbad", "error", "always")


def test_handler_message_is_what_the_user_sees(venv: Venv, runs: dict[str, Run]) -> None:
    """A handler raising its own constant message gives the error; the cause stays underneath."""
    run = runs[ALL]
    verdict = run.verdict("masked")
    module = venv.site / "masked" / f"_C{EXT}"
    assert (verdict["cause"], verdict["cause_error"]) == (
        "masked._C", f"{module}: undefined symbol: masked_op_impl")
    finding = run.finding("masked._C")
    assert (finding["kind"], finding["symbol"]) == ("undefined-symbol", "masked_op_impl")
    assert (finding["import"], finding["severity"], finding["reachability"]) == (
        "masked", "error", "always")


@pytest.mark.parametrize(("package", "module", "severity", "reachability", "effect", "code"), [
    pytest.param("optback", "optback._fast", "info", "guarded", "prerequisite", 0,
                 id="guarded"),
    pytest.param("onuse", "onuse._accel", "warning", "on-use", "degrades", 1, id="on-use"),
])
def test_optional_failure_is_judged_by_its_cause(package: str, module: str, severity: str,
                                                 reachability: str, effect: str, code: int,
                                                 runs: dict[str, Run]) -> None:
    """A module imported under a guard or only on use fails no import; what its failure costs
    follows its cause: a library nothing in the stack provides (libgone.so) is a prerequisite,
    exit 0; a symbol nobody defines degrades the package, exit 1."""
    run = runs[package]
    assert run.returncode == code, run.doc
    assert run.doc["verdict"] == ("fits" if code == 0 else "degraded")
    assert (run.status(module)["loads"], run.status(module)["effect"]) == (False, effect)
    finding = run.finding(module)
    assert (finding["import"], finding["severity"], finding["reachability"],
            finding["effect"]) == (package, severity, reachability, effect)
    verdict = run.verdict(package)
    assert (verdict["loads"], verdict["optional_failures"]) == (True, [module])
    summary = run.doc["summary"]
    assert isinstance(summary, dict)
    assert (summary["failing"], summary["optional_failing"], summary["imports_failing"]) == (
        0, 1, 0)
    assert summary["degraded" if code else "prerequisite"] == 1


def test_unreached_module_is_judged_by_its_cause(runs: dict[str, Run]) -> None:
    """A failing module that no Python file of its package names fails no import the user runs
    (the package imports): it needs libgone.so, which nothing in the stack provides, so it is a
    prerequisite line, exit 0, and no import verdict of its own."""
    run = runs["unreached"]
    assert run.returncode == 0, run.doc
    assert run.doc["verdict"] == "fits"
    finding = run.finding("unreached._hidden")
    assert (finding["kind"], finding["library"]) == ("missing-library", "libgone.so")
    assert (finding["severity"], finding["reachability"], finding["effect"],
            finding["prerequisite"]) == ("info", "unreached", "prerequisite", "libgone.so")
    assert [v["name"] for v in run.entries("imports")] == ["unreached"]
    assert run.verdict("unreached")["loads"] is True  # the package itself imports


def test_whole_environment_counts_failing_imports(runs: dict[str, Run]) -> None:
    """The whole venv fails (two imports raise), with one degraded module and two that need a
    prerequisite."""
    run = runs[ALL]
    assert run.returncode == 1, run.doc
    assert run.doc["verdict"] == "fails"
    summary = run.doc["summary"]
    assert isinstance(summary, dict)
    assert (summary["imports"], summary["imports_failing"], summary["optional_failing"],
            summary["degraded"], summary["prerequisite"]) == (len(EXPECTED), 2, 3, 1, 2)
    failing = sorted(v["name"] for v in run.entries("imports") if not v["loads"])
    assert failing == ["masked", "ownbad"]


def test_text_shows_each_failing_import(runs: dict[str, Run]) -> None:
    """The text report has a block per failing import with what the user sees."""
    run = runs[TEXT]
    assert run.returncode == 1, run.stderr
    assert ("import masked: fails (masked)\n"
            "  the user sees: RuntimeError: operator masked::op does not exist\n"
            "  because masked._C does not load: ") in run.stdout
    assert f"import ownbad: fails (ownbad)\n  the user sees: OSError: {NO_GONE}\n" in run.stdout


def test_text_verify_counts_agreeing_imports(runs: dict[str, Run]) -> None:
    """With --verify, the text says how many real imports agree; optional findings say why."""
    run = runs[TEXT_VERIFY]
    assert run.returncode == 1, run.stdout + run.stderr  # onuse._accel degrades onuse
    assert "verified by real import: 2 of 2 imports agree" in run.stdout
    assert ("needs a prerequisite: libgone.so\n"
            "  without it 1 file(s) do not load, and the imports work: optback._fast") in run.stdout
    assert "degraded, undefined-symbol: onuse._accel" in run.stdout
    assert "`import onuse` works without it: package code loads it only when" in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("degraded: ")
    assert "import optback: fails" not in run.stdout
