"""`abifit variants` against a loopback index serving one release built for several Pythons and
platforms: the target chooses the wheels compared (as `check` chooses them), `--all` compares
every wheel, and a summary line says what was compared and what the target left out."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.variants import architecture, normalized
from abifit.remote.packageindex import Target
from elfbuilder import ElfSpec, Sym, build_elf
from helpers import schema, validate
from httpserver import LoopbackIndex, Projects

SCHEMA = schema("variants")
EM_AARCH64 = 183

CP311 = "multi-1.0-cp311-cp311-linux_x86_64.whl"
CP311_BUILD = "multi-1.0-1-cp311-cp311-linux_x86_64.whl"
CP312 = "multi-1.0-cp312-cp312-linux_x86_64.whl"
AARCH64 = "multi-1.0-cp311-cp311-linux_aarch64.whl"
MACOS = "multi-1.0-cp311-cp311-macosx_10_9_x86_64.whl"
WINDOWS = "multi-1.0-cp311-cp311-win_amd64.whl"
EVERY = sorted([CP311, CP311_BUILD, CP312, AARCH64, MACOS, WINDOWS])
X86_311 = ["--python-version", "3.11", "--platform", "linux_x86_64"]


def _module(*undefined: str, machine: int = 62) -> bytes:
    """An extension module that defines PyInit__core and needs libc for `undefined`."""
    symbols = (Sym("PyInit__core"), *(Sym(name, defined=False) for name in undefined))
    return build_elf(ElfSpec(machine=machine, symbols=symbols, needed=("libc.so.6",))).bytes()


def _wheel(filename: str, members: dict[str, bytes]) -> tuple[str, bytes]:
    name, version, *rest = filename[:-4].split("-")
    tag = "-".join(rest[-3:])
    dist = f"{name}-{version}.dist-info"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("multi/__init__.py", b"")
        for path, data in members.items():
            zf.writestr(path, data)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\n"
                    f"Version: {version}\n")
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
    return filename, buffer.getvalue()


@pytest.fixture(scope="module")
def index_projects() -> Projects:
    """multi 1.0: a cp311 and a cp312 wheel for x86-64 Linux with the same module, a rebuild of
    the cp311 one whose module also calls printf, and aarch64 Linux, macOS and Windows wheels."""
    module = _module("puts")
    return {"multi": [
        _wheel(CP311, {"multi/_core.cpython-311-x86_64-linux-gnu.so": module}),
        _wheel(CP311_BUILD,
               {"multi/_core.cpython-311-x86_64-linux-gnu.so": _module("puts", "printf")}),
        _wheel(CP312, {"multi/_core.cpython-312-x86_64-linux-gnu.so": module}),
        _wheel(AARCH64, {"multi/_core.cpython-311-aarch64-linux-gnu.so":
                         _module("puts", machine=EM_AARCH64)}),
        _wheel(MACOS, {"multi/_core.cpython-311-darwin.so": b"\xcf\xfa\xed\xfe" + bytes(60)}),
        _wheel(WINDOWS, {"multi/_core.cp311-win_amd64.pyd": b"MZ" + bytes(62)}),
    ]}


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, index: str,
        cache: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main(["variants", *args, "--index-url", index, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _document(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
              index: str, cache: Path, *args: str) -> dict[str, object]:
    code, out, err = run(capsys, monkeypatch, index, cache, "multi==1.0", "--json", *args)
    assert code == 0, err
    doc: dict[str, object] = json.loads(out)
    validate(doc, SCHEMA)
    return doc


def _groups(doc: dict[str, object]) -> list[list[str]]:
    groups = doc["groups"]
    assert isinstance(groups, list)
    return sorted(sorted(g["filenames"]) for g in groups)


def test_the_target_chooses_the_wheels_compared(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """For cp311 on linux_x86_64 only the two cp311 x86-64 wheels are compared: two groups, and
    the symbol one module leaves undefined and the other not; the other Pythons and platforms
    are left out, and no macOS or Windows member is reported as not an ELF file."""
    doc = _document(capsys, monkeypatch, loopback_index.url, tmp_path, *X86_311)
    assert doc["target"] == "cp311 on linux_x86_64"
    assert _groups(doc) == [[CP311_BUILD], [CP311]]
    assert doc["left_out"] == sorted([CP312, AARCH64, MACOS, WINDOWS])
    differences = doc["differences"]
    assert isinstance(differences, list)
    (diff,) = differences
    assert (diff["path"], diff["reference"], diff["other"]) == ("multi/_core.so", CP311_BUILD,
                                                                CP311)
    assert diff["undefined_removed"] == ["printf"] and diff["undefined_added"] == []
    assert diff["error"] is None


def test_python_version_picks_another_python(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--python-version 3.12` compares the cp312 wheel alone and leaves the five others out."""
    doc = _document(capsys, monkeypatch, loopback_index.url, tmp_path,
                    "--python-version", "3.12", "--platform", "linux_x86_64")
    assert doc["target"] == "cp312 on linux_x86_64"
    assert _groups(doc) == [[CP312]]
    assert doc["differences"] == [] and len(doc["left_out"]) == 5  # type: ignore[arg-type]


