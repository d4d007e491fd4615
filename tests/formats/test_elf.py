"""Tests of the ELF dynamic-view reader: differential against binutils, fixtures, corrupt input.

Real files (every ELF file of the installed torch, the system's C and C++ runtimes, a fixed sample
of /usr/lib/x86_64-linux-gnu, the fixtures compiled from tests/fixtures/elf/) are compared with
`readelf -W --dyn-syms -d -V -l` and `nm -D`. Corrupt files are synthetic (tests/elfbuilder.py), so
each case breaks exactly one field; property tests mutate real files at random.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from abifit.errors import ElfError
from abifit.formats.elf import (
    Binding,
    ByteOrder,
    ElfClass,
    ElfImage,
    FileType,
    Symbol,
    SymbolType,
    parse_elf,
)
from abifit.formats.sources import BytesSource, FileSource
from conftest import CACHE, TORCH_VERSION
from elfbuilder import (
    DT_GNU_HASH,
    DT_HASH,
    DT_STRSZ,
    DT_STRTAB,
    DT_SYMENT,
    DT_SYMTAB,
    DT_VERDEF,
    DT_VERDEFNUM,
    DT_VERNEED,
    DT_VERNEEDNUM,
    EM_386,
    EM_PPC,
    EM_PPC64,
    EM_X86_64,
    SHN_ABS,
    STB_GNU_UNIQUE,
    STB_WEAK,
    STT_NOTYPE,
    STT_OBJECT,
    VERSYM_HIDDEN,
    BuiltElf,
    Def,
    ElfSpec,
    Need,
    Sym,
    build_elf,
    locate_tables,
)
from fixtures.elf.build import MULTI_PATHS, NAMES, ORIGIN_LIB, cached_build, unavailable_reason
from helpers import SRC

SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64")
SYSTEM_LIBS = ("libc.so.6", "libm.so.6", "libstdc++.so.6")
SAMPLE_DIR = Path("/usr/lib/x86_64-linux-gnu")
SAMPLE_SIZE = 30
ALL_TORCH_FILES = "<every ELF file under torch>"

needs_binutils = pytest.mark.skipif(
    shutil.which("readelf") is None or shutil.which("nm") is None, reason="needs binutils"
)


# ---------------------------------------------------------------------------------------------
# Finding real ELF files


def is_elf_file(path: Path) -> bool:
    """A regular file (not a link) that starts with the ELF magic."""
    if path.is_symlink() or not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_files_under(root: Path) -> list[Path]:
    """Every ELF file below `root` (found by magic, not by name), sorted."""
    found = []
    for dirpath, _dirs, files in os.walk(root):
        found += [p for p in (Path(dirpath, f) for f in files) if is_elf_file(p)]
    return sorted(found)


def _torch_dir_if_ready() -> Path | None:
    """The installed torch package of the test venv, if the venv has been created already."""
    venv = CACHE / f"torch-{TORCH_VERSION}"
    found = sorted(venv.glob("lib/python3*/site-packages/torch"))
    return found[0] if found and (venv / ".abifit-ready").exists() else None


def _torch_files_at_collection() -> list[str]:
    """Paths relative to torch of its ELF files, when the torch test venv already exists.

    When it does not exist yet, one parameter stands for all files: the `torch_dir` fixture
    creates the venv and the test walks it then.
    """
    torch = _torch_dir_if_ready()
    if torch is None:
        return [ALL_TORCH_FILES]
    return [str(p.relative_to(torch)) for p in elf_files_under(torch)]


def _system_lib(name: str) -> Path | None:
    for d in SYSTEM_LIB_DIRS:
        if (Path(d) / name).exists():
            return (Path(d) / name).resolve()
    return None


def _sample_of_system_dir() -> list[Path]:
    """A fixed pseudo-random sample of ELF files in SAMPLE_DIR (the same set on every run)."""
    if not SAMPLE_DIR.is_dir():
        return []
    skip = {p for p in (_system_lib(n) for n in SYSTEM_LIBS) if p is not None}
    files = [p for p in elf_files_under(SAMPLE_DIR) if p.resolve() not in skip]
    files.sort(key=lambda p: hashlib.sha256(str(p.relative_to(SAMPLE_DIR)).encode()).digest())
    return files[:SAMPLE_SIZE]


TORCH_FILES = _torch_files_at_collection()
SAMPLE_FILES = _sample_of_system_dir()


# ---------------------------------------------------------------------------------------------
# What binutils says


@dataclass
class Binutils:
    """The parts of `readelf -W --dyn-syms -d -V -l` and `nm -D` that the reader must match."""

    symbols: Counter[tuple[str, bool, str]] = field(default_factory=Counter)
    nm_names: Counter[str] = field(default_factory=Counter)
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    rpath: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    flags_1: set[str] = field(default_factory=set)
    verneed: list[tuple[str, list[tuple[str, bool, int]]]] = field(default_factory=list)
    verdef: list[tuple[int, str, tuple[str, ...], bool]] = field(default_factory=list)
    interpreter: str | None = None


_DYN_LINE = re.compile(r"^\s*0x[0-9a-f]+ \((\w+)\)\s+(.*)$")
_SYM_LINE = re.compile(
    r"^\s*\d+: [0-9a-f]+\s+(?:0x)?[0-9a-f]+\s+\S+\s+"
    r"(<OS specific>: \d+|<processor specific>: \d+|<unknown>: \d+|\S+)\s+"
    r"\S+(?: \[[^\]]*\])?\s+(\S+) ?(.*)$"
)
_VERDEF_LINE = re.compile(r"Flags: (.+?)\s+Index: (\d+)\s+Cnt: \d+\s+Name: (\S+)")
_PARENT_LINE = re.compile(r"Parent \d+: (\S+)")
_VERNEED_FILE = re.compile(r"File: (\S+)\s+Cnt: \d+")
_VERNAUX_LINE = re.compile(r"Name: (\S+)\s+Flags: (.+?)\s+Version: (\d+)")
_BRACKETS = re.compile(r"\[(.*)\]")


def _blocks(text: str) -> Iterator[list[str]]:
    block: list[str] = []
    for line in text.splitlines():
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def run_readelf(path: Path) -> Binutils:
    """One `readelf` and one `nm` run on `path`, parsed."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", "-d", "-V", "-l", str(path)],
                         capture_output=True, text=True, check=True).stdout
    nm = subprocess.run(["nm", "-D", str(path)], capture_output=True, text=True,
                        check=False).stdout
    found = Binutils()
    found.nm_names = Counter(line.split()[-1] for line in nm.splitlines() if line.strip())
    for block in _blocks(out):
        head = block[0]
        if head.startswith("Symbol table") and not found.symbols:
            _parse_symbols(block[1:], found)
        elif head.startswith("Version definition section"):
            _parse_verdef(block[1:], found)
        elif head.startswith("Version needs section"):
            _parse_verneed(block[1:], found)
        else:
            _parse_other(block, found)
    return found


