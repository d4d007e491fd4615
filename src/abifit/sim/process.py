"""The process simulation: for each extension module, a Python process that has imported what
the module's package needs, then loads the module; every problem becomes a finding.

For each module the simulated process first imports the distributions it requires
(Requires-Dist, recursively) and those that own a library it needs by soname (an extension built
for torch needs `libc10.so` and declares nothing). Importing a distribution means applying its
known process-level rules (torch loads `libtorch_global_deps.so` with RTLD_GLOBAL, after
preloading the nvidia-* libraries) and loading its extension modules. Then the module itself is
loaded with RTLD_NOW | RTLD_LOCAL, as CPython does (`abifit.sim.loader`), and every problem
becomes a finding with its explanation (`abifit.sim.diagnose`).

Pure: files come through an `ObjectSource`, the host's loader settings as a `SearchConfig`, the
glob that import rules need as a callable. Processes that imported the same prerequisites are
shared between modules.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage
from abifit.formats.sources import ObjectSource
from abifit.host.environment import (
    Distribution,
    InterpreterFacts,
)
from abifit.host.ldconfig import HostFacts, cache_id_for
from abifit.sim.diagnose import Context, diagnose
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.loader import LoadResult, Process, SearchConfig

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from abifit.host.natives import NativeFile

DATA = Path(__file__).parent.parent / "data"


Progress = Callable[[str], None]


# Undefined symbols explained with a search for their nearest definitions, per module.
DEEP_DIAGNOSES = 10


@dataclass(frozen=True, slots=True)
class ImportRule:
    """What importing a distribution does to the process beyond loading its modules."""

    preload: tuple[str, ...]
    global_: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModuleStatus:
    """The prediction for one extension module (kind "extension") or plugin library."""

    module: str
    kind: str
    path: str
    distribution: str
    loads: bool
    error: str | None
    prerequisites: tuple[str, ...]
    problems: int


def load_import_rules() -> dict[str, ImportRule]:
    raw = json.loads((DATA / "import_rules.json").read_text("utf-8"))
    return {
        canonicalize_name(name): ImportRule(tuple(rule.get("preload", ())),
                                            tuple(rule.get("global", ())))
        for name, rule in raw["distributions"].items()
    }


def load_soname_packages() -> dict[str, str | None]:
    raw = json.loads((DATA / "soname_packages.json").read_text("utf-8"))
    table: dict[str, str | None] = raw["sonames"]
    return table


def _requirements(dist: Distribution, markers: dict[str, str]) -> list[str]:
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

    names: list[str] = []
    for req in map(_requirement, dist.requires):
        if req is None:
            continue
        try:
            if req.marker is not None and not req.marker.evaluate({**markers, "extra": ""}):
                continue
        except (UndefinedComparison, UndefinedEnvironmentName):
            continue
        names.append(canonicalize_name(req.name))
    return names


def _requirement(text: str) -> Requirement | None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


class Environment:
    """A scanned environment: distributions, their native files, and who needs whom."""

    def __init__(self, facts: InterpreterFacts, dists: list[Distribution],
                 natives: list[NativeFile]) -> None:
        self.facts = facts
        self.dists = {d.key: d for d in dists}
        self.natives = natives
        self.owner_of = {n.path: n.distribution for n in natives}
        self._markers = dict(facts.markers)
        self._by_name: dict[str, list[NativeFile]] = {}
        for n in natives:
            self._by_name.setdefault(os.path.basename(n.path), []).append(n)

    def owner(self, path: str) -> str | None:
        key = self.owner_of.get(path)
        if key is None:
            return None
        dist = self.dists[key]
        return f"{dist.name} {dist.version}"

    def rebuild_hint(self, path: str, provider_path: str) -> str | None:
        """Advice when the object at `path` was built against another release of the
        distribution that owns `provider_path`."""
        mine = self.dists.get(self.owner_of.get(path, ""))
        theirs = self.dists.get(self.owner_of.get(provider_path, ""))
        if mine is None or theirs is None or mine.key == theirs.key:
            return None
        pins = [req for req in map(_requirement, mine.requires)
                if req is not None and canonicalize_name(req.name) == theirs.key]
        wanted = f" (it requires {pins[0]})" if pins else ""
        return (f"{mine.name} {mine.version} was built against another {theirs.name} than the "
                f"installed {theirs.name} {theirs.version}{wanted}: install the {theirs.name} "
                f"release it was built for, or a {mine.name} release built for {theirs.name} "
                f"{theirs.version}")

    def required(self, key: str) -> list[str]:
        dist = self.dists.get(key)
        if dist is None:
            return []
        return [r for r in _requirements(dist, self._markers) if r in self.dists]

    def providers(self, soname: str) -> set[str]:
        """Distributions holding an ELF file named `soname`."""
        return {n.distribution for n in self._by_name.get(soname, ())}

    def _needed_closure(self, native: NativeFile,
                        image: Callable[[str], ElfImage | None]) -> list[str]:
        """Sonames `native` needs, directly or through libraries of its own distribution."""
        needed: list[str] = []
        queue = [native.path]
        seen = {native.path}
        while queue:
            img = image(queue.pop())
            for name in img.needed if img else ():
                if name in needed:
                    continue
                needed.append(name)
                for own in self._by_name.get(name, ()):
                    if own.distribution == native.distribution and own.path not in seen:
                        seen.add(own.path)
                        queue.append(own.path)
        return needed

    def prerequisites(self, native: NativeFile,
                      image: Callable[[str], ElfImage | None]) -> tuple[str, ...]:
        """Distributions imported before `native`, requirements first."""
        direct: list[str] = list(self.required(native.distribution))
        for name in self._needed_closure(native, image):
            providers = self.providers(name)
            if native.distribution in providers:
                continue  # the package ships that library itself
            direct.extend(sorted(providers))
        order: list[str] = []
        seen: set[str] = {native.distribution}

        def visit(key: str) -> None:
            if key in seen:
                return
            seen.add(key)
            for dep in self.required(key):
                visit(dep)
            order.append(key)

        for key in direct:
            visit(key)
        return tuple(k for k in order if any(n.distribution == k for n in self.natives))


class Simulator:
    """Runs the loader simulation for modules, reusing processes that imported the same things."""

    def __init__(self, env: Environment, source: ObjectSource, config: SearchConfig,
                 rules: dict[str, ImportRule],
                 glob: Callable[[str, str], list[str]]) -> None:
        self.env = env
        self.source = source
        self.config = config
        self.rules = rules
        self.glob = glob
        self._bases: dict[tuple[str, ...], Process] = {}

    def image(self, path: str) -> ElfImage | None:
        try:
            return self.source.image(path)
        except (OSError, FormatError):
            return None

    def base(self, prerequisites: tuple[str, ...]) -> Process:
        known = self._bases.get(prerequisites)
        if known is not None:
            return known
        if prerequisites:
            process = self.base(prerequisites[:-1]).copy()
            self._import(process, prerequisites[-1])
        else:
            process = Process(self.source, self.config, self.env.facts.executable)
        self._bases[prerequisites] = process
        return process

    def _import(self, process: Process, key: str) -> None:
        rule = self.rules.get(key)
        dist = self.env.dists[key]
        site = dist.metadata_dir.parent
        if rule is not None:
            for pattern in rule.preload:
                for path in self.glob(str(site), pattern):
                    process.dlopen(path)
            for rel in rule.global_:
                process.dlopen(str(site / rel), global_=True)
        for n in self.env.natives:
            if n.distribution == key and n.checked:
                process.dlopen(n.path)

    def check(self, native: NativeFile) -> tuple[LoadResult, tuple[str, ...]]:
        prerequisites = self.env.prerequisites(native, self.image)
        process = self.base(prerequisites).copy()
        return process.dlopen(native.path), prerequisites


def _exports(sim: Simulator) -> Callable[[str], Collection[str]]:
    memo: dict[str, Collection[str]] = {}

    def exports(path: str) -> Collection[str]:
        if path not in memo:
            img = sim.image(path)
            memo[path] = frozenset(_defined_names(img)) if img else frozenset()
        return memo[path]

    return exports


def _defined_names(image: ElfImage) -> Iterable[str]:
    table = image.symbols
    return (name for i, name in enumerate(table.names) if table.is_defined(i))


LibraryFix = Callable[[str, str], "tuple[str | None, str] | None"]


def context(sim: Simulator, locate: Callable[[str], tuple[str, ...]],
            packages: dict[str, str | None], library_fix: LibraryFix | None = None) -> Context:
    def versions(path: str) -> tuple[str, ...]:
        img = sim.image(path)
        return tuple(d.name for d in img.version_defs) if img else ()

    ctx = Context(owner=sim.env.owner, exports=_exports(sim), versions_defined=versions,
                  locate=locate, pip_package=packages.get, rebuild_hint=sim.env.rebuild_hint)
    return ctx if library_fix is None else replace(ctx, library_fix=library_fix)


def selected(natives: list[NativeFile], packages: list[str],
             env: Environment) -> list[NativeFile]:
    """Extension modules and plugins to check: all, or those of the named distributions or
    packages."""
    modules = [n for n in natives if n.checked]
    if not packages:
        return modules
    keys = {canonicalize_name(p) for p in packages}
    return [n for n in modules
            if n.distribution in keys
            or any(fnmatch.fnmatchcase(n.module or "", f"{p}*") for p in packages)]


def _duplicate(native: NativeFile, soname: str, new: str, old: str, ctx: Context) -> Finding:
    return Finding(
        kind=FindingKind.DUPLICATE_SONAME, object=new, module=native.name, library=soname,
        message=f"{new}: a second copy of {soname} ({old} is already loaded)",
        explanation=f"Because {old} is already in the process under the soname {soname} and "
        f"loading {native.name} maps {new} as well, two copies of that library live in one "
        "process; their global state (allocators, thread pools, registries) is not shared.",
        hint=f"make both packages use one copy of {soname}",
    )


@dataclass(frozen=True, slots=True)
class Simulation:
    """What simulating a set of modules found: a status per module, the findings, and the
    loader's result per module (in the same order as the statuses)."""

    statuses: tuple[ModuleStatus, ...]
    findings: tuple[Finding, ...]
    results: tuple[LoadResult, ...]


