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

import functools
import os
import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from abifit import workers
from abifit.engines.kept import (
    DoctorAsked,
    DoctorPrinted,
    ask,
    doctor_key,
    doctor_runs,
    latest_name,
)
from abifit.engines.plans import (
    ParseAhead,
    Survey,
    cached_parse,
    mark_loaded,
    plan_for,
    python_modules,
    read_source,
    survey,
    survey_in_parts,
)
from abifit.errors import FormatError, UsageError
from abifit.formats.elf import ElfImage
from abifit.formats.fatbin import (
    GpuCode,
    Sectioned,
    Sections,
    has_gpu_code,
    read_gpu_code,
    zstd_available,
)
from abifit.formats.numpyapi import NumpyUse
from abifit.formats.objects import ObjectSource
from abifit.formats.sources import FileSource
from abifit.host import observe
from abifit.host.environment import (
    Distribution,
    InterpreterFacts,
    InterpreterQuery,
    list_distributions,
)
from abifit.host.ldconfig import HostFacts
from abifit.host.localfs import FileCache, LocalObjects
from abifit.host.locate import ENV_VARIABLES, Locator, library_dirs, library_dirs_seen
from abifit.host.natives import (
    NativeFile,
    NotAFile,
    executable_file,
    glob_files,
    has_shared_objects,
    heads_or_none,
    image_or_none,
    not_files,
    parse_ahead_names,
    scan_native_files,
    short_name,
    site_root,
)
from abifit.host.numpyuses import numpy_candidates, read_numpy_uses
from abifit.host.runcache import ReadEnviron
from abifit.remote.diskcache import GPU_BUCKET, Cache
from abifit.sim import pythonapi
from abifit.sim.derivation import (
    ImportDisagrees,
    IndexFix,
    IndexMiss,
    LoadDisagrees,
    SkippedEntry,
)
from abifit.sim.findings import Finding, FindingKind, Verdict
from abifit.sim.gpu import GpuCheck, ObjectCoverage, gpu_check, object_coverage
from abifit.sim.gputarget import GpuTarget
from abifit.sim.imports import (
    BUS_ERROR,
    Compiled,
    DistributionPlan,
    load_loading_rules,
    load_preload_rules,
    python_error,
)
from abifit.sim.loader import (
    DRIVER_LIBRARIES,
    LoadResult,
    SearchConfig,
    cached_paths,
    crashes,
)
from abifit.sim.numpyabi import contract_error
from abifit.sim.process import (
    BuildLogs,
    Checked,
    Environment,
    ImportVerdict,
    LibraryFix,
    ModuleStatus,
    Progress,
    Simulation,
    Simulator,
    compile_findings,
    context,
    count_failing,
    cpython_version,
    import_verdicts,
    load_soname_packages,
    requirements,
    search_config,
    selected,
    simulate_modules,
)
from abifit.sim.verdict import verdict

if TYPE_CHECKING:
    from abifit.remote.runcontext import RemoteContext
    from abifit.remote.wheelfiles import LibrarySearch


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
class ImportCheck:
    """A predicted `import X` against a real one in a fresh process."""

    name: str
    predicted_works: bool
    predicted_error: str | None
    actual_works: bool | None
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
    imports: tuple[ImportVerdict, ...] = ()
    import_checks: tuple[ImportCheck, ...] | None = None  # --verify: real imports

    @property
    def failing(self) -> int:
        return count_failing(self.modules)

    @property
    def optional_failing(self) -> int:
        return count_failing(self.modules, optional=True)

    @property
    def verdict(self) -> Verdict:
        """`fails`, `degraded` or `fits` (`sim.verdict`)."""
        return verdict(self.findings)

    @property
    def problems(self) -> bool:
        """Whether an import fails or a part of a package is lost."""
        return self.verdict is not Verdict.FITS


def system_libraries(natives: Iterable[NativeFile], head: Callable[[str], ElfImage | None],
                     config: SearchConfig) -> list[str]:
    """The libraries outside the environment that its native files name (libc, libstdc++, ...),
    where ld.so.cache has them: the simulation will open most of them, and they are parsed
    ahead (a guess: the simulation finds each library itself)."""
    heads = [image for n in natives if (image := head(n.path)) is not None]
    if not heads:
        return []
    own = {posixpath.basename(n.path) for n in natives} | {h.soname for h in heads if h.soname}
    names = sorted({name for h in heads for name in h.needed} - own)
    return cached_paths(config, names, heads[0])


def located_copy(locate: Callable[[str], tuple[str, ...]],
                 image: Callable[[str], ElfImage | None],
                 ) -> Callable[[str], tuple[str, ElfImage] | None]:
    """The first readable file of a soname among those `locate` names (elsewhere on this
    machine, or in check's wheels): the copy that stands in for a library the search did not
    find, to bind past that miss."""

    @functools.cache
    def find(soname: str) -> tuple[str, ElfImage] | None:
        for path in locate(soname):
            found = image(path)
            if found is not None:
                return path, found
        return None

    return find


