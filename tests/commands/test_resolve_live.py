"""`abifit resolve` against PyPI itself (skipped when PyPI cannot be reached): the story of
DESIGN.md as a resolution. One cache directory serves both tests, so the torch views read by
the first are not fetched again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from helpers import schema, validate

pytestmark = [pytest.mark.network, pytest.mark.slow]

PYPI = "https://pypi.org/simple"
SCHEMA = schema("resolve")
TARGET = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--index-url", PYPI]
CHECK_FUNCTION = ("c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, "
                  "bool)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live-resolve-cache")


def resolve(cache: Path, *args: str) -> tuple[int, dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    done = subprocess.run([sys.executable, "-m", "abifit", "resolve", *args, *TARGET,
                           "--cache-dir", str(cache), "--json"], capture_output=True, text=True,
                          env=env, timeout=3000)
    if done.returncode == 2 and ("pypi.org" in done.stderr or "connect" in done.stderr.lower()):
        pytest.skip(f"PyPI is not reachable: {done.stderr.strip()}")
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    validate(doc, SCHEMA)
    return done.returncode, doc


def pin(doc: dict[str, object], name: str) -> dict[str, object]:
    pins = doc["pins"]
    assert isinstance(pins, list)
    return next(p for p in pins if p["name"] == name)


def test_sgl_kernel_walks_torch_back_to_2_9_1(cache: Path) -> None:
    """sgl-kernel 0.3.21 declares no torch requirement; the newest torch whose binaries it
    loads with is 2.9.1: 2.10.0 changed c10_cuda_check_implementation's 4th parameter, and the
    CUDA 13 releases after it ship no libcudart.so.12. Every release newer than 2.9.1 on the
    index is listed with its reason; the set's whole check fits."""
    code, doc = resolve(cache, "sgl-kernel==0.3.21", "torch")
    assert code == 0 and doc["found"] is True
    torch = pin(doc, "torch")
    assert torch["version"] == "2.9.1"
    assert pin(doc, "sgl-kernel")["version"] == "0.3.21"
    newer = {r["version"]: r for r in torch["newer"]}  # type: ignore[union-attr]
    assert "2.10.0" in newer
    assert newer["2.10.0"]["why"] == "binary"
    assert CHECK_FUNCTION in newer["2.10.0"]["reason"]
    assert "parameter 4: `int` → `unsigned int`" in newer["2.10.0"]["reason"]
    for version, rejection in newer.items():  # the CUDA 13 releases
        if Version(version) >= Version("2.11"):
            assert rejection["why"] == "binary", rejection
            assert ".so.12" in rejection["reason"], rejection
    assert doc["set_check"]["verdict"] != "fails"  # type: ignore[index]
    stats = doc["stats"]
    assert isinstance(stats, dict)
    assert stats["pairs_checked"] >= len(newer)
    assert stats["pairs_checked"] < stats["naive_pairs"]


def test_torchvision_picks_the_torch_its_binaries_fit(cache: Path) -> None:
    """torchvision below 0.25 with torch: 0.24.1, whose metadata pins torch 2.9.1 and whose
    binaries load next to it (the whole-set check says so); the newer torch releases are
    rejected with a reason."""
    code, doc = resolve(cache, "torchvision", "torch", "--with", "torchvision<0.25")
    assert code == 0
    assert pin(doc, "torchvision")["version"] == "0.24.1"
    torch = pin(doc, "torch")
    assert torch["version"] == "2.9.1"
    assert doc["set_check"]["verdict"] != "fails"  # type: ignore[index]
    assert doc["set_check"]["modules"] > 1  # type: ignore[index]
    assert all(r["reason"] for r in torch["newer"])  # type: ignore[union-attr]
    assert any(r["version"] == "2.10.0" for r in torch["newer"])  # type: ignore[union-attr]
