"""`abifit index add|export|import|info` against a real loopback index serving wheels built
here: fpkg 1.0 defines `f(int)`, 2.0 `f(unsigned int)`. Adding reads each wheel once (a second
run fetches nothing and records nothing); an export imports into an empty cache with the same
answers; a damaged, cut or foreign file is refused with one error line and changes nothing."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.remote.store import SymbolStore
from fixtures.build import compile_c
from helpers import FIXTURES, schema, validate
from httpserver import LoopbackIndex, Projects

SOURCES = FIXTURES / "store"
SCHEMA = schema("index")
TAG = "py3-none-linux_x86_64"
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def make_wheel(version: str, lib: bytes) -> tuple[str, bytes]:
    dist = f"fpkg-{version}.dist-info"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fpkg/__init__.py", "")
        zf.writestr("fpkg/lib/libf.so", lib)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: fpkg\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {TAG}\n")
    return f"fpkg-{version}-{TAG}.whl", buffer.getvalue()


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: fpkg 1.0 and 2.0."""
    root = tmp_path_factory.mktemp("fpkg")
    libs = {v: compile_c(SOURCES / f"f_{v}.cpp", root / v / "libf.so", cxx=True,
                         soname="libf.so").read_bytes() for v in ("v1", "v2")}
    return {"fpkg": [make_wheel("1.0", libs["v1"]), make_wheel("2.0", libs["v2"])]}


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path,
        *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main(["index", *args, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def add(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path,
        index: LoopbackIndex, *args: str) -> dict[str, object]:
    code, out, err = run(capsys, monkeypatch, cache, "add", *args, "--index-url", index.url,
                         *TARGET, "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate(doc, SCHEMA)
    result = doc["result"]
    assert isinstance(result, dict)
    return result


def opened(cache: Path) -> SymbolStore:
    store = SymbolStore.open(cache)
    assert store is not None
    return store


def test_add_records_once_and_a_second_run_fetches_nothing(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`index add fpkg==1.0` reads the wheel by ranges and records its member; run again, it
    finds the wheel in the store, fetches 0 bytes and records nothing."""
    first = add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg==1.0")
    [wheel] = first["wheels"]  # type: ignore[misc]
    assert (wheel["status"], wheel["members"], wheel["version"]) == ("recorded", 1, "1.0")
    assert wheel["symbols"] > 0 and wheel["bytes_fetched"] > 0
    second = add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg==1.0")
    [again] = second["wheels"]  # type: ignore[misc]
    assert (again["status"], again["bytes_fetched"], second["bytes_fetched"]) == (
        "present", 0, 0)
    with opened(tmp_path) as store:
        assert [s.obj.version for s in store.symbols("fpkg", "_Z1fi")] == ["1.0"]


def test_versions_records_every_release_and_skips_those_held(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`index add fpkg --versions '>=1.0'` records 2.0 and skips 1.0, already there; the store
    then answers a glob with both manglings of f."""
    add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg==1.0")
    result = add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg", "--versions", ">=1.0")
    assert [(w["version"], w["status"]) for w in result["wheels"]] == [  # type: ignore[attr-defined]
        ("1.0", "present"), ("2.0", "recorded")]
    with opened(tmp_path) as store:
        assert [(s.name, s.obj.version) for s in store.symbols("fpkg", "_Z1f*")] == [
            ("_Z1fi", "1.0"), ("_Z1fj", "2.0")]


def test_a_store_rebuilt_from_the_view_cache_fetches_nothing(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With the store removed but the cached views kept, adding again reads the views from the
    cache: the wheel is recorded, with no wheel bytes fetched."""
    add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg==2.0")
    (tmp_path / "symbols-v2.sqlite").unlink()
    result = add(capsys, monkeypatch, tmp_path, loopback_index, "fpkg==2.0")
    [wheel] = result["wheels"]  # type: ignore[misc]
    assert (wheel["status"], wheel["bytes_fetched"]) == ("recorded", 0)


def test_export_then_import_into_an_empty_cache(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An export imported into another cache answers the same queries; importing it again
    records nothing; `index info` shows the package and its releases."""
    here, there, file = tmp_path / "here", tmp_path / "there", tmp_path / "fpkg.abifit-symbols"
    add(capsys, monkeypatch, here, loopback_index, "fpkg", "--versions", ">=1.0")
    code, out, err = run(capsys, monkeypatch, here, "export", str(file), "--json")
    assert code == 0, err
    validate(json.loads(out), SCHEMA)
    code, out, err = run(capsys, monkeypatch, there, "import", str(file), "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert (doc["result"]["wheels"], doc["result"]["skipped"]) == (2, 0)
    code, out, _err = run(capsys, monkeypatch, there, "import", str(file))
    assert (code, out) == (0, f"recorded 0 wheel(s) from {file} in "
                           f"{there / 'symbols-v2.sqlite'}; 2 there already\n")
    with opened(here) as a, opened(there) as b:
        for pattern in ("_Z1f*", "puts", "*"):
            assert a.symbols("fpkg", pattern) == b.symbols("fpkg", pattern)
    code, out, _err = run(capsys, monkeypatch, there, "info")
    assert code == 0 and out.startswith("fpkg ") and "2 release(s)" in out
    code, out, _err = run(capsys, monkeypatch, there, "info", "--json")
    validate(json.loads(out), SCHEMA)


def _sqlite_file(path: Path) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["flipped-byte", "truncated", "zip", "sqlite", "missing"])
def test_a_bad_file_is_refused_and_changes_nothing(
        loopback_index: LoopbackIndex, tmp_path: Path, damage: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged, cut or foreign file (a zip, an SQLite database), or none: one `error: FILE:`
    line, exit 2, and the store holds what it held."""
    source, target = tmp_path / "source", tmp_path / "target"
    good = tmp_path / "good.bin"
    add(capsys, monkeypatch, source, loopback_index, "fpkg", "--versions", ">=1.0")
    assert run(capsys, monkeypatch, source, "export", str(good))[0] == 0
    add(capsys, monkeypatch, target, loopback_index, "fpkg==1.0")
    with opened(target) as store:
        before = store.dump()
    data = good.read_bytes()
    bad = tmp_path / "bad.bin"
    if damage == "flipped-byte":
        bad.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "truncated":
        bad.write_bytes(data[:-7])
    elif damage == "zip":
        bad.write_bytes(make_wheel("3.0", b"\x7fELF")[1])
    elif damage == "sqlite":
        bad.write_bytes(_sqlite_file(tmp_path / "other.sqlite"))
    code, out, err = run(capsys, monkeypatch, target, "import", str(bad))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {bad}: "), err
    with opened(target) as store:
        assert store.dump() == before
