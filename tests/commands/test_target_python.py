"""The target interpreter: a wheel checked for another Python than the one running abifit is
simulated in a process of that Python's interpreter when this machine has one (PATH, pyenv,
uv); else in this interpreter's process with the C API of abifit's table of CPython's exports
for that version (`sim.pythonapi`, `data/cpython_exports.json`); else, for a version outside
the table, with that version's C API left unchecked, never reported as missing."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.check import ApiCheck, _api_key, target_interpreter
from abifit.formats.elf import SHN_UNDEF, Binding, ElfImage, SymbolType, parse_elf
from abifit.formats.sources import FileSource
from abifit.host.environment import interpreter_candidates
from abifit.host.localfs import LocalObjects, is_elf_file
from abifit.remote.packageindex import Target
from abifit.sim import pythonapi
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel

SOURCE = FIXTURES / "target" / "ext312.c"
FAKE_PYTHON = SOURCE.parent / "fakepython.c"
needs_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                               reason="the fixture needs a 3.12-only symbol absent from 3.11")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel whose extension module needs PyDict_Unwatch (CPython 3.12 and later)."""
    root = tmp_path_factory.mktemp("target")
    so = compile_c(SOURCE, root / "_ext312.abi3.so")
    name, data = make_wheel("ext312", "1.0", {"ext312/__init__.py": b"",
                                              "ext312/_ext312.abi3.so": so.read_bytes()},
                            tag="cp310-abi3-linux_x86_64")
    (root / name).write_bytes(data)
    return root / name


def _check(wheel: Path, version: str, capsys: pytest.CaptureFixture[str],
           ) -> tuple[int, dict[str, object]]:
    code = main(["check", str(wheel), "--python-version", version, "--platform",
                 "linux_x86_64", "--no-cache", "--offline", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _no_interpreters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))


