"""abifit as a library: `abifit.check`, `abifit.doctor`, `abifit.inspect`, and what it exports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import abifit
from abifit.engines.check import CheckReport
from abifit.engines.doctor import DoctorReport
from abifit.engines.inspect import InspectReport
from fixtures.build import compile_c
from helpers import make_wheel

EXTENSION = """\
int demo_answer(void) { return 42; }
void *PyInit__ext(void) { return 0; }
"""

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _abifit_modules_after(statement: str) -> list[str]:
    """The abifit modules a fresh interpreter holds after running `statement`."""
    code = f"{statement}; import sys; print(*sorted(m for m in sys.modules if 'abifit' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return done.stdout.split()


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small extension module with the soname libdemo.so.1, compiled now."""
    root = tmp_path_factory.mktemp("api")
    (root / "ext.c").write_text(EXTENSION)
    return compile_c(root / "ext.c", root / "_ext.abi3.so", soname="libdemo.so.1")


def test_importing_abifit_imports_only_the_errors() -> None:
    """`import abifit` is cheap: the commands, the formats and the demangler load on first use."""
    assert _abifit_modules_after("import abifit") == ["abifit", "abifit.errors", "abifit.version"]


def test_the_command_line_loads_no_network_module_before_it_needs_one() -> None:
    """The command line, its reports and an HTTP client that has sent nothing hold neither
    urllib3 (the first request imports it, with http.client and ssl), the CUDA probes (`cuda`
    and --gpu auto need them) nor the doctor's modules (a check loads its library search only
    to simulate): a check or an inspect that the cache answers never pays for them."""
    unwanted = ("urllib3", "http.client", "ssl", "urllib.request", "abifit.engines.doctor",
                "abifit.commands.doctor", "abifit.engines.gpus", "abifit.engines.plans",
                "abifit.host.cudastack")
    code = ("import sys, abifit.cli, abifit.commands.check, abifit.report.check, "
            "abifit.report.inspect, abifit.remote.wheels, abifit.remote.recording, "
            "abifit.remote.pagefetch, abifit.remote.http as h; "
            "h.HttpClient().close(); "
            f"print(*sorted(m for m in sys.modules if m.split('.')[0] in {unwanted!r} "
            f"or m in {unwanted!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == []


def test_importing_the_elf_reader_stays_in_its_layer() -> None:
    """`import abifit.formats.elf` imports nothing above the formats layer."""
    loaded = _abifit_modules_after("import abifit.formats.elf")
    assert "abifit.formats.elf" in loaded
    assert [m for m in loaded
            if m.split(".")[1:2] not in ([], ["version"], ["errors"], ["formats"])] == []


def test_every_exported_name_resolves() -> None:
    """Each name of `__all__` is an attribute; the report types are the commands' own."""
    assert all(hasattr(abifit, name) for name in abifit.__all__)
    assert (abifit.CheckReport, abifit.DoctorReport, abifit.InspectReport) == (
        CheckReport, DoctorReport, InspectReport)
    assert abifit.demangle("_ZSt9terminatev") == "std::terminate()"


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name abifit does not export raises AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(abifit, "nothing_here")  # noqa: B009


def test_doctor_agrees_with_the_command(tmp_path: Path) -> None:
    """`abifit.doctor` on this venv reports the modules and verdicts `abifit doctor --json` does."""
    report = abifit.doctor(python=sys.executable, no_index=True, cache_dir=tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", "--python", sys.executable, "--json",
         "--no-index", "--cache-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    document = json.loads(done.stdout)
    assert isinstance(report, DoctorReport) and report.modules
    assert [(m.module, m.loads) for m in report.modules] == [
        (m["module"], m["loads"]) for m in document["modules"]]
    assert (1 if report.problems else 0) == done.returncode


@needs_gcc
def test_inspect_reads_a_library(extension: Path) -> None:
    """`abifit.inspect` of one .so: its soname, and the symbols a glob matches."""
    report = abifit.inspect(str(extension), match="PyInit*")
    assert isinstance(report, InspectReport)
    assert report.targets == (str(extension),)
    [obj] = report.objects
    assert obj.soname == "libdemo.so.1" and obj.error is None
    assert [s.name for s in obj.symbols or ()] == ["PyInit__ext"]


def test_inspect_of_nothing_is_a_usage_error(tmp_path: Path) -> None:
    """A target that names no file raises the UsageError the command prints."""
    missing = str(tmp_path / "no-such.so")
    with pytest.raises(abifit.UsageError) as caught:
        abifit.inspect(missing)
    assert str(caught.value) == f"{missing}: no such file or directory"


def test_an_unknown_symbol_selection_is_a_usage_error() -> None:
    """`symbols` takes the values of `--symbols`; another value is quoted in the error."""
    with pytest.raises(abifit.UsageError, match="symbols 'some': expected one of"):
        abifit.inspect("/bin/sh", symbols="some")  # type: ignore[arg-type]


@needs_gcc
def test_check_of_a_local_wheel(extension: Path, tmp_path: Path) -> None:
    """`abifit.check` of a local wheel, offline: its extension module fits this machine."""
    filename, data = make_wheel("demo", "1.0", {"demo/__init__.py": b"",
                                                "demo/_ext.abi3.so": extension.read_bytes()},
                                tag="cp310-abi3-linux_x86_64")
    wheel = tmp_path / filename
    wheel.write_bytes(data)
    report = abifit.check(str(wheel), offline=True, cache_dir=tmp_path / "cache",
                          python_version="3.11", platforms=["linux_x86_64"])
    assert isinstance(report, CheckReport)
    assert report.target == "cp311 on linux_x86_64"
    assert [m.module for m in report.modules] == ["demo._ext"]
    assert report.verdict == "fits"
