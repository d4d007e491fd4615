"""What `import X` loads, and how surely: the place of a native file in its package's imports.

Users ask whether `import torchaudio` works, not whether `lib/_torchaudio.so` loads alone. Two
facts of a package's Python code (read by `abifit.formats.pysource`) change the answer:

- **Libraries the package loads itself** (`torch.ops.load_library`, `ctypes.CDLL`, through
  wrappers such as torchaudio's `_load_lib("libtorchaudio")`). Such a library is loaded before
  the modules that need it, so that they find it by soname, and its own failure is what the
  user sees (`OSError: Could not load this library: ...`). `load_steps` finds them; only the
  files whose text names a loading function or a wrapper are parsed.
- **How surely a native file is loaded by `import X`** (`Reachability`): always, under a guard
  that goes on without it (`GUARDED`), only when a function runs (`ON_USE`), or by nothing abifit
  can follow (`UNREACHED`, which counts like always). `PackageCode.place` answers it for one
  file by searching backwards: the modules whose text names it, how each imports it, and how
  each of those is reached, up to a top-level package. That costs a few parses per file, so it
  is asked only for the files that fail: for those that load, the answer changes nothing.

What static reading cannot see comes from `data/import_rules.json`: libraries loaded by run-time
pickers (sgl-kernel's `common_ops` per GPU), variants of which only one is ever loaded (mpi4py's
MPI ABIs), and failures that surface elsewhere (torchvision goes on without `_C.so`, and its
next module raises `operator torchvision::nms does not exist`).

Pure: module text and code arrive through callables, files as values.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from abifit.formats.pysource import (
    Call,
    Import,
    Load,
    LoadKind,
    ModuleCode,
    Reach,
    compile_error,
)
from abifit.sim.loader import crashes
from abifit.sim.verdict import VariantRule

DATA = Path(__file__).parent.parent / "data"

# Words whose presence in a module's text means it may load a library itself.
LOAD_MARKERS = (b"load_library", b"CDLL", b"LoadLibrary", b"PyDLL")
_MARKER_PARTS = tuple((part, tuple(m for m in LOAD_MARKERS if part in m))
                      for part in (b"DLL", b"ibrary"))
SEARCH_DEPTH = 8  # how many modules back a place is searched
# how many importing modules one place's search may try: past it, what was found stands (the
# search of a module that only tests and modules no top-level import reaches import would
# otherwise try every path among them: scipy's 1.x-built modules beside NumPy 2)
SEARCH_BUDGET = 4000
# what an import whose load kills the process shows: no exception, the shell's word for SIGBUS
BUS_ERROR = "Bus error (SIGBUS kills the Python process: no exception is raised)"


class Reachability(Enum):
    """How an import reaches a native file: `Reach`, plus not at all."""

    ALWAYS = "always"
    GUARDED = "guarded"
    ON_USE = "on-use"
    UNREACHED = "unreached"

    @property
    def counts(self) -> bool:
        """Whether a failure of the file makes an import fail (guarded and on-use ones do not:
        package code goes on without them, or loads them only when asked)."""
        return self in (Reachability.ALWAYS, Reachability.UNREACHED)


_OF_REACH = {Reach.ALWAYS: Reachability.ALWAYS, Reach.GUARDED: Reachability.GUARDED,
             Reach.ON_USE: Reachability.ON_USE}


def _rank(reach: Reachability) -> int:
    return list(Reachability).index(reach)


@dataclass(frozen=True, slots=True)
class LoadingRule:
    """What static reading cannot see of one distribution (`data/import_rules.json`)."""

    loads: tuple[tuple[str, str | None], ...] = ()  # (glob of files, masked error) loaded first
    fails_import: tuple[tuple[str, str], ...] = ()  # (glob, error): its failure fails the import
    optional: tuple[str, ...] = ()  # globs of variants only one of which is loaded, if any
    on_use: tuple[str, ...] = ()  # globs of files loaded only on a code path that needs them
    variants: tuple[VariantRule, ...] = ()  # sets of files the package picks one from
    after: tuple[AfterRule, ...] = ()  # files loaded only after another package's, made global
    why: str = ""

    def after_for(self, rel: str) -> AfterRule | None:
        """The `after` rule of a file (its path relative to site-packages), if any."""
        return next((a for a in self.after if fnmatch.fnmatchcase(rel, a.files)), None)


@dataclass(frozen=True, slots=True)
class AfterRule:
    """Files (a glob) that package code loads only after importing other distributions and
    loading some of their files with RTLD_GLOBAL (globs relative to site-packages), whose
    symbols the files need without linking to them: cuda.core's tensor bridge, after
    `ctypes.CDLL(torch._C.__file__, RTLD_GLOBAL)`."""

    files: str
    imports: tuple[str, ...]
    global_: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """A native file that package code loads: its path, its dotted name when it is imported as
    an extension module, how it is loaded (None: imported) and how sure that is."""

    path: str
    module: str | None
    reach: Reachability
    how: LoadKind | None = None
    masked: str | None = None  # the user-visible error, when package code rewrites it
    global_: bool = False


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a native file stands: the import it concerns (`torchvision`; its own module name
    when nothing reaches it) and how that import loads it."""

    name: str
    step: Step
    # where the import loads it: the line numbers of the imports on the way from the top-level
    # module, in order (of two files one import loads, the smaller loads first)
    order: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PreloadRule:
    """What importing a distribution does to the process beyond loading its modules."""

    preload: tuple[str, ...]
    global_: tuple[str, ...]


