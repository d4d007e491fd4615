"""`report.json.dumps` writes what `json.dumps(doc, indent=2)` writes, byte for byte: seeded
random documents of every kind of value the reports hold (and some they do not: floats, keys
that are not strings, which it leaves to the standard library)."""

from __future__ import annotations

import json
import random

import pytest

from abifit.report.json import dumps

_TEXTS = ["", "a", "torch::jit", "é", "\u2603", "\udcff", "\x1b[2K", "\"quoted\"\\", "\n\t",
          "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"]


def _value(rng: random.Random, depth: int, unusual: bool) -> object:
    pick = rng.randrange(9 if depth < 4 else 5)
    if pick == 0:
        return rng.choice(_TEXTS)
    if pick == 1:
        return rng.choice([0, -1, 7, 2**63, -(2**70)])
    if pick == 2:
        return rng.choice([True, False, None])
    if pick == 3:
        return rng.choice([1.5, -0.0, 1e300]) if unusual else rng.choice(_TEXTS)
    if pick == 4:
        return rng.choice(_TEXTS) + str(rng.random())
    size = rng.randrange(4)
    if pick in (5, 6):
        keys: list[object] = [rng.choice(_TEXTS) + str(n) for n in range(size)]
        if unusual and size and rng.random() < 0.3:
            keys[0] = rng.choice([1, None, True])
        return {k: _value(rng, depth + 1, unusual) for k in keys}
    items = [_value(rng, depth + 1, unusual) for _ in range(size)]
    return tuple(items) if pick == 7 else items


@pytest.mark.parametrize("unusual", [False, True], ids=["report-values", "with-floats-and-keys"])
def test_dumps_writes_what_the_standard_library_writes(unusual: bool) -> None:
    rng = random.Random(f"dumps-{unusual}")
    for _ in range(2000):
        doc = {"schema_version": 3, "body": _value(rng, 0, unusual)}
        assert dumps(doc) == json.dumps(doc, indent=2)


def test_a_flat_listing_is_written_the_same() -> None:
    rows = [{"name": f"sym{n}", "demangled": None, "hidden": n % 2 == 0, "value": n * 16,
             "version": "GLIBC_2.17" if n % 3 else None} for n in range(1000)]
    doc = {"objects": [{"symbols": rows, "needed": ["libc.so.6"], "empty": [], "none": {}}]}
    assert dumps(doc) == json.dumps(doc, indent=2)
