"""NumPy's import contract, judged like a real import: a fixture matrix of extension modules
built here against NumPy 1.26's and NumPy 2.2's headers (the latter for three feature versions:
the default, `NPY_TARGET_VERSION` 1.23 and 2.0), each imported for real beside NumPy 1.23.5,
1.26.4 and 2.2.6 in a fresh process (twice: the runs must agree), and checked by `abifit doctor
--verify` on the same environment.

The NumPys live in venvs under ~/.cache/abifit-tests (`numpy-X`, made once by pip from the
configured index, about 60 MB each); each environment checked is a fresh venv that sees one of
them through a `.pth` file and holds the fixture distribution `npfix` (its modules, and a
RECORD and METADATA that requires numpy). CPython 3.11 is needed (NumPy 1.23 and 1.26 have
no wheels for 3.13); elsewhere the tests are skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from abifit.formats.elf import parse_elf
from abifit.formats.numpyapi import read_numpy_use
from abifit.formats.sources import FileSource
from abifit.sim.numpyabi import api_version
from conftest import CACHE, _create_venv, _pip_install, _python311
from helpers import FIXTURES, schema, validate
from venvs import clean_environ

SOURCE = FIXTURES / "numpy" / "npmod.c"
SCHEMA = schema("doctor")
NUMPYS = ("1.23.5", "1.26.4", "2.2.6")


@dataclass(frozen=True, slots=True)
class Build:
    """A fixture module: the NumPy whose headers built it, the flags, and what its bytes say."""

    headers: str
    flags: tuple[str, ...]
    major: int
    feature: str | None


BUILDS = {
    "np1": Build("1.26.4", (), 1, None),
    "np2": Build("2.2.6", (), 2, "1.20"),  # 2.2's default target: the C API of 1.21 ("1.20")
    "np2t123": Build("2.2.6", ("-DNPY_TARGET_VERSION=NPY_1_23_API_VERSION",), 2, "1.23"),
    "np2t20": Build("2.2.6", ("-DNPY_TARGET_VERSION=NPY_2_0_API_VERSION",), 2, "2.0"),
}

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module")
def python() -> str:
    found = _python311()
    if found is None:
        pytest.skip("CPython 3.11 is needed: NumPy 1.23 and 1.26 have no wheels for newer ones")
    return found


@pytest.fixture(scope="module")
def numpy_sites(python: str) -> dict[str, Path]:
    """The site-packages of a cached venv per NumPy release."""
    def install(version: str) -> None:
        def fill(venv: Path) -> None:
            done = _pip_install(venv, f"numpy=={version}")
            if done.returncode != 0:
                pytest.fail(f"pip could not install numpy=={version}:\n{done.stderr.strip()}")
        _create_venv(CACHE / f"numpy-{version}", python, fill)

    for version in NUMPYS:
        install(version)
    return {v: _site(CACHE / f"numpy-{v}") for v in NUMPYS}


@pytest.fixture(scope="module")
def python_build(python: str) -> tuple[str, str]:
    """The interpreter's include directory and extension module suffix."""
    include, suffix = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
         "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, check=True).stdout.split()
    return include, suffix


@pytest.fixture(scope="module")
def modules(python_build: tuple[str, str], numpy_sites: dict[str, Path],
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture modules, compiled against each build's NumPy headers."""
    out = tmp_path_factory.mktemp("npfix")
    include, suffix = python_build
    built = {}
    for name, build in BUILDS.items():
        built[name] = compile_module(name, build, numpy_sites, include, out / f"{name}{suffix}")
    return built


def compile_module(name: str, build: Build, numpy_sites: dict[str, Path], include: str,
                   target: Path) -> Path:
    """`npmod.c` as module `name`, against the headers of `build`."""
    numpy = numpy_sites[build.headers] / "numpy"
    headers = numpy / ("_core" if build.major == 2 else "core") / "include"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{include}", f"-I{headers}",
                    f"-DMODNAME={name}", *build.flags, str(SOURCE), "-o", str(target)],
                   check=True)
    return target


