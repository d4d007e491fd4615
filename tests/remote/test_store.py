"""The symbol store: what is recorded is what the query API returns (exact names, globs,
definitions and requirements, symbol versions, releases in order); recording a wheel again
replaces it; a file that is not a store of this version is set aside and replaced; the export
format round-trips and refuses damaged input."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import BytesSource
from abifit.formats.storefile import decode_store, encode_store
from abifit.remote.store import STORE_NAME, StoredObject, StoredSymbol, SymbolStore
from fixtures.build import compile_c
from helpers import FIXTURES, SRC

SOURCES = FIXTURES / "store"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """libf.so of fpkg 1.0 (`f(int)`) and 2.0 (`f(unsigned int)`), both calling puts."""
    root = tmp_path_factory.mktemp("store")
    return {v: compile_c(SOURCES / f"f_{v}.cpp", root / v / "libf.so", cxx=True,
                         soname="libf.so").read_bytes() for v in ("v1", "v2")}


def view(data: bytes) -> ElfImage:
    return parse_elf(BytesSource(data), relocations=False, sections=False)


@pytest.fixture
def store(tmp_path: Path, libraries: dict[str, bytes]) -> SymbolStore:
    """A store with fpkg 1.0 and 2.0 recorded (the package name as spelled in a wheel)."""
    opened = SymbolStore.open(tmp_path)
    assert opened is not None
    for version, lib in (("1.0", "v1"), ("2.0", "v2")):
        opened.record(f"key-{version}", "FPkg", version, f"fpkg-{version}-py3-none-any.whl",
                      [("fpkg/lib/libf.so", view(libraries[lib]))])
    return opened


def test_exact_name_finds_the_definition_of_its_release(store: SymbolStore) -> None:
    """An exact mangled name returns the object that defines it, with package, version,
    wheel, member and soname; the package may be given in any spelling."""
    assert store.symbols("fpkg", "_Z1fi") == [StoredSymbol(
        StoredObject("fpkg", "1.0", "fpkg-1.0-py3-none-any.whl", "fpkg/lib/libf.so", "libf.so"),
        "_Z1fi", None, True)]
    assert [s.obj.version for s in store.symbols("FPKG", "_Z1fj")] == ["2.0"]
    assert store.symbols("fpkg", "_Z1fx") == []
    assert store.symbols("otherpkg", "_Z1fi") == []


def test_glob_returns_both_manglings_with_their_releases(store: SymbolStore) -> None:
    """A glob over mangled names finds `f(int)` in 1.0 and `f(unsigned int)` in 2.0, in
    release order; fnmatch's classes work too."""
    found = store.symbols("fpkg", "_Z1f*")
    assert [(s.name, s.obj.version) for s in found] == [("_Z1fi", "1.0"), ("_Z1fj", "2.0")]
    assert [s.name for s in store.symbols("fpkg", "_Z1f[!i]")] == ["_Z1fj"]
    assert [s.name for s in store.symbols("fpkg", "*1f?")] == ["_Z1fi", "_Z1fj"]


def test_required_symbols_carry_their_version(store: SymbolStore) -> None:
    """puts is required (undefined) by both releases, with its glibc version node; filtering
    on `defined` separates requirements from definitions."""
    required = store.symbols("fpkg", "puts", defined=False)
    assert [(s.obj.version, s.defined) for s in required] == [("1.0", False), ("2.0", False)]
    assert all(s.version is not None and s.version.startswith("GLIBC_") for s in required)
    assert store.symbols("fpkg", "puts", defined=True) == []
    assert store.symbols("fpkg", "_Z1f*", defined=False) == []


def test_release_sets_and_names(store: SymbolStore) -> None:
    """Releases in version order; the names a release defines and needs; the needs another
    package provides; names containing a word."""
    assert store.releases("fpkg") == [("1.0", "fpkg-1.0-py3-none-any.whl"),
                                      ("2.0", "fpkg-2.0-py3-none-any.whl")]
    assert "_Z1fi" in store.defined_names("fpkg", "1.0")
    assert "_Z1fj" not in store.defined_names("fpkg", "1.0")
    assert "puts" in store.needed_from("fpkg", "2.0", [])
    assert store.needed_from("fpkg", "2.0", ["fpkg"]) == set()  # fpkg defines no puts
    assert store.names_containing("fpkg", "1f") == ["_Z1fi", "_Z1fj"]


