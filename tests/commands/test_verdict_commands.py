"""One pair, one verdict: `doctor`, `check`, `matrix`, `resolve` and the library API give the same
word for the same stack (the rule of `abifit.sim.verdict`).

softpkg 1.0 imports its extension module `_ops` in a `try`/`except ImportError` (as xformers
loads `_C.so`), and `_ops` was built against hostpkg 1.x, whose `hostlib::check_impl` takes its
line as `int`; hostpkg 2.0 takes it as `unsigned int` (tests/fixtures/resolve/). Beside hostpkg
2.0, `import softpkg` works and `_ops` is lost: `degraded`, exit 1, never chosen by `resolve`.
Beside 1.1 it `fits`. The doctor part installs the pair with pip into a fresh venv and checks the
prediction against real imports and loads (`--verify`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import abifit
from abifit.cli import main
from fixtures.build import compile_c
from helpers import FIXTURES
from httpserver import LoopbackIndex, Projects
from venvs import clean_environ, venv_with_wheels

SOURCES = FIXTURES / "resolve"
TAG = "cp310-abi3-linux_x86_64"
TARGET = ("--python-version", "3.11", "--platform", "linux_x86_64")
GUARDED = b"try:\n    from . import _ops\nexcept ImportError:\n    _ops = None\n"
INT_FORM = "hostlib::check_impl(int, char const*, char const*, int, bool)"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def wheel(name: str, version: str, files: dict[str, bytes],
          requires: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """A wheel pip installs: its files, METADATA, WHEEL and a RECORD with their hashes."""
    dist = f"{name}-{version}.dist-info"
    files = {**files,
             f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                  + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
             f"{dist}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode()}
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n"
                     for path, data in files.items()) + f"{dist}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(path, data)
    return f"{name}-{version}-{TAG}.whl", buffer.getvalue()


def _digest(data: bytes) -> str:
    """A RECORD's hash: urlsafe base64 of the sha256, unpadded."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """hostpkg 1.0 and 1.1 (`int` form), 2.0 (`unsigned int`); softpkg 1.0, built against the
    `int` form, requiring hostpkg>=1.0."""
    root = tmp_path_factory.mktemp("verdict-commands")
    libs = {form: compile_c(SOURCES / "hostlib.cpp", root / form / "libhost.so", cxx=True,
                            soname="libhost.so", flags=[f"-DLINE_TYPE={line}"])
            for form, line in (("int", "int"), ("unsigned", "unsigned int"))}
    ops = compile_c(SOURCES / "ext.cpp", root / "_ops.abi3.so", cxx=True,
                    flags=["-DLINE_TYPE=int", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"],
                    libs=[libs["int"]])
    return {
        "hostpkg": [wheel("hostpkg", version, {"hostpkg/__init__.py": b"",
                                               "hostpkg/lib/libhost.so": libs[form].read_bytes()})
                    for version, form in (("1.0", "int"), ("1.1", "int"), ("2.0", "unsigned"))],
        "softpkg": [wheel("softpkg", "1.0", {"softpkg/__init__.py": GUARDED,
                                             "softpkg/_ops.abi3.so": ops.read_bytes()},
                          requires=("hostpkg>=1.0",))],
    }


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, dict[str, object]]:
    """`abifit ARGS --json` against the loopback index: exit code and document."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main([*args, *TARGET, "--index-url", index.url, "--cache-dir", str(cache), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    doc: dict[str, object] = json.loads(out)
    return code, doc


def test_check_says_degraded_and_fits(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside hostpkg 2.0 the import works and `_ops` is lost: degraded, exit 1, the finding a
    degradation naming the symbol; beside 1.1 it fits, exit 0."""
    code, doc = run(capsys, monkeypatch, loopback_index, tmp_path, "check", "softpkg==1.0",
                    "--with", "hostpkg==2.0")
    assert (code, doc["verdict"]) == (1, "degraded")
    [finding] = doc["findings"]  # type: ignore[misc]
    assert finding["effect"] == "degrades" and finding["module"] == "softpkg._ops"
    assert INT_FORM in json.dumps(finding)
    imports = {i["name"]: i for i in doc["imports"]}  # type: ignore[attr-defined]
    assert imports["softpkg"]["loads"] is True
    code, doc = run(capsys, monkeypatch, loopback_index, tmp_path, "check", "softpkg==1.0",
                    "--with", "hostpkg==1.1")
    assert (code, doc["verdict"], doc["findings"]) == (0, "fits", [])


def test_the_api_gives_the_same_word(loopback_index: LoopbackIndex, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    report = abifit.check("softpkg==1.0", with_="hostpkg==2.0", python_version="3.11",
                          platforms=["linux_x86_64"], index_url=loopback_index.url,
                          cache_dir=tmp_path)
    assert report.verdict == abifit.Verdict.DEGRADED
    assert [f.effect for f in report.findings] == [abifit.Effect.DEGRADES]


def test_matrix_shows_degraded_as_its_own_cell(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, doc = run(capsys, monkeypatch, loopback_index, tmp_path, "matrix", "softpkg==1.0",
                    "--against", "hostpkg>=1")
    cells = {c["version"]: c["verdict"] for c in doc["rows"]}  # type: ignore[attr-defined]
    assert cells == {"2.0": "degraded", "1.1": "fits", "1.0": "fits"}
    assert code == 0  # a host release fits


def test_resolve_never_chooses_a_degraded_set(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The metadata admits hostpkg 2.0, the newest; resolve walks back to 1.1 and says why."""
    code, doc = run(capsys, monkeypatch, loopback_index, tmp_path, "resolve", "softpkg",
                    "hostpkg")
    pins = {p["name"]: p for p in doc["pins"]}  # type: ignore[attr-defined]
    assert code == 0 and pins["hostpkg"]["version"] == "1.1"
    [rejected] = pins["hostpkg"]["newer"]
    assert rejected["version"] == "2.0" and INT_FORM in rejected["reason"]
    assert doc["set_check"]["verdict"] == "fits"  # type: ignore[index]


def test_doctor_on_the_installed_pair_agrees_with_real_imports(
        loopback_index: LoopbackIndex, tmp_path: Path) -> None:
    """pip installs softpkg 1.0 and hostpkg 2.0 into a fresh venv; doctor says degraded, exit 1,
    and every real import and load of `--verify` agrees (`import softpkg` works)."""
    wheels = []
    for name, version in (("softpkg", "1.0"), ("hostpkg", "2.0")):
        path = tmp_path / f"{name}-{version}-{TAG}.whl"
        path.write_bytes(loopback_index.files[path.name])
        wheels.append(path)
    python = venv_with_wheels(tmp_path / "venv", wheels)
    done = subprocess.run([sys.executable, "-m", "abifit", "doctor", "--python", python,
                           "--json", "--verify", "--no-index", "--no-cache"],
                          capture_output=True, text=True, env=clean_environ(), timeout=300,
                          check=False)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "degraded"
    assert [(f["module"], f["effect"]) for f in doc["findings"]] == [("softpkg._ops", "degrades")]
    checks = {c["name"]: c for c in doc["import_checks"]}
    assert checks["softpkg"]["actual_works"] is True
    assert all(c["agrees"] for c in doc["import_checks"]), doc["import_checks"]
    loads = {v["module"]: v for v in doc["verification"]}
    assert loads["softpkg._ops"]["actual_loads"] is False
    assert all(v["agrees"] for v in doc["verification"]), doc["verification"]