LibrarySearchFn = Callable[[str], "LibrarySearch | None"]
SimulationSeen = Callable[[Simulator, Simulation], None]  # shown doctor's simulation


def library_search(remote: Callable[[], RemoteContext]) -> LibrarySearchFn:
    """The wheels on the index that ship a soname, searched once per soname; None (nothing
    fetched) for a soname no wheel of the table may ship."""

    @functools.cache
    def search(soname: str) -> LibrarySearch | None:
        # imported on the first miss: 60 ms that a run missing no library does not spend
        from abifit.remote.wheelfiles import find_library_wheels, load_library_table

        if not load_library_table().candidates(soname):
            return None
        return find_library_wheels(soname, remote())

    return search


def index_library_fix(search: LibrarySearchFn, roots: list[str]) -> LibraryFix:
    """The fix for a missing soname from the wheels on the index that ship it (`search`,
    from `library_search`)."""

    def fix(soname: str, needer: str) -> tuple[str | None, IndexFix | IndexMiss] | None:
        found = search(soname)
        if found is None:
            return None
        from abifit.remote.wheelfiles import render_library_fix  # as `search` imports it

        if not found.wheels:
            return None, IndexMiss(found.reason)
        root = site_root(needer, roots)
        text = render_library_fix(found, site_packages=root or "<site-packages>",
                                  needed_by=os.path.relpath(needer, root) if root else None)
        hint = " or ".join(f"`{w.command}` provides {soname} (in {w.directory})"
                           for w in found.wheels)
        return hint, IndexFix(text)

    return fix


def _import_names(dist: Distribution) -> list[str]:
    """Top-level import names of a distribution (top_level.txt, else its RECORD)."""
    top = str(dist.metadata_dir / "top_level.txt")
    if observe.isfile(top):
        names = [n.strip() for n in observe.read_text(top).splitlines() if n.strip()]
        return [n for n in names if n.isidentifier()]
    site = str(dist.metadata_dir.parent) + "/"
    names = []
    for f in dist.files:
        parts = f[len(site):].split("/") if f.startswith(site) else []
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier():
            names.append(parts[0])
    return sorted(set(names))


R = TypeVar("R")

SURVEY_IN_PARTS = 1000  # a distribution with this many modules is surveyed on every core


class InstalledCode:
    """The Python code of the installed distributions that may have native files, read from
    the start: `start` has the other cores read every module's text and the code of those that
    name a loading function, and find the modules that mention the wrappers those define
    (`abifit.engines.plans.survey`, a call per distribution), while the main thread goes on
    (to the ELF scan, parsing the files no worker has started); `plans` then makes the import
    plans. Without worker processes the texts are read when the plans are made."""

    def __init__(self, cache: Cache | None = None,
                 version: tuple[int, int] | None = None) -> None:
        """`version`: the target's CPython version, which the top-level modules are compiled
        for as they are read (`Survey.compiled`)."""
        self._root = str(cache.root) if cache is not None else None  # for the workers
        self._version = version
        self._compiled: dict[str, str | None] = {}
        self._read = functools.cache(read_source)
        self._parser = ParseAhead(cache, cached_parse(cache))
        self._sources: dict[str, dict[str, str]] = {}
        self._surveys: list[tuple[str, list[tuple[str, str]], Future[Survey]]] = []
        self._surveyed: set[str] = set()  # the paths of the modules read by surveys
        self._loading: set[str] = set()  # those of them that name a loading function
        self._mentions: dict[str, dict[str, tuple[str, ...]]] = {}  # by distribution, word

    def largest_first(self, dists: Iterable[Distribution]) -> list[Distribution]:
        """`dists`, those with the most files first: the order to `start` them in, as the
        largest takes longest (the files stand for the modules, which `start` finds one
        distribution at a time, so that the first is read while the others are found)."""
        return sorted(dists, key=lambda dist: -len(dist.files))

    def start(self, dists: Iterable[Distribution]) -> None:
        """Start reading the modules of `dists` on the other cores, in their order."""
        if not workers.parallel():
            return
        parts = workers.workers_wanted()
        for dist in dists:
            modules = list(self._modules(dist).items())
            if not modules:
                continue
            if len(modules) >= SURVEY_IN_PARTS and parts > 1:
                coming = survey_in_parts(modules, self._root, parts, self._version)
            else:
                coming = workers.submit(survey, modules, self._root, True, self._version)
            self._surveys.append((dist.key, modules, coming))
            self._surveyed.update(path for _, path in modules)

    def _modules(self, dist: Distribution) -> dict[str, str]:
        if dist.key not in self._sources:
            self._sources[dist.key] = python_modules(dist.files, str(dist.metadata_dir.parent))
        return self._sources[dist.key]

    def _gather(self) -> None:
        """Take in the surveys started. Those no worker has started yet are made here, the
        last in line (the smallest) first, rather than waited for; one whose worker failed is
        made here too."""
        made: dict[int, Survey] = {}
        for i in reversed(range(len(self._surveys))):
            _key, batch, coming = self._surveys[i]
            if coming.cancel():  # not started: the workers take the others meanwhile
                made[i] = survey(batch, self._root, True, self._version)
        for i, (key, batch, coming) in enumerate(self._surveys):
            found = made[i] if i in made else _answer(coming)
            if found is None:  # its worker failed: reading here says it again
                found = survey(batch, None, True, self._version)
            observe.note_all(found.seen)
            self._parser.given(found.codes)
            self._loading.update(found.marked)
            self._mentions[key] = dict(found.mentions)
            self._compiled.update(found.compiled)
        self._surveys = []

    def plans(self, dists: list[Distribution], natives: list[NativeFile],
              ) -> dict[str, DistributionPlan]:
        """The import plan of every distribution in `dists` that has native files."""
        self._gather()
        rules = load_loading_rules()
        by_dist: dict[str, list[NativeFile]] = {}
        for n in natives:
            by_dist.setdefault(n.distribution, []).append(n)
        compiled = (Compiled(self._version, self._compiled) if self._version is not None
                    else None)
        return {dist.key: plan_for(dist.key, by_dist[dist.key], self._modules(dist),
                                   str(dist.metadata_dir.parent), _declared_names(dist),
                                   self._read, rules, self._parser, self._parser.ahead,
                                   self._loading_of(dist), self._mentions.get(dist.key),
                                   compiled)
                for dist in dists if by_dist.get(dist.key)}

    def _loading_of(self, dist: Distribution) -> list[str] | None:
        """The modules of `dist` that its survey found naming a loading function; None when
        it was not surveyed."""
        modules = self._modules(dist)
        if not all(path in self._surveyed for path in modules.values()):
            return None
        return [name for name, path in modules.items() if path in self._loading]


