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
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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
from abifit.sim.diagnose import FAILS, OPTIONAL, Context, diagnose
from abifit.sim.findings import Finding, FindingKind, Severity
from abifit.sim.loader import (
    LoadProblem,
    LoadResult,
    ProblemKind,
    Process,
    SearchConfig,
    crashes,
)

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from abifit.host.natives import NativeFile
from abifit.sim.imports import (
    BUS_ERROR,
    DistributionPlan,
    ImportRule,
    Placement,
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

    @property
    def counts(self) -> bool:
        """Whether its failure fails an import (optional modules' failures do not)."""
        return self.reachability is None or effective_reach(Reachability(self.reachability),
                                                            self.error).counts


def effective_reach(reach: Reachability, error: str | None) -> Reachability:
    """How a file that fails to load with `error` fails the import that reaches it: as its
    reach says, except that a guarded load that kills the process (`crashes`: no `except`
    runs) fails it as surely as one at module level."""
    return Reachability.ALWAYS if reach is Reachability.GUARDED and crashes(error) else reach


def count_failing(modules: Iterable[ModuleStatus], *, optional: bool = False) -> int:
    """Modules that do not load and whose failure fails an import; with `optional`, those that
    do not load and that package code does without (guarded, or loaded only on use)."""
    return sum(1 for m in modules if not m.loads and m.counts is not optional)


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
                 requires: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """`requires`, when given, is what `requirements` found of `dists` (else each is
        parsed when first asked)."""
        self.facts = facts
        self.plans = dict(plans or {})
        self.dists = {d.key: d for d in dists}
        self.natives = natives
        self.owner_of = {n.path: n.distribution for n in natives}
        self._native_owners = frozenset(self.owner_of.values())
        self._markers = dict(facts.markers)
        self._required: dict[str, tuple[str, ...]] = {
            key: tuple(r for r in names if r in self.dists)
            for key, names in (requires or {}).items() if key in self.dists}
        self._by_name: dict[str, list[NativeFile]] = {}
        for n in natives:
            self._by_name.setdefault(os.path.basename(n.path), []).append(n)

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
            dist = self.dists.get(key)
            known = () if dist is None else tuple(
                r for r in _requirements(dist.requires, self._markers) if r in self.dists)
            self._required[key] = known
        return known

    def providers(self, soname: str) -> set[str]:
        """Distributions holding an ELF file named `soname` (loose files have none)."""
        return {n.distribution for n in self._by_name.get(soname, ()) if n.distribution}

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

    def prerequisites(self, native: NativeFile,
                      image: Callable[[str], ElfImage | None]) -> tuple[str, ...]:
        """Distributions imported before `native`, requirements first."""
        direct: list[str] = list(self.required(native.distribution))
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
                 rules: dict[str, ImportRule],
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
        rule = self.rules.get(key)
        dist = self.env.dists[key]
        site = dist.metadata_dir.parent
        if rule is not None:
            for pattern in rule.preload:
                for path in self.glob(str(site), pattern):
                    process.dlopen(path)
            for rel in rule.global_:
                process.dlopen(str(site / rel), global_=True)
        plan = self.env.plans.get(key)
        for step in plan.loads if plan else ():
            if step.reach is Reachability.ALWAYS:
                process.dlopen(step.path, global_=step.global_)
        failures = []
        for n in self.env.natives:
            if n.distribution == key and n.checked:
                result = process.dlopen(n.path)
                if not result.loads:
                    failures.append((n, result))
        return tuple(failures)

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
        name, directly or through its package's libraries): loaded before it, in order."""
        plan = self.env.plans.get(native.distribution)
        if plan is None or not plan.loads:
            return ()
        needed = self.env.needed_closure(native, self.image)
        return tuple(s for s in plan.before(needed, self.step_names) if s.path != native.path)

    def check(self, native: NativeFile) -> Checked:
        prerequisites = self.env.prerequisites(native, self.image)
        process = self._with_own(prerequisites, self.own_steps(native)).copy()
        return process.dlopen(native.path), prerequisites

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
    checked: Mapping[str, Checked] | None = None,
) -> Simulation:
    """Simulate every target module; findings for every problem, the first ones explained
    deeply. `checked` holds the checks already made (`Simulator.check`, by path), by this
    simulator or a fork of it whose `logs` it took in."""
    checked = checked or {}
    statuses: list[ModuleStatus] = []
    findings: list[Finding] = []
    results: list[LoadResult] = []
    causes: dict[str, tuple[NativeFile, LoadResult]] = {}  # root causes met, by path
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
        outcome = (OPTIONAL if place
                   and not effective_reach(place.step.reach, result.error).counts else FAILS)
        found = [_blocked(problem, native.name, own) or
                 diagnose(problem, native.name, ctx, deep=i < DEEP_DIAGNOSES, outcome=outcome)
                 for i, problem in enumerate(problems)]
        found += [b.finding for b in blocked]
        found += [_duplicate(native, soname, new, old, ctx)
                  for soname, new, old in result.duplicates]
        findings += [_placed(f, place, result.error) for f in found]
    modules = {n.path for n in targets}
    roots = [diagnose(problem, cause.name, ctx, deep=i < 3)
             for path, (cause, cause_result) in causes.items() if path not in modules
             for i, problem in enumerate(cause_result.problems[:DEEP_DIAGNOSES])]
    # a prerequisite's own problem, said once, first: the root cause of what it blocks
    return Simulation(tuple(statuses), (*roots, *findings), tuple(results))


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
        explanation=(f"Because {native.name} needs {names} from {module.distribution}, whose "
                     f"{module.name} does not load ({result.error}), the libraries it would "
                     f"have brought are missing: {native.name} fails only as a consequence."),
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
        explanation=(f"Because the package's own code loads {step.path} before {module} "
                     f"(which finds it by its name {problem.library}), and that library itself "
                     f"does not load, {module} cannot find it: this is a consequence, the "
                     "cause is that library's own problem."),
        hint=f"fix what keeps {os.path.basename(step.path)} from loading (its own finding)",
    )


def _placement(env: Environment, native: NativeFile) -> Placement | None:
    plan = env.plans.get(native.distribution)
    return plan.place(native.path) if plan else None


_SEVERITY = {Reachability.GUARDED: Severity.WARNING, Reachability.ON_USE: Severity.INFO}


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
    failing file that no import reaches (under its own name)."""
    out: list[ImportVerdict] = []
    for key, plan in sorted(env.plans.items()):
        mine = [s for s in statuses if s.distribution == key]
        if not mine:
            continue
        places = {s.path: plan.place(s.path) for s in mine if not s.loads}
        for top in plan.tops:
            if not any(_under(s, top) for s in mine):
                continue
            failed = [(s, places[s.path]) for s in mine
                      if not s.loads and places[s.path].name == top]
            optional = tuple(s.module for s, p in failed
                             if not effective_reach(p.step.reach, s.error).counts)
            # the libraries the package loads itself fail first: they load before the modules
            loaded = [s.path for s in plan.loads]
            sure = sorted(((s, p) for s, p in failed
                           if effective_reach(p.step.reach, s.error) is Reachability.ALWAYS),
                          key=lambda sp: (loaded.index(sp[0].path) if sp[0].path in loaded
                                          else len(loaded)))
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
        for status in mine:
            own = places.get(status.path)
            if own is not None and own.step.reach is Reachability.UNREACHED:
                out.append(ImportVerdict(own.name, key, False,
                                         user_error(own.step, status.error or ""),
                                         status.module, status.error))
    return tuple(out)


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
