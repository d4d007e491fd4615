"""`sim.process.Environment`: who needs whom, from Requires-Dist and the sonames files need."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from abifit.formats.elf import ElfImage
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


def test_requirements_parsed_elsewhere_are_those_parsed_on_demand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What `requirements` finds for all distributions at once (on another core, in doctor)
    is what each would be parsed to when asked; given it, nothing is parsed again. A
    distribution it does not cover is still parsed when asked."""
    dists = [dist("app", "lib>=1", "old; python_version < '3'", "extra-only; extra == 'x'",
                  "missing", "not a requirement !"),
             dist("lib", "base; sys_platform == 'linux'"), dist("base", "lib"), dist("old"),
             dist("extra-only"), dist("late", "base")]
    natives = [NativeFile(f"/venv/site/{d.key}/_{d.key}.so", d.key, f"{d.key}._m")
               for d in dists]
    on_demand = Environment(FACTS, dists, natives)
    wanted = {d.key: on_demand.required(d.key) for d in dists}
    assert wanted["app"] == ("lib",) and wanted["lib"] == ("base",)

    found = process.requirements({d.key: d.requires for d in dists[:-1]}, dict(FACTS.markers))
    assert found["app"] == ("lib", "missing")  # filtered by what is installed when used
    parsed: list[str] = []
    parse = process._requirement
    monkeypatch.setattr(process, "_requirement", lambda text: parsed.append(text) or parse(text))
    given = Environment(FACTS, dists, natives, requires=found)
    assert {d.key: given.required(d.key) for d in dists} == wanted
    assert parsed == ["base"]  # only `late`'s line, which `found` does not cover
    for native in natives:
        assert (given.prerequisites(native, lambda _path: None)
                == on_demand.prerequisites(native, lambda _path: None))


def test_opened_is_what_checking_a_module_opens_in_its_package_tree(tmp_path: Path) -> None:
    """`Simulator.opened` (what `check` reads ahead of a simulation) lists every file of the
    tree that checking a module opens besides the module: here torch's import rule (its
    nvidia-* preloads and its global library) and torch's own module, imported first because
    the module's package requires torch. Checked against the loader: the files of the tree that
    a real `check` asks the source for."""
    import glob as globbing
    import sys
    from dataclasses import replace

    from abifit.host.localfs import LocalObjects
    from abifit.sim.imports import load_preload_rules
    from abifit.sim.loader import SearchConfig
    from fixtures.build import compile_c

    source = tmp_path / "plain.c"
    source.write_text("int plain(void) { return 1; }\n")
    plain = compile_c(source, tmp_path / "plain.so")
    site = tmp_path / "site"
    files = ["torch/_C.cpython-311-x86_64-linux-gnu.so", "torch/lib/libtorch_global_deps.so",
             "nvidia/a/lib/liba.so.1", "nvidia/b/lib/libb.so.2",
             "app/_m.cpython-311-x86_64-linux-gnu.so"]
    for rel in files:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(plain.read_bytes())
    dists = [Distribution(name, "1.0", site / f"{name}-1.0.dist-info", (), requires)
             for name, requires in (("torch", ()), ("app", ("torch",)))]
    natives = [NativeFile(str(site / files[0]), "torch", "torch._C"),
               NativeFile(str(site / files[-1]), "app", "app._m")]
    env = Environment(replace(FACTS, executable=sys.executable), dists, natives)

    asked: list[str] = []

    class Recording(LocalObjects):
        def image(self, path: str) -> ElfImage:
            asked.append(path)
            return super().image(path)

    sim = process.Simulator(env, Recording(), SearchConfig(), load_preload_rules(),
                            glob=lambda d, p: sorted(globbing.glob(f"{d}/{p}")))
    opened = sim.opened([natives[1]])
    assert set(opened) == {str(site / rel) for rel in files[:-1]}
    asked.clear()
    result, prerequisites = sim.check(natives[1])
    assert result.loads and prerequisites == ("torch",)
    in_tree = {p for p in asked if p.startswith(str(site))}
    assert in_tree - {natives[1].path} == set(opened)