@functools.cache
def _rules_data() -> dict[str, dict[str, Any]]:
    """`data/import_rules.json`'s entries by canonical distribution name; read once."""
    from packaging.utils import canonicalize_name

    raw = json.loads((DATA / "import_rules.json").read_text("utf-8"))
    return {canonicalize_name(name): entry for name, entry in raw["distributions"].items()}


def load_preload_rules() -> dict[str, PreloadRule]:
    """The preload and global rules of `data/import_rules.json`, by canonical name."""
    return {name: PreloadRule(tuple(entry.get("preload", ())), tuple(entry.get("global", ())))
            for name, entry in _rules_data().items()}


def load_loading_rules() -> dict[str, LoadingRule]:
    """The `imports` rules of `data/import_rules.json`, by canonical distribution name."""
    rules: dict[str, LoadingRule] = {}
    for name, entry in _rules_data().items():
        rule = entry.get("imports")
        if rule is None:
            continue
        rules[name] = LoadingRule(
            loads=tuple((g, e) for g, e in rule.get("loads", {}).items()),
            fails_import=tuple((g, e) for g, e in rule.get("fails_import", {}).items()),
            optional=tuple(rule.get("optional", ())),
            on_use=tuple(rule.get("on_use", ())),
            variants=(*(VariantRule(g) for g in rule.get("optional", ())),
                      *(VariantRule(v["files"], v.get("pick"), v.get("fallback"))
                        for v in rule.get("variants", ()))),
            after=tuple(AfterRule(a["files"], tuple(a.get("imports", ())),
                                  tuple(a.get("global", ()))) for a in rule.get("after", ())),
            why=entry.get("why", ""))
    return rules


# ---------------------------------------------------------------------------------------------
# A distribution's Python code, read as needed


@dataclass(frozen=True, slots=True)
class Compiled:
    """What compiling modules raised under CPython `version` (`pysource.compile_error`), by
    path: None for those that compile."""

    version: tuple[int, int]
    errors: Mapping[str, str | None]


