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
import posixpath
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from abifit.errors import FormatError
from abifit.formats.demangle import Names
from abifit.formats.elf import ElfImage
from abifit.formats.ldcache import cache_id_for
from abifit.formats.numpyapi import NumpyUse
from abifit.formats.objects import ObjectSource
from abifit.host.environment import (
    Distribution,
    InterpreterFacts,
)
from abifit.host.ldconfig import HostFacts
from abifit.sim.derivation import (
    BlockedBy,
    DoesNotCompile,
    DuplicateSoname,
    IndexFix,
    IndexMiss,
    NeededPackageFails,
    Outcome,
    OwnLoadFails,
    Sentence,
)
from abifit.sim.diagnose import Context, diagnose
from abifit.sim.findings import Effect, Finding, FindingKind, Severity
from abifit.sim.loader import (
    LoadProblem,
    LoadResult,
    ProblemKind,
    Process,
    SearchConfig,
    crashes,
    expand_path,
)
from abifit.sim.numpyabi import numpy_break
from abifit.sim.verdict import (
    Cause,
    Member,
    Stack,
    VariantRule,
    picked,
    problem_cause,
    stack_cuda,
    unused,
    variant_sets,
    worst,
)

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from abifit.host.natives import NativeFile
from abifit.sim.imports import (
    BUS_ERROR,
    AfterRule,
    DistributionPlan,
    Placement,
    PreloadRule,
    Reachability,
    Step,
    user_error,
)

DATA = Path(__file__).parent.parent / "data"


Progress = Callable[[str], None]


# Undefined symbols explained with a search for their nearest definitions, per module.
DEEP_DIAGNOSES = 10


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
    import_name: str | None = None  # the import that loads it (sim.imports)
    reachability: str | None = None  # how that import reaches it; None: not planned
    blocked_by: str | None = None  # the prerequisite module whose failure it fails by
    blocked_error: str | None = None  # that module's error, which `import` shows first
    effect: Effect | None = None  # what its failure costs (`sim.verdict`); None: it loads

    @property
    def counts(self) -> bool:
        """Whether its failure fails an import (the others degrade the package, need a
        prerequisite, or are variants it does not pick)."""
        if self.effect is not None:
            return self.effect is Effect.FAILS
        return self.reachability is None or effective_reach(Reachability(self.reachability),
                                                            self.error).counts

    @property
    def costs(self) -> bool:
        """Whether it does not load and that counts against the stack: its failure fails an
        import or degrades its package (`sim.verdict`)."""
        if self.loads:
            return False
        return self.counts if self.effect is None else self.effect in (Effect.FAILS,
                                                                       Effect.DEGRADES)


def effective_reach(reach: Reachability, error: str | None) -> Reachability:
    """How a file that fails to load with `error` fails the import that reaches it: as its
    reach says, except that a guarded load that kills the process (`crashes`: no `except`
    runs) fails it as surely as one at module level."""
    return Reachability.ALWAYS if reach is Reachability.GUARDED and crashes(error) else reach


def count_failing(modules: Iterable[ModuleStatus], *, optional: bool = False) -> int:
    """Modules that do not load and whose failure fails an import; with `optional`, those that
    do not load and that package code does without (guarded, loaded only on use, or reached
    by no import)."""
    return sum(1 for m in modules if not m.loads and m.counts is not optional)


def count_effect(modules: Iterable[ModuleStatus], effect: Effect) -> int:
    """Modules that do not load with that effect (`degrades`, `prerequisite`, `unused`)."""
    return sum(1 for m in modules if not m.loads and m.effect is effect)


def load_soname_packages() -> dict[str, str | None]:
    raw = json.loads((DATA / "soname_packages.json").read_text("utf-8"))
    table: dict[str, str | None] = raw["sonames"]
    return table


