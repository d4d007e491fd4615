"""`abifit history` and `abifit explain` against PyPI itself: the seed case, from the pasted error
to the torch releases that define the symbol (skipped when PyPI cannot be reached). One cache
directory serves the module: the releases history records are what explain then asks about."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_live

pytestmark = [pytest.mark.network, pytest.mark.slow]

OLD = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
NEW = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"
SEED = f"ImportError: /venv/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: {OLD}"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live-history")


def test_history_finds_the_change_at_2_10_within_the_byte_budget(cache: Path) -> None:
    """torch 2.9.0 and 2.9.1 define c10_cuda_check_implementation(int, ..., int, bool); 2.10.0
    takes an unsigned int: found by reading at most 3 % of the wheels' bytes, then by a query
    of the store that fetches nothing."""
    code, doc = run_live(cache, "history", OLD, "--in", "torch", "--versions", ">=2.9.0,<2.11")
    assert code == 0
    assert doc["releases"] == ["2.9.0", "2.9.1", "2.10.0"]
    assert {f["name"]: f["releases"] for f in doc["forms"]} == {  # type: ignore[attr-defined]
        OLD: ["2.9.0", "2.9.1"], NEW: ["2.10.0"]}
    [change] = doc["changes"]  # type: ignore[misc]
    assert change["release"] == "2.10.0"
    assert "parameter 4: `int` → `unsigned int`" in change["description"]
    transfer = doc["transfer"]
    assert isinstance(transfer, dict)
    assert 0 < transfer["bytes_fetched"] <= 0.03 * transfer["wheel_bytes"]

    code, doc = run_live(cache, "history", OLD, "--in", "torch", "--versions", ">=2.9.0,<2.11")
    assert doc["read"] == []
    assert doc["transfer"] is None or doc["transfer"]["bytes_fetched"] == 0  # type: ignore[index]


def test_explain_the_seed_error_with_torch_2_10_standing_in(cache: Path) -> None:
    """The pasted error, with torch==2.10.0 standing in for the environment: the function
    demangled, torch 2.9.0-2.9.1 defining it, the parameter that changed, and the fix; the
    releases come from the store the history test filled."""
    code, doc = run_live(cache, "explain", SEED, "--with", "torch==2.10.0", "--releases", "3")
    assert code == 0  # the object is not in this environment: explained, not confirmed
    [e] = doc["explanations"]  # type: ignore[misc]
    assert e["signature"] == ("c10::cuda::c10_cuda_check_implementation(int, char const*, "
                              "char const*, int, bool)")
    assert e["provider"] == "torch 2.9.0-2.9.1 define it (of 3 releases, 2.9.0 to 2.10.0)"
    assert any("parameter 4: `int` → `unsigned int`" in n for n in e["notes"])
    assert e["fix"].startswith("`pip install torch==2.9.1`")
