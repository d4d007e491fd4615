"""`abifit doctor`: will every native module of a Python environment load, and if not, why.

For each extension module, the simulated process first imports what the module's package needs:
the distributions it requires (Requires-Dist, recursively) and those that own a library it needs
by soname (an extension built for torch needs `libc10.so` and declares nothing). Importing a
distribution means applying its known process-level rules (torch loads
`libtorch_global_deps.so` with RTLD_GLOBAL, after preloading the nvidia-* libraries) and loading
its extension modules. Then the module itself is loaded with RTLD_NOW | RTLD_LOCAL, as CPython
does, and every problem becomes a finding with its explanation.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from .diagnose import Context, Finding, diagnose
from .elf import ElfImage, FileType, might_be_elf
from .environment import Distribution, InterpreterFacts, list_distributions, query_interpreter
from .errors import FormatError, UsageError
from .fatbin import GpuCode
from .gpucode import (
    GpuCheck,
    GpuTarget,
    check_gpu_code,
    detect_targets,
    has_gpu_code,
    read_gpu_code,
)
from .ldconfig import HostFacts, cache_id_for, probe_host
from .loader import LoadResult, ObjectSource, Process, SearchConfig
from .localfs import ElfCache, LocalObjects, is_elf_file
from .locate import Locator, library_dirs
from .sources import FileSource

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from .remote import RemoteContext
    from .wheelfiles import LibrarySearch

DATA = Path(__file__).parent / "data"

Progress = Callable[[str], None]

# Undefined symbols explained with a search for their nearest definitions, per module.
DEEP_DIAGNOSES = 10


@dataclass(frozen=True, slots=True)
class NativeFile:
    """An ELF file of a distribution; `module` is set for an importable extension module.

    A *plugin* is a library inside a Python package that no ELF file of the environment links
    to: packages load those themselves (`ctypes`, `torch.ops.load_library`), with RTLD_NOW.
    """

    path: str
    distribution: str
    module: str | None
    plugin: bool = False
    label: str = ""

    @property
    def name(self) -> str:
        return self.module or self.label or self.path

    @property
    def checked(self) -> bool:
        return self.module is not None or self.plugin


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


@dataclass(frozen=True, slots=True)
class Verification:
    """A prediction against what the real loader did."""

    module: str
    predicted_loads: bool
    predicted_error: str | None
    actual_loads: bool | None
    actual_error: str | None
    agrees: bool
    note: str


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Everything `abifit doctor` found."""

    python: str
    python_version: str
    modules: tuple[ModuleStatus, ...]
    findings: tuple[Finding, ...]
    verification: tuple[Verification, ...] | None
    libraries: int
    warnings: tuple[Finding, ...] = ()
    gpu: tuple[GpuCheck, ...] = ()
    gpu_reason: str | None = None  # why no GPU was checked
    saved_host: str | None = None  # what --save-host wrote

    @property
    def failing(self) -> int:
        return sum(1 for m in self.modules if not m.loads)

    @property
    def problems(self) -> bool:
        return bool(self.findings)


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


def module_name(path: str, roots: Iterable[str], suffixes: Iterable[str]) -> str | None:
    """The dotted name under which an extension module at `path` is imported, if any."""
    base = os.path.basename(path)
    suffix = next((s for s in sorted(suffixes, key=len, reverse=True) if base.endswith(s)), None)
    if suffix is None:
        return None
    for root in sorted(roots, key=len, reverse=True):
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            rel = path[len(prefix):-len(suffix)]
            parts = rel.split("/")
            if all(part.isidentifier() for part in parts):
                return ".".join(parts)
    return None


def site_root(path: str, roots: Iterable[str]) -> str | None:
    """The deepest of `roots` (site-packages directories) that holds `path`, if any."""
    return next((r for r in sorted(roots, key=len, reverse=True)
                 if path.startswith(r.rstrip("/") + "/")), None)


def defines_init(image: ElfImage | None, module: str) -> bool:
    """Whether an object exports the `PyInit_<name>` function that makes it an extension module."""
    if image is None:
        return False
    wanted = "PyInit_" + module.rsplit(".", 1)[-1]
    table = image.symbols
    return any(name == wanted and table.is_defined(i) for i, name in enumerate(table.names))