@pytest.fixture(scope="module")
def environments(python: str, numpy_sites: dict[str, Path], modules: dict[str, Path],
                 python_build: tuple[str, str],
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A fresh venv per NumPy release that sees it (a `.pth`) and holds `npfix` and the
    `USERS`: its interpreter, by release."""
    include, suffix = python_build
    own = compile_module("own", BUILDS["np1"], numpy_sites, include,
                         tmp_path_factory.mktemp("own") / f"own{suffix}")
    out = {}
    for version, numpy_site in numpy_sites.items():
        venv = tmp_path_factory.mktemp(f"env-{version}")
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = _site(venv)
        (site / "numpy-release.pth").write_text(f"{numpy_site}\n")
        package = site / "npfix"
        package.mkdir()
        (package / "__init__.py").write_text("")
        for path in modules.values():
            shutil.copy(path, package / path.name)
        info = site / "npfix-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: npfix\nVersion: 1.0\nRequires-Dist: numpy\n")
        files = ["npfix/__init__.py", *(f"npfix/{p.name}" for p in modules.values()),
                 "npfix-1.0.dist-info/METADATA", "npfix-1.0.dist-info/RECORD"]
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
        for user, init in USERS.items():
            add_user(site, user, init, own)
        out[version] = str(venv / "bin" / "python")
    return out


# Two distributions that require npfix and hold a module built with NumPy 1.x headers of their
# own: one imports npfix's first, the other its own first (the line numbers matter).
USERS = {
    "npforeign": "import os\nfrom npfix import np2t20\nfrom npfix import np1\nfrom . import own\n",
    "npownfirst": "import os\nfrom . import own\nfrom npfix import np1\n",
}


def add_user(site: Path, name: str, init: str, module: Path) -> None:
    """Distribution `name` 1.0 requiring npfix and numpy: its `__init__.py` is `init`, and
    `module` (`own`) its extension module."""
    package = site / name
    package.mkdir()
    (package / "__init__.py").write_text(init)
    own = module.name
    shutil.copy(module, package / own)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: npfix\n"
        "Requires-Dist: numpy\n")
    files = [f"{name}/__init__.py", f"{name}/{own}", f"{name}-1.0.dist-info/METADATA",
             f"{name}-1.0.dist-info/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def real_import(python: str, module: str) -> str | None:
    """`import npfix.MODULE` in a fresh process: None when it works, else the exception
    ("ImportError: ...") as the last line of the traceback shows it."""
    done = subprocess.run([python, "-c", f"import npfix.{module}"], capture_output=True,
                          text=True, env=clean_environ(), cwd="/", timeout=120, check=False)
    if done.returncode == 0:
        return None
    return done.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def doctors(environments: dict[str, str]) -> dict[str, dict[str, object]]:
    """`abifit doctor npfix --json --verify` on each environment."""
    out = {}
    for version, python in environments.items():
        done = subprocess.run(
            [sys.executable, "-m", "abifit", "doctor", "npfix", "--python", python, "--json",
             "--verify", "--no-index", "--no-cache"],
            capture_output=True, text=True, env=clean_environ(), timeout=300, check=False)
        assert done.returncode in (0, 1), done.stderr
        out[version] = json.loads(done.stdout)
        validate(out[version], SCHEMA)
    return out


def test_the_bytes_say_the_headers_and_the_feature_version(modules: dict[str, Path]) -> None:
    """What `formats.numpyapi` reads of each fixture: its headers' major release and, for 2.x
    headers, the oldest NumPy it accepts."""
    for name, path in modules.items():
        with FileSource(str(path)) as source:
            use = read_numpy_use(source, parse_elf(source).sections)
        assert use is not None and use.imports_api, name
        assert (use.headers, use.feature) == (BUILDS[name].major, BUILDS[name].feature), name
        expected = "numpy._core" if use.headers == 2 else "numpy.core"
        assert use.array_error == f"{expected}.multiarray failed to import"


def test_the_c_api_table_is_numpys_own(numpy_sites: dict[str, Path]) -> None:
    """`data/numpy_capi.json` gives each NumPy installed here the C API its headers say it
    provides (`NPY_API_VERSION`), and agrees with every `NPY_X_Y_API_VERSION` of the 2.x
    headers (1.x headers before 1.25 left 1.9 to 1.19 at 0x8: placeholders, never a running
    NumPy's version)."""
    import re

    for version, site in numpy_sites.items():
        include = next((site / "numpy").glob("*core/include/numpy"))
        provided = re.search(r"#define NPY_API_VERSION (0x\w+)",
                             (include / "_numpyconfig.h").read_text())
        assert provided is not None and api_version(version) == int(provided[1], 16), version
        if version.startswith("2."):
            for major, minor, value in re.findall(r"#define NPY_(\d+)_(\d+)_API_VERSION (0x\w+)",
                                                  (include / "numpyconfig.h").read_text()):
                assert api_version(f"{major}.{minor}") == int(value, 16), (major, minor)


@pytest.mark.parametrize("version", NUMPYS)
@pytest.mark.parametrize("module", list(BUILDS))
def test_each_pairing_is_judged_like_the_real_import(
        module: str, version: str, environments: dict[str, str],
        doctors: dict[str, dict[str, object]]) -> None:
    """The real import (twice, agreeing) and doctor's prediction: the module's verdict, the
    error the user sees, and --verify's real load of it agreeing."""
    python = environments[version]
    real = real_import(python, module)
    assert real_import(python, module) == real, "two real imports disagree"
    doc = doctors[version]
    [status] = [m for m in doc["modules"] if m["module"] == f"npfix.{module}"]  # type: ignore[attr-defined]
    assert status["loads"] is (real is None), (status, real)
    if real is not None:
        assert status["error"] == real
        [verdict] = [i for i in doc["imports"] if i["name"] == f"npfix.{module}"]  # type: ignore[attr-defined]
        assert verdict["error"] == real
    [check] = [v for v in doc["verification"] if v["module"] == f"npfix.{module}"]  # type: ignore[attr-defined]
    assert check["agrees"] is True, check


def test_an_import_fails_where_it_first_meets_a_broken_module(
        environments: dict[str, str]) -> None:
    """`import npforeign` (the whole environment checked) beside NumPy 2.2.6 runs into npfix's
    module built with NumPy 1.x headers (through `from npfix import np1`) before its own: the
    verdict names npfix.np1, as the real traceback's last line of npforeign/__init__.py does;
    npownfirst imports its own first, and the verdict names its own."""
    python = environments["2.2.6"]
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", "--python", python, "--json",
         "--no-index", "--no-cache"],
        capture_output=True, text=True, env=clean_environ(), timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    verdicts = {i["name"]: i for i in json.loads(done.stdout)["imports"]}
    for user, init in USERS.items():
        runs = [subprocess.run([python, "-c", f"import {user}"], capture_output=True,
                               text=True, env=clean_environ(), cwd="/", timeout=120,
                               check=False).stderr for _ in range(2)]
        assert runs[0] == runs[1] and runs[0], "two real imports disagree"
        frame = [ln for ln in runs[0].splitlines() if f"{user}/__init__.py" in ln][-1]
        line = int(frame.split("line ")[1].split(",")[0])
        failing = init.splitlines()[line - 1]
        expected = "npfix.np1" if "np1" in failing else f"{user}.own"
        assert verdicts[user]["loads"] is False
        assert verdicts[user]["cause"] == expected, (user, failing, verdicts[user])
        assert verdicts[user]["error"] == runs[0].strip().splitlines()[-1]


def on_index(files: dict[str, bytes], args: list[str], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """`abifit ARGS --json` for CPython 3.11 on linux_x86_64 against a loopback index serving
    a distribution made of `files` (named by their first directory, version 1.0, requiring
    numpy) and a numpy wheel of each release of `NUMPYS` holding its metadata only (the
    contract needs only numpy's release): the exit code and the document."""
    from abifit.cli import main
    from helpers import make_wheel
    from httpserver import LoopbackServer, publish_index

    tag = "cp311-cp311-linux_x86_64"
    name = next(iter(files)).split("/")[0]
    projects = {name: [make_wheel(name, "1.0", files, requires=("numpy",), tag=tag)],
                "numpy": [make_wheel("numpy", v, {"numpy/__init__.py": b""}, tag=tag)
                          for v in NUMPYS]}
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    with LoopbackServer() as server:
        index = publish_index(server, projects)
        code = main([*args, "--python-version", "3.11", "--platform", "linux_x86_64",
                     "--index-url", index.url, "--cache-dir", str(tmp_path), "--json"])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, doc


@pytest.mark.parametrize("version", ["1.26.4", "2.2.6"])
def test_check_judges_the_wheels_alike(version: str, modules: dict[str, Path],
                                       environments: dict[str, str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`abifit check npfix --with numpy==X` from a loopback index (npfix's wheel holds the
    fixture modules; numpy's, its metadata: the contract needs only its release) says what the
    real imports beside that NumPy do, module by module."""
    files = {"npfix/__init__.py": b"",
             **{f"npfix/{p.name}": p.read_bytes() for p in modules.values()}}
    code, doc = on_index(files, ["check", "npfix==1.0", "--with", f"numpy=={version}"],
                         tmp_path, monkeypatch, capsys)
    validate(doc, schema("check"))
    statuses = {m["module"]: m for m in doc["modules"]}
    for module in BUILDS:
        real = real_import(environments[version], module)
        status = statuses[f"npfix.{module}"]
        assert status["loads"] is (real is None), (module, status, real)
        assert real is None or status["error"] == real, (module, status, real)
    assert code == (0 if all(m["loads"] for m in doc["modules"]) else 1)


def test_resolve_learns_the_numpy_a_set_needs(modules: dict[str, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """npone holds only the module built with NumPy 1.x headers and requires any numpy: the
    newest numpy (2.2.6) breaks its contract, so resolve learns numpy<2 from the whole-set
    check and chooses 1.26.4, saying why 2.2.6 was not chosen."""
    np1 = modules["np1"]
    files = {"npone/__init__.py": b"", f"npone/{np1.name}": np1.read_bytes()}
    code, doc = on_index(files, ["resolve", "npone", "numpy"], tmp_path, monkeypatch, capsys)
    validate(doc, schema("resolve"))
    pins = {p["name"]: p for p in doc["pins"]}
    assert code == 0 and pins["numpy"]["version"] == "1.26.4"
    [newer] = pins["numpy"]["newer"]
    assert newer["version"] == "2.2.6"
    assert newer["reason"] == "the NumPy C API of npone 1.0's modules needs numpy<2"
    assert doc["set_check"]["verdict"] == "fits"


def test_explain_names_the_module_of_a_pasted_numpy_error(
        environments: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The banner and error of a real failed import (np1 beside NumPy 2.2.6), pasted: explain
    recognises NumPy's contract, confirms it in the environment and names the module and the
    fix."""
    from abifit.cli import main
    from abifit.formats.errortext import NumpyContract, read_clues

    python = environments["2.2.6"]
    done = subprocess.run([python, "-c", "import npfix.np1"], capture_output=True, text=True,
                          env=clean_environ(), cwd="/", timeout=120, check=False)
    assert "compiled using NumPy 1.x cannot be run in" in done.stderr
    clues = read_clues(done.stderr)
    assert clues and all(isinstance(c, NumpyContract) for c in clues)
    code = main(["explain", done.stderr, "--python", python, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    first = doc["explanations"][0]
    assert first["kind"] == "numpy-c-api" and first["verdict"] == "confirmed"
    assert first["object"].endswith(f"npfix/np1{Path(first['object']).name[3:]}")
    assert "numpy<2" in first["fix"]


def test_the_first_release_built_against_numpy2_is_named(
        python_build: tuple[str, str], numpy_sites: dict[str, Path], tmp_path: Path) -> None:
    """npgen 1.0 and 1.1 hold a module built with NumPy 1.26's headers, 1.2 and 2.0 the same
    module built with 2.2's: beside NumPy 2, the fix names npgen>=1.2, found by reading the
    module in the later wheels on a loopback index."""
    from abifit.engines.numpyfix import first_numpy2_release
    from abifit.remote.diskcache import Cache
    from abifit.remote.http import HttpClient
    from abifit.remote.packageindex import IndexConfig, PackageIndex, Target
    from abifit.remote.pagefetch import cached_fetch
    from abifit.remote.runcontext import RemoteContext
    from helpers import make_wheel
    from httpserver import LoopbackServer, publish_index

    include, suffix = python_build
    built = {major: compile_module("core", BUILDS["np1" if major == 1 else "np2"], numpy_sites,
                                   include, tmp_path / f"{major}" / f"core{suffix}")
             for major in (1, 2) if (tmp_path / f"{major}").mkdir() is None}
    tag = "cp311-cp311-linux_x86_64"
    wheels = [make_wheel("npgen", v, {"npgen/__init__.py": b"",
                                      f"npgen/core{suffix}": built[major].read_bytes()},
                         requires=("numpy",), tag=tag)
              for v, major in (("1.0", 1), ("1.1", 1), ("1.2", 2), ("2.0", 2))]
    with LoopbackServer() as server:
        index = publish_index(server, {"npgen": wheels})
        client, cache = HttpClient(), Cache(tmp_path / "cache")
        ctx = RemoteContext(PackageIndex(cached_fetch(client, cache),
                                         IndexConfig(index_url=index.url)),
                            client, cache, Target((3, 11), platforms=("linux_x86_64",)))
        assert first_numpy2_release("npgen", "1.0", f"npgen/core{suffix}", ctx) == "1.2"
        assert first_numpy2_release("npgen", "1.1", f"npgen/core{suffix}", ctx) == "1.2"
        assert first_numpy2_release("npgen", "2.0", f"npgen/core{suffix}", ctx) is None


def test_a_snapshot_records_each_modules_numpy_c_api(environments: dict[str, str],
                                                    tmp_path: Path) -> None:
    """`abifit snapshot` writes the headers and feature version of each module that uses
    NumPy's C API, as its bytes say, and reads them back."""
    from abifit.formats.pylock import loads

    lock = tmp_path / "pylock.toml"
    done = subprocess.run([sys.executable, "-m", "abifit", "snapshot", "--python",
                           environments["1.26.4"], "-o", str(lock), "--no-cache"],
                          capture_output=True, text=True, env=clean_environ(), timeout=300,
                          check=False)
    assert done.returncode in (0, 1), done.stderr
    records = {m.module: m for m in loads(lock.read_text(), str(lock)).modules}
    for name, build in BUILDS.items():
        record = records[f"npfix.{name}"]
        assert (record.numpy_headers, record.numpy_feature) == (build.major, build.feature)
