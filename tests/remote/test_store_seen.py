"""Every view abifit reads goes into the symbol store: `check` and `inspect` note the views
they read as they end (`record_seen`), and the store records them from the cache of views before
it is next queried (`index_seen`). Against a real loopback index serving a wheel built here:
an extension module that needs libg.so, a library nothing loads, and an executable."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.index import open_store
from abifit.remote.store import SymbolStore
from fixtures.build import compile_c
from helpers import FIXTURES
from httpserver import LoopbackIndex, Projects

SOURCES = FIXTURES / "seen"
TAG = "cp311-cp311-linux_x86_64"
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: gpkg 1.0, and hpkg 1.0,
    whose extension module needs gpkg's libg.so."""
    root = tmp_path_factory.mktemp("gpkg")
    libg = compile_c(SOURCES / "libg.c", root / "libg.so", soname="libg.so")
    unused = compile_c(SOURCES / "libunused.c", root / "libunused.so", soname="libunused.so")
    ext = compile_c(SOURCES / "ext.c", root / "_ext.so", libs=[libg], runpath=["$ORIGIN/lib"])
    tool = compile_c(SOURCES / "tool.c", root / "tool", shared=False)
    dist = "gpkg-1.0.dist-info"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("gpkg/__init__.py", "from gpkg import _ext\n")
        zf.writestr("gpkg/_ext.cpython-311-x86_64-linux-gnu.so", ext.read_bytes())
        zf.writestr("gpkg/lib/libg.so", libg.read_bytes())
        zf.writestr("gpkg/lib/libunused.so", unused.read_bytes())
        zf.writestr("gpkg/bin/tool", tool.read_bytes())
        zf.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: gpkg\nVersion: 1.0\n")
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {TAG}\n")
    hext = compile_c(SOURCES / "hext.c", root / "_hext.so", libs=[libg],
                     runpath=["$ORIGIN/../gpkg/lib"])
    hpkg = io.BytesIO()
    with zipfile.ZipFile(hpkg, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("hpkg/__init__.py", "import gpkg\nfrom hpkg import _hext\n")
        zf.writestr("hpkg/_hext.cpython-311-x86_64-linux-gnu.so", hext.read_bytes())
        zf.writestr("hpkg-1.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: hpkg\nVersion: 1.0\nRequires-Dist: gpkg\n")
        zf.writestr("hpkg-1.0.dist-info/WHEEL", f"Wheel-Version: 1.0\nTag: {TAG}\n")
    return {"gpkg": [(f"gpkg-1.0-{TAG}.whl", buffer.getvalue())],
            "hpkg": [(f"hpkg-1.0-{TAG}.whl", hpkg.getvalue())]}


def abifit(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path,
           index: LoopbackIndex, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main([*args, "--index-url", index.url, *TARGET, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def members(store: SymbolStore) -> dict[str, set[str]]:
    """Recorded members of gpkg and where each of the fixture's names is defined."""
    found: dict[str, set[str]] = {}
    for name in ("g_value", "unused_value", "PyInit__ext", "tool_main_value"):
        for s in store.symbols("gpkg", name, defined=True):
            found.setdefault(name, set()).add(s.obj.member)
    return found


def info(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         cache: Path) -> dict[str, dict[str, object]]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    assert main(["index", "info", "--json", "--cache-dir", str(cache)]) == 0
    packages = json.loads(capsys.readouterr().out)["result"]["packages"]
    return {p["package"]: p for p in packages}


def test_check_records_the_views_it_read_and_index_add_reads_only_the_rest(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`check hpkg==1.0` reads hpkg's extension module and, of gpkg, the extension module its
    `__init__` imports and libg.so, not libunused.so nor the executable: the store then holds
    hpkg whole and gpkg in part, those members queryable by symbol; `index add gpkg==1.0`
    reads the rest (not the executable) and the wheel is whole."""
    code, text = abifit(capsys, monkeypatch, tmp_path, loopback_index, "check", "hpkg==1.0")
    assert code == 0, text
    with SymbolStore.open(tmp_path) as store:  # type: ignore[union-attr]
        assert {(v.package, v.member) for v in store.seen()} == {
            ("hpkg", "hpkg/_hext.cpython-311-x86_64-linux-gnu.so"),
            ("gpkg", "gpkg/_ext.cpython-311-x86_64-linux-gnu.so"), ("gpkg", "gpkg/lib/libg.so")}
    assert info(capsys, monkeypatch, tmp_path) == {
        "gpkg": {"package": "gpkg", "releases": 1, "wheels": 1, "partial": 1},
        "hpkg": {"package": "hpkg", "releases": 1, "wheels": 1, "partial": 0}}
    with open_store(tmp_path) as store:
        assert store.seen() == []
        assert members(store) == {
            "g_value": {"gpkg/lib/libg.so"},
            "PyInit__ext": {"gpkg/_ext.cpython-311-x86_64-linux-gnu.so"}}
        assert store.releases("gpkg") == []  # not whole: history reads the wheel again
        assert store.releases("hpkg") == [("1.0", f"hpkg-1.0-{TAG}.whl")]
    code, out = abifit(capsys, monkeypatch, tmp_path, loopback_index,
                       "index", "add", "gpkg==1.0", "--json")
    assert code == 0, out
    [wheel] = json.loads(out)["result"]["wheels"]
    assert (wheel["status"], wheel["members"]) == ("recorded", 3)
    assert wheel["bytes_fetched"] > 0  # libunused.so was never read
    with SymbolStore.open(tmp_path) as store:  # type: ignore[union-attr]
        assert store.seen() == []  # what index add read is recorded, not noted as well
    assert info(capsys, monkeypatch, tmp_path)["gpkg"]["partial"] == 0  # type: ignore[index]
    with open_store(tmp_path) as store:
        assert members(store) == {
            "g_value": {"gpkg/lib/libg.so"}, "unused_value": {"gpkg/lib/libunused.so"},
            "PyInit__ext": {"gpkg/_ext.cpython-311-x86_64-linux-gnu.so"}}


def test_inspect_reads_every_member_and_the_wheel_is_then_whole(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`inspect` reads every ELF member: the wheel is recorded whole from what it read, and
    `index add` finds it there and fetches nothing."""
    code, text = abifit(capsys, monkeypatch, tmp_path, loopback_index, "inspect", "gpkg==1.0")
    assert code == 0, text
    assert info(capsys, monkeypatch, tmp_path) == {
        "gpkg": {"package": "gpkg", "releases": 1, "wheels": 1, "partial": 0}}
    with open_store(tmp_path) as store:  # every library, not the executable
        assert members(store) == {
            "g_value": {"gpkg/lib/libg.so"}, "unused_value": {"gpkg/lib/libunused.so"},
            "PyInit__ext": {"gpkg/_ext.cpython-311-x86_64-linux-gnu.so"}}
    code, out = abifit(capsys, monkeypatch, tmp_path, loopback_index,
                       "index", "add", "gpkg==1.0", "--json")
    assert code == 0, out
    result = json.loads(out)["result"]
    assert (result["wheels"][0]["status"], result["bytes_fetched"]) == ("present", 0)


def test_a_seen_view_the_cache_no_longer_holds_is_dropped(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The views are recorded from the cache of views: with that gone, the noted rows are
    forgotten and nothing is recorded (the wheel is read again when a query needs it)."""
    code, text = abifit(capsys, monkeypatch, tmp_path, loopback_index, "check", "hpkg==1.0")
    assert code == 0, text
    views = [p for p in tmp_path.iterdir() if p.name.startswith("views-")]
    assert views, sorted(p.name for p in tmp_path.iterdir())
    for bucket in views:
        shutil.rmtree(bucket)
    with open_store(tmp_path) as store:
        assert (store.seen(), members(store)) == ([], {})


def test_without_a_cache_nothing_is_noted(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, text = abifit(capsys, monkeypatch, tmp_path, loopback_index,
                        "check", "hpkg==1.0", "--no-cache")
    assert code == 0, text
    assert not list(tmp_path.glob("symbols-*"))


def test_a_local_wheel_is_recorded_as_a_remote_one(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`inspect` of a wheel file on this machine records its libraries too, keyed by the
    sha256 of its bytes."""
    name = f"gpkg-1.0-{TAG}.whl"
    wheel = tmp_path / name
    wheel.write_bytes(loopback_index.files[name])
    cache = tmp_path / "cache"
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    assert main(["inspect", str(wheel), "--cache-dir", str(cache)]) == 0
    capsys.readouterr()
    assert info(capsys, monkeypatch, cache) == {
        "gpkg": {"package": "gpkg", "releases": 1, "wheels": 1, "partial": 0}}
    with open_store(cache) as store:
        assert members(store)["unused_value"] == {"gpkg/lib/libunused.so"}
