"""Entries planted in the cache: every entry a check wrote replaced by a FIFO (whose open would
wait for a writer forever), then by a directory; the check runs again, at once, and gives the
same verdict (a bad entry is a miss, never a hang or a crash)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import wheels
from httpserver import LoopbackServer, publish_index


@pytest.mark.parametrize("planted", ["fifo", "directory"])
def test_planted_entries_are_misses(planted: str, binaries: dict[str, bytes],
                                   tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    with LoopbackServer() as server:
        index = publish_index(server, wheels(binaries))
        args = [sys.executable, "-m", "abifit", "check", "extpkg==1.0", "--python-version",
                "3.11", "--platform", "linux_x86_64", "--index-url", index.url,
                "--cache-dir", str(cache), "--json"]
        first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        entries = [p for p in cache.rglob("*") if p.is_file() and "sqlite" not in p.name]
        assert first.returncode == 0 and entries, first.stderr
        for entry in entries:
            entry.unlink()
            if planted == "fifo":
                os.mkfifo(entry)
            else:
                entry.mkdir()
        again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == first.returncode, again.stderr
    assert '"verdict": "fits"' in again.stdout
    shutil.rmtree(cache, ignore_errors=True)


@pytest.mark.parametrize("value", [(1, 2, 3), {"a": 1}, "text", [None]])
def test_entries_of_the_wrong_shape_are_misses(value: object, binaries: dict[str, bytes],
                                               tmp_path: Path) -> None:
    """Every entry a check and an inspect wrote replaced by a valid entry of another shape:
    both run again with the same outcome, never an internal error. (A string is the shape of
    a wheel's cached METADATA: planted, it is read as that wheel's metadata, whose requirements
    are then gone; whoever can write the cache can make abifit read wrong entries, as the
    README says, so for it only a clean outcome is asked.)"""
    from abifit.remote.diskcache import write_value

    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    with LoopbackServer() as server:
        index = publish_index(server, wheels(binaries))
        common = ["--python-version", "3.11", "--platform", "linux_x86_64", "--index-url",
                  index.url, "--cache-dir", str(cache), "--json"]
        commands = [[sys.executable, "-m", "abifit", "check", "extpkg==1.0", *common],
                    [sys.executable, "-m", "abifit", "inspect", "extpkg==1.0", *common]]
        first = [subprocess.run(c, capture_output=True, text=True, env=env, timeout=120)
                 for c in commands]
        entries = [p for p in cache.rglob("*") if p.is_file() and "sqlite" not in p.name]
        assert entries and [r.returncode for r in first] == [0, 0], first[0].stderr
        for entry in entries:
            write_value(entry, value)
        again = [subprocess.run(c, capture_output=True, text=True, env=env, timeout=120)
                 for c in commands]
    for before, after in zip(first, again, strict=True):
        assert "internal error" not in after.stderr and after.returncode in (0, 1)
        if not isinstance(value, str):
            assert after.returncode == before.returncode, after.stderr