def scan_native_files(
    facts: InterpreterFacts, dists: list[Distribution],
    image: Callable[[str], ElfImage | None],
) -> list[NativeFile]:
    """Every ELF file the distributions' RECORDs list; an extension module is one at an
    importable name that exports its `PyInit_*` function."""
    roots = [p for p in facts.sys_path if os.path.isdir(p)]
    found = []
    for dist in dists:
        for path in dist.files:
            if (might_be_elf(os.path.basename(path)) and not os.path.islink(path)
                    and is_elf_file(path)):
                name = module_name(path, roots, facts.extension_suffixes)
                if name is not None and not defines_init(image(path), name):
                    name = None
                found.append(NativeFile(path, dist.key, name))
    return mark_plugins(found, image, roots)


def _has_init(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py"))


def mark_plugins(natives: list[NativeFile], image: Callable[[str], ElfImage | None],
                 roots: list[str], package_dir: Callable[[str], bool] = _has_init
                 ) -> list[NativeFile]:
    """Libraries in a package directory that nothing links to are loaded by package code."""
    candidates = {n.path for n in natives if n.module is None
                  and package_dir(os.path.dirname(n.path))}
    if not candidates:
        return natives
    linked: set[str] = set()
    images = {n.path: image(n.path) for n in natives}
    for img in images.values():
        if img is not None:
            linked.update(img.needed)
    out = []
    for n in natives:
        img = images[n.path]
        directory = os.path.dirname(n.path)
        if (n.path in candidates and img is not None and img.interpreter is None
                and img.file_type == FileType.DYN
                and os.path.basename(n.path) not in linked
                and (img.soname or "") not in linked):
            root = site_root(n.path, roots) or directory
            n = NativeFile(n.path, n.distribution, None, True, os.path.relpath(n.path, root))
        out.append(n)
    return out


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
                 glob: Callable[[str, str], list[str]] | None = None) -> None:
        self.env = env
        self.source = source
        self.config = config
        self.rules = rules
        self.glob = glob or _glob_files
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


def _glob_files(directory: str, pattern: str) -> list[str]:
    """Paths under `directory` matching a relative glob pattern, sorted."""
    return sorted(str(p) for p in Path(directory).glob(pattern))


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


def index_library_fix(remote: Callable[[], RemoteContext], roots: list[str]) -> LibraryFix:
    """The fix for a missing soname from the wheels on the index that ship it (each soname is
    searched once; nothing is fetched for a soname no wheel of the table may ship)."""
    from .wheelfiles import find_library_wheels, load_library_table, render_library_fix

    @functools.cache
    def search(soname: str) -> LibrarySearch | None:
        if not load_library_table().candidates(soname):
            return None
        return find_library_wheels(soname, remote())

    def fix(soname: str, needer: str) -> tuple[str | None, str] | None:
        found = search(soname)
        if found is None:
            return None
        if not found.wheels:
            return None, found.reason.rstrip(".") + "."
        root = site_root(needer, roots)
        text = render_library_fix(found, site_packages=root or "<site-packages>",
                                  needed_by=os.path.relpath(needer, root) if root else None)
        hint = " or ".join(f"`{w.command}` provides {soname} (in {w.directory})"
                           for w in found.wheels)
        return hint, "From the index: " + text

    return fix


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
        kind="duplicate-soname", object=new, module=native.name, library=soname,
        message=f"{new}: a second copy of {soname} ({old} is already loaded)",
        explanation=f"Because {old} is already in the process under the soname {soname} and "
        f"loading {native.name} maps {new} as well, two copies of that library live in one "
        "process; their global state (allocators, thread pools, registries) is not shared.",
        hint=f"make both packages use one copy of {soname}",
    )