def simulate_modules(
    sim: Simulator, targets: list[NativeFile], ctx: Context, progress: Progress,
) -> Simulation:
    """Simulate every target module; findings for every problem, the first ones explained
    deeply."""
    statuses: list[ModuleStatus] = []
    findings: list[Finding] = []
    results: list[LoadResult] = []
    for n, native in enumerate(targets, 1):
        progress(f"module {n}/{len(targets)} {native.name}")
        result, prerequisites = sim.check(native)
        results.append(result)
        statuses.append(ModuleStatus(native.name, "plugin" if native.plugin else "extension",
                                     native.path,
                                     native.distribution, result.loads, result.error,
                                     prerequisites, len(result.problems)))
        for i, problem in enumerate(result.problems):
            findings.append(diagnose(problem, native.name, ctx, deep=i < DEEP_DIAGNOSES))
        findings.extend(_duplicate(native, soname, new, old, ctx)
                        for soname, new, old in result.duplicates)
    return Simulation(tuple(statuses), tuple(findings), tuple(results))


def search_config(host: HostFacts) -> SearchConfig:
    """The loader's search configuration from the probed host facts."""
    return SearchConfig(
        ld_library_path=host.ld_library_path,
        ld_preload=(*host.ld_so_preload, *host.ld_preload),
        system_dirs=host.defaults.system_dirs,
        lib=host.defaults.lib,
        platform=host.defaults.platform,
        cache=host.cache,
        cache_id=cache_id_for,
        subdirs=tuple(dict.fromkeys(host.defaults.searched_subdirs)),
        hwcaps=host.defaults.hwcaps_subdirs,
        legacy_hwcaps=host.defaults.legacy_hwcaps_subdirs or ("tls",),
    )
