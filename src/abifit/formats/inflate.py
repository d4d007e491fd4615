"""The inflater every DEFLATE read goes through: zlib-ng's when the `zlib-ng` package is
installed (a dependency of abifit), else the standard library's zlib.

zlib-ng is a maintained fork of zlib whose inflater gives the same output and rejects the same
streams with the same messages, about 1.7 times as fast on the members of real wheels; its
Python binding is CPython's `zlib` module built against it, with the same objects (`copy`,
`unconsumed_tail`, `max_length`). Reading a member's tail enters the stream at candidate bit
offsets and relies on the inflater rejecting false starts (`abifit.formats.deflate`): the two
agree there too, which `tests/formats/test_inflate.py` checks on real libraries, every
candidate start and every decoded view compared byte for byte.

`ABIFIT_INFLATE=zlib` picks the standard library's zlib (for a comparison, or a machine where
zlib-ng misbehaves); worker processes inherit the choice through the environment. `use` changes
it in this process (benchmarks and tests).
"""

from __future__ import annotations

import os
import zlib
from types import ModuleType
from typing import Any, cast

__all__ = ["CHOICES", "crc32", "decompressobj", "error", "name", "use"]

CHOICES = ("zlib-ng", "zlib")

_backend: ModuleType = zlib
_name = "zlib"
error: tuple[type[Exception], ...] = (zlib.error,)


def _module(choice: str) -> ModuleType | None:
    if choice == "zlib":
        return zlib
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return None
    return zlib_ng


def use(choice: str) -> str:
    """Inflate with `choice` (one of CHOICES) from now on in this process, or with zlib when
    zlib-ng is not installed; the name of the inflater used."""
    global _backend, _name, error
    if choice not in CHOICES:
        raise ValueError(f"unknown inflater {choice!r} (known: {', '.join(CHOICES)})")
    module = _module(choice)
    _backend, _name = (module, choice) if module is not None else (zlib, "zlib")
    error = (zlib.error,) if _backend is zlib else (zlib.error, _backend.error)
    return _name


def name() -> str:
    """The inflater in use: "zlib-ng" or "zlib"."""
    return _name


def decompressobj(wbits: int = zlib.MAX_WBITS, zdict: bytes = b"") -> zlib._Decompress:
    """`zlib.decompressobj` of the inflater in use."""
    made: Any = _backend.decompressobj(wbits=wbits, zdict=zdict) if zdict else \
        _backend.decompressobj(wbits)
    return cast("zlib._Decompress", made)


def crc32(data: bytes | memoryview, value: int = 0) -> int:
    """`zlib.crc32` of the inflater in use (zlib-ng's is several times faster)."""
    return int(_backend.crc32(data, value))


use("zlib" if os.environ.get("ABIFIT_INFLATE", "").strip().lower() == "zlib" else "zlib-ng")