class PackageCode:
    """The Python modules of one distribution: text and parsed code, each read once, on demand.

    `sources` names the modules (dotted name -> path); `read` gives a path's bytes (None when
    unreadable); `parse` reads bytes into `ModuleCode` (None when they do not parse). `loading`
    and `mentions`, when given, are what reading every text found: the modules whose text
    names a loading function, and by word the modules whose text holds it (`mentioning`);
    `compiled`, what compiling modules raised under a CPython version (`compile_error`).
    """

    def __init__(self, sources: Mapping[str, str], read: Callable[[str], bytes | None],
                 parse: Callable[[bytes, str, bool], ModuleCode | None],
                 ahead: Callable[[list[tuple[bytes, str, bool]]], None] | None = None,
                 loading: Iterable[str] | None = None,
                 mentions: Mapping[str, Sequence[str]] | None = None,
                 compiled: Compiled | None = None) -> None:
        self.sources = dict(sources)
        self._compiled = compiled
        # the modules whose text names a loading function, when told (else found by reading)
        self._loading = None if loading is None else sorted(set(loading) & set(sources))
        self._read = read
        self._parse = parse
        self._ahead = ahead  # told of modules about to be parsed, to start on them at once
        self._text: dict[str, bytes | None] = {}
        self._code: dict[str, ModuleCode | None] = {}
        self._mentions: dict[bytes, list[str]] = {
            word.encode("utf-8", "surrogateescape"): sorted(set(names) & self.sources.keys())
            for word, names in (mentions or {}).items()}

    def text(self, name: str) -> bytes | None:
        if name not in self._text:
            path = self.sources.get(name)
            self._text[name] = self._read(path) if path is not None else None
        return self._text[name]

    def empty(self) -> bool:
        """Whether no module has code (empty `__init__.py` files at most): then the
        distribution's extension modules are its interface, imported by name."""
        return not any((self.text(name) or b"").strip() for name in sorted(self.sources))

    def loading(self) -> list[str]:
        """The modules whose text names a loading function (`marked`), in name order."""
        if self._loading is None:
            self._loading = [m for m in sorted(self.sources) if marked(self.text(m))]
        return self._loading

    def code(self, name: str) -> ModuleCode | None:
        if name not in self._code:
            data = self.text(name)
            path = self.sources.get(name, "")
            self._code[name] = (None if data is None
                                else self._parse(data, name, path.endswith("/__init__.py")))
        return self._code[name]

    def compile_error(self, name: str, version: tuple[int, int]) -> str | None:
        """What compiling module `name` raises under CPython `version`
        (`pysource.compile_error`); None when it compiles, is unreadable or cannot be told."""
        path = self.sources.get(name, "")
        if self._compiled is not None and self._compiled.version == version and \
                path in self._compiled.errors:
            return self._compiled.errors[path]
        data = self.text(name)
        return None if data is None else compile_error(data, version)

    def coming(self, names: Iterable[str]) -> None:
        """Say that the modules `names` are about to be parsed (`ahead`, when given)."""
        if self._ahead is None:
            return
        due = [(data, name, self.sources[name].endswith("/__init__.py")) for name in names
               if name not in self._code and (data := self.text(name)) is not None]
        if due:
            self._ahead(due)

    def mentioning(self, word: str) -> list[str]:
        """The modules whose text holds `word` as a whole word, in name order."""
        key = word.encode("utf-8", "surrogateescape")
        if key not in self._mentions:
            self._mentions[key] = mentions_in(word, ((m, self.text(m))
                                                     for m in sorted(self.sources)))
        return self._mentions[key]


def mentions_in(word: str, texts: Iterable[tuple[str, bytes | None]]) -> list[str]:
    """The names of the `texts` (name, text) that hold `word` as a whole word, in their order."""
    key = word.encode("utf-8", "surrogateescape")
    pattern = re.compile(rb"(?<![\w])" + re.escape(key) + rb"(?![\w])")
    return [name for name, text in texts if text and key in text and pattern.search(text)]


