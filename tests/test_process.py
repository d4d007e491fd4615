"""`sim.process.Environment`: who needs whom, from Requires-Dist and the sonames files need."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from abifit.host.environment import Distribution, InterpreterFacts
from abifit.host.natives import NativeFile
from abifit.sim import process
from abifit.sim.process import Environment

FACTS = InterpreterFacts(
    executable="/venv/bin/python", version="3.11.7", implementation="cpython", prefix="/venv",
    base_prefix="/usr", sys_path=("/venv/site",), site_packages=("/venv/site",),
    dlopen_flags=2, ext_suffix=".cpython-311-x86_64-linux-gnu.so",
    markers=(("python_version", "3.11"), ("sys_platform", "linux")),
)


def dist(name: str, *requires: str) -> Distribution:
    return Distribution(name, "1.0", Path(f"/venv/site/{name}-1.0.dist-info"), (), requires)


def test_requirements_are_parsed_once_per_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many modules ask for their prerequisites, each distribution's Requires-Dist
    lines are parsed once; markers and extras still decide which count."""
    parsed: Counter[str] = Counter()
    parse = process._requirement

    def counting(text: str) -> Requirement | None:
        parsed[text] += 1
        return parse(text)

    monkeypatch.setattr(process, "_requirement", counting)
    dists = [dist("app", "lib>=1", "old; python_version < '3'", "extra-only; extra == 'x'"),
             dist("lib", "base"), dist("base", "not installed"), dist("old"),
             dist("extra-only")]
    natives = [NativeFile(f"/venv/site/app/_m{i}.so", "app", f"app._m{i}") for i in range(20)]
    natives += [NativeFile(f"/venv/site/{d}/_{d}.so", d, f"{d}._{d}")
                for d in ("lib", "base", "old", "extra-only")]
    env = Environment(FACTS, dists, natives)
    for native in natives[:20]:
        assert env.prerequisites(native, lambda _path: None) == ("base", "lib")
    assert parsed and set(parsed.values()) == {1}
