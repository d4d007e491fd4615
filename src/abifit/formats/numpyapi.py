"""What an extension module's bytes say of its use of NumPy's C API.

NumPy's C API is not linked: `import_array()` (from the headers the module was built with)
imports NumPy's `_multiarray_umath` at import time and takes the table of function pointers
from its `_ARRAY_API` capsule, so the loader is content whatever NumPy is installed. The
headers leave their marks in the module's read-only data, which is what is read here:

- NumPy 2.x headers import `numpy._core._multiarray_umath` (then `numpy.core...` on NumPy 1.x)
  and check the running NumPy's C-API feature version against the oldest the module accepts,
  `NPY_FEATURE_VERSION`, whose release their message names: "module was compiled against
  NumPy C-API version 0x%x (NumPy 1.23) but the running NumPy has ...".
- NumPy 1.x headers import only `numpy.core._multiarray_umath`; on NumPy 2 that is a shim whose
  `_ARRAY_API` raises ImportError after printing "A module that was compiled using NumPy 1.x
  cannot be run in NumPy 2...".
- `import_array()` turns a failure into `ImportError: numpy.core.multiarray failed to import`
  (`numpy._core.multiarray` with 2.x headers); `import_umath()` into `... umath failed to
  import`. Those texts are in the module too.
- A Cython module that cimports numpy checks the size of `numpy.dtype` (and other types)
  against its headers' when it is imported, before `import_array()`: "numpy.dtype size
  changed, may indicate binary incompatibility. Expected 96 from C header, got 88 from
  PyObject" is a ValueError.

Pure: bytes in, a `NumpyUse` out (`read_numpy_use` takes a source and its section headers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from abifit.formats.elf import Section
    from abifit.formats.sources import ByteSource

# the sections whose bytes hold string literals; at most this many bytes of them are read
STRING_SECTIONS = (".rodata",)
MAX_STRINGS = 64 << 20

_NUMPY2 = b"numpy._core._multiarray_umath\0"
_NUMPY1 = b"numpy.core._multiarray_umath\0"
_FEATURE = re.compile(rb"\(NumPy (\d+\.\d+)\) but the running NumPy has C-API version")
_ARRAY_ERROR = re.compile(rb"(numpy\.(?:_core|core)\.multiarray failed to import)\0")
_UMATH_ERROR = re.compile(rb"(numpy\.(?:_core|core)\.umath failed to import)\0")
# Cython 3 calls import_array() itself when a module cimports numpy, with its own message
_CYTHON_ERROR = re.compile(rb"(numpy\.(?:_core|core)\.multiarray failed to import \(auto-generated"
                           rb"[^\0]*)\0")
_CYTHON_SIZE = b"size changed, may indicate binary incompatibility"
_INIT_FAILED = b"initialization failed\0"  # pybind11's ImportError for a failed module init
_CYTHON_VERSION = re.compile(rb"_cython_(\d+)_(\d+)_(\d+)")


@dataclass(frozen=True, slots=True)
class NumpyUse:
    """An object's use of NumPy's C API, as its bytes tell it."""

    headers: int  # the major release of the NumPy headers it was built with: 1 or 2
    imports_api: bool  # it holds `_import_array()` (the name of NumPy's `_multiarray_umath`)
    feature: str | None  # the oldest NumPy it accepts ("1.23"), as 2.x headers name it
    array_error: str | None  # what `import_array()` raises: "numpy.core.multiarray failed ..."
    umath_error: str | None  # what `import_umath()` raises
    cython_error: str | None  # what Cython 3's own call of import_array() raises
    cython: str | None  # the Cython release that wrote it ("3.0.11"), when it says
    size_checks: bool  # it checks imported types' sizes (Cython's "size changed" check)
    numpy_types: bool  # it names the module `numpy` and the type `dtype` (a Cython cimport)
    init_failed: bool  # it has pybind11's "initialization failed" for a module init that threw

    @property
    def cython3(self) -> bool:
        """Written by Cython 3 or later (which calls `import_array()` itself)."""
        return self.cython is not None and not self.cython.startswith("0.")


def numpy_use(data: bytes) -> NumpyUse | None:
    """What string literals `data` (an object's read-only data) say of its use of NumPy's C
    API; None when they show none (no `_multiarray_umath`, no `import_array()` message)."""
    array_error = _ARRAY_ERROR.search(data)
    umath_error = _UMATH_ERROR.search(data)
    if _NUMPY2 in data or b"numpy._core.multiarray failed to import" in data:
        headers = 2
    elif _NUMPY1 in data or array_error or umath_error:
        headers = 1
    else:
        return None
    feature = _FEATURE.search(data)
    cython = _CYTHON_VERSION.search(data)
    cython_error = _CYTHON_ERROR.search(data)
    return NumpyUse(
        headers=headers,
        imports_api=_NUMPY2 in data or _NUMPY1 in data,
        feature=feature[1].decode() if feature and headers == 2 else None,
        array_error=array_error[1].decode() if array_error else None,
        umath_error=umath_error[1].decode() if umath_error else None,
        cython_error=cython_error[1].decode() if cython_error else None,
        cython=".".join(x.decode() for x in cython.groups()) if cython else None,
        size_checks=_CYTHON_SIZE in data,
        numpy_types=b"\0numpy\0" in data and b"\0dtype\0" in data,
        init_failed=_INIT_FAILED in data)


def read_numpy_use(source: ByteSource, sections: tuple[Section, ...]) -> NumpyUse | None:
    """`numpy_use` of the string sections of the object in `source`, whose section headers
    are `sections` (at most `MAX_STRINGS` bytes of each)."""
    data = b"".join(
        source.read_at(s.offset, min(s.size, MAX_STRINGS, max(0, source.size - s.offset)))
        for s in sections if s.name in STRING_SECTIONS and s.type != 8)  # 8: SHT_NOBITS
    return numpy_use(data)