def _parse_symbols(lines: list[str], found: Binutils) -> None:
    for line in lines:
        m = _SYM_LINE.match(line)
        if m is None:
            continue
        bind, ndx, name = m.groups()
        if line.strip().startswith("0:"):
            continue  # the null symbol
        name = re.sub(r" \(\d+\)$", "", name)  # "(N)": the version index of a needed version
        found.symbols[(name, ndx != "UND", bind)] += 1


def _parse_verdef(lines: list[str], found: Binutils) -> None:
    for line in lines:
        if m := _VERDEF_LINE.search(line):
            flags, index, name = m.groups()
            found.verdef.append((int(index), name, (), "BASE" in flags))
        elif (m := _PARENT_LINE.search(line)) and found.verdef:
            index, name, parents, base = found.verdef[-1]
            found.verdef[-1] = (index, name, (*parents, m.group(1)), base)


def _parse_verneed(lines: list[str], found: Binutils) -> None:
    for line in lines:
        if m := _VERNEED_FILE.search(line):
            found.verneed.append((m.group(1), []))
        elif (m := _VERNAUX_LINE.search(line)) and found.verneed:
            name, flags, index = m.groups()
            found.verneed[-1][1].append((name, "WEAK" in flags, int(index)))


def _parse_other(block: list[str], found: Binutils) -> None:
    for line in block:
        if "[Requesting program interpreter:" in line:
            found.interpreter = line.split(": ", 1)[1].rstrip("]")
            continue
        m = _DYN_LINE.match(line)
        if m is None:
            continue
        tag, value = m.groups()
        inside = _BRACKETS.search(value)
        if tag == "NEEDED" and inside:
            found.needed.append(inside.group(1))
        elif tag == "SONAME" and inside:
            found.soname = inside.group(1)
        elif tag == "RPATH" and inside:
            found.rpath.append(inside.group(1))
        elif tag == "RUNPATH" and inside:
            found.runpath.append(inside.group(1))
        elif tag == "FLAGS":
            found.flags = set(value.split())
        elif tag == "FLAGS_1":
            found.flags_1 = set(value.removeprefix("Flags:").split())


# ---------------------------------------------------------------------------------------------
# The same facts from the reader

DF_NAMES = ("ORIGIN", "SYMBOLIC", "TEXTREL", "BIND_NOW", "STATIC_TLS")
DF_1_NAMES = (
    "NOW", "GLOBAL", "GROUP", "NODELETE", "LOADFLTR", "INITFIRST", "NOOPEN", "ORIGIN", "DIRECT",
    "TRANS", "INTERPOSE", "NODEFLIB", "NODUMP", "CONFALT", "ENDFILTEE", "DISPRELDNE",
    "DISPRELPND", "NODIRECT", "IGNMULDEF", "NOKSYMS", "NOHDR", "EDITED", "NORELOC", "SYMINTPOSE",
    "GLOBAUDIT", "SINGLETON", "STUB", "PIE", "KMOD", "WEAKFILTER", "NOCOMMON",
)
ELFOSABI_GNU = 3


def flag_names(value: int, names: tuple[str, ...]) -> set[str]:
    return {name for bit, name in enumerate(names) if value & (1 << bit)}


def binding_name(binding: int, osabi: int) -> str:
    """The binding as readelf prints it."""
    if binding == Binding.GNU_UNIQUE and osabi == ELFOSABI_GNU:
        return "UNIQUE"
    if binding in (Binding.LOCAL, Binding.GLOBAL, Binding.WEAK):
        return Binding(binding).name
    if 10 <= binding <= 12:
        return f"<OS specific>: {binding}"
    if 13 <= binding <= 15:
        return f"<processor specific>: {binding}"
    return f"<unknown>: {binding}"


def assert_matches_binutils(path: Path, image: ElfImage | None = None) -> None:
    """Everything the reader reports about `path` equals what readelf and nm report."""
    if image is None:
        with FileSource(path) as source:
            image = parse_elf(source)
    ref = run_readelf(path)
    symbols = list(image.symbols)
    ours = Counter((s.versioned_name, s.defined, binding_name(s.binding, image.osabi))
                   for s in symbols)
    assert ours == ref.symbols, _diff("symbols", ours, ref.symbols)
    names = Counter(s.versioned_name for s in symbols)
    assert names == ref.nm_names, _diff("nm -D names", names, ref.nm_names)
    assert list(image.needed) == ref.needed
    assert image.soname == ref.soname
    dynamic = image.dynamic
    assert list(dynamic.rpath if dynamic else ()) == ref.rpath
    assert list(dynamic.runpath if dynamic else ()) == ref.runpath
    assert flag_names(dynamic.flags if dynamic else 0, DF_NAMES) == ref.flags
    assert flag_names(dynamic.flags_1 if dynamic else 0, DF_1_NAMES) == ref.flags_1
    needs = [(n.file, [(v.name, v.weak, v.index) for v in n.versions])
             for n in image.version_needs]
    assert needs == ref.verneed
    defs = [(d.index, d.name, d.parents, d.is_base) for d in image.version_defs]
    assert defs == ref.verdef
    assert image.interpreter == ref.interpreter


