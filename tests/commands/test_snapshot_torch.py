"""The CPU torch test venv snapshotted, rebuilt by pip from the snapshot's pins in a new venv, and
compared; then one package swapped for a release built for another torch, whose real import
fails: `diff` names the module and the symbol the real loader names.

Slow (a new venv with torch, about 200 MB installed from the local find-links or index) and
network: fbgemm-gpu-cpu 1.8.0 (built for this torch) and 1.4.0 (built for torch 2.9) come from
PyPI, about 12 MB."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from abifit.cli import main

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = [pytest.mark.slow, pytest.mark.network]

FITS = "fbgemm-gpu-cpu==1.8.0"  # built for torch 2.13: imports in the torch 2.13.0 venv
OTHER_TORCH = "fbgemm-gpu-cpu==1.4.0"  # built for torch 2.9


def pip(venv: Path, *args: str) -> None:
    done = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q",
                           "--only-binary", ":all:", "--no-deps", *args],
                          capture_output=True, text=True)
    if done.returncode != 0:
        if "Could not find" in done.stderr or "connection" in done.stderr.lower():
            pytest.skip(f"pip could not fetch {args}: {done.stderr.strip()[-300:]}")
        pytest.fail(done.stderr)


def real_load_error(venv: Path, library: Path) -> str | None:
    """What the real loader says of `library` in a process that imported torch."""
    code = ("import ctypes, sys, torch\n"
            "try:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n")
    done = subprocess.run([str(venv / "bin/python"), "-c", code, str(library)],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip() or None


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_rebuilt_stack_diffs_clean_and_a_swap_breaks(
        torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """snapshot -> pip install from its pins -> diff: no differences; then a release of
    fbgemm-gpu-cpu built for another torch: diff exits 1 and names the module that breaks with
    the undefined symbol the real loader reports."""
    lock = tmp_path / "pylock.toml"
    code, pins = run(capsys, "snapshot", "--python", str(torch_venv / "bin/python"), "-o",
                     str(lock), "--requirements", "--no-cache")
    assert code == 0
    Pylock.from_dict(tomllib.loads(lock.read_text()))
    assert "torch==2.13.0+cpu --hash=sha256:" in pins
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(pins)

    venv = tmp_path / "rebuilt"
    subprocess.run([str(torch_venv / "bin/python"), "-m", "venv", str(venv)], check=True)
    pip(venv, "-r", str(requirements))  # hash-checking mode: every pin has its sha256
    code, out = run(capsys, "diff", str(lock), str(venv), "--no-cache")
    assert (code, out.splitlines()[2:]) == (0, ["no differences", "B breaks nothing A loaded"])

    pip(venv, FITS)
    site = next(venv.glob("lib/python3*/site-packages"))
    assert real_load_error(venv, site / "fbgemm_gpu/fbgemm_gpu_config.so") is None
    known_good = tmp_path / "pylock.good.toml"
    assert run(capsys, "snapshot", "--python", str(venv / "bin/python"), "-o",
               str(known_good), "--no-index", "--no-cache")[0] == 0

    pip(venv, OTHER_TORCH)
    real = real_load_error(venv, site / "fbgemm_gpu/fbgemm_gpu_config.so")
    assert real is not None and ": undefined symbol: _ZNR5torch7Library4_def" in real
    code, out = run(capsys, "diff", str(known_good), str(venv), "--no-cache", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["breaks"] > 0
    broken = [c for c in doc["abi"] if c["breaks"]]
    assert all(c["kind"] == "stops-loading" and c["subject"].startswith("fbgemm_gpu")
               for c in broken)
    assert real in [c["after"] for c in broken]  # the real loader's words, symbol and all
    assert any("Nearest definition" in c["detail"] and "torch::Library::_def" in c["detail"]
               for c in broken)  # the provider's signature that changed
    assert {(c["subject"], c["before"], c["after"]) for c in doc["versions"]} == {
        ("fbgemm-gpu-cpu", "1.8.0", "1.4.0")}


def test_an_installer_that_reads_pep_751_installs_the_snapshot_itself(
        torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The snapshot is a lock an installer reads as it is: uv installs the stack from the
    `pylock.toml` abifit wrote (each wheel by its URL, checked against its sha256) into a new
    venv, and `diff` finds no difference."""
    uv = pytest.importorskip("uv").find_uv_bin()
    lock = tmp_path / "pylock.toml"
    assert run(capsys, "snapshot", "--python", str(torch_venv / "bin/python"), "-o", str(lock),
               "--no-cache")[0] == 0
    venv = tmp_path / "from-lock"
    subprocess.run([str(torch_venv / "bin/python"), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    done = subprocess.run([uv, "pip", "install", "--python", str(venv / "bin/python"),
                           "-r", str(lock)], capture_output=True, text=True)
    if done.returncode != 0 and "connect" in done.stderr.lower():
        pytest.skip(f"uv could not fetch the wheels: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr
    code, out = run(capsys, "diff", str(lock), str(venv), "--no-cache")
    assert (code, out.splitlines()[2:]) == (0, ["no differences", "B breaks nothing A loaded"])