def test_platform_picks_another_machine(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--platform linux_aarch64` compares the aarch64 wheel alone."""
    doc = _document(capsys, monkeypatch, loopback_index.url, tmp_path,
                    "--python-version", "3.11", "--platform", "linux_aarch64")
    assert _groups(doc) == [[AARCH64]]
    assert doc["left_out"] == sorted([CP311, CP311_BUILD, CP312, MACOS, WINDOWS])


def test_default_target_is_this_interpreter(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without target options the target is this interpreter, as for `check`; every wheel is
    either compared or left out. (No wheel fitting this machine is the error of the next
    test.)"""
    code, out, err = run(capsys, monkeypatch, loopback_index.url, tmp_path, "multi==1.0",
                         "--json")
    if code == 2:
        assert err.startswith("error: no wheel of multi==1.0 fits ")
        return
    doc = json.loads(out)
    assert doc["target"] == str(Target.for_python())
    compared = [f for group in _groups(doc) for f in group]
    assert sorted(compared + doc["left_out"]) == EVERY


def test_all_compares_every_wheel(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--all` compares every Linux wheel whatever the target: the cp312 wheel groups with
    the cp311 one (module names without their Python tag); the macOS and Windows wheels,
    whose modules are not ELF files, are left out (not one "not an ELF file" difference per
    member), and there is no target."""
    doc = _document(capsys, monkeypatch, loopback_index.url, tmp_path, "--all", *X86_311)
    assert doc["target"] is None and doc["left_out"] == sorted([MACOS, WINDOWS])
    assert sorted(f for group in _groups(doc) for f in group) == sorted(
        set(EVERY) - {MACOS, WINDOWS})
    assert [CP311, CP312] in _groups(doc)
    differences = doc["differences"]
    assert isinstance(differences, list)
    assert not [d for d in differences if d["error"]]


def test_text_ends_with_a_summary_line(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The text starts with the target and ends with one line: wheels compared, groups, and
    how many the target left out (or none, with --all)."""
    code, out, _err = run(capsys, monkeypatch, loopback_index.url, tmp_path, "multi==1.0",
                          *X86_311)
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "target: cp311 on linux_x86_64"
    assert lines[-1] == ("multi 1.0: 2 wheel(s) compared in 2 group(s) of identical binaries; "
                         "4 left out by the target (--all compares every wheel)")
    assert "not an ELF file" not in out
    code, out, _err = run(capsys, monkeypatch, loopback_index.url, tmp_path, "multi==1.0",
                          "--all", *X86_311)
    lines = out.splitlines()
    assert lines[0] == "target: every wheel (--all)"
    assert lines[-1] == ("multi 1.0: 4 wheel(s) compared in 3 group(s) of identical binaries; "
                         "2 for macOS or Windows not compared (abifit reads ELF files only)")


def test_no_wheel_for_the_target_is_an_error_with_a_hint(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A target no wheel of the release fits is an `error:` line, exit 2, with the platforms
    offered and a hint that names --all."""
    code, out, err = run(capsys, monkeypatch, loopback_index.url, tmp_path, "multi==1.0",
                         "--python-version", "3.11", "--platform", "linux_ppc64le")
    assert code == 2 and out == ""
    first, *rest = err.splitlines()
    assert first.startswith("error: no wheel of multi==1.0 fits cp311 on linux_ppc64le")
    assert any(line.startswith("hint: ") and "--all compares every wheel" in line
               for line in rest)


@pytest.mark.parametrize(("path", "expected"), [
    ("pkg/_core.cpython-311-x86_64-linux-gnu.so", "pkg/_core.so"),
    ("pkg/_core.pypy310-pp73-x86_64-linux-gnu.so", "pkg/_core.so"),
    ("pkg/_core.abi3.so", "pkg/_core.abi3.so"),
    ("pkg/lib/libfoo.so.1", "pkg/lib/libfoo.so.1"),
], ids=["cpython", "pypy", "abi3", "library"])
def test_normalized_drops_the_python_tag_of_modules(path: str, expected: str) -> None:
    """Extension module names lose their Python tag; other members keep their names."""
    assert normalized(path) == expected


@pytest.mark.parametrize(("filename", "expected"), [
    (CP311, "x86_64"), (AARCH64, "aarch64"), (MACOS, "x86_64"), (WINDOWS, "amd64"),
    ("multi-1.0-py3-none-any.whl", "any"),
], ids=["linux-x86_64", "linux-aarch64", "macos-x86_64", "windows", "pure"])
def test_architecture_of_a_wheel(filename: str, expected: str) -> None:
    """The machine of a wheel's platform tag."""
    assert architecture(filename) == expected