T = TypeVar("T")


def _diff(what: str, ours: Counter[T], theirs: Counter[T]) -> str:
    only_ours = list((ours - theirs).items())[:10]
    only_theirs = list((theirs - ours).items())[:10]
    return f"{what} differ: only in the reader {only_ours}; only in binutils {only_theirs}"


# ---------------------------------------------------------------------------------------------
# Fixtures


@dataclass(frozen=True)
class ElfFixtures:
    directory: Path
    paths: dict[str, Path]

    def __getitem__(self, name: str) -> Path:
        if name not in self.paths:
            pytest.skip(unavailable_reason(self.directory, name))
        return self.paths[name]

    def image(self, name: str) -> ElfImage:
        with FileSource(self[name]) as source:
            return parse_elf(source)


@pytest.fixture(scope="session")
def elf_fixtures(tmp_path_factory: pytest.TempPathFactory) -> ElfFixtures:
    """The fixtures of tests/fixtures/elf/, compiled once per session."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("needs gcc and g++ to build the ELF fixtures")
    return ElfFixtures(*cached_build(tmp_path_factory))


def symbol(image: ElfImage, name: str, version: str | None = None) -> Symbol:
    """The one symbol called `name` (with `version`, when given)."""
    found = [s for s in image.symbols
             if s.name == name and (version is None or s.version == version)]
    assert len(found) == 1, f"{name}@{version}: {found}"
    return found[0]


# ---------------------------------------------------------------------------------------------
# Differential tests on real files


@needs_binutils
@pytest.mark.slow
@pytest.mark.parametrize("relpath", TORCH_FILES)
def test_torch_file_matches_binutils(torch_dir: Path, relpath: str) -> None:
    """Each ELF file of the installed torch reads as readelf and nm -D read it."""
    paths = elf_files_under(torch_dir) if relpath == ALL_TORCH_FILES else [torch_dir / relpath]
    assert paths, f"no ELF files under {torch_dir}"
    for path in paths:
        assert_matches_binutils(path)


@needs_binutils
@pytest.mark.parametrize("name", SYSTEM_LIBS)
def test_system_runtime_matches_binutils(name: str) -> None:
    """The system's libc, libm and libstdc++ read as readelf and nm -D read them."""
    path = _system_lib(name)
    if path is None:
        pytest.skip(f"{name} not found in {SYSTEM_LIB_DIRS}")
    assert_matches_binutils(path)


def test_positions_are_every_index_of_a_name() -> None:
    """`SymbolTable.positions` gives every index of a name, in order, as a loop over the names
    does: on the system's libc, whose versioned symbols repeat names (memcpy@GLIBC_2.2.5 and
    memcpy@@GLIBC_2.14), and for a name it lacks."""
    path = _system_lib("libc.so.6")
    if path is None:
        pytest.skip(f"libc.so.6 not found in {SYSTEM_LIB_DIRS}")
    with FileSource(path) as source:
        table = parse_elf(source).symbols
    by_name: dict[str, list[int]] = {}
    for i, name in enumerate(table.names):
        by_name.setdefault(name, []).append(i)
    assert max(len(found) for found in by_name.values()) >= 2
    for name, found in by_name.items():
        assert list(table.positions(name)) == found, name
    assert list(table.positions("no_such_symbol_anywhere")) == []


@needs_binutils
@pytest.mark.parametrize(
    "path", SAMPLE_FILES, ids=[str(p.relative_to(SAMPLE_DIR)) for p in SAMPLE_FILES]
)
def test_system_sample_matches_binutils(path: Path) -> None:
    """A fixed sample of the system's libraries read as readelf and nm -D read them."""
    assert_matches_binutils(path)


@needs_binutils
@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_binutils(elf_fixtures: ElfFixtures, name: str) -> None:
    """Each compiled fixture reads as readelf and nm -D read it (flags included)."""
    assert_matches_binutils(elf_fixtures[name])


# ---------------------------------------------------------------------------------------------
# What each fixture was built to show


def test_hidden_version_is_not_the_default(elf_fixtures: ElfFixtures) -> None:
    """`foo` is defined twice: foo@FIX_1.0 hidden (non-default), foo@@FIX_2.0 the default."""
    image = elf_fixtures.image("versioned")
    old, new = symbol(image, "foo", "FIX_1.0"), symbol(image, "foo", "FIX_2.0")
    assert (old.hidden, old.versioned_name) == (True, "foo@FIX_1.0")
    assert (new.hidden, new.versioned_name) == (False, "foo@@FIX_2.0")
    assert old.defined and new.defined and old.version_file is None
    assert symbol(image, "bar").versioned_name == "bar@@FIX_1.0"


def test_version_definitions_and_parents(elf_fixtures: ElfFixtures) -> None:
    """The BASE entry names the library; each node names the node it inherits from."""
    image = elf_fixtures.image("versioned")
    defs = [(d.name, d.parents, d.is_base) for d in image.version_defs]
    assert defs == [("libversioned.so.1", (), True), ("FIX_1.0", (), False),
                    ("FIX_2.0", ("FIX_1.0",), False), ("FIX_3.0", ("FIX_2.0",), False)]
    marker = symbol(image, "FIX_2.0")
    assert (marker.section_index, marker.versioned_name) == (SHN_ABS, "FIX_2.0")


def test_consumer_needs_versions_from_each_library(elf_fixtures: ElfFixtures) -> None:
    """DT_VERNEED lists libversioned's nodes and glibc's GLIBC_2.2.5, each under its file."""
    image = elf_fixtures.image("consumer")
    needs = {n.file: {v.name for v in n.versions} for n in image.version_needs}
    assert needs["libversioned.so.1"] == {"FIX_1.0", "FIX_2.0", "FIX_3.0"}
    assert "GLIBC_2.2.5" in needs["libc.so.6"]
    foo = symbol(image, "foo")
    assert (foo.defined, foo.version, foo.version_file) == (False, "FIX_2.0", "libversioned.so.1")
    assert foo.versioned_name == "foo@FIX_2.0"
    assert "libversioned.so.1" in image.needed