def test_versions_sort_as_versions(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    """10.0 comes after 9.0 (packaging's order, not the strings')."""
    store = SymbolStore.open(tmp_path)
    assert store is not None
    for version in ("10.0", "9.0", "9.1rc1"):
        store.record(version, "fpkg", version, f"fpkg-{version}.whl",
                     [("libf.so", view(libraries["v1"]))])
    assert [v for v, _w in store.releases("fpkg")] == ["9.0", "9.1rc1", "10.0"]


def test_recording_a_wheel_again_replaces_it(store: SymbolStore,
                                             libraries: dict[str, bytes]) -> None:
    """The same key recorded with other views replaces the wheel: the old symbols are gone,
    and `has_wheel` says it is there."""
    assert store.has_wheel("key-1.0") and not store.has_wheel("key-3.0")
    before = store.info().symbols
    store.record("key-1.0", "fpkg", "1.0", "fpkg-1.0-py3-none-any.whl",
                 [("fpkg/lib/libf.so", view(libraries["v2"]))])
    assert [s.obj.version for s in store.symbols("fpkg", "_Z1fj")] == ["1.0", "2.0"]
    assert store.symbols("fpkg", "_Z1fi") == []
    assert store.info().symbols == before
    assert len(store.releases("fpkg")) == 2


def test_a_garbage_file_at_the_store_path_is_replaced(tmp_path: Path) -> None:
    """A file that is not a database is set aside and a new, empty store made."""
    (tmp_path / STORE_NAME).write_bytes(b"not a database at all\n" * 100)
    store = SymbolStore.open(tmp_path)
    assert store is not None
    assert store.info().packages == ()
    assert (tmp_path / f"{STORE_NAME}.damaged").exists()


def test_another_schema_version_is_replaced(tmp_path: Path) -> None:
    """A database of another schema version (or someone else's) is not used."""
    db = sqlite3.connect(tmp_path / STORE_NAME)
    db.execute("CREATE TABLE other (x)")
    db.execute("PRAGMA user_version = 7")
    db.commit()
    db.close()
    store = SymbolStore.open(tmp_path)
    assert store is not None and store.info().packages == ()


def test_an_unwritable_directory_gives_no_store(tmp_path: Path) -> None:
    """A cache root that cannot be created: None, not an error."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert SymbolStore.open(blocker / "cache") is None


def test_two_stores_write_one_file(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    """Two connections (as two processes have) record into the same file; both wheels are
    there after."""
    first, second = SymbolStore.open(tmp_path), SymbolStore.open(tmp_path)
    assert first is not None and second is not None
    first.record("a", "fpkg", "1.0", "a.whl", [("libf.so", view(libraries["v1"]))])
    second.record("b", "fpkg", "2.0", "b.whl", [("libf.so", view(libraries["v2"]))])
    assert [v for v, _w in first.releases("fpkg")] == ["1.0", "2.0"]


def test_export_round_trips(store: SymbolStore, tmp_path: Path) -> None:
    """A dump encoded and decoded is the same dump, and loads into an empty store that then
    answers the same queries; loading it again records nothing."""
    dump = store.dump()
    assert decode_store(encode_store(dump), "x") == dump
    other = SymbolStore.open(tmp_path / "other")
    assert other is not None
    assert other.load(dump) == (2, 0)
    assert other.load(dump) == (0, 2)
    assert other.symbols("fpkg", "*") == store.symbols("fpkg", "*")


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


@pytest.mark.parametrize("damage", ["flip-body", "flip-header", "truncated", "empty",
                                    "other-version", "foreign"])
def test_damaged_exports_are_refused(store: SymbolStore, damage: str) -> None:
    """A byte changed anywhere, a cut, another format version or another format: a
    FormatError naming the file."""
    data = encode_store(store.dump())
    broken = {
        "flip-body": _flip(data, len(data) - 10),
        "flip-header": _flip(data, 20),
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "other-version": data[:8] + b"\x00\x02" + data[10:],
        "foreign": b"PK\x03\x04" + hashlib.sha256(data).digest() * 4,
    }[damage]
    with pytest.raises(FormatError, match=r"^dump\.bin: "):
        decode_store(broken, "dump.bin")


WRITER = """
import sys
from pathlib import Path
from abifit.formats.elf import parse_elf
from abifit.formats.sources import BytesSource
from abifit.remote.store import SymbolStore

root, lib, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
image = parse_elf(BytesSource(lib.read_bytes()), relocations=False, sections=False)
store = SymbolStore.open(root)
assert store is not None
for i in range(8):
    store.record(f"{tag}-{i}", "fpkg", f"{i}.{tag}", f"fpkg-{i}.whl", [("libf.so", image)])
"""


def test_two_processes_write_at_once(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    """Two abifit processes recording into one store at the same time both succeed, and every
    wheel of each is there after."""
    lib = tmp_path / "libf.so"
    lib.write_bytes(libraries["v1"])
    src = str(SRC)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "c"), str(lib),
                                 str(n)], env={"PYTHONPATH": src}) for n in (1, 2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    store = SymbolStore.open(tmp_path / "c")
    assert store is not None
    assert len(store.releases("fpkg")) == 16
    assert len(store.symbols("fpkg", "_Z1fi")) == 16
