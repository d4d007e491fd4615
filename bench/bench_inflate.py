"""Benchmark: zlib-ng's inflater (abifit's default) against the standard library's zlib
(`ABIFIT_INFLATE=zlib`), in the same run, alternating round by round.

- tails: `decode_tail` of the last 256 KiB, 1 MiB and 4 MiB of libtorch_cpu.so (torch 2.13.0's,
  from the test environment, else this machine's libstdc++) compressed as raw DEFLATE at level
  6, in this process (`abifit.formats.inflate.use`); the views must be equal;
- whole members: every ELF member of the torch 2.13.0 CPU wheel (`--wheel`, default the first
  under /opt/wheels) inflated whole and checked against its CRC, in this process;
- commands (`--live`, PyPI): `abifit inspect torch==2.10.0 --json` cold (an empty cache each
  run), whole processes, with each inflater; the documents (less `transfer`) must be equal.
  Also the process's CPU seconds (its children's included).

Output: one JSON document on stdout; progress and a one-line summary (the ratios) on stderr.

    .venv/bin/python bench/bench_inflate.py [--repeat 5] [--live] [--wheel PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from _common import (
    REPO,
    Log,
    Runs,
    abifit_env,
    base_machine_info,
    byte_compile_abifit,
    ratio,
    timed,
)

from abifit.formats import deflate, inflate
from abifit.formats.wheel import Member, whole_member

SCHEMA_VERSION = 1
CACHE = Path(os.environ.get("ABIFIT_TEST_CACHE", Path.home() / ".cache" / "abifit-tests"))
TORCH_CPU = CACHE / "torch-2.13.0/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
FALLBACK = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
TAILS = (256 << 10, 1 << 20, 4 << 20)
CHOICES = ("zlib", "zlib-ng")


def _tails(log: Log, repeat: int) -> dict[str, object]:
    source = TORCH_CPU if TORCH_CPU.exists() else FALLBACK
    original = source.read_bytes()[: 96 << 20]
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = compressor.compress(original) + compressor.flush()
    out: dict[str, object] = {"input": str(source), "uncompressed": len(original),
                              "compressed": len(stream)}
    for size in TAILS:
        tail = stream[-size:]
        times: dict[str, list[float]] = {c: [] for c in CHOICES}
        views = {}
        for _ in range(repeat):
            for choice in CHOICES:
                inflate.use(choice)
                seconds, view = timed(lambda tail=tail: deflate.decode_tail(tail, len(original)))
                times[choice].append(seconds)
                views[choice] = (view.start, view.data, view.other)
        assert views["zlib"] == views["zlib-ng"], f"the views of the {size}-byte tail differ"
        runs = {c: Runs(tuple(t)) for c, t in times.items()}
        out[f"tail_{size}"] = {**{c: r.to_json() for c, r in runs.items()},
                               "ratio": ratio(runs["zlib"].median, runs["zlib-ng"].median)}
        log(f"tail {size >> 10} KiB: zlib {runs['zlib'].median:.3f} s, zlib-ng "
            f"{runs['zlib-ng'].median:.3f} s")
    return out


def _wheel_members(wheel: Path, log: Log, repeat: int) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as z:
        infos = [i for i in z.infolist() if ".so" in i.filename and i.compress_type == 8]
        stored = []
        with open(wheel, "rb") as f:
            for info in infos:
                f.seek(info.header_offset + 26)
                skip = int.from_bytes(f.read(2), "little") + int.from_bytes(f.read(2), "little")
                f.seek(info.header_offset + 30 + skip)
                member = Member(info.filename, info.file_size, info.compress_size, info.CRC,
                                info.compress_type, info.header_offset)
                stored.append((f.read(info.compress_size), member))
    times: dict[str, list[float]] = {c: [] for c in CHOICES}
    for _ in range(repeat):
        for choice in CHOICES:
            inflate.use(choice)
            seconds, _sizes = timed(lambda: [len(whole_member(data, m, m.path))
                                             for data, m in stored])
            times[choice].append(seconds)
    runs = {c: Runs(tuple(t)) for c, t in times.items()}
    log(f"whole members ({len(stored)}, {sum(m.size for _d, m in stored) / 1e6:.0f} MB): "
        f"zlib {runs['zlib'].median:.3f} s, zlib-ng {runs['zlib-ng'].median:.3f} s")
    return {"wheel": str(wheel), "members": len(stored),
            "uncompressed": sum(m.size for _d, m in stored),
            **{c: r.to_json() for c, r in runs.items()},
            "ratio": ratio(runs["zlib"].median, runs["zlib-ng"].median)}


def _live(log: Log, repeat: int) -> dict[str, object]:
    times: dict[str, list[float]] = {c: [] for c in CHOICES}
    cpu: dict[str, list[float]] = {c: [] for c in CHOICES}
    documents = {}
    for _ in range(repeat):
        for choice in CHOICES:
            env = {**abifit_env(), "ABIFIT_INFLATE": "zlib" if choice == "zlib" else "zlib-ng"}
            with tempfile.TemporaryDirectory() as cache:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                seconds, done = timed(lambda env=env, cache=cache: subprocess.run(
                    [sys.executable, "-m", "abifit", "inspect", "torch==2.10.0",
                     "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                     "--cache-dir", cache, "--json"],
                    env=env, capture_output=True, text=True, timeout=300))
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert done.returncode == 0, done.stderr[-2000:]
            document = json.loads(done.stdout)
            document.pop("transfer", None)
            documents[choice] = document
            times[choice].append(seconds)
            cpu[choice].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        log(f"inspect torch==2.10.0 cold: zlib {times['zlib'][-1]:.2f} s, zlib-ng "
            f"{times['zlib-ng'][-1]:.2f} s")
    assert documents["zlib"] == documents["zlib-ng"], "the documents differ"
    runs = {c: Runs(tuple(t)) for c, t in times.items()}
    cpus = {c: Runs(tuple(t)) for c, t in cpu.items()}
    return {**{c: {**runs[c].to_json(), "cpu_s": cpus[c].to_json()} for c in CHOICES},
            "ratio": ratio(runs["zlib"].median, runs["zlib-ng"].median),
            "cpu_ratio": ratio(cpus["zlib"].median, cpus["zlib-ng"].median)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--live", action="store_true", help="also inspect torch==2.10.0 cold")
    parser.add_argument("--wheel", type=Path,
                        default=next(iter(sorted(Path("/opt/wheels").glob("torch-2.13.0*.whl"))),
                                     None))
    parser.add_argument("--json-only", action="store_true")
    args = parser.parse_args()
    log = Log(args.json_only)
    byte_compile_abifit()
    result: dict[str, object] = {"schema_version": SCHEMA_VERSION, "machine": base_machine_info(),
                                 "repo": str(REPO), "tails": _tails(log, args.repeat)}
    if args.wheel is not None and args.wheel.exists():
        result["wheel_members"] = _wheel_members(args.wheel, log, args.repeat)
    if args.live:
        result["inspect_torch"] = _live(log, args.repeat)
    print(json.dumps(result, indent=2))
    parts = [f"tail {size >> 10} KiB {result['tails'][f'tail_{size}']['ratio']}x"  # type: ignore[index]
             for size in TAILS]
    for key in ("wheel_members", "inspect_torch"):
        if key in result:
            parts.append(f"{key} {result[key]['ratio']}x")  # type: ignore[index]
    log("zlib-ng against zlib (zlib's time / zlib-ng's): " + ", ".join(parts))


if __name__ == "__main__":
    main()