def _declared_names(dist: Distribution) -> list[str]:
    try:
        text = observe.read_text(str(dist.metadata_dir / "top_level.txt"))
    except OSError:
        return []
    return [n.strip() for n in text.splitlines() if n.strip()]


def _verify(env: Environment, sim: Simulator, statuses: list[ModuleStatus],
            progress: Progress) -> list[Verification]:
    """Load every module for real (`real_loads`: fork servers over all cores) and compare."""
    from abifit.host.realload import CRASHED, LoadJob, real_loads

    natives = {n.path: n for n in env.natives}
    jobs = []
    for status in statuses:
        imports = [name for key in status.prerequisites for name in _import_names(env.dists[key])]
        native = natives.get(status.path)
        before = tuple((s.path, s.global_) for s in sim.own_steps(native)) if native else ()
        jobs.append(LoadJob(status.module if status.kind == "extension" else "", status.path,
                            tuple(imports), before))
    reals = real_loads(env.facts.executable, jobs,
                       progress=lambda n: progress(f"verify {n}/{len(jobs)}"))
    out = []
    for status, real in zip(statuses, reals, strict=True):
        if real.loads is None and not status.loads and real.note.startswith(CRASHED):
            # predicted not to load, and loading it really kills the process: agreed, said so,
            # with whether the crash itself was predicted (a file cut short: `crashes`)
            said = ("the real load crashed the process, as predicted" if crashes(status.error)
                    else "the real load crashed the process; abifit predicted a failed load")
            out.append(Verification(status.module, status.loads, status.error, False,
                                    real.note, True, said))
            continue
        if real.loads is None:
            out.append(Verification(status.module, status.loads, status.error, None, None, False,
                                    real.note))
            continue
        if python_error(status.error):  # it loads, and its import raises (`sim.numpyabi`)
            agrees = bool(real.loads) and errors_agree(status.error, real.import_error)
            note = "" if agrees else ("abifit's prediction of the import disagrees with the "
                                      f"real import: {real.import_error or 'it works'}")
            if not agrees and real.loads and contract_error(status.error) \
                    and contract_error(real.import_error):
                # importing it imports its package first, where another module breaks the
                # same contract first, with its own error
                agrees, note = True, (f"the real import raised {real.import_error}: another "
                                      "module its package imports first breaks NumPy's "
                                      "contract first")
            out.append(Verification(status.module, status.loads, status.error, real.loads,
                                    real.import_error, agrees, note))
            continue
        agrees = real.loads == status.loads and (real.loads or real.load_error == status.error)
        note = "" if agrees else "abifit's model of the loader disagrees with the real loader"
        if real.import_error and real.loads:
            note = (note + "; " if note else "") + f"import: {real.import_error}"
        out.append(Verification(status.module, status.loads, status.error, real.loads,
                                real.load_error, agrees, note))
    return out


