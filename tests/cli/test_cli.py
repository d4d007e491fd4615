"""`abifit inspect` end to end: files, wheels, installed distributions, JSON, bad input."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.report.json import schema_version
from fixtures.build import compile_c
from helpers import FIXTURES, schema, validate

SOURCES = FIXTURES / "inspect"
LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
SCHEMA = schema("inspect")


def find_python(version: str) -> str | None:
    """A working interpreter of that version: on PATH, or among pyenv's installed versions."""
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path.home() / ".pyenv" / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}*/bin/python3"))
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "pass"],
                                        capture_output=True).returncode == 0:
            return candidate
    return None


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """abifit as a user runs it: a separate process."""
    return subprocess.run([sys.executable, "-m", "abifit", *args], capture_output=True, text=True,
                          timeout=300)


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    doc = json.loads(done.stdout)
    validate(doc, SCHEMA)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def ext_so(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(SOURCES / "demo_ext.c", tmp_path_factory.mktemp("ext") / "_ext.so")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(dest: Path, ext: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A real, installable wheel `demo_ext-1.0` holding the compiled extension."""
    contents = {
        "demo_ext/__init__.py": b"",
        "demo_ext/_ext.so": ext.read_bytes(),
        "demo_ext-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-ext\nVersion: 1.0\n",
        "demo_ext-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\n"
        b"Root-Is-Purelib: false\nTag: py3-none-any\n",
        **(extra or {}),
    }
    record = "\n".join(_record_line(n, d) for n, d in contents.items())
    record += "\ndemo_ext-1.0.dist-info/RECORD,,\n"
    path = dest / "demo_ext-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in contents.items():
            zf.writestr(name, data)
        zf.writestr("demo_ext-1.0.dist-info/RECORD", record)
    return path


def test_inspect_shared_library_text() -> None:
    """The text report names soname, needed libraries, counts and versions of a system library."""
    done = run("inspect", LIBSTDCXX)
    assert done.returncode == 0, done.stderr
    assert "soname     libstdc++.so.6" in done.stdout
    assert "libc.so.6" in done.stdout
    assert "GLIBCXX_3.4" in done.stdout
    assert done.stdout.rstrip().endswith("1 object(s)")


def test_inspect_json_matches_schema_and_readelf() -> None:
    """--json validates against the schema and its counts agree with readelf."""
    done = run("inspect", LIBSTDCXX, "--json")
    assert done.returncode == 0, done.stderr
    doc = json_of(done)
    assert doc["schema_version"] == schema_version("inspect") == 3
    (obj,) = doc["objects"]  # type: ignore[misc]
    readelf = subprocess.run(["readelf", "--dyn-syms", "-W", LIBSTDCXX], capture_output=True,
                             text=True, check=True).stdout
    rows = [line.split() for line in readelf.splitlines() if line.strip()[:1].isdigit()]
    undefined = sum(1 for r in rows if r[6] == "UND") - 1  # minus the null symbol
    assert obj["symbol_counts"]["undefined"] == undefined
    assert obj["symbol_counts"]["defined"] == len(rows) - 1 - undefined
    assert obj["symbol_counts"]["weak"] == sum(1 for r in rows if r[4] == "WEAK")


def test_symbols_match_with_demangled_names() -> None:
    """--match selects symbols by demangled name and shows the demangled text beside them."""
    done = run("inspect", LIBSTDCXX, "--match", "std::runtime_error::runtime_error(char const*)",
               "--json")
    assert done.returncode == 0, done.stderr
    (obj,) = json_of(done)["objects"]  # type: ignore[misc]
    names = {s["name"] for s in obj["symbols"]}
    assert "_ZNSt13runtime_errorC1EPKc" in names
    assert all(s["demangled"] == "std::runtime_error::runtime_error(char const*)"
               for s in obj["symbols"])


def test_symbols_undefined_selection(ext_so: Path) -> None:
    """--symbols undefined lists only undefined symbols, with the weak one marked weak."""
    done = run("inspect", str(ext_so), "--symbols", "undefined", "--json")
    (obj,) = json_of(done)["objects"]  # type: ignore[misc]
    by_name = {s["name"]: s for s in obj["symbols"]}
    assert all(not s["defined"] for s in obj["symbols"])
    assert by_name["demo_optional_hook"]["binding"] == "WEAK"
    assert "PyInit__ext" not in by_name
    text = run("inspect", str(ext_so), "--symbols", "defined").stdout
    assert "D GLOBAL     FUNC      PyInit__ext" in text


def test_inspect_wheel_in_place(tmp_path: Path, ext_so: Path) -> None:
    """A wheel's ELF members are reported with their member paths; other members are skipped."""
    wheel = build_wheel(tmp_path, ext_so)
    done = run("inspect", str(wheel), "--json")
    assert done.returncode == 0, done.stderr
    (obj,) = json_of(done)["objects"]  # type: ignore[misc]
    assert obj["member"] == "demo_ext/_ext.so"
    assert obj["needed"] == ["libc.so.6"]


def test_bad_member_is_reported_and_others_inspected(tmp_path: Path, ext_so: Path) -> None:
    """A truncated ELF member is one error; the good member is still inspected; exit code 2."""
    broken = ext_so.read_bytes()[:200]
    wheel = build_wheel(tmp_path, ext_so, {"demo_ext/_broken.so": broken})
    done = run("inspect", str(wheel), "--json")
    assert done.returncode == 2
    doc = json_of(done)
    objs = {o["member"]: o for o in doc["objects"]}  # type: ignore[union-attr]
    assert objs["demo_ext/_ext.so"]["error"] is None
    assert "truncated" in objs["demo_ext/_broken.so"]["error"]
    assert doc["summary"] == {"objects": 2, "errors": 1}
    assert done.stderr.count("\n") == 1 and "demo_ext/_broken.so" in done.stderr


@pytest.fixture(scope="module")
def py312_venv(tmp_path_factory: pytest.TempPathFactory, ext_so: Path) -> Path:
    python = find_python("3.12")
    if python is None:
        pytest.skip("no working python3.12 on this machine")
    root = tmp_path_factory.mktemp("venv312")
    subprocess.run([python, "-m", "venv", str(root / "venv")], check=True)
    wheel = build_wheel(root, ext_so)
    subprocess.run([str(root / "venv/bin/python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    return root / "venv"


def test_inspect_distribution_of_another_interpreter(py312_venv: Path) -> None:
    """An installed distribution of a Python 3.12 venv is found by name with --python."""
    py = str(py312_venv / "bin" / "python")
    for spelling in ("demo-ext", "Demo_Ext"):
        done = run("inspect", spelling, "--python", py, "--json")
        assert done.returncode == 0, done.stderr
        (obj,) = json_of(done)["objects"]  # type: ignore[misc]
        assert obj["path"].endswith("python3.12/site-packages/demo_ext/_ext.so")


def test_distribution_is_not_imported_into_abifit(py312_venv: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Inspecting a distribution reads files only: its modules never enter abifit's process."""
    assert main(["inspect", "demo-ext", "--python", str(py312_venv / "bin" / "python")]) == 0
    assert "demo_ext" not in sys.modules
    assert "_ext.so" in capsys.readouterr().out


@pytest.mark.slow
def test_inspect_torch_distribution(torch_venv: Path) -> None:
    """`inspect torch --python` reads every ELF file that torch's RECORD lists."""
    done = run("inspect", "torch", "--python", str(torch_venv / "bin" / "python"), "--json")
    assert done.returncode == 0, done.stderr
    objs = json_of(done)["objects"]
    paths = {Path(o["path"]).name for o in objs}  # type: ignore[union-attr]
    assert {"libtorch_cpu.so", "libc10.so", "libtorch_python.so"} <= paths
    cpu = next(o for o in objs if o["path"].endswith("/libtorch_cpu.so"))  # type: ignore[union-attr]
    assert cpu["soname"] == "libtorch_cpu.so"
    assert cpu["symbol_counts"]["defined"] > 50_000


def _one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for needle in needles:
        assert needle in lines[0]


def test_non_elf_file(tmp_path: Path) -> None:
    """A text file is 'not an ELF file', one line, exit 2."""
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    _one_line_error(run("inspect", str(path)), str(path), "not an ELF file")


def test_truncated_elf(tmp_path: Path, ext_so: Path) -> None:
    """An ELF cut after its header is reported with the file name and an offset."""
    path = tmp_path / "cut.so"
    path.write_bytes(ext_so.read_bytes()[:100])
    _one_line_error(run("inspect", str(path)), str(path), "truncated", "offset")


def test_corrupt_zip(tmp_path: Path) -> None:
    """A .whl that is not a zip is one line naming the file."""
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    _one_line_error(run("inspect", str(path)), str(path), "zip")


def test_zip_not_a_wheel(tmp_path: Path) -> None:
    """A zip without wheel metadata is refused in one line."""
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a.txt", "x")
    _one_line_error(run("inspect", str(path)), "not a wheel")


def test_missing_path_and_unknown_distribution() -> None:
    """A missing path and a name no distribution has are one-line errors."""
    _one_line_error(run("inspect", "/no/such/file.so"), "no such file")
    py = sys.executable
    _one_line_error(run("inspect", "no-such-dist-xyz", "--python", py),
                    "no-such-dist-xyz", "neither a file nor a distribution")


def test_invalid_requirement() -> None:
    """A malformed requirement is one line naming it, before any network access."""
    _one_line_error(run("inspect", "torch==2.10.0!!", "--offline", "--no-cache"),
                    "invalid requirement", "torch==2.10.0!!")


def test_bad_interpreter(tmp_path: Path) -> None:
    """--python pointing at something that is not Python is one line, exit 2."""
    _one_line_error(run("inspect", "torch", "--python", "/bin/false"), "/bin/false")
    _one_line_error(run("inspect", "torch", "--python", str(tmp_path / "nope")), "nope")


def test_usage_error() -> None:
    """A bad option is a usage error with exit code 2 and a hint."""
    done = run("inspect", LIBSTDCXX, "--symbols", "sideways")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr


def test_the_command_sets_the_allocator_where_glibc_is_the_c_library() -> None:
    """`abifit` (and `python -m abifit`) fixes glibc's mmap threshold and arena count before its
    main; elsewhere nothing is changed and nothing fails."""
    import platform

    from abifit.host.allocator import tune_allocator

    assert tune_allocator() is (platform.libc_ver()[0] == "glibc")
