"""NumPy's import contract, the pure parts: what `formats.numpyapi` reads from string literals,
and what `sim.numpyabi` predicts from them. The literals are those found in real wheels
(pandas 2.0.3, shapely 2.0.2, matplotlib 3.7.2, pandas 2.2.3); the predictions are what real
imports raised beside NumPy 2.0.2 and 1.26.4 (bench/numpy_pairs.py, and the fixture matrix of
tests/commands/test_numpy_contract.py, which checks the C-API table against NumPy's own
headers)."""

from __future__ import annotations

import pytest

from abifit.formats.numpyapi import numpy_use
from abifit.sim.numpyabi import api_version, contract_error, numpy_break

DTYPE = ("ValueError: numpy.dtype size changed, may indicate binary incompatibility. "
         "Expected 96 from C header, got 88 from PyObject")
CYTHON3 = ("numpy.core.multiarray failed to import (auto-generated because you didn't call "
           "'numpy.import_array()' after cimporting numpy; use '<void>numpy._import_array' to "
           "disable if you are certain you don't need it).")
FEATURE_123 = (b"module was compiled against NumPy C-API version 0x%x (NumPy 1.23) but the "
               b"running NumPy has C-API version 0x%x. Check the section ...\0")


def strings(*literals: bytes) -> bytes:
    return b"\0" + b"\0".join(literals) + b"\0"


# a module Cython 0.29 wrote against NumPy 1.x headers (pandas 2.0.3's _libs)
CYTHON029 = strings(b"numpy", b"dtype", b"numpy.core._multiarray_umath",
                    b"numpy.core.multiarray failed to import", b"numpy.core.umath failed to import",
                    b"%s.%s size changed, may indicate binary incompatibility. Expected %zd from "
                    b"C header, got %zd from PyObject", b"_cython_0_29_35")
# Cython 3.0.3 against NumPy 1.x headers (shapely 2.0.2's _geometry_helpers)
CYTHON303 = strings(b"numpy", b"dtype", CYTHON3.encode(), b"numpy.core.multiarray failed to import",
                    b"%s.%s size changed, may indicate binary incompatibility.", b"_cython_3_0_3")
# a C module (matplotlib 3.7.2's _path)
C_MODULE = strings(b"numpy.core._multiarray_umath", b"numpy.core.multiarray failed to import")
# NumPy 2.x headers for NumPy 1.23 and newer
NUMPY2 = strings(b"numpy._core._multiarray_umath", b"numpy.core._multiarray_umath",
                 b"numpy._core.multiarray failed to import") + FEATURE_123


def test_what_the_literals_say() -> None:
    use = numpy_use(CYTHON029)
    assert use is not None and (use.headers, use.cython, use.size_checks, use.numpy_types) == (
        1, "0.29.35", True, True)
    use = numpy_use(NUMPY2)
    assert use is not None and (use.headers, use.feature, use.imports_api) == (2, "1.23", True)
    assert use.array_error == "numpy._core.multiarray failed to import"
    use = numpy_use(CYTHON303)
    assert use is not None and use.cython3 and use.cython_error == CYTHON3
    assert numpy_use(strings(b"numpy", b"dtype", b"something else")) is None


@pytest.mark.parametrize(("data", "numpy", "error"), [
    pytest.param(CYTHON029, "2.0.2", DTYPE, id="cython-0.29-checks-the-dtype-size"),
    pytest.param(CYTHON029, "1.26.4", None, id="1.x-built-beside-1.x"),
    pytest.param(CYTHON303, "2.0.2", f"ImportError: {CYTHON3}", id="cython-3-imports-the-api"),
    pytest.param(C_MODULE, "2.1.3", "ImportError: numpy.core.multiarray failed to import",
                 id="c-module"),
    pytest.param(NUMPY2, "1.22.4", "ImportError: numpy._core.multiarray failed to import",
                 id="2.x-built-beside-an-older-c-api"),
    pytest.param(NUMPY2, "1.23.5", None, id="2.x-built-beside-its-feature-version"),
    pytest.param(NUMPY2, "2.4.6", None, id="2.x-built-beside-2.x"),
])
def test_what_the_import_raises(data: bytes, numpy: str, error: str | None) -> None:
    use = numpy_use(data)
    assert use is not None
    broken = numpy_break(use, numpy)
    assert (broken.error if broken else None) == error
    if broken is not None:
        assert contract_error(broken.error)
        assert broken.requirement == ("numpy<2" if use.headers == 1 else "numpy>=1.23")


def test_a_release_provides_the_c_api_of_its_minor() -> None:
    """1.26 provides 1.25's C API (0x11); a release past the table, the newest known."""
    assert (api_version("1.26.4"), api_version("1.23.2"), api_version("2.0.0rc1")) == (
        0x11, 0x10, 0x12)
    assert api_version("9.0") == api_version("2.4")
    assert api_version("not a version") is None