def errors_agree(predicted: str | None, actual: str | None) -> bool:
    """Whether a predicted user-visible error is the one seen: the same exception type, and the
    predicted message in the real one (packages add details to theirs)."""
    if predicted is None or actual is None:
        return predicted == actual
    kind, _, text = predicted.partition(": ")
    real_kind, _, real_text = actual.partition(": ")
    return kind == real_kind and text.strip() in real_text


def _verify_imports(env: Environment, verdicts: tuple[ImportVerdict, ...],
                    progress: Progress) -> list[ImportCheck]:
    """`import X` in a fresh process for each import the report has a verdict for, as many at
    once as there are cores."""
    from abifit.host.realload import CRASHED, real_import

    with ThreadPoolExecutor(max_workers=workers.usable_cores()) as pool:
        reals = pool.map(lambda v: real_import(env.facts.executable, v.name), verdicts)
        out = []
        for n, (verdict, real) in enumerate(zip(verdicts, reals, strict=True), 1):
            progress(f"verify import {n}/{len(verdicts)} {verdict.name}")
            if real.works is None and verdict.error == BUS_ERROR and \
                    real.note.startswith(f"{CRASHED} SIGBUS"):  # the crash predicted
                out.append(ImportCheck(verdict.name, False, verdict.error, False, "Bus error",
                                       True, real.note))
                continue
            if real.works is None:
                out.append(ImportCheck(verdict.name, verdict.loads, verdict.error, None, None,
                                       False, real.note))
                continue
            agrees = real.works == verdict.loads and (real.works
                                                      or errors_agree(verdict.error, real.error))
            out.append(ImportCheck(verdict.name, verdict.loads, verdict.error, real.works,
                                   real.error, agrees, ""))
    return out


def _not_a_file(entry: NotAFile, env: Environment) -> Finding:
    """An entry named like an extension module that the import system skips."""
    dist = env.dists.get(entry.distribution)
    label = f"{dist.name} {dist.version}" if dist is not None else entry.distribution
    return Finding(
        kind=FindingKind.NOT_A_FILE, object=entry.path, module=entry.module,
        message=f"{entry.path}: {entry.what}, not a file",
        derivation=(SkippedEntry(entry.what, entry.module),),
        hint=f"reinstall {label}: the file its installation recorded is not there",
        import_name=entry.module.partition(".")[0],
    )


def _import_disagreement(c: ImportCheck) -> Finding:
    predicted = "works" if c.predicted_works else f"fails: {c.predicted_error}"
    actual = ("could not be run: " + c.note if c.actual_works is None
              else "works" if c.actual_works else f"fails: {c.actual_error}")
    return Finding(
        kind=FindingKind.MODEL_DISAGREEMENT, object=c.name, module=c.name, import_name=c.name,
        message=f"import {c.name}: predicted: {predicted}; real import: {actual}",
        derivation=(ImportDisagrees(),),
        hint="please report this with `abifit doctor --json --verify` output",
    )


def _disagreement(v: Verification, path: str) -> Finding:
    predicted = "loads" if v.predicted_loads else f"fails: {v.predicted_error}"
    actual = ("could not be run: " + v.note if v.actual_loads is None
              else "loads" if v.actual_loads else f"fails: {v.actual_error}")
    return Finding(
        kind=FindingKind.MODEL_DISAGREEMENT, object=path, module=v.module,
        message=f"predicted: {predicted}; real loader: {actual}",
        derivation=(LoadDisagrees(),),
        hint="please report this with `abifit doctor --json --verify` output",
    )


def library_dirs_ahead(sys_path: Sequence[str],
                       environ: Mapping[str, str]) -> Callable[[], tuple[str, ...]]:
    """What collects `library_dirs` when the search first wants them: collected on another
    core from now on (forks the checks are shared with would each collect them again), the
    variables it read and its reads noted when it is taken."""
    if not workers.parallel():
        return lambda: library_dirs(sys_path, environ)
    values = (environ.unnoted(ENV_VARIABLES) if isinstance(environ, ReadEnviron)
              else {name: environ[name] for name in ENV_VARIABLES if name in environ})
    coming = workers.submit(library_dirs_seen, sys_path, values)

    def collected() -> tuple[str, ...]:
        answer = _answer(coming)
        if answer is None or any(environ.get(name) != values.get(name)
                                 for name in ENV_VARIABLES):
            return library_dirs(sys_path, environ)
        dirs, seen = answer
        observe.note_all(seen)
        return dirs

    return collected