@needs_311
def test_this_python_fails_on_the_newer_api(wheel: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """For the running 3.11, the module fails naming the 3.12 symbol it needs."""
    code, doc = _check(wheel, "3.11", capsys)
    assert code == 1 and doc["verdict"] == "fails"
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert {f["symbol"] for f in findings} == {"PyDict_Unwatch", "PyDict_Watch"}


def _notes(doc: dict[str, object], needle: str) -> list[str]:
    notes = doc["notes"]
    assert isinstance(notes, list)
    return [str(n) for n in notes if needle in str(n)]


def _symbols(doc: dict[str, object]) -> set[str]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return {f["symbol"] for f in findings}


@pytest.mark.skipif(sys.version_info[:2] == (3, 12), reason="3.12 is this interpreter")
def test_without_an_interpreter_the_table_checks_the_api(
        wheel: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """For 3.12 with no 3.12 interpreter here, the module's C API is bound against the table
    of CPython 3.12's exports: it fits, and a note says so (nothing is left unchecked)."""
    _no_interpreters(monkeypatch, tmp_path)
    code, doc = _check(wheel, "3.12", capsys)
    assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    assert _notes(doc, "table") == [
        "no Python 3.12 interpreter on this machine: its C API was checked against abifit's "
        "table of CPython 3.12's exports (3.12.1); give --python with a 3.12 interpreter to "
        "check against it"]
    assert not _notes(doc, "not checked")


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.11"])
def test_an_older_version_fails_naming_the_newer_api(
        wheel: Path, version: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """For a version before 3.12 with no interpreter of it here, the module fails naming the
    3.12 symbols it needs: through the table, or through this interpreter for its own
    version."""
    _no_interpreters(monkeypatch, tmp_path)
    code, doc = _check(wheel, version, capsys)
    assert code == 1 and doc["verdict"] == "fails"
    assert _symbols(doc) == {"PyDict_Unwatch", "PyDict_Watch"}
    mine = sys.version_info[:2] == tuple(map(int, version.split(".")))
    assert len(_notes(doc, f"table of CPython {version}'s exports")) == (0 if mine else 1)
    findings = doc["findings"]
    assert isinstance(findings, list)
    for finding in findings:  # the table's history, for an interpreter or the table alike
        assert f"{finding['symbol']}: introduced in CPython 3.12." in finding["explanation"]


@pytest.fixture(scope="module")
def wheel310(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel whose extension module needs Py_NewRef (CPython 3.10 and later)."""
    root = tmp_path_factory.mktemp("target310")
    so = compile_c(SOURCE.parent / "ext310.c", root / "_ext310.abi3.so")
    name, data = make_wheel("ext310", "1.0", {"ext310/__init__.py": b"",
                                              "ext310/_ext310.abi3.so": so.read_bytes()},
                            tag="cp39-abi3-linux_x86_64")
    (root / name).write_bytes(data)
    return root / name


@pytest.mark.parametrize(("version", "fits"), [("3.9", False), ("3.10", True)])
def test_the_table_takes_away_what_this_interpreter_has(
        wheel310: Path, version: str, fits: bool, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A name this (newer) interpreter exports but the target version does not is missing:
    a module needing Py_NewRef fails for 3.9 and fits for 3.10."""
    _no_interpreters(monkeypatch, tmp_path)
    code, doc = _check(wheel310, version, capsys)
    assert (code, doc["verdict"]) == ((0, "fits") if fits else (1, "fails")), doc["findings"]
    assert _symbols(doc) == (set() if fits else {"Py_NewRef"})


@pytest.mark.parametrize("version", ["3.8", "3.16"])
def test_outside_the_table_the_api_is_not_checked(
        wheel: Path, version: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """For a version outside the table with no interpreter of it here, the module fits and a
    note names the API symbols that were not checked."""
    _no_interpreters(monkeypatch, tmp_path)
    code, doc = _check(wheel, version, capsys)
    assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    notes = _notes(doc, "not checked")
    assert len(notes) == 1 and not _notes(doc, "exports (")
    assert f"no Python {version} interpreter" in notes[0] and "PyDict_Unwatch" in notes[0]


def test_where_the_api_comes_from(tmp_path: Path) -> None:
    """With no interpreter of the target version: the table for a version in it, unchecked
    outside it and for another implementation; and the result's key tells the three apart."""
    empty = {"PATH": str(tmp_path), "HOME": str(tmp_path), "PYENV_ROOT": str(tmp_path / "p"),
             "UV_PYTHON_INSTALL_DIR": str(tmp_path / "uv")}
    other = (3, 13) if sys.version_info[:2] != (3, 13) else (3, 12)
    cases = {Target(other, platforms=()): ApiCheck.TABLE,
             Target((3, 16), platforms=()): ApiCheck.UNCHECKED,
             Target(other, platforms=(), implementation="pp"): ApiCheck.UNCHECKED,
             Target(sys.version_info[:2], platforms=()): ApiCheck.INTERPRETER}
    for target, api in cases.items():
        assert target_interpreter(target, None, empty) == (sys.executable, api)
    keys = {_api_key(Target(other, platforms=()), api) for api in ApiCheck}
    assert len(keys) == 3


@needs_311
def test_a_found_interpreter_starts_the_process(
        wheel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """For 3.12 with a 3.12 interpreter on this machine, the process starts from it and the
    module's C API is bound against its symbols: it fits, with no symbol left unchecked."""
    found = [c for c in interpreter_candidates((3, 12), os.environ)
             if is_elf_file(os.path.realpath(c))]
    if not found:
        pytest.skip("no Python 3.12 interpreter on this machine")
    code, doc = _check(wheel, "3.12", capsys)
    assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    assert f"the target's interpreter: {os.path.realpath(found[0])}" in doc["notes"]
    assert not [n for n in doc["notes"] if "not checked" in str(n)]  # type: ignore[union-attr]


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_candidates_prefer_path_then_the_newest_managed_one(tmp_path: Path) -> None:
    """PATH's pythonX.Y first, then pyenv's and uv's installs of X.Y, newest patch first;
    other versions and missing files are not candidates."""
    bin_dir, pyenv, uv = tmp_path / "bin", tmp_path / "pyenv", tmp_path / "uv"
    for path in (bin_dir / "python3.12", pyenv / "versions/3.12.9/bin/python3.12",
                 pyenv / "versions/3.12.10/bin/python3.12",
                 pyenv / "versions/3.13.1/bin/python3.13",
                 uv / "cpython-3.12.4-linux-x86_64-gnu/bin/python3.12"):
        _executable(path)
    env = {"PATH": str(bin_dir), "PYENV_ROOT": str(pyenv), "UV_PYTHON_INSTALL_DIR": str(uv),
           "HOME": str(tmp_path)}
    assert interpreter_candidates((3, 12), env) == [
        str(bin_dir / "python3.12"), str(pyenv / "versions/3.12.10/bin/python3.12"),
        str(pyenv / "versions/3.12.9/bin/python3.12"),
        str(uv / "cpython-3.12.4-linux-x86_64-gnu/bin/python3.12")]
    assert interpreter_candidates((3, 14), env) == []


# --- the table of CPython's exports ----------------------------------------------------------


def test_the_table_holds_api_names_of_3_9_to_3_14() -> None:
    """Every name of the table is a C API name; its sources cover 3.9 to 3.14, each with a
    release and a sha256, and their counts are the names each version exports; `introduced`
    is the first version exporting a name."""
    table = pythonapi.load_table()
    assert table.versions == tuple((3, minor) for minor in range(9, 15))
    assert sorted(table.sources) == list(table.versions)
    raw = json.loads((pythonapi.DATA / "cpython_exports.json").read_text())
    assert raw["pattern"] == pythonapi.PATTERN
    for entry in raw["sources"]:
        version = tuple(map(int, entry["version"].split(".")))
        assert entry["release"].startswith(entry["version"] + ".")
        assert len(entry["sha256"]) == 64 and int(entry["sha256"], 16) >= 0
        assert len(pythonapi.exported(version) or ()) == entry["symbols"]
    for name, symbol in table.symbols.items():
        assert re.fullmatch(r"_?Py[A-Za-z_]\w*|PY_TIMEOUT_MAX", name), name
        assert not name.startswith("PyInit_")
        assert symbol.versions and symbol.introduced == symbol.versions[0]
        assert pythonapi.introduced(name) == "{}.{}".format(*symbol.introduced)
    assert pythonapi.exported((3, 8)) is None and pythonapi.exported((3, 15)) is None


@pytest.mark.parametrize(("name", "version", "said"), [
    ("PyDict_Unwatch", (3, 11), "introduced in CPython 3.12"),
    ("PyDict_Unwatch", (3, 12), None),
    ("PyAST_CompileEx", (3, 12), "removed in CPython 3.10"),
    ("_PyTrash_thread_deposit_object", (3, 11),
     "exported by CPython 3.9 to 3.10, 3.13 to 3.14"),
    ("PyDict_Unwatch", (3, 8), None),
    ("no_such_name", (3, 11), None),
], ids=["introduced", "exported", "removed", "gap", "outside", "unknown"])
def test_history_says_why_a_version_lacks_a_name(name: str, version: tuple[int, int],
                                                 said: str | None) -> None:
    """Why a version lacks a name: when it came, when it went, or where it is."""
    assert pythonapi.history(name, version) == said


def _nm_exports(path: str) -> set[str]:
    """The defined dynamic names of a library, as `nm -D --defined-only` lists them."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def _libpython(executable: str) -> tuple[str, str] | None:
    """(release, its shared libpython) of an interpreter; None for a static one."""
    code = ("import sys, sysconfig, os; v = sysconfig.get_config_var; "
            "print('%d.%d.%d' % sys.version_info[:3], "
            "os.path.join(v('LIBDIR') or '', v('INSTSONAME') or ''))")
    out = subprocess.run([executable, "-S", "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    return (out[0], out[1]) if out[1].endswith(".so.1.0") and os.path.isfile(out[1]) else None


def _interpreters() -> list[tuple[tuple[int, int], str, str]]:
    """(version, release, libpython) of every interpreter of a table version on this machine
    (PATH, pyenv, uv) that has a shared libpython, one per file."""
    found: dict[str, tuple[tuple[int, int], str, str]] = {}
    for version in pythonapi.load_table().versions:
        for candidate in interpreter_candidates(version, os.environ):
            real = os.path.realpath(candidate)
            lib = _libpython(real) if is_elf_file(real) else None
            if lib is not None:
                found.setdefault(os.path.realpath(lib[1]), (version, *lib))
    return sorted(found.values())


def test_the_table_agrees_with_nm_on_this_machines_interpreters() -> None:
    """For each interpreter of a table version here, the table's names for that version are
    the API names its libpython exports by `nm -D --defined-only`: all of them for the release
    the table was read from; for another release of that version the public names (those not
    starting with `_`), as patch releases add and remove a few private `_Py` ones."""
    found = _interpreters()
    if not found:
        pytest.skip("no interpreter of a table version with a shared libpython here")
    pattern = re.compile(pythonapi.PATTERN)
    for version, release, lib in found:
        table = pythonapi.exported(version)
        source = pythonapi.source(version)
        assert table is not None and source is not None
        real = {n for n in _nm_exports(lib) if pattern.fullmatch(n)}
        if release == source.release:
            assert real == table, (lib, sorted(real ^ table))
        else:
            public = {n for n in real ^ table if not n.startswith("_")}
            assert not public, (lib, release, sorted(public))


def _fake_python(root: Path, soname: str) -> Path:
    return compile_c(FAKE_PYTHON, root / soname, soname=soname)


def _api_definitions(image: ElfImage) -> dict[str, int]:
    pattern = re.compile(pythonapi.PATTERN)
    return {s.name: int(s.type) for s in image.symbols
            if s.defined and s.binding == Binding.GLOBAL and pattern.fullmatch(s.name)}


def test_with_api_exports_exactly_the_names_given(tmp_path: Path) -> None:
    """An image given a version's API defines those names (functions as functions, data as
    data) and no other API name; its other symbols, its references to libc and the order of
    its relocations stay."""
    path = _fake_python(tmp_path, "libpython3.99.so.1.0")
    image = parse_elf(FileSource(str(path)))
    names = {"PyDict_New": SymbolType.FUNC, "PyDict_Watch": SymbolType.FUNC,
             "PyExc_ValueError": SymbolType.OBJECT}
    changed = pythonapi.with_api(image, names)
    assert _api_definitions(changed) == {n: int(t) for n, t in names.items()}
    kept = {s.name for s in changed.symbols if s.defined}
    assert {"PyInit_posix", "fake_helper"} <= kept and "PyList_New" not in kept
    undefined = {s.name for s in changed.symbols if s.section_index == SHN_UNDEF}
    assert "puts" in undefined
    assert image.relocated_symbols is not None and changed.relocated_symbols is not None
    before = [image.symbols.names[i] for i in image.relocated_symbols]
    after = [changed.symbols.names[i] for i in changed.relocated_symbols]
    assert after == [n for n in before if n in set(changed.symbols.names)]


def test_table_objects_change_only_the_interpreter(tmp_path: Path) -> None:
    """The wrapping `ObjectSource` gives a libpython (by soname) and the executable the
    table's API, each image once; another library is the base's, unchanged."""
    lib = _fake_python(tmp_path / "a", "libpython3.99.so.1.0")
    other = _fake_python(tmp_path / "b", "libother.so.1")
    exe = _fake_python(tmp_path / "c", "python-like")
    base = LocalObjects()
    names = {"PyDict_Watch": SymbolType.FUNC}
    objects = pythonapi.TableApiObjects(base, str(exe), names)
    for path in (lib, exe):
        assert set(_api_definitions(objects.image(str(path)))) == {"PyDict_Watch"}
        assert objects.image(str(path)) is objects.image(str(path))
    assert objects.image(str(other)) is base.image(str(other))
