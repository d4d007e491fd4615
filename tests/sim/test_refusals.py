"""Files glibc's loader refuses, and what it says: the simulation against a real dlopen.

A shared object built from `fixtures/loader/dep.c` is cut short and has single fields of its
headers changed, as a damaged download or copy does; each file is opened with ctypes.CDLL
(RTLD_NOW) in a fresh Python process and by the simulation, and the two must agree, word for
word: "file too short" (shorter than an ELF header, whatever it holds), "invalid ELF header",
"cannot read file data" (program headers past the end), the checks of the ELF identification
and header in glibc's order, and what `_dl_map_object_from_fd` refuses (an executable, a
position-independent executable, a file with nothing to map). Only one field is damaged per
file: for a file damaged twice, glibc releases differ in which problem they name.

A file cut at every 128th byte is loaded in a process of its own (one cut inside what the loader
maps kills it: SIGBUS, when the loader touches a page wholly past the end of the file), and the
simulation must tell a crash, a refusal (in glibc's words) and a load apart as the real loader
does. Not covered, as not predicted exactly: a file cut within the last page of what it maps,
with a table the loader reads running past the end. The loader reads zeros there and often
dies of SIGSEGV (a library patchelf has edited keeps its dynamic section last); abifit predicts
a failed load.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.doctor import search_config
from abifit.formats.elf import LOADER_PAGE
from abifit.formats.errortext import LOADER_REFUSALS
from abifit.host.ldconfig import probe_host
from abifit.host.localfs import LocalObjects
from abifit.sim.loader import Process, crashes
from fixtures.build import ROOT, compile_c

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or sys.platform != "linux"
                                or struct.calcsize("P") != 8,
                                reason="needs gcc, on 64-bit Linux")

ELF64_PHDR = 56


def _header(data: bytes) -> dict[str, int]:
    """The fields of an ELF64 little-endian header this test changes."""
    (_type, _machine, _version, _entry, phoff, _shoff, _flags, _ehsize, phentsize,
     phnum) = struct.unpack_from("<HHIQQQIHHH", data, 16)
    return {"phoff": phoff, "phentsize": phentsize, "phnum": phnum}


def _loads(data: bytes) -> list[tuple[int, int]]:
    """(offset, size in the file) of each PT_LOAD segment of an ELF64 little-endian file."""
    h = _header(data)
    out = []
    for i in range(h["phnum"]):
        ptype, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from(
            "<IIQQQQ", data, h["phoff"] + i * ELF64_PHDR)
        if ptype == 1:
            out.append((offset, filesz))
    return out


def _patched(data: bytes, *changes: tuple[int, bytes]) -> bytes:
    out = bytearray(data)
    for offset, value in changes:
        out[offset:offset + len(value)] = value
    return bytes(out)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files, by what was done to them."""
    root = tmp_path_factory.mktemp("refusals")
    data = compile_c(ROOT / "loader" / "dep.c", root / "built" / "libdep.so").read_bytes()
    h = _header(data)
    assert h["phentsize"] == ELF64_PHDR and h["phnum"] > 0
    phdr_end = h["phoff"] + h["phnum"] * ELF64_PHDR
    u16 = struct.Struct("<H").pack
    variants = {
        "intact": data,
        "empty": b"",
        "one byte": data[:1],
        "cut in the identification": data[:10],
        "cut in the header": data[:40],
        "one byte short of a header": data[:63],
        "a header and nothing else": data[:64],
        "cut in the program headers": data[:phdr_end - 1],
        "text, short": b"hello world, not elf\n",
        "text, long": b"INPUT ( libdep.so.1 )\n" * 8,
        "class 3": _patched(data, (4, b"\x03")),
        "32-bit class": _patched(data, (4, b"\x01")),
        "big-endian data": _patched(data, (5, b"\x02")),
        "unknown data encoding": _patched(data, (5, b"\x03")),
        "identification version 0": _patched(data, (6, b"\x00")),
        "OS ABI 9": _patched(data, (7, b"\x09")),
        "SYSV with ABI version 1": _patched(data, (8, b"\x01")),
        "GNU with ABI version 3": _patched(data, (7, b"\x03"), (8, b"\x03")),
        "GNU with ABI version 255": _patched(data, (7, b"\x03"), (8, b"\xff")),
        "padding": _patched(data, (10, b"\x01")),
        "e_version 0": _patched(data, (20, b"\0\0\0\0")),
        "relocatable": _patched(data, (16, u16(1))),
        "core file": _patched(data, (16, u16(4))),
        "executable type": _patched(data, (16, u16(2))),
        "another machine": _patched(data, (18, u16(3))),
        "small program header entries": _patched(data, (54, u16(48))),
        "large program header entries": _patched(data, (54, u16(64))),
        "program headers past the end": _patched(data, (32, struct.pack("<Q", 1 << 30))),
        "no program headers": _patched(data, (56, u16(0))),
    }
    files = {}
    for name, content in variants.items():
        path = root / (name.replace(" ", "_").replace(",", "") + ".so")
        path.write_bytes(content)
        files[name] = path
    files["position-independent executable"] = compile_c(
        ROOT / "loader" / "main.c", root / "pie", shared=False, flags=["-fPIE", "-pie"])
    return files