def numpy_uses_on_cores(candidates: list[tuple[str, ElfImage]]) -> dict[str, NumpyUse]:
    """`read_numpy_uses` of the candidates, in parts read on the other cores at once (each
    reads its files' string sections itself); a part whose worker failed is read here."""
    files = [(path, image.sections) for path, image in candidates]
    parts = min(len(files), workers.workers_wanted()) if workers.parallel() else 0
    if parts < 2:
        return read_numpy_uses(files)
    shares = [files[i::parts] for i in range(parts)]
    coming = [workers.submit(read_numpy_uses, share) for share in shares]
    found: dict[str, NumpyUse] = {}
    for share, call in zip(shares, coming, strict=True):
        answer = _answer(call)
        found.update(answer if answer is not None else read_numpy_uses(share))
    return found


def _gpu_code(path: str, image: Sectioned) -> GpuCode | FormatError | None:
    """The fat binaries of the file at `path` (parsed as `image`), or the error reading them;
    raises OSError."""
    try:
        with FileSource(path, mapped=False) as source:
            return read_gpu_code(source, image)
    except FormatError as e:
        return e


GpuVerdict = ObjectCoverage | FormatError


class GpuReads:
    """Verdicts on the GPU code of files, worked out on the other cores (`abifit.workers`)
    ahead of `check_gpu_codes`, the largest files first. Nothing is started without worker
    processes, nor for a file whose verdicts are in the cache."""

    def __init__(self, targets: tuple[GpuTarget, ...], cache: FileCache | None) -> None:
        self.targets = targets
        self.cache = cache
        self._coming: dict[str, Future[tuple[GpuVerdict, ...] | None]] = {}

    def start(self, natives: Iterable[NativeFile],
              image: Callable[[str], ElfImage | None]) -> None:
        if not workers.parallel():
            return
        key = _verdicts_key(self.targets)
        where = str(self.cache.base) if self.cache is not None else None
        wanted = []
        for native in natives:
            img = image(native.path)
            if (img is None or not has_gpu_code(img) or native.path in self._coming
                    or (self.cache is not None and self.cache.holds(native.path, key))):
                continue
            try:
                wanted.append((observe.stat(native.path).st_size, native.path,
                               Sections.of(img)))
            except OSError:
                continue
        for _size, path, sections in sorted(wanted, key=lambda w: -w[0]):
            self._coming[path] = workers.submit(gpu_verdicts_at, path, sections, self.targets,
                                              where)

    def pending(self) -> bool:
        """Whether verdicts are still being worked out on the other cores."""
        return any(not coming.done() for coming in self._coming.values())

    def verdicts(self, path: str, image: ElfImage,
                 progress: Progress) -> tuple[GpuVerdict, ...] | None:
        """The file's verdicts: those worked out ahead, else worked out here."""
        coming = self._coming.pop(path, None)
        if coming is not None:
            try:
                observe.stat(path)  # what the verdicts depend on, noted here
                return coming.result()
            except Exception:  # whatever it was, working it out here says it again
                pass
        return _gpu_verdicts(path, image, self.targets, self.cache, progress)


def gpu_verdicts_at(path: str, sections: Sections, targets: tuple[GpuTarget, ...],
                    cache_dir: str | None) -> tuple[GpuVerdict, ...] | None:
    """`_gpu_verdicts` of a file, with the GPU cache under `cache_dir`: a function another
    process can run."""
    cache = FileCache(Path(cache_dir), GPU_BUCKET) if cache_dir is not None else None
    return _gpu_verdicts(path, sections, targets, cache, lambda _said: None)


def check_gpu_codes(natives: Iterable[NativeFile], image: Callable[[str], ElfImage | None],
                    name: Callable[[NativeFile], str], progress: Progress,
                    reads: GpuReads) -> tuple[GpuCheck, ...]:
    """The GPU code of `natives` against each of `reads.targets`, as `sim.gpu.check_gpu_code`
    finds it: each file's verdicts come from `reads.cache` while the file is unchanged, and its
    fat binaries are read only when they do not (a cached reading would cost more to decode than
    to read again: cuFFT's has tens of thousands of entries), unless `reads` started them."""
    rows: list[tuple[str, str, tuple[GpuVerdict, ...]]] = []
    for native in natives:
        img = image(native.path)
        if img is None or not has_gpu_code(img):
            continue
        verdicts = reads.verdicts(native.path, img, progress)
        if verdicts is not None:
            rows.append((name(native), native.path, verdicts))
    return tuple(gpu_check(target, [(n, path, found[i]) for n, path, found in rows])
                 for i, target in enumerate(reads.targets))


