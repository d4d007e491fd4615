"""Benchmark: the symbol store over 20 synthetic releases of a library of 75k symbols.

What is measured, in a fresh store in a temporary directory:

- `record` of each release (one view of `--symbols` symbols; a release keeps 95% of the
  previous one's names and renames the rest, as torch's releases do): median and slowest;
- `symbols(package, exact name)` for a name every release holds: median of `--repeat` runs
  (the target: under 0.05 s), and a glob with a literal prefix, and `names_containing`;
- the store's size, and `export` (`dump` + `encode_store`) and `import` into an empty store.

The views are built in memory (`ElfImage`s with a `SymbolTable`), not parsed from files: the
store is what is measured.

Output: one JSON document on stdout; progress and a one-line summary on stderr.

    .venv/bin/python bench/bench_store.py [--releases 20] [--symbols 75000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
from array import array
from pathlib import Path

from _common import REPO, Log, Runs, Target, base_machine_info, timed

from abifit.formats.elf import (
    ByteOrder,
    DynamicInfo,
    ElfClass,
    ElfImage,
    FileType,
    SymbolTable,
    VersionName,
)
from abifit.formats.storefile import decode_store, encode_store
from abifit.remote.store import SymbolStore

SCHEMA_VERSION = 1
WORDS = ("at", "native", "Tensor", "impl", "cuda", "dispatch", "kernel", "autograd", "c10",
         "IValue", "Scalar", "optional", "ArrayRef", "SymInt", "Stream", "Device")


def mangled(rng: random.Random, i: int) -> str:
    parts = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))] + [f"op{i}"]
    return "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "E" + rng.choice(
        ("v", "RKNS_6TensorE", "iib", "RKN3c108ArrayRefIlEE"))


def release_names(count: int, releases: int, seed: int = 1) -> list[list[str]]:
    """The names of each release: 95% of the previous release's, 5% new."""
    rng = random.Random(seed)
    names = [mangled(rng, i) for i in range(count)]
    out, serial = [], count
    for _ in range(releases):
        out.append(list(names))
        for j in rng.sample(range(count), count // 20):
            names[j] = mangled(rng, serial)
            serial += 1
    return out


def view(names: list[str]) -> ElfImage:
    """A view of a library: every third symbol required (a few of those versioned)."""
    n = len(names)
    table = SymbolTable(
        tuple(names), bytes([0x12]) * n, bytes(n),
        array("H", [0 if i % 3 == 0 else 12 for i in range(n)]),
        array("Q", bytes(8 * n)), array("Q", bytes(8 * n)),
        array("H", [2 if i % 30 == 0 else 1 for i in range(n)]),
        {2: VersionName("GLIBC_2.17", "libc.so.6")})
    return ElfImage("libtorch_cpu.so", ElfClass.ELF64, ByteOrder.LITTLE, 62, FileType.DYN, 0,
                    None, (), DynamicInfo((), "libtorch_cpu.so", (), (), 0, 0), table, (), (),
                    (), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--symbols", type=int, default=75_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args(argv)
    log = Log(args.json_only)
    every = release_names(args.symbols, args.releases)
    shared = sorted(set.intersection(*map(set, every)))
    probe = shared[len(shared) // 2]
    with tempfile.TemporaryDirectory() as tmp:
        store = SymbolStore.open(Path(tmp))
        assert store is not None
        records = []
        for r, names in enumerate(every):
            image = view(names)
            seconds, _ = timed(lambda r=r, image=image: store.record(
                f"key-{r}", "torch", f"2.{r}.0", f"torch-2.{r}.0-cp311-cp311-linux_x86_64.whl",
                [("torch/lib/libtorch_cpu.so", image)]))
            records.append(seconds)
            log(f"release {r + 1}/{args.releases} recorded in {seconds:.3f} s")
        exact = Runs(tuple(timed(lambda: store.symbols("torch", probe))[0]
                           for _ in range(args.repeat)))
        hits = len(store.symbols("torch", probe))
        prefix = probe[:12] + "*"
        glob = Runs(tuple(timed(lambda: store.symbols("torch", prefix))[0]
                          for _ in range(args.repeat)))
        glob_hits = len(store.symbols("torch", prefix))
        word = Runs(tuple(timed(lambda: store.names_containing("torch", "op4711"))[0]
                          for _ in range(args.repeat)))
        info = store.info()
        export_s, data = timed(lambda: encode_store(store.dump()))
        with tempfile.TemporaryDirectory() as other_dir:
            other = SymbolStore.open(Path(other_dir))
            assert other is not None
            import_s, loaded = timed(lambda: other.load(decode_store(data, "export")))
            other.close()
        store.close()
    target = Target("exact symbols() query", round(exact.median, 4), 0.05, at_least=False,
                    unit=" s")
    record_target = Target("record, median", round(sorted(records)[len(records) // 2], 3), 1.0,
                           at_least=False, unit=" s")
    document = {
        "schema_version": SCHEMA_VERSION,
        "machine": {**base_machine_info(), "sqlite": sqlite3.sqlite_version},
        "input": {"releases": args.releases, "symbols_per_release": args.symbols,
                  "distinct_names": info.names, "symbol_rows": info.symbols},
        "record_s": {"median": record_target.measured, "max": round(max(records), 3)},
        "exact_query": {**exact.to_json(), "name": probe, "rows": hits},
        "glob_query": {**glob.to_json(), "pattern": prefix, "rows": glob_hits},
        "names_containing": word.to_json(),
        "store_bytes": info.bytes,
        "export": {"bytes": len(data), "seconds": round(export_s, 3)},
        "import": {"wheels": loaded[0], "seconds": round(import_s, 3)},
        "targets": [target.to_json(), record_target.to_json()],
        "repo": str(REPO),
    }
    json.dump(document, sys.stdout, indent=2)
    print()
    log(f"store: {target.describe()} over {args.releases} releases x {args.symbols:,} symbols "
        f"({hits} rows); {record_target.describe()}; {info.bytes / 1e6:.1f} MB, export "
        f"{len(data) / 1e6:.1f} MB")
    return 0 if target.met and record_target.met else 1


if __name__ == "__main__":
    sys.exit(main())