def wrappers_of(codes: Iterable[ModuleCode | None]) -> dict[str, tuple[int, LoadKind]]:
    """The functions that the modules `codes` define around a loading function, by name: the
    parameter that names the file, and how it is loaded (the first definition of a name)."""
    wrappers: dict[str, tuple[int, LoadKind]] = {}
    for module in codes:
        for w in module.wrappers if module else ():
            if not _implicit(w.name):
                wrappers.setdefault(w.name, (w.param, w.kind))
    return wrappers


def _imported_names(what: Import | Load | Call) -> list[str]:
    """The modules an event may import, parents first: `from a.b import c` imports a, a.b
    and, when c is a module, a.b.c (names that are not modules are harmless here)."""
    if isinstance(what, Import):
        parts = what.module.split(".")
        chain = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
        return [*chain, *(f"{what.module}.{n}" for n in what.names if n != "*")]
    if (isinstance(what, Load) and what.kind is LoadKind.IMPORT_MODULE and what.param is None
            and what.hints and what.hints[0].replace(".", "").isidentifier()):
        parts = what.hints[0].split(".")
        return [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
    return []


def _imports_module(what: Import | Load | Call, target: str) -> bool:
    """Whether an event imports `target` (or a submodule of it, which imports it too)."""
    if isinstance(what, Import):
        if what.module == target or what.module.startswith(target + "."):
            return True
        parent, _, leaf = target.rpartition(".")
        return what.module == parent and leaf in what.names
    if isinstance(what, Load) and what.kind is LoadKind.IMPORT_MODULE and what.param is None:
        return bool(what.hints) and what.hints[0] == target
    return False


# ---------------------------------------------------------------------------------------------
# The plan of a distribution


@dataclass(frozen=True, slots=True)
class _Way:
    """One way a module is reached: from a top-level import or only from a module nothing
    reaches (which the user imports by name), how surely, under which import, and the error
    package code rewrites its failure into."""

    from_top: bool
    reach: Reachability
    top: str
    masked: str | None
    order: tuple[int, ...] = ()  # the lines of the imports on the way (`Placement.order`)

    @property
    def key(self) -> tuple[bool, int]:
        """Smaller is better: ways from a top-level import first, then surer ones."""
        return not self.from_top, _rank(self.reach)


@dataclass
class DistributionPlan:
    """What a distribution's code does with its native files: the libraries it loads itself,
    and, asked for one file, the import that reaches it and how (`place`)."""

    name: str
    tops: tuple[str, ...]
    code: PackageCode | None
    modules: Mapping[str, str]  # extension module name -> path
    files: Mapping[str, str]  # path relative to the site directory -> path
    rule: LoadingRule | None = None
    loads: tuple[Step, ...] = ()
    _places: dict[str, Placement] = field(default_factory=dict)
    _ways: dict[str, _Way] = field(default_factory=dict)
    # ways from a top-level import found inside a search: a path that exists whichever path
    # asks again (one through a module on the asking path is never better than that path's
    # own way, so the best way is still found)
    _from_top: dict[str, _Way] = field(default_factory=dict)
    _budget: list[int] = field(default_factory=lambda: [0])  # modules a `place` may still try
    _imported: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)

    def reached(self, module: str, top: str) -> tuple[int, ...] | None:
        """Whether `import top` (a top-level package of this distribution) surely imports
        `module` (its own or another distribution's, `scipy.sparse`) through this
        distribution's code: the lines of the imports on the way (`Placement.order`), None
        when it does not at module level."""
        if top not in self._imported:
            self._imported[top] = self._walk(top)
        return self._imported[top].get(module)

    def _walk(self, top: str) -> dict[str, tuple[int, ...]]:
        """The modules `import top` surely imports through this distribution's code, in the
        order Python runs the imports (each module's module-level imports, depth first, a
        module imported once), each with the lines of the imports that first reach it. Names
        of other distributions' modules are recorded, not followed."""
        out: dict[str, tuple[int, ...]] = {top: ()}
        todo: list[tuple[str, tuple[int, ...], int]] = [(top, (), 0)]  # (module, order, event)
        while todo:
            name, order, at = todo.pop()
            code = self.code.code(name) if self.code is not None else None
            events = [e for e in code.events if e.reach is Reach.ALWAYS] if code else []
            for i in range(at, len(events)):
                event = events[i]
                new = [m for m in _imported_names(event.what) if m not in out]
                for m in new:
                    out[m] = (*order, event.line)
                own = [m for m in new if self.code is not None and m in self.code.sources]
                if own and len(order) < 4 * SEARCH_DEPTH:
                    # run the first new module of ours now, the rest of this one after it
                    todo.append((name, order, i + 1))
                    todo += [(m, out[m], 0) for m in reversed(own)]
                    break
        return out

    def place(self, path: str) -> Placement:
        """The import that reaches the native file at `path`, how, and what the user sees."""
        if path not in self._places:
            self._places[path] = self._ruled(path, self._search(path))
        return self._places[path]

    def _search(self, path: str) -> Placement:
        module = next((m for m, p in self.modules.items() if p == path), None)
        load = next((s for s in self.loads if s.path == path), None)
        rel = next((r for r, p in self.files.items() if p == path), path)
        if module is not None:
            way = self._way(module, 0, frozenset())
            reach, top, masked, order = way.reach, way.top, way.masked, way.order
        elif load is not None:
            reach, top, masked, order = load.reach, self._top_of(rel), load.masked, ()
        else:
            reach, top, masked, order = Reachability.UNREACHED, rel, None, ()
        if reach is Reachability.UNREACHED and module is None:
            top = rel
        how = load.how if load else None
        return Placement(top, Step(path, module, reach, how, masked,
                                   load.global_ if load else False), order)

    def _top_of(self, rel: str) -> str:
        """The top-level import a file belongs to: its first directory when that is one."""
        first = rel.split("/")[0]
        return first if first in self.tops or not self.tops else self.tops[0]

    def optional_by_rule(self, path: str) -> bool:
        """Whether a rule makes the file at `path` optional or loaded only on use."""
        rule = self.rule
        rel = next((r for r, p in self.files.items() if p == path), path)
        return rule is not None and any(fnmatch.fnmatchcase(rel, g)
                                        for g in (*rule.optional, *rule.on_use))

    def _ruled(self, path: str, place: Placement) -> Placement:
        rule = self.rule
        if rule is None:
            return place
        rel = next((r for r, p in self.files.items() if p == path), path)
        step = place.step
        name = place.name
        for pattern, error in rule.fails_import:
            if fnmatch.fnmatchcase(rel, pattern):
                step = Step(path, step.module, Reachability.ALWAYS, step.how, error,
                            step.global_)
                name = self._top_of(rel)
        for pattern, masked in rule.loads:
            if fnmatch.fnmatchcase(rel, pattern):
                step = Step(path, step.module, Reachability.ALWAYS, step.how, masked,
                            step.global_)
                name = self._top_of(rel)
        if any(fnmatch.fnmatchcase(rel, g) for g in rule.optional):
            step = Step(path, step.module, Reachability.GUARDED, step.how, step.masked,
                        step.global_)
            name = self._top_of(rel)
        if any(fnmatch.fnmatchcase(rel, g) for g in rule.on_use):
            step = Step(path, step.module, Reachability.ON_USE, step.how, step.masked,
                        step.global_)
            name = self._top_of(rel)
        return Placement(name, step, place.order)

    def _way(self, target: str, depth: int, visiting: frozenset[str]) -> _Way:
        top = target.split(".")[0]
        if target in self.tops or (target == top and top in self.tops):
            return _Way(True, Reachability.ALWAYS, target, None)
        if target in self._ways:
            return self._ways[target]
        if target in self._from_top:
            return self._from_top[target]
        if not visiting:
            self._budget[0] = SEARCH_BUDGET
        best: _Way | None = None
        if self.code is not None and depth < SEARCH_DEPTH:
            for name in self.code.mentioning(target.rsplit(".", 1)[-1]):
                if name in visiting or name == target:
                    continue
                if self._budget[0] <= 0:  # a module imported by many that no top reaches
                    break
                self._budget[0] -= 1
                found = self._via(name, target, depth, visiting)
                # surer first; of two as sure, the one under the target's own top-level name
                # (`import matplotlib`, not `import pylab`, which imports it too)
                if found is not None and (best is None or (found.key, found.top != top)
                                          < (best.key, best.top != top)):
                    best = found
                if (best is not None and best.from_top and best.reach is Reachability.ALWAYS
                        and best.top == top):
                    break
        if best is None:
            best = _Way(False, Reachability.UNREACHED, target, None)
        if not visiting:
            self._ways[target] = best
        elif best.from_top:
            self._from_top[target] = best
        return best

    def _via(self, name: str, target: str, depth: int, visiting: frozenset[str],
             ) -> _Way | None:
        """How `target` is reached through module `name`, if `name` imports it."""
        code = self.code.code(name) if self.code else None
        events = [e for e in code.events if _imports_module(e.what, target)] if code else []
        if not events:
            return None
        event = min(events, key=lambda e: _rank(_OF_REACH[e.reach]))
        local = _OF_REACH[event.reach]
        if local is Reachability.ON_USE:
            return _Way(True, Reachability.ON_USE, name.split(".")[0], event.masked,
                        (event.line,))
        outer = self._way(name, depth + 1, visiting | {target})
        masked = event.masked or outer.masked
        if not outer.from_top:
            # no top-level import reaches `name`: the user imports it (or what imports it),
            # and a guard there still makes the file optional
            alone = local if local is Reachability.GUARDED else Reachability.UNREACHED
            return _Way(False, alone, outer.top, masked)
        weaker = local if _rank(local) > _rank(outer.reach) else outer.reach
        return _Way(True, weaker, outer.top, masked, (*outer.order, event.line))

    def before(self, needed: Iterable[str],
               names: Callable[[Step], Iterable[str]] = lambda s: (posixpath.basename(s.path),),
               ) -> tuple[Step, ...]:
        """The libraries the package loads itself that a module needing `needed` (sonames or
        file names) finds already loaded: the sure steps one of whose `names` (by default its
        file name) it needs, in the order the package loads them."""
        wanted = set(needed)
        return tuple(s for s in self.loads if s.reach is Reachability.ALWAYS
                     and not wanted.isdisjoint(names(s)))


