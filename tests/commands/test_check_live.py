"""`abifit check` and `abifit matrix` against PyPI itself: the story of DESIGN.md (skipped when
PyPI cannot be reached). One cache directory serves all tests of the module, so the torch and
nvidia-* views read by the first test are not fetched again."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_live

pytestmark = [pytest.mark.network, pytest.mark.slow]

CHECK_FUNCTION = ("c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, "
                  "bool)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("live-cache")


def test_sgl_kernel_with_torch_2_10_fails_on_the_changed_parameter(cache: Path) -> None:
    """sgl-kernel 0.3.21 with torch 2.10.0: c10_cuda_check_implementation(int, ..., int, bool)
    is undefined, and the nearest definition changed its 4th parameter to unsigned int."""
    code, doc = run_live(cache, "check", "sgl-kernel==0.3.21", "--with", "torch==2.10.0")
    assert code == 1 and doc["verdict"] == "fails"
    findings = doc["findings"]
    assert isinstance(findings, list)
    hit = [f for f in findings if f["symbol"] == "_ZN3c104cuda29c10_cuda_check_implementation"
           "EiPKcS2_ib"]
    assert hit, [f["symbol"] for f in findings]
    assert CHECK_FUNCTION in hit[0]["explanation"]
    assert "parameter 4: `int` → `unsigned int`" in hit[0]["explanation"]
    transfer = doc["transfer"]
    assert isinstance(transfer, dict)
    assert transfer["bytes_fetched"] < 0.08 * transfer["wheel_bytes"]


def test_sgl_kernel_with_torch_2_9_1_fits_but_the_driver_is_apart(cache: Path) -> None:
    """With torch 2.9.1 the symbols fit; the driver's libcuda.so.1, absent on a machine without
    a GPU, is reported apart from symbol problems."""
    code, doc = run_live(cache, "check", "sgl-kernel==0.3.21", "--with", "torch==2.9.1")
    assert doc["findings"] == []
    if doc["host_missing"]:
        assert (code, doc["verdict"], doc["host_missing"]) == (
            1, "fits-but-host-lacks-driver", ["libcuda.so.1"])
    else:
        assert (code, doc["verdict"]) == (0, "fits")


def test_matrix_finds_torch_2_9_as_the_only_fits(cache: Path) -> None:
    """`matrix sgl-kernel==0.3.21 --against 'torch>=2.8,<2.11'`: 2.9.0 and 2.9.1 fit, 2.8.0
    and 2.10.0 do not."""
    code, doc = run_live(cache, "matrix", "sgl-kernel==0.3.21", "--against", "torch>=2.8,<2.11")
    assert code == 0
    assert doc["fits"] == ["2.9.1", "2.9.0"]
    rows = doc["rows"]
    assert isinstance(rows, list)
    assert {r["version"]: r["verdict"] for r in rows} == {
        "2.10.0": "fails", "2.9.1": "fits", "2.9.0": "fits", "2.8.0": "fails"}


def _imports(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    imports = doc["imports"]
    assert isinstance(imports, list)
    return {str(v["name"]): v for v in imports}


def test_sgl_kernel_import_fails_with_the_users_error(cache: Path) -> None:
    """The seed case per import: `import sgl_kernel` fails with sgl-kernel's own ImportError
    (its run-time picked common_ops misses the int/unsigned int symbol), and
    `import sgl_kernel.flash_attn` with the message its guard raises."""
    code, doc = run_live(cache, "check", "sgl-kernel==0.3.21", "--with", "torch==2.10.0")
    verdicts = _imports(doc)
    assert code == 1
    assert verdicts["sgl_kernel"]["error"] == (
        "ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!")
    assert "c10_cuda_check_implementation" in str(verdicts["sgl_kernel"]["cause_error"])
    assert verdicts["sgl_kernel.flash_attn"]["error"] == (
        "ImportError: Can not import FA3 in sgl_kernel. Please check your installation.")


@pytest.mark.parametrize(("torch", "fits"), [("2.9.1", True), ("2.10.0", False)])
def test_torchaudio_loads_its_own_library_first(cache: Path, torch: str, fits: bool) -> None:
    """torchaudio 2.9.1 loads lib/libtorchaudio.so itself before _torchaudio: with the torch it
    pins it fits; with torch 2.10.0 `import torchaudio` fails with torch's OSError, caused by the
    torch symbols libtorchaudio.so needs (not by _torchaudio missing libtorchaudio.so)."""
    code, doc = run_live(cache, "check", "torchaudio==2.9.1", "--with", f"torch=={torch}",
                         "--assume-driver", "580")
    verdict = _imports(doc)["torchaudio"]
    assert (code == 0) == fits and verdict["loads"] is fits
    if not fits:
        assert str(verdict["error"]).startswith("OSError: Could not load this library: ")
        assert str(verdict["error"]).endswith("/torchaudio/lib/libtorchaudio.so")
        assert verdict["cause"] == "torchaudio/lib/libtorchaudio.so"
        assert "undefined symbol: _ZN3c10" in str(verdict["cause_error"])


def test_torchvision_import_shows_the_masked_error(cache: Path) -> None:
    """torchvision 0.24.1 with torch 2.10.0: `_C.so` misses the seed symbol, and the user sees
    torchvision's own `operator torchvision::nms does not exist`."""
    code, doc = run_live(cache, "check", "torchvision==0.24.1", "--with", "torch==2.10.0",
                         "--assume-driver", "580")
    verdict = _imports(doc)["torchvision"]
    assert code == 1 and verdict["loads"] is False
    assert verdict["error"] == "RuntimeError: operator torchvision::nms does not exist"
    assert "c10_cuda_check_implementation" in str(verdict["cause_error"])


VLLM_PAST = {  # what vllm 0.2.2's modules need of torch that torch 2.0.1 does not define
    "vllm.attention_ops": {"_ZNK3c1010TensorImpl27throw_data_ptr_access_errorEv"},
    "vllm.cache_ops": {"_ZNK3c1010TensorImpl27throw_data_ptr_access_errorEv"},
    "vllm.quantization_ops": {"_ZN3c104cuda9SetDeviceEi", "_ZN3c104cuda14ExchangeDeviceEi",
                              "_ZN3c104cuda14MaybeSetDeviceEi", "_ZN3c104cuda9GetDeviceEPi"},
}


def test_vllm_names_the_torch_symbols_past_the_missing_cudart(cache: Path) -> None:
    """vllm 0.2.2 (built for CUDA 12) with torch 2.0.1 (CUDA 11.7): libcudart.so.12 is missing,
    and past it, counting nvidia-cuda-runtime-cu12's copy, 5 torch symbols are undefined (the
    same 5 `nm -D` finds: undefined in vllm's modules, defined by none of torch's libraries)."""
    code, doc = run_live(cache, "check", "vllm==0.2.2", "--with", "torch==2.0.1")
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert code == 1
    past: dict[str, set[str]] = {}
    for f in findings:
        if f["behind"]:
            assert f["behind"] == ["libcudart.so.12"] and f["kind"] == "undefined-symbol"
            past.setdefault(str(f["module"]), set()).add(str(f["symbol"]))
    assert past == VLLM_PAST
    missing = {f["module"] for f in findings if f["kind"] == "missing-library"}
    assert missing >= set(VLLM_PAST)