def requirements(requires: Mapping[str, Sequence[str]],
                 markers: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The names of what each distribution requires (`requires`: its Requires-Dist lines, by
    key), those whose markers hold, extras left out: what `Environment.required` parses, made
    at once for all (a function another process can run)."""
    return {key: tuple(_requirements(lines, dict(markers))) for key, lines in requires.items()}


def _requirements(requires: Iterable[str], markers: dict[str, str]) -> list[str]:
    from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

    names: list[str] = []
    for req in map(_requirement, requires):
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
                 natives: list[NativeFile],
                 plans: Mapping[str, DistributionPlan] | None = None,
                 requires: Mapping[str, tuple[str, ...]] | None = None,
                 numpy_uses: Mapping[str, NumpyUse] | None = None) -> None:
        """`requires`, when given, is what `requirements` found of `dists` (else each is
        parsed when first asked); `numpy_uses`, what the bytes of the files that use NumPy's C
        API say of it, by path (`formats.numpyapi`)."""
        self.facts = facts
        self.numpy_uses = dict(numpy_uses or {})
        self.plans = dict(plans or {})
        self.dists = {d.key: d for d in dists}
        self.natives = natives
        self.owner_of = {n.path: n.distribution for n in natives}
        self._native_owners = frozenset(self.owner_of.values())
        self._markers = dict(facts.markers)
        self._declared: dict[str, tuple[str, ...]] = {
            key: tuple(names) for key, names in (requires or {}).items() if key in self.dists}
        self._required: dict[str, tuple[str, ...]] = {}
        self._by_name: dict[str, list[NativeFile]] = {}
        for n in natives:
            self._by_name.setdefault(os.path.basename(n.path), []).append(n)

    def numpy_problem(self, native: NativeFile,
                      image: Callable[[str], ElfImage | None]) -> LoadProblem | None:
        """Why `native`, which loads, fails to import beside the environment's NumPy
        (`sim.numpyabi`): its own use of NumPy's C API, else that of a library of its
        distribution it needs (whose `import_array()` its import runs: pyarrow.lib's
        libarrow_python.so); None when it imports, or when that is not known."""
        numpy = self.dists.get("numpy")
        if numpy is None or not self.numpy_uses:
            return None
        uses = [(native.path, self.numpy_uses.get(native.path))]
        img = image(native.path)
        for name in (img.needed if img is not None else ()):
            uses += [(own.path, self.numpy_uses.get(own.path)) for own in self.files_named(name)
                     if own.distribution == native.distribution and own.path != native.path]
        for path, use in uses:
            broken = numpy_break(use, numpy.version) if use is not None else None
            if broken is not None:
                return LoadProblem(ProblemKind.NUMPY_C_API, path, broken.error,
                                   version=broken.requirement, library=numpy.version,
                                   numpy_reason=broken.reason, printed=broken.printed)
        return None

    def owner(self, path: str) -> str | None:
        """The distribution that owns `path`, as "NAME VERSION"; None for a loose file."""
        dist = self.dists.get(self.owner_of.get(path, ""))
        return None if dist is None else f"{dist.name} {dist.version}"

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

    def required(self, key: str) -> tuple[str, ...]:
        """The installed distributions `key` requires (its Requires-Dist whose markers hold,
        extras left out), parsed once per distribution: every module's prerequisites ask."""
        known = self._required.get(key)
        if known is None:
            known = tuple(r for r in self.declared(key) if r in self.dists)
            self._required[key] = known
        return known

    def required_closure(self, keys: Iterable[str]) -> set[str]:
        """The installed distributions `keys` require, directly or through others (`keys`
        left out)."""
        start = set(keys)
        seen: set[str] = set()
        todo = [r for key in sorted(start) for r in self.required(key)]
        while todo:
            name = todo.pop()
            if name not in seen and name not in start:
                seen.add(name)
                todo += self.required(name)
        return seen

    def declared(self, key: str) -> tuple[str, ...]:
        """What `key` declares it requires (Requires-Dist whose markers hold, extras left out),
        installed or not, by canonical name; parsed once per distribution."""
        known = self._declared.get(key)
        if known is None:
            dist = self.dists.get(key)
            known = () if dist is None else tuple(_requirements(dist.requires, self._markers))
            self._declared[key] = known
        return known

    def providers(self, soname: str) -> set[str]:
        """Distributions holding an ELF file named `soname` (loose files have none)."""
        return {n.distribution for n in self._by_name.get(soname, ()) if n.distribution}

    def files_named(self, name: str) -> tuple[NativeFile, ...]:
        """The native files whose file name is `name`."""
        return tuple(self._by_name.get(name, ()))

    def needed_closure(self, native: NativeFile,
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

    def after_rule(self, native: NativeFile) -> AfterRule | None:
        """The `after` rule of a native file of a distribution with an imports rule."""
        plan = self.plans.get(native.distribution)
        if plan is None or plan.rule is None or not plan.rule.after:
            return None
        rel = next((r for r, p in plan.files.items() if p == native.path), None)
        return plan.rule.after_for(rel) if rel is not None else None

    def prerequisites(self, native: NativeFile,
                      image: Callable[[str], ElfImage | None]) -> tuple[str, ...]:
        """Distributions imported before `native`, requirements first."""
        direct: list[str] = list(self.required(native.distribution))
        after = self.after_rule(native)
        direct += [canonicalize_name(d) for d in (after.imports if after else ())
                   if canonicalize_name(d) in self.dists]
        for name in self.needed_closure(native, image):
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
        return tuple(k for k in order if k in self._native_owners)


OwnKey = tuple[tuple[str, ...], tuple[str, ...]]  # prerequisites, paths of own steps
Checked = tuple[LoadResult, tuple[str, ...]]  # a module's check: its result, its prerequisites


@dataclass(frozen=True, slots=True)
class BuildLogs:
    """What building the processes of checks found, by process: the modules of the
    prerequisite last imported that did not load (by the prerequisites imported), and the own
    steps that did not load (by prerequisites and own steps). Building a process is the same
    wherever it is done, so logs from several copies of a simulator agree."""

    imports: dict[tuple[str, ...], tuple[tuple[NativeFile, LoadResult], ...]]
    own: dict[OwnKey, tuple[Step, ...]]


class Simulator:
    """Runs the loader simulation for modules, reusing processes that imported the same things."""

    def __init__(self, env: Environment, source: ObjectSource, config: SearchConfig,
                 rules: dict[str, PreloadRule],
                 glob: Callable[[str, str], list[str]]) -> None:
        self.env = env
        self.source = source
        self.config = config
        self.rules = rules
        self.glob = glob
        self._bases: dict[tuple[str, ...], Process] = {}
        self._own: dict[OwnKey, Process] = {}
        self.logs = BuildLogs({}, {})
        self._settled: set[tuple[str, ...] | OwnKey] = set()
        # what the checks settled so far found (`settle`), read by the findings of a module:
        self.failed_own: set[Step] = set()  # own load steps that did not load
        # prerequisite distribution -> its modules that did not load when it was imported
        self.import_failures: dict[str, dict[str, tuple[NativeFile, LoadResult]]] = {}

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
            self.logs.imports[prerequisites] = self._import(process, prerequisites[-1])
        else:
            process = Process(self.source, self.config, self.env.facts.executable)
        self._bases[prerequisites] = process
        return process

    def _import(self, process: Process, key: str) -> tuple[tuple[NativeFile, LoadResult], ...]:
        """Import distribution `key` into `process`; its modules that did not load."""
        for path, global_ in self._import_loads(key):
            process.dlopen(path, global_=global_)
        failures = []
        for n in self._import_modules(key):
            result = process.dlopen(n.path)
            if not result.loads:
                failures.append((n, result))
        return tuple(failures)

    def _import_loads(self, key: str) -> list[tuple[str, bool]]:
        """What importing distribution `key` loads before its modules, in order: its rule's
        preloads and global files, then the files its plan always loads; (path, global)."""
        rule = self.rules.get(key)
        site = self.env.dists[key].metadata_dir.parent
        loads: list[tuple[str, bool]] = []
        if rule is not None:
            loads += [(path, False) for pattern in rule.preload
                      for path in self.glob(str(site), pattern)]
            loads += [(str(site / rel), True) for rel in rule.global_]
        plan = self.env.plans.get(key)
        loads += [(step.path, step.global_) for step in (plan.loads if plan else ())
                  if step.reach is Reachability.ALWAYS]
        return loads

    def _import_modules(self, key: str) -> list[NativeFile]:
        return [n for n in self.env.natives if n.distribution == key and n.checked]

    def opened(self, natives: Iterable[NativeFile]) -> list[str]:
        """The files that checking `natives` opens besides them and what they need: the
        imports of their prerequisites and their own steps, in order (to be read ahead)."""
        keys = dict.fromkeys(k for n in natives for k in self.env.prerequisites(n, self.image))
        paths = [path for key in keys for path, _ in self._import_loads(key)]
        paths += [n.path for key in keys for n in self._import_modules(key)]
        paths += [s.path for n in natives for s in self.own_steps(n)]
        return list(dict.fromkeys(paths))

    def _with_own(self, prerequisites: tuple[str, ...], steps: tuple[Step, ...]) -> Process:
        """The process after the prerequisites and the package's own earlier steps."""
        key = (prerequisites, tuple(s.path for s in steps))
        known = self._own.get(key)
        if known is None:
            known = self.base(prerequisites).copy()
            self.logs.own[key] = tuple(step for step in steps
                                       if not known.dlopen(step.path, global_=step.global_).loads)
            self._own[key] = known
        return known

    def settle(self, prerequisites: tuple[str, ...], steps: tuple[Step, ...]) -> None:
        """Add to `failed_own` and `import_failures` what building the processes of a module's
        check found (its `logs`; the check's prerequisites and `own_steps`), in the order
        checking the modules one by one finds it: for the modules in order, each after its
        `check`, wherever the checks ran."""
        key = (prerequisites, tuple(s.path for s in steps))
        if key in self._settled:
            return
        self._settle_base(prerequisites)
        self.failed_own.update(self.logs.own.get(key, ()))
        self._settled.add(key)

    def _settle_base(self, prerequisites: tuple[str, ...]) -> None:
        if prerequisites in self._settled:
            return
        if prerequisites:
            self._settle_base(prerequisites[:-1])
            for n, result in self.logs.imports.get(prerequisites, ()):
                self.import_failures.setdefault(prerequisites[-1], {})[n.path] = (n, result)
        self._settled.add(prerequisites)

    def take_logs(self, logs: BuildLogs) -> None:
        """Take in the logs of checks made by another copy of this simulator (a fork's)."""
        for key, failures in logs.imports.items():
            self.logs.imports.setdefault(key, failures)
        for own, failed in logs.own.items():
            self.logs.own.setdefault(own, failed)

    def step_names(self, step: Step) -> tuple[str, ...]:
        """The names a DT_NEEDED entry finds a loaded step by: its file name and soname."""
        image = self.image(step.path)
        soname = image.soname if image is not None else None
        return (os.path.basename(step.path), *([soname] if soname else []))

    def own_steps(self, native: NativeFile) -> tuple[Step, ...]:
        """The libraries its package loads itself that `native` needs (by soname or file
        name, directly or through its package's libraries): loaded before it, in order; for a
        plugin, also the libraries of its own distribution that it needs and that its
        RPATH/RUNPATH does not reach (`sibling_steps`)."""
        plan = self.env.plans.get(native.distribution)
        planned: tuple[Step, ...] = ()
        if plan is not None and plan.loads:
            needed = self.env.needed_closure(native, self.image)
            planned = tuple(s for s in plan.before(needed, self.step_names)
                            if s.path != native.path)
        planned = (*self.after_steps(native), *planned)
        if not native.plugin:
            return planned
        known = {s.path for s in planned}
        return (*planned, *(s for s in self.sibling_steps(native) if s.path not in known))

    def after_steps(self, native: NativeFile) -> tuple[Step, ...]:
        """The files of other distributions that package code loads with RTLD_GLOBAL before
        `native` (an `after` rule); they are loaded already, by the import of their
        distribution among the prerequisites, and are made global."""
        after = self.env.after_rule(native)
        if after is None:
            return ()
        steps: list[Step] = []
        for name in after.imports:
            dist = self.env.dists.get(canonicalize_name(name))
            if dist is None:
                continue
            site = str(dist.metadata_dir.parent)
            steps += [Step(path, None, Reachability.ON_USE, global_=True)
                      for pattern in after.global_ for path in self.glob(site, pattern)]
        return tuple(steps)

    def sibling_steps(self, native: NativeFile) -> tuple[Step, ...]:
        """The libraries of `native`'s distribution that it needs by name and that its
        RPATH/RUNPATH does not reach: package code that loads it must have loaded them first
        (torchcodec loads libtorchcodec_core7.so, then libtorchcodec_custom_ops7.so, which
        needs it and has no RPATH)."""
        image = self.image(native.path)
        dyn = image.dynamic if image is not None else None
        if image is None or dyn is None:
            return ()
        origin = posixpath.dirname(native.path)
        reached = {posixpath.normpath(expand_path(part, origin, self.config))
                   for entry in (*dyn.rpath, *dyn.runpath) for part in entry.split(":")}
        return tuple(Step(own.path, None, Reachability.GUARDED)
                     for name in image.needed for own in self.env.files_named(name)
                     if own.distribution == native.distribution and own.path != native.path
                     and posixpath.dirname(own.path) not in reached)

    def check(self, native: NativeFile) -> Checked:
        prerequisites = self.env.prerequisites(native, self.image)
        process = self._with_own(prerequisites, self.own_steps(native)).copy()
        result = process.dlopen(native.path)
        if result.loads and native.module is not None:
            problem = self.env.numpy_problem(native, self.image)
            if problem is not None:  # it loads, and its import raises
                result = replace(result, loads=False, error=problem.message,
                                 problems=(problem,))
        return result, prerequisites

    def bindings(self, native: NativeFile) -> tuple[tuple[str, str | None, str], ...]:
        """What each undefined symbol of `native` binds to when it loads, in the process
        `check` loads it into (`Process.bindings`); empty when it does not load."""
        prerequisites = self.env.prerequisites(native, self.image)
        process = self._with_own(prerequisites, self.own_steps(native)).copy()
        return process.bindings(native.path) if process.dlopen(native.path).loads else ()


def _exports(sim: Simulator) -> Callable[[str], Collection[str]]:
    memo: dict[str, Collection[str]] = {}

    def exports(path: str) -> Collection[str]:
        if path not in memo:
            img = sim.image(path)
            memo[path] = Names(_defined_names(img) if img else ())
        return memo[path]

    return exports


def _defined_names(image: ElfImage) -> Iterable[str]:
    table = image.symbols
    return compress(table.names, table.section_indexes)  # SHN_UNDEF is 0: the undefined


LibraryFix = Callable[[str, str], "tuple[str | None, IndexFix | IndexMiss] | None"]


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
        derivation=(DuplicateSoname(old, soname, native.name, new),),
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
    checked: Mapping[str, Checked] | None = None, *, gpu: bool = False,
) -> Simulation:
    """Simulate every target module; findings for every problem, the first ones explained
    deeply, each with what its failure costs (`sim.verdict`; `gpu`: the target has a GPU,
    which decides the variant some packages pick). `checked` holds the checks already made
    (`Simulator.check`, by path), by this simulator or a fork of it whose `logs` it took in."""
    checked = checked or {}
    statuses: list[ModuleStatus] = []
    judged: list[_Judged] = []
    results: list[LoadResult] = []
    causes: dict[str, tuple[NativeFile, LoadResult]] = {}  # root causes met, by path
    stack = _stack(sim.env)
    for n, native in enumerate(targets, 1):
        progress(f"module {n}/{len(targets)} {native.name}")
        result, prerequisites = checked.get(native.path) or sim.check(native)
        steps = sim.own_steps(native)
        sim.settle(prerequisites, steps)
        results.append(result)
        place = None if result.loads else _placement(sim.env, native)
        problems, blocked = _by_cause(sim, native, prerequisites, result.problems, causes)
        mine = [p for p in problems if not p.behind]  # symbols past a miss come after it
        cause = next((causes[f.object_cause] for f in blocked), None) if not mine else None
        status = ModuleStatus(native.name, "plugin" if native.plugin else "extension",
                              native.path, native.distribution, result.loads, result.error,
                              prerequisites, len(result.problems),
                              place.name if place else None,
                              place.step.reach.value if place else None,
                              cause[0].name if cause else None,
                              cause[1].error if cause else None)
        statuses.append(status)
        own = {name: s for s in steps if s in sim.failed_own
               for name in sim.step_names(s)}
        counting = place is None or _counts(sim.env, native, place, result.error)
        outcome = Outcome.IMPORT_FAILS if counting else Outcome.DOES_NOT_LOAD
        found: list[tuple[Finding, Cause | None]] = []
        for i, problem in enumerate(problems):
            consequence = _blocked(problem, native.name, own)
            if consequence is not None:
                found.append((consequence, Cause(Effect.DEGRADES, sibling=problem.library)))
                continue
            finding = diagnose(problem, native.name, ctx, deep=i < DEEP_DIAGNOSES,
                               outcome=outcome)
            cause_of = problem_cause(problem, native.distribution, stack)
            found.append((finding, cause_of if not problem.behind else None))
        found += [(b.finding, Cause(Effect.DEGRADES, reason=NeededPackageFails()))
                  for b in blocked]
        found += [(_duplicate(native, soname, new, old, ctx), None)
                  for soname, new, old in result.duplicates]
        judged.append(_Judged(native, counting, [(_placed(f, place, result.error), c)
                                                 for f, c in found]))
    statuses, findings = _judge(sim.env, statuses, judged, gpu)
    modules = {n.path for n in targets}
    roots = [diagnose(problem, cause.name, ctx, deep=i < 3)
             for path, (cause, cause_result) in causes.items() if path not in modules
             for i, problem in enumerate(cause_result.problems[:DEEP_DIAGNOSES])]
    # a prerequisite's own problem, said once, first: the root cause of what it blocks
    return Simulation(tuple(statuses), (*roots, *findings), tuple(results))


@dataclass(frozen=True, slots=True)
class _Judged:
    """A module's findings before the rule is applied: whether its failure fails an import,
    and each finding with the cause the rule sees in it (None: not about its load)."""

    native: NativeFile
    counting: bool
    found: list[tuple[Finding, Cause | None]]


def _stack(env: Environment) -> Stack:
    """What the verdict rule needs of an environment."""
    files: dict[str, set[str]] = {}
    for native in env.natives:
        if native.distribution:
            files.setdefault(os.path.basename(native.path), set()).add(native.distribution)
    return Stack.of({k: frozenset(v) for k, v in files.items()}, env.declared,
                    load_soname_packages(), env.dists)


def _judge(env: Environment, statuses: list[ModuleStatus], judged: list[_Judged],
           gpu: bool) -> tuple[list[ModuleStatus], list[Finding]]:
    """Apply the verdict rule: each failing module's effect from its causes (a file of its own
    that does not load passes its effect on), then the variant sets (`sim.verdict`); each
    finding takes its cause's effect, and its severity from that."""
    base: dict[str, Effect] = {}
    by_name: dict[tuple[str, str], str] = {}
    for status, entry in zip(statuses, judged, strict=True):
        by_name[(status.distribution, os.path.basename(status.path))] = status.path
        if status.loads:
            continue
        own = [c.effect for f, c in entry.found if c is not None and c.sibling is None]
        base[status.path] = (Effect.FAILS if entry.counting
                             else worst(own) or Effect.DEGRADES)

    def resolved(status: ModuleStatus, cause: Cause) -> Effect | None:
        """A cause's effect; a file of its own that it needs passes on that file's effect,
        or, when that file was not checked itself, none: its problems are the module's own
        (the loader looks past it, `LoadProblem.stand_ins`)."""
        if cause.sibling is None:
            return cause.effect
        other = by_name.get((status.distribution, cause.sibling))
        return base.get(other, Effect.DEGRADES) if other else None

    effects: dict[str, Effect] = {}
    for status, entry in zip(statuses, judged, strict=True):
        if status.loads:
            continue
        if entry.counting:
            effects[status.path] = Effect.FAILS
            continue
        effects[status.path] = worst(resolved(status, c) for _, c in entry.found
                                     if c is not None) or Effect.DEGRADES
    for path in _unused_variants(env, statuses, gpu):
        if effects.get(path) is not Effect.FAILS:
            effects[path] = Effect.UNUSED
    out_statuses = [replace(s, effect=effects.get(s.path)) for s in statuses]
    findings: list[Finding] = []
    for status, entry in zip(statuses, judged, strict=True):
        effect = effects.get(status.path)
        for finding, cause in entry.found:
            if cause is None or effect is None:
                findings.append(finding)
                continue
            mine = (effect if effect in (Effect.FAILS, Effect.UNUSED)
                    else resolved(status, cause) or effect)
            findings.append(replace(
                finding, effect=mine, severity=_EFFECT_SEVERITY[mine],
                hint=cause.hint or finding.hint, derivation=_explained(finding, cause),
                prerequisite=(cause.prerequisite.name if cause.prerequisite
                              and mine is Effect.PREREQUISITE else None)))
    return out_statuses, findings


def _explained(finding: Finding, cause: Cause) -> tuple[Sentence, ...]:
    """The finding's derivation; where the cause changes the fix (a library the stack has in
    another release), the cause in place of the index's wheel for the library, which would
    mix two releases in one process."""
    if cause.hint is None:
        return finding.derivation
    kept = tuple(s for s in finding.derivation if not isinstance(s, IndexFix))
    return (*kept, cause.reason) if cause.reason is not None else kept


_EFFECT_SEVERITY = {Effect.FAILS: Severity.ERROR, Effect.DEGRADES: Severity.WARNING,
                    Effect.PREREQUISITE: Severity.INFO, Effect.UNUSED: Severity.INFO}


def _unused_variants(env: Environment, statuses: Sequence[ModuleStatus],
                     gpu: bool) -> set[str]:
    """The paths of the failing variants a package does not pick (`sim.verdict`)."""
    rel_of: dict[str, str] = {}
    rules: dict[str, tuple[VariantRule, ...]] = {}
    for key, plan in env.plans.items():
        rel_of.update({path: rel for rel, path in plan.files.items()})
        if plan.rule is not None and plan.rule.variants:
            rules[key] = plan.rule.variants
    members = [Member(rel_of.get(s.path, s.path), s.distribution, s.loads, s.counts)
               for s in statuses]
    path_of = {(m.distribution, m.rel): s.path for m, s in zip(members, statuses, strict=True)}
    versions = {key: d.version for key, d in env.dists.items()}
    cuda = stack_cuda(versions)
    out: set[str] = set()
    for group in variant_sets(members, rules):
        rule = next((r for r in rules.get(group[0].distribution, ())
                     if all(fnmatch.fnmatchcase(m.rel, r.files) for m in group)), None)
        out.update(path_of[(group[0].distribution, rel)]
                   for rel in unused(group, picked(group, rule, cuda, gpu, versions)))
    return out


@dataclass(frozen=True, slots=True)
class _Blocked:
    finding: Finding
    object_cause: str  # the path of the prerequisite module that blocks


def _by_cause(sim: Simulator, native: NativeFile, prerequisites: tuple[str, ...],
              problems: tuple[LoadProblem, ...],
              causes: dict[str, tuple[NativeFile, LoadResult]],
              ) -> tuple[list[LoadProblem], list[_Blocked]]:
    """The problems of its own, and one `blocked-by` finding when the libraries it misses are
    those of a prerequisite package that did not load (recorded in `causes`)."""
    own: list[LoadProblem] = []
    blocked: dict[str, list[str]] = {}  # cause path -> sonames
    for problem in problems:
        cause = _blocker(sim, prerequisites, problem) if problem.library else None
        if cause is None:
            own.append(problem)
            continue
        causes.setdefault(cause[0].path, cause)
        blocked.setdefault(cause[0].path, []).append(problem.library or "")
    found = [_Blocked(_blocked_by(native, causes[path], sonames), path)
             for path, sonames in blocked.items()]
    return own, found


def _blocker(sim: Simulator, prerequisites: tuple[str, ...],
             problem: LoadProblem) -> tuple[NativeFile, LoadResult] | None:
    """The module of a prerequisite whose failure kept the missing library out, if any."""
    if problem.kind is not ProblemKind.MISSING_LIBRARY:
        return None
    soname = problem.library or ""
    for key in prerequisites:
        failures = sim.import_failures.get(key)
        if not failures or key not in sim.env.providers(soname):
            continue
        for cause in failures.values():
            if soname in sim.env.needed_closure(cause[0], sim.image):
                return cause
        return next(iter(failures.values()))
    return None


def _blocked_by(native: NativeFile, cause: tuple[NativeFile, LoadResult],
                sonames: list[str]) -> Finding:
    module, result = cause
    names = ", ".join(sonames[:3]) + (f" and {len(sonames) - 3} more" if len(sonames) > 3 else "")
    return Finding(
        kind=FindingKind.BLOCKED_BY, object=native.path, module=native.name,
        library=sonames[0], candidates=tuple(sonames),
        message=f"{module.name} ({module.distribution}) does not load, so {names} "
                f"{'is' if len(sonames) == 1 else 'are'} not in the process",
        derivation=(BlockedBy(native.name, tuple(sonames), module.distribution, module.name,
                              result.error),),
        hint=f"fix {module.name} first: its own finding says why it does not load",
    )


def _blocked(problem: LoadProblem, module: str, own: Mapping[str, Step]) -> Finding | None:
    """The finding of a library a module misses only because its package's own code loads
    that library first, and that load failed: it points at the library's own finding."""
    step = own.get(problem.library or "") if problem.kind is ProblemKind.MISSING_LIBRARY else None
    if step is None:
        return None
    return Finding(
        kind=FindingKind.MISSING_LIBRARY, object=problem.object, module=module,
        library=problem.library, message=problem.message,
        derivation=(OwnLoadFails(step.path, module, problem.library),),
        hint=f"fix what keeps {os.path.basename(step.path)} from loading (its own finding)",
    )


def _counts(env: Environment, native: NativeFile, place: Placement, error: str | None) -> bool:
    """Whether the failure of a file fails an import the user runs: one reaches it at module
    level (or its load kills the process); a Python module of the package that nothing else
    imports loads it at module level (`import sgl_kernel.flash_attn` raises); or it is an
    extension module no code imports in a distribution without Python code of its own (its
    modules are the interface, imported by name; unread code counts as none). A file that no
    code loads (vllm's vendored deep_gemm extension, a library of a library-only wheel) fails
    no import: what it costs is its effect."""
    reach = effective_reach(place.step.reach, error)
    if reach is Reachability.ALWAYS:
        return True
    if reach is not Reachability.UNREACHED or not _module_like(env, native):
        return False
    if native.module is not None and place.name != native.module:  # imported by package code
        return True
    plan = env.plans.get(native.distribution)
    return plan is None or plan.code is None or plan.code.empty()


def _module_like(env: Environment, native: NativeFile) -> bool:
    """An extension module, or a file named like one (`x.cpython-311-x86_64-linux-gnu.so`,
    `x.abi3.so`) whose `PyInit_*` could not be read: `import` finds it by name."""
    if native.module is not None:
        return True
    suffixes = [s for s in env.facts.extension_suffixes if s != ".so"]
    return any(native.path.endswith(s) for s in suffixes)


def _placement(env: Environment, native: NativeFile) -> Placement | None:
    plan = env.plans.get(native.distribution)
    return plan.place(native.path) if plan else None


_SEVERITY = {Reachability.GUARDED: Severity.WARNING, Reachability.ON_USE: Severity.INFO,
             Reachability.UNREACHED: Severity.WARNING}


def _placed(finding: Finding, place: Placement | None, error: str | None) -> Finding:
    """A finding with the import it concerns and how sure that import is to load the object
    (a guarded load that kills the process fails the import all the same)."""
    if place is None:
        return finding
    return replace(finding, import_name=place.name, reachability=place.step.reach.value,
                   severity=_SEVERITY.get(effective_reach(place.step.reach, error),
                                          Severity.ERROR))


@dataclass(frozen=True, slots=True)
class ImportVerdict:
    """`import name`: whether it works, and if not, what the user sees and why."""

    name: str
    distribution: str
    loads: bool
    error: str | None = None  # the exception the user sees
    cause: str | None = None  # the native file whose failure it is
    cause_error: str | None = None  # the loader's error for that file
    optional_failures: tuple[str, ...] = ()  # guarded or on-use modules that would not load


def import_verdicts(env: Environment,
                    statuses: Sequence[ModuleStatus]) -> tuple[ImportVerdict, ...]:
    """The verdict of each top-level import whose native files were simulated, and of each
    extension module imported by name only whose failure counts (`_counts`); another file
    that no import reaches fails none: what its failure costs is its `effect`."""
    out: list[ImportVerdict] = []
    for key, plan in sorted(env.plans.items()):
        mine = [s for s in statuses if s.distribution == key]
        if not mine:
            continue
        places = {s.path: plan.place(s.path) for s in mine if not s.loads}
        for top in plan.tops:
            if not any(_under(s, top) for s in mine):
                continue
            if (broken := _compile_error(env, plan, top)) is not None:
                out.append(broken)
                continue
            failed = [(s, places[s.path]) for s in mine
                      if not s.loads and places[s.path].name == top]
            optional = tuple(s.module for s, p in failed
                             if not effective_reach(p.step.reach, s.error).counts)
            # the libraries the package loads itself fail first: they load before the modules
            loaded = [s.path for s in plan.loads]
            sure = sorted([*((s, replace(p, order=plan.reached(s.module, top) or p.order))
                             for s, p in failed
                             if effective_reach(p.step.reach, s.error) is Reachability.ALWAYS),
                           *_foreign_failures(env, statuses, key, plan, top)],
                          key=lambda sp: (loaded.index(sp[0].path) if sp[0].path in loaded
                                          else len(loaded), sp[1].order))
            if not sure:
                out.append(ImportVerdict(top, key, True, optional_failures=optional))
                continue
            status, place = sure[0]
            if status.blocked_by:  # the prerequisite's import fails first, with its error
                shown = (BUS_ERROR if crashes(status.blocked_error)
                         else f"ImportError: {status.blocked_error}")
                out.append(ImportVerdict(top, key, False, shown, status.blocked_by,
                                         status.blocked_error, optional))
                continue
            out.append(ImportVerdict(top, key, False, user_error(place.step, status.error or ""),
                                     status.module, status.error, optional))
        for status in mine:  # an import nothing else imports, whose failure counts
            own = places.get(status.path)
            if (own is not None and own.step.reach is Reachability.UNREACHED
                    and status.counts):
                out.append(ImportVerdict(own.name, key, False,
                                         user_error(own.step, status.error or ""),
                                         status.module, status.error))
    return tuple(out)


def cpython_version(facts: InterpreterFacts) -> tuple[int, int] | None:
    """The interpreter's version as (major, minor) when it is CPython (whose compiler
    `import_verdicts` asks), else None."""
    parts = facts.version.split(".")[:2]
    if dict(facts.markers).get("implementation_name") != "cpython" or len(parts) != 2 \
            or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _compile_error(env: Environment, plan: DistributionPlan, top: str) -> ImportVerdict | None:
    """The verdict on `import top` when its first module does not compile under the target
    CPython: it raises before any native file is loaded."""
    version = cpython_version(env.facts)
    if plan.code is None or version is None:
        return None
    raised = plan.code.compile_error(top, version)
    if raised is None:
        return None
    return ImportVerdict(top, plan.name, False, raised, plan.code.sources[top],
                         raised.partition(": ")[2])


def compile_findings(env: Environment, verdicts: Iterable[ImportVerdict]) -> list[Finding]:
    """A `python-syntax` finding for each import whose first module does not compile
    (`_compile_error`): it breaks that import."""
    out = []
    for v in verdicts:
        if v.loads or v.cause is None or not v.cause.endswith(".py"):
            continue
        dist = env.dists.get(v.distribution)
        owner = f"{dist.name} {dist.version}" if dist is not None else v.distribution
        python = ".".join(env.facts.version.split(".")[:2])
        out.append(Finding(
            FindingKind.PYTHON_SYNTAX, v.cause, v.error or "",
            (DoesNotCompile(v.cause, owner, python, v.name, v.error),),
            module=v.name, import_name=v.name, effect=Effect.FAILS,
            hint=f"install a release of {owner.split()[0]} made for Python {python}"))
    return out


def _foreign_failures(env: Environment, statuses: Sequence[ModuleStatus], key: str,
                      plan: DistributionPlan, top: str,
                      ) -> list[tuple[ModuleStatus, Placement]]:
    """The failing modules of the distributions `key` requires (directly or not) that the
    import of its top-level package `top` runs into through its own code: sklearn's
    `from scipy.sparse import issparse` imports scipy.sparse, whose `_sparsetools` fails beside
    NumPy 2 before any module of scikit-learn's own. Each comes placed as the import of `key`
    reaches it: the lines of `key`'s imports up to the other package's module, then those of
    that package's imports from there (`Placement.order`)."""
    wanted = env.required_closure((key,))
    out: list[tuple[ModuleStatus, Placement]] = []
    for status in statuses:
        other = env.plans.get(status.distribution)
        if (status.loads or status.distribution not in wanted or other is None
                or "/" in status.module):
            continue
        parts = status.module.split(".")
        orders = [(*mine, *there) for n in range(1, len(parts) + 1)
                  if (mine := plan.reached(".".join(parts[:n]), top)) is not None
                  and (there := other.reached(status.module, ".".join(parts[:n]))) is not None]
        if orders and not other.optional_by_rule(status.path):
            step = replace(other.place(status.path).step, reach=Reachability.ALWAYS)
            out.append((status, Placement(top, step, min(orders))))
    return out


def _under(status: ModuleStatus, top: str) -> bool:
    """Whether a module or plugin belongs to the top-level package `top`."""
    name = status.module.replace("/", ".")
    return name == top or name.startswith(top + ".")


def search_config(host: HostFacts) -> SearchConfig:
    """The loader's search configuration from the host facts: the subdirectories tried under
    every directory, `$PLATFORM` and the cache's hwcaps rules are those of the host's glibc
    release (probed on this machine or a profiled one, computed for a preset:
    `LoaderDefaults.for_glibc`), so the search and every trace follow that release."""
    defaults = host.defaults
    return SearchConfig(
        ld_library_path=host.ld_library_path,
        ld_preload=(*host.ld_so_preload, *host.ld_preload),
        system_dirs=defaults.system_dirs,
        lib=defaults.lib,
        platform=defaults.platform,
        cache=host.cache,
        cache_id=cache_id_for,
        subdirs=tuple(dict.fromkeys(defaults.searched_subdirs)),
        hwcaps=defaults.hwcaps_subdirs,
        legacy_hwcaps=defaults.cache_legacy_hwcaps,
    )