def _gpu_verdicts(path: str, image: Sectioned, targets: tuple[GpuTarget, ...],
                  cache: FileCache | None, progress: Progress,
                  ) -> tuple[GpuVerdict, ...] | None:
    """The verdict on each target of the file's GPU code (the error reading it, for each),
    from the cache or read; None when it has none."""
    key = _verdicts_key(targets)
    try:
        st = observe.stat(path)
        stored = cache.get(path, st, key, tuple[GpuVerdict, ...]) if cache else None
        if isinstance(stored, tuple) and len(stored) == len(targets):
            return stored
        progress(f"fat binaries of {path}")
        code = _gpu_code(path, image)
    except OSError as e:  # not kept: it says nothing of the file's bytes
        return (FormatError(path, e.strerror or str(e)),) * len(targets)
    if code is None:
        return None
    verdicts = tuple(code if isinstance(code, FormatError) else object_coverage(code, target)
                     for target in targets)
    if cache is not None:
        cache.put(path, st, key, verdicts)
    return verdicts


# what a file's stored GPU verdicts hold (2: their reasons as records of sim.derivation)
VERDICTS_FORMAT = "gpu-verdicts-2"


def _verdicts_key(targets: tuple[GpuTarget, ...]) -> str:
    """What a file's verdicts depend on besides its bytes: what they hold, abifit's release,
    the GPUs and their drivers' CUDA releases, and whether zstd-compressed images can be
    opened here."""
    from abifit.version import __version__

    gpus = ",".join(f"{t.capability}@{t.driver_release or 'any'}" for t in targets)
    return f"{VERDICTS_FORMAT};{__version__};{gpus};zstd={zstd_available()}"


def _gpu_check(natives: list[NativeFile], statuses: list[ModuleStatus], roots: list[str],
               image: Callable[[str], ElfImage | None], progress: Progress,
               reads: GpuReads) -> tuple[GpuCheck, ...]:
    """The GPU code of the checked modules' distributions and their prerequisites."""
    keys = {s.distribution for s in statuses} | {k for s in statuses for k in s.prerequisites}
    return check_gpu_codes([n for n in natives if n.distribution in keys], image,
                           lambda n: short_name(n, roots), progress, reads)


Observed = tuple[tuple[tuple[str, str], observe.Seen], ...]  # a recording's reads
MIN_SHARED = 16  # fewer modules are checked here alone: a fork costs more than it saves
MAX_FORKS = 7  # more forks than that bind the same large libraries again for little gain


def _answer(call: Future[R] | None) -> R | None:
    """The answer of a call made on another core; None when it failed (or none was made), for
    the caller to work it out itself."""
    try:
        return call.result() if call is not None else None
    except Exception:  # whatever it was, working it out here says it again
        return None


def forks_for_checks(targets: list[NativeFile]) -> int:
    """How many forks `check_shared` would make for `targets`: one a core, the first core
    this process's, at most `MAX_FORKS`; 0 when none would be made (one core, a library, a
    few modules, a single distribution)."""
    groups = {n.distribution for n in targets}
    if len(targets) < MIN_SHARED or not 2 <= len(groups) <= workers.Tickets.MAX:
        return 0
    return max(0, min(MAX_FORKS, len(groups) - 1, workers.workers_wanted() - 1,
                      workers.usable_cores() - 1))


def check_shared(sim: Simulator, targets: list[NativeFile],
                 head: Callable[[str], ElfImage | None],
                 forked: Callable[[], None] | None = None) -> dict[str, Checked]:
    """The checks of `targets` (`Simulator.check`, by path), made here and in forks of this
    process (`workers.fork_call`, as many as `forks_for_checks` says) at once, each taking the
    next distribution's modules, those with the most symbols first; the forks' logs and reads
    are taken in. {} where no fork is made (on one core, in a library, for a few modules):
    `simulate_modules` checks them then, as it does those of a fork that failed. `forked` is
    called once the forks are made (or none could be), before this process takes its share:
    work of its own threads, which a process forks without."""
    groups: dict[str, list[NativeFile]] = {}
    for native in targets:
        groups.setdefault(native.distribution, []).append(native)
    count = forks_for_checks(targets)
    if count == 0:
        if forked is not None:
            forked()
        return {}

    # what all would work out: each module's prerequisites (their Requires-Dist parsed)
    prerequisites = {n.path: sim.env.prerequisites(n, sim.image) for n in targets}
    symbols: dict[str, int] = {}  # by distribution: those of its ELF files parsed (a program's
    for n in sim.env.natives:     # head, all that is read of it, has none)
        if (image := head(n.path)) is not None:
            symbols[n.distribution] = symbols.get(n.distribution, 0) + len(image.symbols)

    def weight(group: list[NativeFile]) -> int:
        """What the group's checks bind, roughly: the symbols of the ELF files of its
        distribution and of those imported before its modules."""
        keys = {group[0].distribution} | {key for n in group for key in prerequisites[n.path]}
        return sum(symbols.get(key, 0) for key in keys)

    order = sorted(groups.values(), key=weight, reverse=True)
    tickets = workers.Tickets(len(order))

    def take() -> dict[str, Checked]:
        done = {}
        while (ticket := tickets.take()) is not None:
            for native in order[ticket]:
                done[native.path] = sim.check(native)
        return done

    def theirs() -> tuple[dict[str, Checked], BuildLogs, Observed]:
        with observe.recording() as recorder:
            done = take()
        return done, sim.logs, tuple(recorder.seen.items())

    try:
        forks = []
        for _ in range(count):
            fork = workers.fork_call(theirs)
            if fork is None:
                break
            forks.append(fork)
        if forked is not None:
            forked()
        if not forks:
            return {}
        done = take()
        for fork in forks:
            try:
                their, logs, seen = fork.result()
            except Exception:  # whatever it was, the modules it took are checked again here
                continue
            observe.note_all(seen)
            sim.take_logs(logs)
            done.update(their)
    finally:
        tickets.close()
    return done