def run_doctor(
    env: Environment, sim: Simulator, targets: list[NativeFile], ctx: Context,
    progress: Progress, results: list[LoadResult] | None = None,
) -> tuple[list[ModuleStatus], list[Finding]]:
    """Simulate every target module; findings for every problem, the first ones explained deeply.
    The loader's results are appended to `results` when given."""
    statuses: list[ModuleStatus] = []
    findings: list[Finding] = []
    for n, native in enumerate(targets, 1):
        progress(f"module {n}/{len(targets)} {native.name}")
        result, prerequisites = sim.check(native)
        if results is not None:
            results.append(result)
        statuses.append(ModuleStatus(native.name, "plugin" if native.plugin else "extension",
                                     native.path,
                                     native.distribution, result.loads, result.error,
                                     prerequisites, len(result.problems)))
        for i, problem in enumerate(result.problems):
            findings.append(diagnose(problem, native.name, ctx, deep=i < DEEP_DIAGNOSES))
        findings.extend(_duplicate(native, soname, new, old, ctx)
                        for soname, new, old in result.duplicates)
    return statuses, findings


def image_or_none(source: ObjectSource) -> Callable[[str], ElfImage | None]:
    def image(path: str) -> ElfImage | None:
        try:
            return source.image(path)
        except (OSError, FormatError):
            return None

    return image


def _import_names(dist: Distribution) -> list[str]:
    """Top-level import names of a distribution (top_level.txt, else its RECORD)."""
    top = dist.metadata_dir / "top_level.txt"
    if top.is_file():
        names = [n.strip() for n in top.read_text("utf-8", "replace").splitlines() if n.strip()]
        return [n for n in names if n.isidentifier()]
    site = str(dist.metadata_dir.parent) + "/"
    names = []
    for f in dist.files:
        parts = f[len(site):].split("/") if f.startswith(site) else []
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            names.append(parts[0])
    return sorted(set(names))


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


def _verify(env: Environment, statuses: list[ModuleStatus],
            progress: Progress) -> list[Verification]:
    out = []
    for n, status in enumerate(statuses, 1):
        progress(f"verify {n}/{len(statuses)} {status.module}")
        imports = [name for key in status.prerequisites for name in _import_names(env.dists[key])]
        from .verify import real_load

        module = status.module if status.kind == "extension" else ""
        real = real_load(env.facts.executable, module, status.path, imports)
        if real.loads is None:
            out.append(Verification(status.module, status.loads, status.error, None, None, False,
                                    real.note))
            continue
        agrees = real.loads == status.loads and (real.loads or real.load_error == status.error)
        note = "" if agrees else "abifit's model of the loader disagrees with the real loader"
        if real.import_error and real.loads:
            note = (note + "; " if note else "") + f"import: {real.import_error}"
        out.append(Verification(status.module, status.loads, status.error, real.loads,
                                real.load_error, agrees, note))
    return out


def _disagreement(v: Verification, path: str) -> Finding:
    predicted = "loads" if v.predicted_loads else f"fails: {v.predicted_error}"
    actual = ("could not be run: " + v.note if v.actual_loads is None
              else "loads" if v.actual_loads else f"fails: {v.actual_error}")
    return Finding(
        kind="model-disagreement", object=path, module=v.module,
        message=f"predicted: {predicted}; real loader: {actual}",
        explanation="abifit predicted one outcome and the real loader, in a fresh process of the "
        "target interpreter, gave another: abifit's model of this case is wrong.",
        hint="please report this with `abifit doctor --json --verify` output",
    )


def short_name(native: NativeFile, roots: list[str]) -> str:
    """A module's name, a plugin's label, else the file's path inside its site-packages."""
    if native.module or native.label:
        return native.name
    root = site_root(native.path, roots)
    return os.path.relpath(native.path, root) if root else native.path


def read_gpu_codes(natives: Iterable[NativeFile], image: Callable[[str], ElfImage | None],
                   name: Callable[[NativeFile], str], progress: Progress,
                   ) -> list[tuple[str, str, GpuCode | FormatError]]:
    """(name, path, fat binaries or the error reading them) for each file with GPU code."""
    out: list[tuple[str, str, GpuCode | FormatError]] = []
    for native in natives:
        img = image(native.path)
        if img is None or not has_gpu_code(img):
            continue
        progress(f"fat binaries of {native.path}")
        code: GpuCode | FormatError | None
        try:
            with FileSource(native.path) as source:
                code = read_gpu_code(source, img)
        except OSError as e:
            code = FormatError(native.path, e.strerror or str(e))
        except FormatError as e:
            code = e
        if code is not None:
            out.append((name(native), native.path, code))
    return out