REAL = """
import ctypes, json, os, sys
said = {}
for path in sys.argv[1:]:
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW)
        said[path] = None
    except OSError as e:
        said[path] = str(e)
print(json.dumps(said))
"""


def real_dlopen(paths: list[Path]) -> dict[str, str | None]:
    """The error of each dlopen in a fresh Python process (None for a file that loads)."""
    done = subprocess.run([sys.executable, "-c", REAL, *map(str, paths)], capture_output=True,
                          text=True, timeout=60, check=True)
    said: dict[str, str | None] = json.loads(done.stdout)
    return said


def test_the_simulation_refuses_what_glibc_refuses_in_its_words(
        damaged: dict[str, Path]) -> None:
    real = real_dlopen(list(damaged.values()))
    process = Process(LocalObjects(), search_config(probe_host(os.environ)), sys.executable)
    simulated = {}
    for path in damaged.values():
        result = process.copy().dlopen(str(path))
        simulated[str(path)] = None if result.loads else result.error
    disagreements = {name: (real[str(p)], simulated[str(p)]) for name, p in damaged.items()
                     if real[str(p)] != simulated[str(p)]}
    assert disagreements == {}
    # the test means something: the intact file loads, the others fail in words of their own
    refused = {name: real[str(p)] for name, p in damaged.items()}
    assert refused["intact"] is None and refused["GNU with ABI version 3"] is None
    words = {said.split(": ", 1)[1] for said in refused.values() if said is not None}
    assert {"file too short", "invalid ELF header", "cannot read file data",
            "nonzero padding in e_ident", "cannot dynamically load executable",
            "object file has no loadable segments",
            "cannot dynamically load position-independent executable"} <= words
    assert len(words) >= 14
    # what `abifit explain` reads back: every refusal of a file the loader found
    refusals = {w for w in words if not w.startswith(("wrong ELF class", "cannot open shared"))}
    assert refusals <= set(LOADER_REFUSALS), refusals - set(LOADER_REFUSALS)


ONE_CUT = """
import ctypes, os, sys
try:
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)
    print("loads")
except OSError as e:
    print(str(e).split(": ", 1)[1])
"""


def test_a_file_cut_short_is_a_crash_a_refusal_or_a_load_as_for_the_real_loader(
        tmp_path: Path) -> None:
    data = compile_c(ROOT / "loader" / "dep.c", tmp_path / "libdep.so").read_bytes()
    process = Process(LocalObjects(), search_config(probe_host(os.environ)), sys.executable)
    seen: dict[str, int] = {}
    disagreements = []
    for size in [*range(0, len(data), 128), len(data) - 1]:
        path = tmp_path / f"cut{size}.so"
        path.write_bytes(data[:size])
        done = subprocess.run([sys.executable, "-c", ONE_CUT, str(path)], capture_output=True,
                              text=True, timeout=60, check=False)
        real = "crash" if done.returncode == -signal.SIGBUS else done.stdout.strip()
        result = process.copy().dlopen(str(path))
        error = (result.error or "").split(": ", 1)[-1]
        predicted = "loads" if result.loads else "crash" if crashes(result.error) else error
        kind = real if real in ("crash", "loads") else "refused"
        seen[kind] = seen.get(kind, 0) + 1
        if real != predicted:
            disagreements.append((size, real, predicted))
    assert disagreements == []
    assert set(seen) == {"crash", "loads", "refused"}, seen  # all three were met


def test_inspect_warns_of_a_refused_file_and_of_one_cut_short(
        damaged: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`abifit inspect` reads both (they are ELF files it can read) and says what keeps the
    loader from loading them."""
    data = compile_c(ROOT / "loader" / "data.c", tmp_path / "libdata.so").read_bytes()
    end = max(offset + size for offset, size in _loads(data))
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:end - 2 * LOADER_PAGE])  # inside the table: the rest is whole
    for path, said in ((damaged["padding"], "glibc's loader refuses it: nonzero padding in "
                                            "e_ident"),
                       (cut, "cut short: the file ends at byte")):
        assert main(["inspect", str(path), "--json"]) == 0
        (obj,) = json.loads(capsys.readouterr().out)["objects"]
        assert any(w.startswith(said) for w in obj["warnings"]), obj["warnings"]