@pytest.mark.parametrize("name", ["weak_missing", "weak_missing_data", "optional_feature"])
def test_weak_references_are_weak_and_undefined(elf_fixtures: ElfFixtures, name: str) -> None:
    """A weak extern declaration gives an undefined WEAK symbol (allowed to stay unbound)."""
    sym = symbol(elf_fixtures.image("consumer"), name)
    assert (sym.binding, sym.defined) == (Binding.WEAK, False)


@pytest.mark.parametrize("name", ["weak_defined", "weak_defined_data"])
def test_weak_definitions_are_weak_and_defined(elf_fixtures: ElfFixtures, name: str) -> None:
    """A weak definition gives a defined WEAK symbol."""
    sym = symbol(elf_fixtures.image("consumer"), name)
    assert (sym.binding, sym.defined) == (Binding.WEAK, True)


@pytest.mark.parametrize("name", ["_ZZ14unique_countervE1n", "_ZN6HolderIiE5valueE"])
def test_gnu_unique_binding(elf_fixtures: ElfFixtures, name: str) -> None:
    """An inline function's static local and a template's static member are GNU_UNIQUE."""
    sym = symbol(elf_fixtures.image("consumer"), name)
    assert (sym.binding, sym.type, sym.defined) == (Binding.GNU_UNIQUE, SymbolType.OBJECT, True)


@pytest.mark.parametrize(
    ("name", "rpath", "runpath"),
    [
        ("rpath", [ORIGIN_LIB], []),
        ("runpath", [], [ORIGIN_LIB]),
        ("multi_rpath", list(MULTI_PATHS), []),
        ("multi_runpath", [], list(MULTI_PATHS)),
    ],
)
def test_search_paths_land_in_their_field(
    elf_fixtures: ElfFixtures, name: str, rpath: list[str], runpath: list[str]
) -> None:
    """--disable-new-dtags writes DT_RPATH, --enable-new-dtags DT_RUNPATH; entries keep order."""
    dynamic = elf_fixtures.image(name).dynamic
    assert dynamic is not None

    def entries(values: tuple[str, ...]) -> list[str]:
        return [p for value in values for p in value.split(":")]

    assert (entries(dynamic.rpath), entries(dynamic.runpath)) == (rpath, runpath)


def test_rpath_and_runpath_together() -> None:
    """An object with both DT_RPATH and DT_RUNPATH keeps each in its own field."""
    built = build_elf(ElfSpec(rpath=("/opt/r1:/opt/r2",), runpath=("$ORIGIN",),
                              symbols=(Sym("f"),)))
    image = parse_elf(BytesSource(built.bytes(), "both-paths.so"))
    assert image.dynamic is not None
    assert (image.dynamic.rpath, image.dynamic.runpath) == (("/opt/r1:/opt/r2",), ("$ORIGIN",))


def test_32bit_library(elf_fixtures: ElfFixtures) -> None:
    """An i386 library: ELF32, little-endian, versions from its script, a weak undefined symbol."""
    image = elf_fixtures.image("lib32")
    assert (image.elf_class, image.byte_order, image.machine_name) == (
        ElfClass.ELF32, ByteOrder.LITTLE, "i386")
    missing = symbol(image, "lib32_missing")
    assert (missing.binding, missing.defined) == (Binding.WEAK, False)
    assert symbol(image, "lib32_old").versioned_name == "lib32_old@@L32_1"
    assert symbol(image, "lib32_new").versioned_name == "lib32_new@@L32_2"
    assert [d.name for d in image.version_defs] == ["liblib32.so", "L32_1", "L32_2"]


def test_hash_styles_give_the_same_symbols(elf_fixtures: ElfFixtures) -> None:
    """The DT_HASH count (nchain) and the DT_GNU_HASH count agree for the same source."""
    images = {n: elf_fixtures.image(n) for n in ("hash_sysv", "hash_gnu", "hash_both")}
    assert images["hash_sysv"].section(".gnu.hash") is None
    assert images["hash_sysv"].section(".hash") is not None
    assert images["hash_gnu"].section(".hash") is None
    counts = {n: len(i.symbols) for n, i in images.items()}
    assert len(set(counts.values())) == 1, counts
    names = {n: sorted(s.versioned_name for s in i.symbols) for n, i in images.items()}
    assert names["hash_sysv"] == names["hash_gnu"] == names["hash_both"]
    assert "hashed_alpha" in names["hash_sysv"]


def test_executable_interpreter_and_copy_relocation(elf_fixtures: ElfFixtures) -> None:
    """A PIE executable names its interpreter; a copied variable keeps its needed version."""
    image = elf_fixtures.image("exe")
    assert image.interpreter is not None
    assert Path(image.interpreter).name.startswith("ld-linux")
    assert image.file_type in (FileType.DYN, FileType.EXEC)
    copied = symbol(image, "fix_data")
    assert (copied.defined, copied.version, copied.version_file) == (
        True, "FIX_1.0", "libversioned.so.1")
    assert copied.versioned_name == "fix_data@FIX_1.0"
    assert elf_fixtures.image("versioned").interpreter is None


@pytest.mark.parametrize(
    ("name", "greet", "string_version"),
    [
        ("strings_abi0", "_ZN14abifit_fixture5greetERKSs", "GLIBCXX_3.4"),
        ("strings_abi1",
         "_ZN14abifit_fixture5greetERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
         "GLIBCXX_3.4.21"),
    ],
)
def test_string_abi_variants(
    elf_fixtures: ElfFixtures, name: str, greet: str, string_version: str
) -> None:
    """_GLIBCXX_USE_CXX11_ABI=0 mangles std::string as Ss, =1 as std::__cxx11::basic_string."""
    image = elf_fixtures.image(name)
    ours = {s.name for s in image.symbols if s.defined and "abifit_fixture" in s.name}
    assert greet in ours
    assert all(("__cxx11" in n) == name.endswith("abi1") for n in ours), ours
    needs = {n.file: {v.name for v in n.versions} for n in image.version_needs}
    assert string_version in needs["libstdc++.so.6"]