def doctor(
    python: str | InterpreterQuery, packages: list[str], *, verify: bool, cache_dir: Path | None,
    environ: Mapping[str, str], progress: Progress,
    gpus: tuple[GpuTarget, ...] | None = None,
    remote: Callable[[], RemoteContext] | None = None,
    save_host: Path | None = None,
    on_simulation: SimulationSeen | None = None,
    host: HostFacts | None = None,
    assume_driver: bool = False,
    asked: DoctorAsked | None = None,
    printed: Callable[[DoctorReport], DoctorPrinted] | None = None,
) -> DoctorReport:
    """Scan the environment of `python`, simulate every selected module, explain the problems.

    What is asked live (the interpreter's facts, the host's loader, the GPUs: `asked`, or asked
    here) keys a whole result kept in the cache directory; the result is taken while the
    environment variables and files the run looked at are unchanged (`abifit.host.runcache`),
    and kept with what `printed` makes of it (`commands.kept`). A run with `--verify` or
    `--save-host` does work of its own and is always made, as is one that asked the index, or
    one whose simulation `on_simulation` is shown (`abifit snapshot` reads the fingerprints of
    the modules from it). `python` is the interpreter, or the query of its facts started
    (`InterpreterQuery`: the `abifit` command starts it before importing this module)."""
    if asked is None:
        asked = ask(python, environ, gpus, host)
    runs = doctor_runs(cache_dir, kept=not verify and not save_host and on_simulation is None)
    key = ""
    if runs is not None:
        key = doctor_key(asked, tuple(packages), offline=remote is None,
                         assume_driver=assume_driver)
        kept = runs.get(key, environ, DoctorReport)
        if isinstance(kept, DoctorReport):
            return kept
    asked_index: list[bool] = []

    def index() -> RemoteContext:
        assert remote is not None
        asked_index.append(True)
        return remote()

    read = ReadEnviron(environ)
    with observe.recording() as recorder:
        report = _doctor(asked.facts, asked.host, asked.gpus, asked.gpu_reason, packages,
                         verify=verify, cache_dir=cache_dir, environ=read, progress=progress,
                         remote=index if remote is not None else None, save_host=save_host,
                         on_simulation=on_simulation, assume_driver=assume_driver)
    if runs is not None and not asked_index and runs.put(
            key, read, recorder, report, printed(report) if printed else None):
        given = python.python if isinstance(python, InterpreterQuery) else python
        runs.remember(latest_name(given, tuple(packages)), key)
    return report