def _gpu_check(natives: list[NativeFile], statuses: list[ModuleStatus], roots: list[str],
               image: Callable[[str], ElfImage | None], progress: Progress,
               targets: tuple[GpuTarget, ...]) -> tuple[GpuCheck, ...]:
    """The GPU code of the checked modules' distributions and their prerequisites."""
    keys = {s.distribution for s in statuses} | {k for s in statuses for k in s.prerequisites}
    codes = read_gpu_codes([n for n in natives if n.distribution in keys], image,
                           lambda n: short_name(n, roots), progress)
    return tuple(check_gpu_code(codes, target) for target in targets)


def doctor(
    python: str, packages: list[str], *, verify: bool, cache_dir: Path | None,
    environ: Mapping[str, str], progress: Progress,
    gpus: tuple[GpuTarget, ...] | None = None,
    remote: Callable[[], RemoteContext] | None = None,
    save_host: Path | None = None,
) -> DoctorReport:
    """Scan the environment of `python`, simulate every selected module, explain the problems."""
    facts = query_interpreter(python)
    progress("reading distributions")
    dists = list_distributions(facts)
    source = LocalObjects(ElfCache(cache_dir) if cache_dir else None)
    natives = scan_native_files(facts, dists, image_or_none(source))
    env = Environment(facts, dists, natives)
    targets = selected(natives, packages, env)
    if packages and not targets:
        raise UsageError(f"no native modules found for {', '.join(packages)} in the environment "
                         f"of {facts.executable}")
    host = probe_host(environ)
    sim = Simulator(env, source, search_config(host), load_import_rules())
    locator = Locator(lambda: library_dirs(facts.sys_path, environ))
    roots = [p for p in facts.sys_path if os.path.isdir(p)]
    ctx = context(sim, locator, load_soname_packages(),
                  index_library_fix(remote, roots) if remote is not None else None)
    results: list[LoadResult] = []
    statuses, findings = run_doctor(env, sim, targets, ctx, progress, results)
    saved = None
    if save_host is not None:
        saved = _save_host(save_host, host, facts.executable, results, roots, source, progress)
    verification = None
    if verify:
        verification = tuple(_verify(env, statuses, progress))
        by_module = {s.module: s.path for s in statuses}
        findings += [_disagreement(v, by_module[v.module]) for v in verification if not v.agrees]
    libraries = sum(1 for n in natives if n.module is None)
    gpu_reason = None
    if gpus is None:
        gpus, gpu_reason = detect_targets(environ)
    checks: tuple[GpuCheck, ...] = ()
    if gpus:
        checks = _gpu_check(natives, statuses, roots, image_or_none(source), progress, gpus)
        findings += [f for c in checks for f in c.findings]
    return DoctorReport(facts.executable, facts.version, tuple(statuses), tuple(findings),
                        verification, libraries,
                        tuple(w for c in checks for w in c.warnings), checks, gpu_reason, saved)


def _save_host(path: Path, host: HostFacts, executable: str, results: list[LoadResult],
               roots: list[str], source: ObjectSource, progress: Progress) -> str:
    """Write this machine's host profile; the line that says so."""
    from . import __version__
    from .hostprofile import dumps, snapshot_host

    progress("saving the host profile")
    used = {r.path for result in results for r in result.resolutions
            if r.path and site_root(r.path, roots) is None}
    snapshot = snapshot_host(host, executable, sorted(used), image_or_none(source),
                             os.path.realpath, __version__)
    data = dumps(snapshot)
    try:
        path.write_bytes(data)
    except OSError as e:
        raise UsageError(f"--save-host {path}: {e.strerror or e}") from e
    return (f"host profile saved to {path}: {len(snapshot.libraries)} system libraries, "
            f"{len(data):,} bytes")