def test_bind_now_and_nodelete_flags(elf_fixtures: ElfFixtures) -> None:
    """-z now sets DF_BIND_NOW and DF_1_NOW; -z nodelete sets DF_1_NODELETE."""
    dynamic = elf_fixtures.image("flags").dynamic
    assert dynamic is not None
    assert dynamic.flags & 0x8
    assert dynamic.flags_1 & 0x9 == 0x9
    plain = elf_fixtures.image("rpath").dynamic
    assert plain is not None and plain.flags_1 & 0x8 == 0


# ---------------------------------------------------------------------------------------------
# Synthetic files: byte orders and classes no compiler here produces


def synthetic_spec(elf64: bool, big_endian: bool, hash_style: str) -> ElfSpec:
    """A file with every feature the reader handles: versions both ways, weak, unique."""
    machine = {(True, False): EM_X86_64, (False, False): EM_386,
               (True, True): EM_PPC64, (False, True): EM_PPC}[(elf64, big_endian)]
    return ElfSpec(
        elf64=elf64, big_endian=big_endian, machine=machine, osabi=ELFOSABI_GNU,
        hash_style=hash_style, soname="libsynth.so.1", needed=("libc.so.6", "libdep.so.2"),
        rpath=("/opt/a:/opt/b",), runpath=("$ORIGIN/../lib",), flags=0x8, flags_1=0x9,
        interp="/lib/ld.so.1",
        defs=(Def(1, "libsynth.so.1", base=True), Def(2, "SYN_1"), Def(3, "SYN_2", ("SYN_1",))),
        needs=(Need("libc.so.6", (("GLIBC_2.17", 4, False), ("GLIBC_2.34", 5, True))),
               Need("libdep.so.2", (("DEP_1", 6, False),))),
        symbols=(
            Sym("puts", defined=False, versym=4),
            Sym("memcpy", defined=False, versym=5, bind=STB_WEAK),
            Sym("dep_fn", defined=False, versym=6),
            Sym("weak_ref", defined=False, bind=STB_WEAK, type=STT_NOTYPE),
            Sym("synth", versym=2 | VERSYM_HIDDEN),
            Sym("synth", versym=3),
            Sym("synth_data", type=STT_OBJECT, versym=2),
            Sym("SYN_1", shndx=SHN_ABS, type=STT_OBJECT, versym=2),
            Sym("SYN_2", shndx=SHN_ABS, type=STT_OBJECT, versym=3),
            Sym("unique", bind=STB_GNU_UNIQUE, type=STT_OBJECT, versym=3),
            Sym("plain"),
        ),
    )


SYNTHETIC_KINDS = [
    pytest.param(elf64, be, hs, id=f"{'elf64' if elf64 else 'elf32'}-{'be' if be else 'le'}-{hs}")
    for elf64 in (True, False) for be in (False, True) for hs in ("sysv", "gnu")
]


@needs_binutils
@pytest.mark.parametrize(("elf64", "big_endian", "hash_style"), SYNTHETIC_KINDS)
def test_synthetic_file_matches_binutils(
    tmp_path: Path, elf64: bool, big_endian: bool, hash_style: str
) -> None:
    """Synthetic ELF32/ELF64 files in both byte orders read as readelf reads them."""
    built = build_elf(synthetic_spec(elf64, big_endian, hash_style))
    path = tmp_path / "libsynth.so.1"
    path.write_bytes(built.data)
    with FileSource(path) as source:
        image = parse_elf(source)
    assert image.elf_class is (ElfClass.ELF64 if elf64 else ElfClass.ELF32)
    assert image.byte_order is (ByteOrder.BIG if big_endian else ByteOrder.LITTLE)
    assert len(image.symbols) == 11
    assert symbol(image, "synth", "SYN_1").versioned_name == "synth@SYN_1"
    assert symbol(image, "memcpy").version_file == "libc.so.6"
    assert [v.weak for v in image.version_needs[0].versions] == [False, True]
    assert_matches_binutils(path, image)


def test_without_section_headers_the_dynamic_view_is_complete() -> None:
    """The loader never reads section headers; neither does the dynamic view."""
    spec = synthetic_spec(True, True, "gnu")
    with_headers = parse_elf(BytesSource(build_elf(spec).bytes(), "with.so"))
    built = build_elf(dataclasses.replace(spec, section_headers=False))
    without = parse_elf(BytesSource(built.bytes(), "without.so"))
    assert (without.sections, without.section_problem) == ((), None)
    assert list(without.symbols) == list(with_headers.symbols)
    assert without.version_needs == with_headers.version_needs
    assert without.dynamic == with_headers.dynamic


# ---------------------------------------------------------------------------------------------
# Bad input: every problem is one ElfError line that names the file


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the main thread if the block runs longer than `seconds`."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_elf_error(data: bytes, name: str, *, offset: bool, contains: str = "") -> ElfError:
    """Parsing `data` raises one ElfError whose single line names the file."""
    with time_limit(5), pytest.raises(ElfError) as caught:
        parse_elf(BytesSource(data, name))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{name}: ")
    if offset:
        assert "offset 0x" in message, message
    assert contains in message, message
    return caught.value


@pytest.mark.parametrize(
    ("content", "contains"),
    [
        pytest.param(b"just some text\nover two lines\n", "not an ELF file", id="text"),
        pytest.param(b"", "not an ELF file", id="empty"),
        pytest.param(b"\x7fEL", "not an ELF file", id="three-bytes"),
        pytest.param(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(64), "not an ELF file", id="png"),
        pytest.param(b"\x7fELF", "truncated", id="magic-only"),
        pytest.param(b"\x7fELF\x02\x01\x01" + bytes(9), "truncated", id="identification-only"),
    ],
)
def test_not_elf_files(tmp_path: Path, content: bytes, contains: str) -> None:
    """Files that are not ELF (or stop inside the identification) raise ElfError naming them."""
    path = tmp_path / "input.bin"
    path.write_bytes(content)
    with FileSource(path) as source, pytest.raises(ElfError) as caught:
        parse_elf(source)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and contains in message, message


