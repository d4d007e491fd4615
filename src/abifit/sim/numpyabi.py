"""NumPy's import contract: whether an extension module that uses NumPy's C API imports beside a
NumPy release, and what the user sees when it does not.

The loader cannot tell: NumPy's C API is a table of pointers the module takes from NumPy at
import (`formats.numpyapi`). What decides is the headers the module was built with:

- built with NumPy 1.x headers, beside NumPy 2: the import raises. A module Cython 0.29 wrote
  checks the size of `numpy.dtype` first and raises `ValueError: numpy.dtype size changed, may
  indicate binary incompatibility. Expected 96 from C header, got 88 from PyObject`; any other
  raises what its `import_array()` raises (`ImportError: numpy.core.multiarray failed to
  import`, Cython 3's own longer text, or pybind11's `ImportError: initialization failed`),
  after NumPy has printed "A module that was compiled using NumPy 1.x cannot be run in NumPy
  2...". Beside NumPy 1.x it imports (the release its headers were of is not in the bytes).
- built with NumPy 2.x headers for a feature version (`NPY_TARGET_VERSION`, named in the
  module: "(NumPy 1.23)"), beside a NumPy whose C API is older: the import raises what its
  `import_array()` raises (`ImportError: numpy._core.multiarray failed to import`), after a
  printed RuntimeError naming both versions. Beside any NumPy at least that new, it imports.

Only what is known is predicted: a module whose failure text is not in its bytes is not judged.
Pure: a `NumpyUse` and a release in, a `NumpyBreak` out.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from abifit.formats.numpyapi import NumpyUse
from abifit.sim.derivation import NumpyReason, OlderCApi, OldHeaders

DATA = Path(__file__).parent.parent / "data"
BANNER = "A module that was compiled using NumPy 1.x cannot be run in NumPy"


@dataclass(frozen=True, slots=True)
class NumpyBreak:
    """Why a module's import fails beside a NumPy release, as the user sees it."""

    error: str  # the exception the import raises: "ValueError: numpy.dtype size changed, ..."
    reason: NumpyReason  # the contract broken, as a record (`report.derivation` words it)
    requirement: str  # the NumPy the module needs: "numpy<2", "numpy>=1.23"
    printed: str | None = None  # what is printed before it (NumPy's banner, a RuntimeError)


@functools.cache
def _table() -> dict[str, object]:
    raw: dict[str, object] = json.loads((DATA / "numpy_capi.json").read_text("utf-8"))
    return raw


def api_version(release: str) -> int | None:
    """The C-API feature version NumPy `release` provides (that of the newest table entry not
    newer than it); None for a release the table cannot place."""
    try:
        version = Version(release)
    except InvalidVersion:
        return None
    table = _table()["api_versions"]
    assert isinstance(table, dict)
    known = [(Version(k), v) for k, v in table.items() if Version(k) <= Version(
        f"{version.major}.{version.minor}")]
    return max(known)[1] if known else None


def dtype_size(headers: int) -> int:
    """`sizeof(PyArray_Descr)` of NumPy `headers`.x (x86_64), as Cython compares it."""
    sizes = _table()["dtype_basicsize"]
    assert isinstance(sizes, dict)
    return int(sizes[str(headers)])


def _import_error(use: NumpyUse) -> str | None:
    """What the module's own call of `import_array()` raises, as its bytes say."""
    if use.cython_error is not None:
        return f"ImportError: {use.cython_error}"
    if use.array_error is not None:
        return f"ImportError: {use.array_error}"
    if use.umath_error is not None:
        return f"ImportError: {use.umath_error}"
    if use.init_failed:
        return "ImportError: initialization failed"
    return None


_CONTRACT = re.compile(r"ValueError: numpy\.dtype size changed"
                       r"|ImportError: numpy\.(?:_core|core)\.(?:multiarray|umath) failed to import"
                       r"|ImportError: initialization failed")


def contract_error(error: str | None) -> bool:
    """Whether an import's error is one NumPy's import contract raises (`numpy_break`)."""
    return error is not None and _CONTRACT.match(error) is not None


def numpy_break(use: NumpyUse, numpy: str) -> NumpyBreak | None:
    """Whether a module that uses NumPy's C API as `use` says fails to import beside NumPy
    `numpy`, and how; None when it imports, or when what it would raise is not known."""
    try:
        running = Version(numpy)
    except InvalidVersion:
        return None
    if use.headers == 1 and running.major >= 2:
        if use.size_checks and use.numpy_types and not use.cython3:
            error: str | None = (
                "ValueError: numpy.dtype size changed, may indicate binary incompatibility. "
                f"Expected {dtype_size(1)} from C header, got {dtype_size(2)} from PyObject")
            printed = None
        elif use.imports_api or use.cython_error:
            error = _import_error(use)
            printed = f"{BANNER} {numpy} as it may crash. ..."
        else:  # no call of import_array(), no type check: nothing known fails
            return None
        if error is None:
            return None
        return NumpyBreak(error, OldHeaders(numpy, dtype_size(1), dtype_size(2)), "numpy<2",
                          printed)
    if use.headers == 2 and use.feature is not None and use.imports_api:
        needed, have = api_version(use.feature), api_version(numpy)
        if needed is None or have is None or have >= needed:
            return None
        error = _import_error(use)
        if error is None:
            return None
        printed = (f"RuntimeError: module was compiled against NumPy C-API version "
                   f"{needed:#x} (NumPy {use.feature}) but the running NumPy has C-API version "
                   f"{have:#x}. ...")
        return NumpyBreak(error, OlderCApi(use.feature, numpy), f"numpy>={use.feature}",
                          printed)
    return None
