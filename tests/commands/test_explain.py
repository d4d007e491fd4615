"""`abifit explain` on the real loader's messages: tiny extension modules built from
tests/fixtures/explain/ are installed in a fresh venv, loaded with `ctypes.CDLL(path,
RTLD_NOW)` in a subprocess for the genuine text of glibc's loader, and that text is explained
against the venv; `--json` validates against explain.schema.json."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.explanation import ReleaseChanged, StandsIn
from abifit.report.explain import note_text
from fixtures.build import compile_c
from helpers import FIXTURES, schema, validate, venv_with_package

SOURCES = FIXTURES / "explain"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
SCHEMA = schema("explain")
CXX_SYMBOL = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"


@dataclass(frozen=True, slots=True)
class Venv:
    """The venv, its package directory and the real loader's message for each module."""

    python: str
    package: Path
    messages: dict[str, str]


def record(package: Path) -> None:
    """The dist-info of `package`, version 1.0, listing its files: installed by a tool."""
    site, name = package.parent, package.name
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    listed = sorted(str(p.relative_to(site)) for p in package.iterdir())
    (info / "RECORD").write_text("".join(f"{p},,\n" for p in listed))


def _real_error(path: Path) -> str:
    """What `ctypes.CDLL(path, RTLD_NOW)` raises in a fresh process: the loader's own text."""
    code = ("import ctypes, os, sys\ntry:\n    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)\n"
            "except OSError as e:\n    print(f'OSError: {e}')\nelse:\n    print('loaded')\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, check=True, env={"PATH": os.defpath})
    return done.stdout.strip()


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv without pip holding `explpkg` (recorded in its dist-info): `_undef` needs a C
    function nothing defines, `_cxx` a c10:: function, `_needs` a library that is not there,
    `_usever` version VERS_2 of a libexplver.so that has only VERS_1."""
    root = tmp_path_factory.mktemp("explain")
    package = venv_with_package(root, "explpkg")
    build = root / "build"
    compile_c(SOURCES / "undef.c", package / f"_undef{SUFFIX}")
    compile_c(SOURCES / "cxx_undef.cpp", package / f"_cxx{SUFFIX}", cxx=True)
    gone = compile_c(SOURCES / "gone.c", build / "libexplgone.so", soname="libexplgone.so")
    compile_c(SOURCES / "needs.c", package / f"_needs{SUFFIX}", libs=[gone])
    ver2 = compile_c(SOURCES / "ver.c", build / "libexplver.so", soname="libexplver.so",
                     flags=[f"-Wl,--version-script={SOURCES / 'ver2.map'}"])
    compile_c(SOURCES / "usever.c", package / f"_usever{SUFFIX}", libs=[ver2],
              rpath=["$ORIGIN"])
    compile_c(SOURCES / "ver.c", package / "libexplver.so", soname="libexplver.so",
              flags=[f"-Wl,--version-script={SOURCES / 'ver1.map'}"])
    record(package)
    messages = {n: _real_error(package / f"_{n}{SUFFIX}")
                for n in ("undef", "cxx", "needs", "usever")}
    return Venv(str(root / "venv" / "bin" / "python"), package, messages)


def _explain(venv: Venv, text: str, capsys: pytest.CaptureFixture[str],
             *extra: str) -> tuple[int, dict[str, object], str]:
    code = main(["explain", text, "--python", venv.python, "--json", "--no-cache", *extra])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    validate(doc, SCHEMA)
    return code, doc, captured.err


def _only(doc: dict[str, object]) -> dict[str, object]:
    explanations = doc["explanations"]
    assert isinstance(explanations, list) and len(explanations) == 1, explanations
    found = explanations[0]
    assert isinstance(found, dict)
    return found


def test_real_undefined_symbol_is_confirmed(venv: Venv,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """glibc's `OBJ: undefined symbol: explain_missing_fn`: the object found by its path in the
    venv, doctor's simulation confirms it, the finding names the symbol."""
    message = venv.messages["undef"]
    assert "undefined symbol: explain_missing_fn" in message
    code, doc, _ = _explain(venv, f"Traceback (most recent call last):\n  ...\n{message}", capsys)
    e = _only(doc)
    assert code == 1 and doc["verdict"] == "problems"
    assert e["kind"] == "undefined-symbol" and e["verdict"] == "confirmed"
    assert e["object"] == str(venv.package / f"_undef{SUFFIX}") and e["located_by"] == "path"
    assert e["distribution"] == "explpkg 1.0"
    assert e["module"]["loads"] is False  # type: ignore[index]
    assert [f["symbol"] for f in e["findings"]] == ["explain_missing_fn"]  # type: ignore[index]
    assert e["demangled"] is None


def test_real_cxx_symbol_of_torch_points_at_history(venv: Venv,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A c10:: symbol nothing defines: demangled with its signature, confirmed, and torch named
    as the package that defines it, with the `abifit history` command (the seam's default)."""
    message = venv.messages["cxx"]
    assert f"undefined symbol: {CXX_SYMBOL}" in message
    code, doc, _ = _explain(venv, message, capsys)
    e = _only(doc)
    assert code == 1 and e["verdict"] == "confirmed"
    assert e["signature"] == ("c10::cuda::c10_cuda_check_implementation(int, char const*, "
                              "char const*, int, bool)")
    assert e["provider"] == (f"defined by torch; the release that defines it is found by "
                             f"`abifit history {CXX_SYMBOL} --in torch`")
    assert "torch is not installed in this environment" in e["notes"]  # type: ignore[operator]
    assert e["fix"] == "install the torch release that defines it, or rebuild explpkg against torch"


def test_symbol_history_seam_is_used(venv: Venv) -> None:
    """The history `explain` is given says which releases define the symbol, the newest of them
    to install, and where its signature changed; `standing_in` is the version asked about."""
    from abifit.engines.explain import explain
    from abifit.engines.history import Change, Form, HistoryReport
    from abifit.formats.errortext import read_clues

    new = CXX_SYMBOL.replace("S2_ib", "S2_jb")
    asked: list[tuple[str, str, str | None]] = []

    def history(symbol: str, package: str, version: str | None) -> HistoryReport:
        asked.append((symbol, package, version))
        releases = ("2.8.0", "2.9.0", "2.9.1", "2.10.0")
        return HistoryReport(symbol, package, releases,
                             (Form(CXX_SYMBOL, "", releases[:3], (), ()),
                              Form(new, "", releases[3:], (), ())),
                             (Change("2.10.0", "2.9.1", CXX_SYMBOL, new,
                                     "parameter 4: `int` → `unsigned int`"),), ())

    report = explain(read_clues(venv.messages["cxx"]), venv.python, environ=dict(os.environ),
                     cache_dir=None, progress=lambda _s: None, history=history,
                     standing_in={"torch": "2.10.0"})
    e = report.explanations[0]
    assert asked == [(CXX_SYMBOL, "torch", "2.10.0")]
    assert e.provider == "torch 2.8.0-2.9.1 define it (of 4 releases, 2.8.0 to 2.10.0)"
    assert e.fix == ("`pip install torch==2.9.1` (the newest release examined that defines "
                     "it), or rebuild explpkg against torch 2.10.0")
    assert StandsIn("torch", "2.10.0") in e.notes
    assert ReleaseChanged("torch", "2.10.0", "parameter 4: `int` → `unsigned int`",
                          "c10::cuda::c10_cuda_check_implementation(int, char const*, char "
                          "const*, unsigned int, bool)") in e.notes
    notes = [note_text(n) for n in e.notes]
    assert "torch 2.10.0 stands in for the environment's (--with)" in notes
    assert any(n.startswith("torch 2.10.0 changed it: parameter 4: `int` → `unsigned int`; "
                            "from 2.10.0 it is c10::cuda::c10_cuda_check_implementation(int, "
                            "char const*, char const*, unsigned int, bool)") for n in notes)


def test_history_of_only_another_form_says_what_changed(venv: Venv) -> None:
    """When the releases searched define only another form of the function, the explanation
    names it, the parameter that differs, and that older releases may define the one needed."""
    from abifit.engines.explain import explain
    from abifit.engines.history import Form, HistoryReport
    from abifit.formats.errortext import read_clues

    new = CXX_SYMBOL.replace("S2_ib", "S2_jb")
    releases = ("2.10.0", "2.11.0")
    found = HistoryReport(CXX_SYMBOL, "torch", releases,
                          (Form(new, "c10::cuda::c10_cuda_check_implementation(int, char const*, "
                                "char const*, unsigned int, bool)", releases, (), ()),), (), ())
    report = explain(read_clues(venv.messages["cxx"]), venv.python, environ=dict(os.environ),
                     cache_dir=None, progress=lambda _s: None,
                     history=lambda _s, _p, _v: found)
    e = report.explanations[0]
    assert e.provider == ("no release of torch examined defines it (2 releases, 2.10.0 to "
                          "2.11.0); torch 2.10.0-2.11.0 define c10::cuda::c10_cuda_check_"
                          "implementation(int, char const*, char const*, unsigned int, bool) "
                          "instead")
    assert ("against the form needed: same function c10::cuda::c10_cuda_check_implementation; "
            "parameter 4: `int` → `unsigned int`") in [note_text(n) for n in e.notes]
    assert e.fix == "install the torch release that defines it, or rebuild explpkg against torch"


def test_real_missing_library_names_the_module_that_needs_it(
        venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """glibc's `libexplgone.so: cannot open shared object file` names no object: the module of
    the venv that needs it is found by the simulation, and the finding's hint is the fix."""
    message = venv.messages["needs"]
    assert "libexplgone.so: cannot open shared object file: No such file or directory" in message
    code, doc, _ = _explain(venv, message, capsys)
    e = _only(doc)
    assert code == 1 and e["kind"] == "missing-library" and e["verdict"] == "confirmed"
    assert e["clue"] == {"library": "libexplgone.so", "obj": None}
    assert e["object"] == str(venv.package / f"_needs{SUFFIX}")
    assert [f["library"] for f in e["findings"]] == ["libexplgone.so"]  # type: ignore[index]
    assert e["fix"]


def test_real_missing_version_node(venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """glibc's ``version `VERS_2' not found (required by OBJ)`` for a library rebuilt without
    that node: the object and the library named, confirmed by the simulation."""
    message = venv.messages["usever"]
    assert "version `VERS_2' not found (required by " in message
    code, doc, _ = _explain(venv, message, capsys)
    e = _only(doc)
    assert code == 1 and e["kind"] == "missing-version" and e["verdict"] == "confirmed"
    assert e["clue"]["version"] == "VERS_2"  # type: ignore[index]
    assert e["object"] == str(venv.package / f"_usever{SUFFIX}")
    assert [f["version"] for f in e["findings"]] == ["VERS_2"]  # type: ignore[index]


def test_object_found_by_file_name_from_another_machine(
        venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """A message pasted from another machine: its path is not here, the object is found by its
    file name among the venv's files."""
    text = f"ImportError: /elsewhere/explpkg/_undef{SUFFIX}: undefined symbol: explain_missing_fn"
    code, doc, _ = _explain(venv, text, capsys)
    e = _only(doc)
    assert code == 1 and e["located_by"] == "file name" and e["verdict"] == "confirmed"


def test_object_that_loads_here_and_object_not_here(
        venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """A library that loads here: not reproduced (exit 0); an object no file of the venv is:
    not in this environment."""
    text = (f"OSError: {venv.package}/libexplver.so: undefined symbol: other_fn\n"
            "ImportError: /x/nothere.so: undefined symbol: foo")
    code, doc, _ = _explain(venv, text, capsys)
    verdicts = [e["verdict"] for e in doc["explanations"]]  # type: ignore[attr-defined]
    assert verdicts == ["loads-here", "not-in-environment"] and code == 0


def test_message_without_object_that_nothing_here_shows(
        venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing library that no object of the venv needs: the whole venv simulated, nothing
    fails that way, and no ELF file of it names the library: said so (exit 0), not "here it
    loads"."""
    text = "ImportError: libnothing.so.3: cannot open shared object file: No such file or directory"
    code, doc, _ = _explain(venv, text, capsys)
    e = _only(doc)
    assert code == 0 and e["verdict"] == "not-needed" and e["object"] is None
    assert "no object of this environment needs it" in str(e["summary"])


def test_message_naming_a_library_the_venv_finds(
        venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing library that an object of the venv needs and finds here (`_usever` finds
    libexplver.so through its RPATH): not reproduced, and that object is named."""
    text = ("ImportError: libexplver.so: cannot open shared object file: No such file or "
            "directory")
    code, doc, _ = _explain(venv, text, capsys)
    e = _only(doc)
    assert code == 0 and e["verdict"] == "loads-here"
    notes = e["notes"]
    assert isinstance(notes, list) and notes[0].startswith("needed here by ")
    assert f"_usever{SUFFIX}" in notes[0]


def test_object_that_fails_for_another_reason(venv: Venv,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The module fails here, but for another symbol than the message's: said so, exit 1."""
    text = f"ImportError: {venv.package}/_undef{SUFFIX}: undefined symbol: other_fn"
    code, doc, _ = _explain(venv, text, capsys)
    e = _only(doc)
    assert code == 1 and e["verdict"] == "fails-otherwise" and e["findings"] == []
    assert "explain_missing_fn" in str(e["module"]["error"])  # type: ignore[index]


def test_text_output(venv: Venv, capsys: pytest.CaptureFixture[str]) -> None:
    """The text report: the demangled name, the object, the verdict, the fix, a summary line."""
    code = main(["explain", venv.messages["cxx"], "--python", venv.python, "--no-cache"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"undefined-symbol: {CXX_SYMBOL} needed by {venv.package}/_cxx{SUFFIX}" in out
    assert "demangled: c10::cuda::c10_cuda_check_implementation(int, char const*" in out
    assert "confirmed: abifit's simulation of this environment fails the same way" in out
    assert "fix: " in out
    assert out.rstrip().endswith("1 message(s) recognised, 1 confirmed in this environment")


def test_reads_stdin(venv: Venv, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`-` (and no argument, with stdin not a terminal) reads the text from stdin."""
    for argv in (["explain", "-"], ["explain"]):
        monkeypatch.setattr(sys, "stdin", io.StringIO(venv.messages["undef"]))
        code = main([*argv, "--python", venv.python, "--json", "--no-cache"])
        doc = json.loads(capsys.readouterr().out)
        assert code == 1 and _only(doc)["kind"] == "undefined-symbol"


def test_nothing_recognised_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Text without a recognised message: exit 2 and one `error:` line, nothing on stdout."""
    code = main(["explain", "Segmentation fault (core dumped)"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert [line for line in captured.err.splitlines() if line.startswith("error:")] == [
        line for line in captured.err.splitlines() if "error" in line]
    assert captured.err.count("error:") == 1


def test_gpu_and_cuda_messages_are_explained(venv: Venv,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """GPU and CUDA messages in an environment without torch or a GPU: each explained with a
    fix, none confirmed (exit 0); the JSON validates."""
    text = ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
            "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the "
            "current PyTorch installation.\nThe current PyTorch install supports CUDA "
            "capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
            "CUDA driver version is insufficient for CUDA runtime version\n"
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different "
            "CUDA major versions. PyTorch has CUDA Version=12.8 and torchvision has CUDA "
            "Version=13.0. Please reinstall the torchvision that matches your PyTorch install.")
    code, doc, _ = _explain(venv, text, capsys)
    kinds = [(e["kind"], e["verdict"]) for e in doc["explanations"]]  # type: ignore[attr-defined]
    assert code == 0 and kinds == [("no-kernel-image", "explained"),
                                   ("unsupported-arch", "explained"),
                                   ("driver-too-old", "explained"),
                                   ("cuda-major-mismatch", "explained")]
    arch, mismatch = doc["explanations"][1], doc["explanations"][3]  # type: ignore[index]
    assert "the installed torch's kernels cover sm_50 sm_60" in " ".join(arch["notes"])
    assert "sm_120" in arch["fix"]
    assert "https://download.pytorch.org/whl/cu128" in mismatch["fix"]


def test_masked_messages_point_at_the_hidden_file(venv: Venv,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """torchvision's `operator torchvision::nms does not exist` names the file import_rules.json
    says it masks; `Could not load this library: PATH` the file it names, simulated."""
    text = ("RuntimeError: operator torchvision::nms does not exist\n"
            f"OSError: Could not load this library: {venv.package}/_undef{SUFFIX}")
    code, doc, _ = _explain(venv, text, capsys)
    operator, could = doc["explanations"]  # type: ignore[misc]
    assert operator["kind"] == "missing-operator"
    assert operator["verdict"] == "not-in-environment"
    assert "torchvision/_C.so" in " ".join(operator["notes"])
    assert could["kind"] == "could-not-load" and could["verdict"] == "confirmed"
    assert "undefined symbol: explain_missing_fn" in " ".join(could["notes"])
    assert code == 1


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A venv holding `dmgpkg` (recorded in its dist-info): `_pad`, a module whose ELF
    identification has nonzero padding, and `_cut`, a module cut to its first page, inside
    what the loader maps. The messages are the real loader's: `_pad`'s OSError, and for `_cut`
    what `import dmgpkg._cut` does to the process (its return code)."""
    root = tmp_path_factory.mktemp("damaged")
    package = venv_with_package(root, "dmgpkg")
    whole = compile_c(SOURCES / "undef.c", root / "build" / f"_whole{SUFFIX}").read_bytes()
    padded = bytearray(whole)
    padded[10] = 1  # EI_PAD
    (package / f"_pad{SUFFIX}").write_bytes(bytes(padded))
    (package / f"_cut{SUFFIX}").write_bytes(whole[:4096])
    record(package)
    python = str(root / "venv" / "bin" / "python")
    crashed = subprocess.run([python, "-c", "import dmgpkg._cut"], capture_output=True,
                             check=False, cwd="/")
    return Venv(python, package, {"pad": _real_error(package / f"_pad{SUFFIX}"),
                                  "cut": str(crashed.returncode)})


def test_a_refused_file_and_a_bus_error_are_explained(damaged: Venv,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """glibc's refusal of a damaged module names the file and its owner to reinstall; a
    `Bus error` (the shell's words when SIGBUS kills `import dmgpkg._cut`: checked) points at
    the module cut short, found by simulating the environment."""
    assert damaged.messages["pad"].endswith(f"_pad{SUFFIX}: nonzero padding in e_ident")
    assert damaged.messages["cut"] == str(-signal.SIGBUS)
    code, doc, _ = _explain(damaged, damaged.messages["pad"], capsys)
    found = _only(doc)
    assert (found["kind"], found["verdict"]) == ("damaged-object", "confirmed")
    assert found["clue"] == {"obj": f"{damaged.package}/_pad{SUFFIX}",
                             "said": "nonzero padding in e_ident"}
    assert str(found["fix"]).startswith("reinstall dmgpkg 1.0")
    assert code == 1
    code, doc, _ = _explain(damaged, "Segmentation fault\nBus error (core dumped)", capsys)
    found = _only(doc)
    assert (found["kind"], found["verdict"]) == ("bus-error", "confirmed")
    assert found["object"] == f"{damaged.package}/_cut{SUFFIX}"
    assert "is cut short" in str(found["summary"])
    assert str(found["fix"]).startswith("reinstall dmgpkg 1.0")