def _synthetic() -> BuiltElf:
    return build_elf(synthetic_spec(True, False, "sysv"))


def _synthetic_gnu() -> BuiltElf:
    return build_elf(synthetic_spec(True, False, "gnu"))


def _header_field(built: BuiltElf, offset: int, fmt: str, value: int) -> bytes:
    built.put(offset, fmt, value)
    return built.bytes()


def _outside_load(tag: int) -> Callable[[], bytes]:
    def make() -> bytes:
        built = _synthetic()
        built.set_dynamic(tag, built.offsets["shstrtab"])  # in the file, in no PT_LOAD
        return built.bytes()
    return make


def _hash_nchain(value: int) -> bytes:
    built = _synthetic()
    built.put(built.offsets["hash"] + 4, "I", value)
    return built.bytes()


def _gnu_hash_field(index: int, value: int) -> bytes:
    built = _synthetic_gnu()
    built.put(built.offsets["hash"] + 4 * index, "I", value)
    return built.bytes()


def _gnu_hash_no_buckets_huge_offset() -> bytes:
    built = _synthetic_gnu()
    nbuckets = struct.unpack_from("<I", built.data, built.offsets["hash"])[0]
    built.put(built.offsets["hash"] + 4, "I", 2**31)
    for i in range(nbuckets):
        built.put(built.offsets["hash"] + 16 + 8 + 4 * i, "I", 0)
    return built.bytes()


def _strtab_unterminated() -> bytes:
    built = _synthetic()
    built.set_dynamic(DT_STRSZ, built.sizes["dynstr"] - 1)  # the last name loses its NUL
    return built.bytes()


def _set_dynamic(tag: int, value: int, gnu: bool = False) -> bytes:
    built = _synthetic_gnu() if gnu else _synthetic()
    built.set_dynamic(tag, value)
    return built.bytes()


def _symbol_name(value: int) -> bytes:
    built = _synthetic()
    built.put(built.offsets["dynsym"] + 24, "I", value)  # st_name of symbol 1
    return built.bytes()


def _truncated(part: str, extra: int) -> bytes:
    built = _synthetic()
    return built.bytes()[: built.offsets[part] + extra]


# (id, bytes, offset expected in the message, text expected in the message)
CORRUPT_CASES: list[tuple[str, Callable[[], bytes], bool, str]] = [
    ("bad-class", lambda: _header_field(_synthetic(), 4, "B", 3), True, "class"),
    ("bad-data-encoding", lambda: _header_field(_synthetic(), 5, "B", 0), True, "encoding"),
    ("truncated-elf-header", lambda: _synthetic().bytes()[:40], True, "truncated"),
    ("truncated-program-headers", lambda: _truncated("phdrs", 20), True, "truncated"),
    ("truncated-dynamic", lambda: _truncated("dynamic", 8), True, "truncated"),
    ("phnum-beyond-file", lambda: _header_field(_synthetic(), 56, "H", 0xFFF0), True,
     "program header"),
    ("phoff-beyond-file", lambda: _header_field(_synthetic(), 32, "Q", 1 << 40), True,
     "program header"),
    ("phentsize-too-small", lambda: _header_field(_synthetic(), 54, "H", 8), False,
     "program header"),
    ("dynamic-size-beyond-file", lambda: _header_field(_synthetic(), 64 + 56 + 32, "Q", 1 << 33),
     True, "dynamic"),
    ("strtab-outside-load", _outside_load(DT_STRTAB), False, "DT_STRTAB"),
    ("symtab-outside-load", _outside_load(DT_SYMTAB), False, "symbol table"),
    ("strtab-unmapped-address", lambda: _set_dynamic(DT_STRTAB, 0x7FFF_0000), False, "DT_STRTAB"),
    ("symtab-unmapped-address", lambda: _set_dynamic(DT_SYMTAB, 1 << 63), False,
     "symbol table"),
    ("hash-nchain-2**31", lambda: _hash_nchain(2**31), False, "symbol count"),
    ("hash-nchain-2**32-1", lambda: _hash_nchain(2**32 - 1), False, "symbol count"),
    ("hash-outside-load", lambda: _set_dynamic(DT_HASH, 1 << 40), False, "DT_HASH"),
    ("gnu-hash-nbuckets-2**31", lambda: _gnu_hash_field(0, 2**31), True, "DT_GNU_HASH"),
    ("gnu-hash-bloom-2**31", lambda: _gnu_hash_field(2, 2**31), True, "DT_GNU_HASH"),
    ("gnu-hash-symoffset-2**31", _gnu_hash_no_buckets_huge_offset, False, "symbol count"),
    ("gnu-hash-bucket-below-symoffset", lambda: _gnu_hash_field(1, 2**30), True, "DT_GNU_HASH"),
    ("gnu-hash-outside-load", lambda: _set_dynamic(DT_GNU_HASH, 1 << 40, gnu=True), False,
     "DT_GNU_HASH"),
    ("strtab-without-final-nul", _strtab_unterminated, True, "terminator"),
    ("strsz-beyond-file", lambda: _set_dynamic(DT_STRSZ, 1 << 20), True, "truncated"),
    ("strsz-2**63", lambda: _set_dynamic(DT_STRSZ, 1 << 63), True, "truncated"),
    ("symbol-name-outside-strtab", lambda: _symbol_name(1 << 30), True, "string table"),
    ("wrong-syment", lambda: _set_dynamic(DT_SYMENT, 40), False, "entry size"),
    ("verneed-outside-load", lambda: _set_dynamic(DT_VERNEED, 1 << 40), False, "DT_VERNEED"),
    ("needed-name-outside-strtab", lambda: _set_dynamic(1, 1 << 31), True, "DT_NEEDED"),
]


