"""The dynamic symbol tables of pyelftools' test files against GNU readelf.

pyelftools' source distribution ships ELF files of many machines and linkers
(`test/testfiles_for_readelf/`, `test/testfiles_for_unittests/`, ...). The set-up fetches it
once from PyPI (pinned by sha256) into the test cache; the tests skip when it cannot be fetched.
The loader reads the dynamic symbols through the dynamic segment (DT_SYMTAB, sized by DT_HASH or
DT_GNU_HASH); readelf lists the `.dynsym` section. Where the two legitimately differ the test
says why (no PT_DYNAMIC; no usable section headers; a `.dynsym` whose string table is not
DT_STRTAB's), and compares everything else name by name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from abifit.formats.elf import PT_DYNAMIC, SHT_DYNSYM, ElfError, ElfImage, parse_elf, parse_layout
from abifit.formats.sources import FileSource
from conftest import CACHE

pytestmark = pytest.mark.network

SDIST = "pyelftools-0.33.tar.gz"
SHA256 = "660d82dcbeb8e83d1702bd97f223f761625da06111c0cc988eac6b8ab0c1b61f"


@pytest.fixture(scope="module")
def elf_files() -> list[Path]:
    """Every ELF file of pyelftools 0.33's tests, extracted once into the test cache."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is needed as the oracle")
    root = CACHE / "pyelftools-0.33"
    done = root / ".extracted"
    if not done.exists():
        root.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                              "--no-binary", ":all:", "pyelftools==0.33", "-d", str(root), "-q"],
                             capture_output=True, text=True, env=env, timeout=300, check=False)
        sdist = root / SDIST
        if got.returncode != 0 or not sdist.exists():
            pytest.skip(f"pyelftools' sdist could not be fetched: {got.stderr.strip()[-200:]}")
        assert hashlib.sha256(sdist.read_bytes()).hexdigest() == SHA256
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and "/test/" in m.name and ".." not in m.name]
            tar.extractall(root, members=members, filter="data")
        done.touch()
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
             and p.open("rb").read(4) == b"\x7fELF"]
    assert len(files) > 100, len(files)
    return files


def _readelf_names(path: Path) -> tuple[int, list[str]] | None:
    """The names of `.dynsym` as readelf lists them (section symbols as ""), with its entry count;
    None when readelf lists no `.dynsym`."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True,
                         text=True, check=False).stdout
    if "Symbol table '.dynsym'" not in out:
        return None
    names = []
    for line in out.splitlines():
        fields = line.split(None, 7)
        if len(fields) >= 7 and fields[0][:-1].isdigit() and fields[0].endswith(":"):
            if int(fields[0][:-1]) == 0:
                continue
            name = fields[7] if len(fields) == 8 else ""
            names.append("" if fields[3] == "SECTION" else name.split("@")[0].split(" (")[0])
    return len(names), names


def _mine(image: ElfImage) -> list[str]:
    table = image.symbols
    return ["" if info & 0xF == 3 else name for name, info in zip(table.names, table.info,
                                                                   strict=True)]


def _why_apart(path: Path, image: ElfImage) -> str | None:
    """Why readelf's `.dynsym` is not the loader's table here, if it is not."""
    with FileSource(str(path)) as source:
        layout = parse_layout(source, sections=False)
    if not any(s.type == PT_DYNAMIC for s in layout.segments):
        return "no PT_DYNAMIC: the loader sees no dynamic symbols"
    if image.section_problem is not None or not any(s.type == SHT_DYNSYM for s in image.sections):
        return "no usable section headers: readelf lists no .dynsym"
    if sum(1 for s in image.sections if s.name == ".dynstr") > 1:
        return ("two .dynstr sections: readelf names from the one .dynsym links, ld.so from "
                "DT_STRTAB")
    return None


def _compare(elf_files: list[Path], *, remote: bool) -> tuple[list[str], list[str], list[str]]:
    """(compared, apart, differing) file names, reading views as a local (relocations and
    section headers) or a remote read (neither) does."""
    compared, apart, differ = [], [], []
    for path in elf_files:
        theirs = _readelf_names(path)
        try:
            with FileSource(str(path)) as source:
                image = parse_elf(source, relocations=not remote, sections=not remote)
            with FileSource(str(path)) as source:
                full = parse_elf(source)
        except ElfError:
            assert theirs is None or not theirs[1], path
            continue
        why = _why_apart(path, full)
        if why is not None and why.startswith("no PT_DYNAMIC"):
            assert not image.symbols.names, path  # nothing to bind: no dynamic table at all
            continue
        if why is not None:
            apart.append(f"{path.name}: {why}")
            continue
        if theirs is None:
            continue
        compared.append(path.name)
        if _mine(image) != theirs[1]:
            differ.append(path.name)
    return compared, apart, differ


@pytest.mark.parametrize("remote", [False, True], ids=["local-view", "remote-view"])
def test_dynamic_symbols_equal_readelf(elf_files: list[Path], remote: bool) -> None:
    """Every file's dynamic symbol names equal readelf's, in the local and the remote view,
    except where the section view is not the loader's (a handful, each for a stated reason).
    Among them are programs whose GNU hash table hashes no symbol (all buckets empty, a symbol
    offset of 1): their count comes from DT_HASH, else from the relocations."""
    compared, apart, differ = _compare(elf_files, remote=remote)
    assert not differ, differ
    assert len(compared) >= 50 and len(apart) <= 8, (len(compared), apart)
    assert {"exe_simple64.elf", "exe_simple32.elf", "sample_exe64.elf"} <= set(compared)


def test_a_zeroed_string_table_is_a_warning(elf_files: list[Path]) -> None:
    """Symbols whose names all come out empty are reported, not taken silently."""
    path = next(p for p in elf_files if p.name == "lib_with_two_dynstr_sections_reversed.so.elf")
    with FileSource(str(path)) as source:
        image = parse_elf(source)
    assert image.warnings and "empty name" in image.warnings[0]