def _match_file(hints: Sequence[str], files: Mapping[str, str]) -> str | None:
    """The one native file the string constants of a load name: by relative path, file name,
    or file name up to its first dot (`libtorchaudio` -> lib/libtorchaudio.so)."""
    for hint in sorted({h.strip().strip("/") for h in hints if h.strip(" ./")}, key=len,
                       reverse=True):
        found = [p for rel, p in files.items()
                 if rel == hint or rel.endswith("/" + hint)
                 or posixpath.basename(rel).split(".")[0] == hint]
        if len(found) == 1:
            return found[0]
    return None


def marked(text: bytes | None) -> bool:
    """Whether a module's text names a loading function (`LOAD_MARKERS`)."""
    # two passes over most texts, not four: every marker holds "DLL" or "ibrary"
    return text is not None and any(
        part in text and any(marker in text for marker in markers)
        for part, markers in _MARKER_PARTS)


def load_steps(code: PackageCode, files: Mapping[str, str]) -> tuple[Step, ...]:
    """The native files the package loads itself (not by import), in module and line order,
    each with the reach of its load within its module. Only modules whose text names a loading
    function (`LOAD_MARKERS`), or a wrapper of one, are parsed."""
    loading = code.loading()
    wrappers = wrappers_of(code.code(name) for name in loading)
    callers = sorted({m for w in wrappers for m in code.mentioning(w)} | set(loading))
    code.coming(callers)
    steps: dict[str, Step] = {}
    for name in callers:
        module = code.code(name)
        for event in module.events if module else ():
            step = _load_step(event.what, _OF_REACH[event.reach], event.masked, wrappers, files)
            if step is not None:
                known = steps.get(step.path)
                if known is None or _rank(step.reach) < _rank(known.reach):
                    steps[step.path] = step
    return tuple(steps.values())