@pytest.mark.parametrize(
    ("make", "offset", "contains"),
    [pytest.param(make, offset, contains, id=name) for name, make, offset, contains
     in CORRUPT_CASES],
)
def test_corrupt_file_raises_one_line_elf_error(
    make: Callable[[], bytes], offset: bool, contains: str
) -> None:
    """Each corruption raises ElfError: one line, the file's name, the offset where it applies."""
    assert_elf_error(make(), "corrupt.so", offset=offset, contains=contains)


@pytest.mark.parametrize("nchain", [2**31, 2**32 - 1])
def test_bogus_symbol_count_fails_fast(nchain: int) -> None:
    """A symbol count of 2**31 is refused before anything is allocated by it (well under 1 s)."""
    data = _hash_nchain(nchain)
    start = time.perf_counter()
    assert_elf_error(data, "huge-count.so", offset=False)
    assert time.perf_counter() - start < 1.0


def _verneed_back_reference(field_offset: int, num: int | None) -> bytes:
    """A verneed chain whose 32-bit `next` field wraps round to point back at its own entry."""
    built = _synthetic()
    built.put(built.offsets["verneed"] + field_offset, "I", 2**32 - 16)
    if num is not None:
        built.set_dynamic(DT_VERNEEDNUM, num)
    return built.bytes()


@pytest.mark.parametrize(
    ("field_offset", "num"),
    [
        pytest.param(12, None, id="vn_next-back-to-itself"),
        pytest.param(12, 2**31, id="vn_next-back-to-itself-num-2**31"),
        pytest.param(16 + 12, 2, id="vna_next-back-to-itself"),
    ],
)
def test_verneed_loop_terminates(field_offset: int, num: int | None) -> None:
    """A version-need chain that points back at itself ends (an ElfError or a finite result)."""
    data = _verneed_back_reference(field_offset, num)
    start = time.perf_counter()
    with time_limit(5), contextlib.suppress(ElfError):
        image = parse_elf(BytesSource(data, "loop.so"))
        assert sum(len(n.versions) for n in image.version_needs) < 100
    assert time.perf_counter() - start < 1.0


def _verneed_fan(num: int | None) -> bytes:
    """65,536 version needs, each with 65,535 aux entries, from 2 MiB of identical records.

    Each 16-byte record reads as an Elf_Verneed (cnt 0xFFFF, aux 16, next 16) and as an
    Elf_Vernaux (name 16, a valid name; next 16). Every entry is well-formed on its own; the
    chains overlap, so together they make 4 * 10**9 entries.
    """
    built = build_elf(synthetic_spec(True, False, "sysv"))
    region = built.append_mapped(struct.pack("<HHIII", 1, 0xFFFF, 0, 16, 16) * (1 << 17))
    built.set_dynamic(DT_VERNEED, region)
    if num is None:
        built.drop_dynamic(DT_VERNEEDNUM)  # the chain alone says where it ends
    else:
        built.set_dynamic(DT_VERNEEDNUM, num)
    return built.bytes()


def _verdef_fan(num: int | None) -> bytes:
    """65,536 version definitions, each with 65,535 names from one shared verdaux chain.

    1.3 MB of Elf_Verdef entries (cnt 0xFFFF, aux pointing at the shared chain) and 512 KiB of
    Elf_Verdaux entries (a valid name, next 8): 4 * 10**9 names in total.
    """
    built = build_elf(synthetic_spec(True, False, "sysv"))
    count, names = 1 << 16, 0xFFFF
    defs_at = len(built.data)
    chain_at = defs_at + 20 * count
    defs = b"".join(struct.pack("<HHHHIII", 1, 0, 2 + i % 0x7000, names, 0,
                                chain_at - (defs_at + 20 * i), 20 if i + 1 < count else 0)
                    for i in range(count))
    chain = struct.pack("<II", 1, 8) * (names - 1) + struct.pack("<II", 1, 0)
    built.append_mapped(defs + chain)
    built.set_dynamic(DT_VERDEF, defs_at)
    if num is None:
        built.drop_dynamic(DT_VERDEFNUM)
    else:
        built.set_dynamic(DT_VERDEFNUM, num)
    return built.bytes()


@pytest.mark.parametrize(
    ("make", "num"),
    [
        pytest.param(_verneed_fan, None, id="verneed-num-absent"),
        pytest.param(_verneed_fan, 0xFFFF, id="verneed-num-65535"),
        pytest.param(_verdef_fan, None, id="verdef-num-absent"),
        pytest.param(_verdef_fan, 0xFFFF, id="verdef-num-65535"),
    ],
)
def test_version_chains_are_bounded_in_total(
    make: Callable[[int | None], bytes], num: int | None
) -> None:
    """Nested version chains cannot multiply into billions of entries (must end within 2 s)."""
    data = make(num)
    start = time.perf_counter()
    with time_limit(2), contextlib.suppress(ElfError):
        image = parse_elf(BytesSource(data, "fan.so"))
        entries = sum(len(n.versions) for n in image.version_needs)
        entries += sum(1 + len(d.parents) for d in image.version_defs)
        assert entries <= len(data) // 8
    assert time.perf_counter() - start < 2.0


def _overlapping_names(symbols: int, name_length: int) -> bytes:
    """Many symbols whose names all start inside one long string (names overlap in the file)."""
    spec = ElfSpec(symbols=tuple(Sym(f"s{i}") for i in range(symbols)))
    built = build_elf(spec)
    long_name = b"A" * name_length + b"\0"
    built.set_dynamic(DT_STRTAB, built.append_mapped(long_name))
    built.set_dynamic(DT_STRSZ, len(long_name))
    for i in range(symbols):  # symbol i's name is the string at offset i % 64
        built.put(built.offsets["dynsym"] + 24 * (i + 1), "I", i % 64)
    return built.bytes()