def _doctor(
    facts: InterpreterFacts, host: HostFacts, gpus: tuple[GpuTarget, ...],
    gpu_reason: str | None, packages: list[str], *, verify: bool, cache_dir: Path | None,
    environ: Mapping[str, str], progress: Progress,
    remote: Callable[[], RemoteContext] | None, save_host: Path | None,
    on_simulation: SimulationSeen | None = None, assume_driver: bool = False,
) -> DoctorReport:
    progress("reading distributions")
    dists = list_distributions(facts)
    collecting = library_dirs_ahead(facts.sys_path, environ)
    progress("reading the packages' Python code")
    code = InstalledCode(Cache(cache_dir) if cache_dir else None, cpython_version(facts))
    # the code is read on the other cores, the largest distribution first; the ELF files are
    # parsed there once a core is free, and here: the scan takes back those not started yet
    # (their Requires-Dist, which every module's prerequisites read, are parsed there first)
    requires = (workers.submit(requirements, {d.key: d.requires for d in dists}, facts.markers)
                if workers.parallel() else None)
    code.start(code.largest_first(d for d in dists if has_shared_objects(d)))
    # local files are parsed again rather than kept in the cache: taking a view from the cache
    # costs 2/3 of parsing the file again, and keeping it there more than the parse. Their
    # relocations are read only for a symbol not bound, unless the bindings themselves are
    # shown (`on_simulation`) or the views kept (`save_host`)
    source = LocalObjects(None, relocations=on_simulation is not None or save_host is not None)
    objects, programs = parse_ahead_names(dists, executable_file)
    source.prefetch(objects, heads=programs)
    natives = scan_native_files(facts, dists, image_or_none(source), loose=True,
                                head=heads_or_none(source))
    roots = [p for p in facts.sys_path if observe.isdir(p)]
    reads = GpuReads(gpus, FileCache(cache_dir, GPU_BUCKET) if cache_dir else None)
    # every distribution's GPU code is checked: its reads start now, unless the checks will
    # be shared with forks, which are made first (a process forks with one thread)
    read_all = bool(gpus) and not packages
    reads_after_forks = read_all and forks_for_checks([n for n in natives if n.checked]) > 0
    if read_all and not reads_after_forks:
        reads.start(natives, heads_or_none(source))
    plans = code.plans(dists, natives)
    natives = mark_loaded(natives, plans, roots)
    env = Environment(facts, dists, natives, plans, _answer(requires))
    if "numpy" in env.dists:  # what the files that use NumPy's C API say of it
        progress("reading the modules' use of NumPy's C API")
        env.numpy_uses.update(numpy_uses_on_cores(numpy_candidates(
            natives, lambda key: "numpy" in env.declared(key), image_or_none(source))))
    targets = selected(natives, packages, env)
    if packages and not targets:
        raise UsageError(f"no native modules found for {', '.join(packages)} in the environment "
                         f"of {facts.executable}")
    locator = Locator(collecting)
    config = replace(search_config(host), stand_in=located_copy(locator, image_or_none(source)),
                     assumed=DRIVER_LIBRARIES if assume_driver else ())
    source.prefetch(system_libraries(natives, heads_or_none(source), config))
    sim = Simulator(env, source, config, load_preload_rules(), glob_files)
    ctx = context(sim, locator, load_soname_packages(),
                  index_library_fix(library_search(remote), roots) if remote is not None
                  else None)
    major, minor = (int(p) for p in facts.version.split(".")[:2])
    ctx = replace(ctx, symbol_note=lambda name: pythonapi.history(name, (major, minor)))
    # the modules are checked here and in forks, the GPU code read meanwhile (unless its reads
    # started early, when no fork was foreseen: a process forks with one thread)
    checked = {} if reads.pending() else check_shared(
        sim, targets, heads_or_none(source),
        (lambda: reads.start(natives, heads_or_none(source))) if reads_after_forks else None)
    simulation = simulate_modules(sim, targets, ctx, progress, checked, gpu=bool(gpus))
    if on_simulation is not None:
        on_simulation(sim, simulation)
    statuses, findings, results = (list(simulation.statuses), list(simulation.findings),
                                   simulation.results)
    if remote is not None and any(f.kind is FindingKind.NUMPY_C_API for f in findings):
        from abifit.engines.numpyfix import with_numpy2_releases

        progress("the first releases built against NumPy 2, from the index")
        owners = {n.path: (env.dists[n.distribution].name, env.dists[n.distribution].version,
                           os.path.relpath(n.path, root))
                  for n in natives if n.distribution in env.dists
                  for root in [site_root(n.path, roots)] if root}
        findings = with_numpy2_releases(findings, owners, remote())
    findings += [_not_a_file(entry, env) for entry in not_files(facts, dists)
                 if not packages or entry.distribution in {t.distribution for t in targets}]
    saved = None
    if save_host is not None:
        saved = _save_host(save_host, host, facts.executable, results, roots, source, progress)
    verification = None
    import_checks = None
    verdicts = import_verdicts(env, statuses)
    findings += compile_findings(env, verdicts)
    if verify:
        # the imports do not wait for the modules' loads: they take the cores that the loads'
        # last fork servers leave idle (each import is its own fresh process either way)
        with ThreadPoolExecutor(max_workers=1) as beside:
            importing = beside.submit(_verify_imports, env, verdicts, progress)
            verification = tuple(_verify(env, sim, statuses, progress))
            import_checks = tuple(importing.result())
        by_module = {s.module: s.path for s in statuses}
        findings += [_disagreement(v, by_module[v.module]) for v in verification if not v.agrees]
        findings += [_import_disagreement(c) for c in import_checks
                     if not c.agrees and c.actual_works is not None]
    libraries = sum(1 for n in natives if n.module is None)
    checks: tuple[GpuCheck, ...] = ()
    if gpus:
        checks = _gpu_check(natives, statuses, roots, heads_or_none(source), progress, reads)
        findings += [f for c in checks for f in c.findings]
    return DoctorReport(facts.executable, facts.version, tuple(statuses), tuple(findings),
                        verification, libraries,
                        tuple(w for c in checks for w in c.warnings), checks, gpu_reason, saved,
                        verdicts, import_checks)


def _save_host(path: Path, host: HostFacts, executable: str, results: Sequence[LoadResult],
               roots: list[str], source: ObjectSource, progress: Progress) -> str:
    """Write this machine's host profile; the line that says so."""
    from abifit.host.profile import dumps, snapshot_host
    from abifit.version import __version__

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