def _implicit(function: str) -> bool:
    """Whether the interpreter calls `function` itself (`__getattr__`, `__init__`): its
    arguments are never string constants in a caller's text, so no caller is looked for."""
    return len(function) > 4 and function.startswith("__") and function.endswith("__")


def _load_step(what: Import | Load | Call, reach: Reachability, masked: str | None,
               wrappers: Mapping[str, tuple[int, LoadKind]],
               files: Mapping[str, str]) -> Step | None:
    if isinstance(what, Load) and what.param is None and what.kind is not LoadKind.IMPORT_MODULE:
        path = _match_file(what.hints, files)
        return Step(path, None, reach, what.kind, masked, what.global_) if path else None
    if isinstance(what, Call):
        wrapper = wrappers.get(what.function.rsplit(".", 1)[-1])
        if wrapper is not None:
            param, kind = wrapper
            arg = what.args[param] if param < len(what.args) else None
            path = _match_file((arg,), files) if arg is not None else None
            return Step(path, None, reach, kind, masked) if path else None
    return None


def plan_distribution(
    distribution: str,
    tops: Sequence[str],
    code: PackageCode | None,
    modules: Mapping[str, str],
    files: Mapping[str, str],
    rule: LoadingRule | None = None,
) -> DistributionPlan:
    """The plan of a distribution: the libraries its code loads itself (rules first), ready to
    place any of its native files.

    `modules` maps its extension modules' dotted names to their paths; `files` maps every
    native file's path relative to its site directory to its path; `tops` are its top-level
    import names.
    """
    found = load_steps(code, files) if code is not None else ()
    first: list[Step] = []
    for pattern, masked in rule.loads if rule else ():
        first += [Step(p, None, Reachability.ALWAYS, LoadKind.IMPORT_MODULE, masked)
                  for rel, p in sorted(files.items()) if fnmatch.fnmatchcase(rel, pattern)]
    ruled = {s.path for s in first}
    return DistributionPlan(distribution, tuple(tops), code, modules, files, rule,
                            (*first, *(s for s in found if s.path not in ruled)))


# ---------------------------------------------------------------------------------------------
# What the user sees


_PYTHON_ERROR = re.compile(r"[A-Z]\w*(?:Error|Exception): ")


def python_error(error: str | None) -> bool:
    """Whether a module's error is an exception its import raises once it has loaded
    ("ImportError: numpy.core.multiarray failed to import"), not the loader's text: a
    loader's error begins with a path or a soname, never with an exception's name."""
    return error is not None and _PYTHON_ERROR.match(error) is not None


def user_error(step: Step, loader_error: str) -> str:
    """The exception an import shows when `step` fails with the loader's `loader_error`; for a
    load that kills the process, what the shell shows (`BUS_ERROR`)."""
    if crashes(loader_error):
        return BUS_ERROR
    if python_error(loader_error) and not (step.masked and
                                           loader_error.startswith("ImportError: ")):
        return loader_error  # it loads; its import raises this (`sim.numpyabi`)
    if step.masked:
        return step.masked
    if step.how is LoadKind.TORCH_OPS:
        return f"OSError: Could not load this library: {step.path}"
    if step.how is LoadKind.CTYPES:
        return f"OSError: {loader_error}"
    return f"ImportError: {loader_error}"