def test_overlapping_names_do_not_multiply_memory() -> None:
    """Names that overlap in the string table must not cost symbols * name length of memory.

    40,000 symbols naming the same 1 MiB string is a 2 MB file; materialising each name
    separately would take 40 GB. Run in a child process capped at 1 GiB of address space.
    """
    data = _overlapping_names(40_000, 1 << 20)
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from abifit.formats.elf import parse_elf\n"
        "from abifit.errors import ElfError\n"
        "from abifit.formats.sources import BytesSource\n"
        "data = sys.stdin.buffer.read()\n"
        "try:\n"
        "    image = parse_elf(BytesSource(data, 'names.so'))\n"
        "    print('parsed', len(image.symbols))\n"
        "except ElfError as e:\n"
        "    print('ElfError', e)\n"
    )
    src = str(SRC)
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True,
                          timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()[-600:]


def test_section_headers_out_of_range_keep_the_dynamic_view() -> None:
    """A section header table past the end is a section problem, not a failure to read."""
    built = _synthetic()
    good = parse_elf(BytesSource(built.bytes(), "good.so"))
    built.put(40, "Q", len(built.data) + 4096)  # e_shoff
    image = parse_elf(BytesSource(built.bytes(), "shoff.so"))
    assert image.sections == () and image.section_problem
    assert "\n" not in image.section_problem
    assert list(image.symbols) == list(good.symbols)
    assert image.version_needs == good.version_needs and image.dynamic == good.dynamic


@pytest.mark.parametrize(
    ("offset", "fmt", "value"),
    [
        pytest.param(60, "H", 0xFF00, id="shnum-beyond-file"),
        pytest.param(58, "H", 4, id="shentsize-too-small"),
        pytest.param(40, "Q", 2**64 - 8, id="shoff-2**64"),
    ],
)
def test_bad_section_header_fields_keep_the_dynamic_view(offset: int, fmt: str, value: int) -> None:
    """Section header problems are recorded in section_problem; the dynamic view still parses."""
    built = _synthetic()
    built.put(offset, fmt, value)
    image = parse_elf(BytesSource(built.bytes(), "sections.so"))
    assert (image.sections, bool(image.section_problem)) == ((), True)
    assert len(image.symbols) == 11


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.03, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.99])
def test_truncated_synthetic_file(fraction: float) -> None:
    """A file cut anywhere before its dynamic section ends raises ElfError."""
    built = _synthetic()
    cut = int((built.offsets["dynamic"] + built.sizes["dynamic"] - 1) * fraction)
    assert_elf_error(built.bytes()[:cut], "cut.so", offset=cut >= 4)


# ---------------------------------------------------------------------------------------------
# Property tests: mutated real files


@dataclass(frozen=True, repr=False)
class Sample:
    """A real file to mutate, with the byte ranges (start, end) that mutations are biased to."""

    name: str
    data: bytes
    regions: tuple[tuple[int, int], ...]

    def __repr__(self) -> str:  # hypothesis prints the drawn sample: the name, not the bytes
        return f"Sample({self.name!r}, {len(self.data)} bytes)"


def _sample(name: str, data: bytes) -> Sample:
    regions = [(0, min(4096, len(data)))]
    for start, size in locate_tables(data).values():
        if 0 <= start < len(data):
            regions.append((start, min(len(data), start + max(size, 1))))
    return Sample(name, data, tuple(regions))


@pytest.fixture(scope="session")
def mutation_samples(elf_fixtures: ElfFixtures) -> list[Sample]:
    """Real files under 3 MB: fixtures, libgcc_s, libstdc++, a big-endian ELF32, and (when the
    torch venv exists) two of torch's patchelf-rewritten libraries, whose .dynstr is at the end.
    """
    samples = [_sample(n, elf_fixtures[n].read_bytes()) for n in ("consumer", "versioned")]
    if "lib32" in elf_fixtures.paths:
        samples.append(_sample("lib32", elf_fixtures.paths["lib32"].read_bytes()))
    torch = _torch_dir_if_ready()
    paths = [_system_lib("libgcc_s.so.1"), _system_lib("libstdc++.so.6")]
    if torch is not None:
        paths += [torch / "lib" / "libshm.so", torch / "lib" / "libc10.so"]
    for path in paths:
        if path is not None and path.exists() and path.stat().st_size < 3 << 20:
            samples.append(_sample(path.name, path.read_bytes()))
    synthetic = build_elf(synthetic_spec(False, True, "gnu")).bytes()
    samples.append(_sample("synthetic-elf32-be", synthetic))
    return samples


def parse_or_elf_error(data: bytes, name: str) -> None:
    """Parse and look at every symbol; only ElfError may escape, within a few seconds."""
    with time_limit(5):
        try:
            image = parse_elf(BytesSource(data, name))
        except ElfError as e:
            assert "\n" not in str(e) and name in str(e)
            return
        for sym in image.symbols:
            _ = sym.versioned_name
        image.symbols.counts()


@settings(max_examples=120, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncation_raises_only_elf_error(mutation_samples: list[Sample], data: st.DataObject
                                          ) -> None:
    """A real file cut at any length parses or raises ElfError, and never hangs."""
    sample = data.draw(st.sampled_from(mutation_samples), label="file")
    region = data.draw(st.sampled_from([(0, len(sample.data)), *sample.regions]), label="region")
    cut = data.draw(st.integers(region[0], region[1]), label="length")
    parse_or_elf_error(sample.data[:cut], f"{sample.name}[:{cut}]")


_REPLACEMENT = st.one_of(
    st.tuples(st.just("xor"), st.integers(1, 255)),
    st.tuples(st.just("set"), st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF])),
)


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_byte_flips_raise_only_elf_error(mutation_samples: list[Sample], data: st.DataObject
                                         ) -> None:
    """1-8 changed bytes anywhere (biased into the headers and tables) never escape ElfError."""
    sample = data.draw(st.sampled_from(mutation_samples), label="file")
    mutated = bytearray(sample.data)
    size = len(mutated)
    regions = st.sampled_from([(0, size), *sample.regions])
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        start, end = data.draw(regions)
        position = data.draw(st.integers(start, max(start, end - 1)), label="position")
        how, value = data.draw(_REPLACEMENT)
        mutated[position] = mutated[position] ^ value if how == "xor" else value
    parse_or_elf_error(bytes(mutated), f"{sample.name}*")
