"""abifit.sim.imports: the libraries a package loads itself, the place of a native file in its
package's imports, and the user-visible error of a failing step. Module code is given as text
and parsed by the real reader (abifit.formats.pysource)."""

from __future__ import annotations

from collections.abc import Mapping

from abifit.engines.plans import parse
from abifit.formats.pysource import LoadKind
from abifit.sim.imports import (
    DistributionPlan,
    LoadingRule,
    PackageCode,
    Reachability,
    Step,
    load_loading_rules,
    plan_distribution,
    user_error,
)

SITE = "/site"


def _plan(sources: Mapping[str, str], natives: Mapping[str, str | None], tops: tuple[str, ...],
          rule: LoadingRule | None = None) -> DistributionPlan:
    """A plan over Python modules given as text ({dotted name: source}) and native files
    ({path relative to the site: extension module name or None})."""
    def is_package(name: str) -> bool:
        return name in tops or any(k.startswith(name + ".") for k in sources)

    paths = {name: f"{SITE}/{name.replace('.', '/')}"
             + ("/__init__.py" if is_package(name) else ".py") for name in sources}
    texts = {paths[name]: text.encode() for name, text in sources.items()}
    code = PackageCode(paths, texts.get, parse)
    files = {rel: f"{SITE}/{rel}" for rel in natives}
    modules = {name: f"{SITE}/{rel}" for rel, name in natives.items() if name}
    return plan_distribution("pkg", tops, code, modules, files, rule)


TORCHAUDIO = {
    "ta": "from ta import _extension\n",
    "ta._extension": ("from ta._extension.utils import _load_lib\n"
                      "if True:\n    _load_lib('libtorchaudio')\n    import ta.lib._ta\n"),
    "ta._extension.utils": ("import torch\nfrom pathlib import Path\n"
                            "_LIB_DIR = Path(__file__).parent.parent / 'lib'\n"
                            "def _load_lib(lib):\n    path = _LIB_DIR / f'{lib}.so'\n"
                            "    torch.ops.load_library(path)\n"),
}


def test_a_library_the_package_loads_itself_comes_before_its_users() -> None:
    """A wrapper call with a constant (`_load_lib("libtorchaudio")`) is a sure load step, and a
    module that needs that library gets it first."""
    plan = _plan(TORCHAUDIO, {"ta/lib/libtorchaudio.so": None, "ta/lib/_ta.so": "ta.lib._ta"},
                 ("ta",))
    assert [(s.path, s.how, s.reach) for s in plan.loads] == [
        (f"{SITE}/ta/lib/libtorchaudio.so", LoadKind.TORCH_OPS, Reachability.ALWAYS)]
    assert [s.path for s in plan.before({"libtorchaudio.so", "libc.so.6"})] == [
        f"{SITE}/ta/lib/libtorchaudio.so"]
    assert plan.before({"libc.so.6"}) == ()


def test_a_module_imported_at_module_level_is_always_loaded() -> None:
    """A module the top-level package imports through a chain of module-level imports is
    reached always, under that import's name."""
    plan = _plan(TORCHAUDIO, {"ta/lib/libtorchaudio.so": None, "ta/lib/_ta.so": "ta.lib._ta"},
                 ("ta",))
    place = plan.place(f"{SITE}/ta/lib/_ta.so")
    assert (place.name, place.step.reach, place.step.module) == (
        "ta", Reachability.ALWAYS, "ta.lib._ta")


def test_guarded_and_on_use_modules_are_optional() -> None:
    """An import under try/except ImportError is guarded; one inside a function is on use;
    neither fails the import."""
    sources = {"pkg": ("try:\n    from pkg import fast\nexcept ImportError:\n    fast = None\n"
                       "def threads():\n    from pkg import tbb\n")}
    plan = _plan(sources, {"pkg/fast.so": "pkg.fast", "pkg/tbb.so": "pkg.tbb"}, ("pkg",))
    assert plan.place(f"{SITE}/pkg/fast.so").step.reach is Reachability.GUARDED
    assert plan.place(f"{SITE}/pkg/tbb.so").step.reach is Reachability.ON_USE
    assert not Reachability.GUARDED.counts and not Reachability.ON_USE.counts


def test_the_surest_way_in_wins() -> None:
    """A module imported on use in one module and at module level in another is always
    loaded."""
    sources = {"pkg": "import pkg.a\nimport pkg.b\n",
               "pkg.a": "def f():\n    import pkg._ext\n",
               "pkg.b": "from pkg import _ext\n"}
    plan = _plan(sources, {"pkg/_ext.so": "pkg._ext"}, ("pkg",))
    assert plan.place(f"{SITE}/pkg/_ext.so").step.reach is Reachability.ALWAYS


def test_a_guard_that_raises_keeps_its_error() -> None:
    """A module under a handler that raises its own error fails the import with that error."""
    sources = {"pkg": "from pkg import flash_attn\n",
               "pkg.flash_attn": ("try:\n    from pkg import flash_ops\nexcept:\n"
                                  "    raise ImportError('Can not import FA3 in sgl_kernel.')\n")}
    plan = _plan(sources, {"pkg/flash_ops.so": "pkg.flash_ops"}, ("pkg",))
    step = plan.place(f"{SITE}/pkg/flash_ops.so").step
    assert step.reach is Reachability.ALWAYS
    assert user_error(step, "undefined symbol: x") == (
        "ImportError: Can not import FA3 in sgl_kernel.")


def test_a_file_nothing_reaches_counts_under_its_own_name() -> None:
    """A native module no Python code names is unreached: placed under its own name, it
    still counts."""
    plan = _plan({"pkg": "x = 1\n"}, {"pkg/hidden.so": "pkg.hidden"}, ("pkg",))
    place = plan.place(f"{SITE}/pkg/hidden.so")
    assert (place.name, place.step.reach) == ("pkg.hidden", Reachability.UNREACHED)
    assert Reachability.UNREACHED.counts


def test_rules_add_what_reading_cannot_see() -> None:
    """Rules: a run-time picked library loads first, a variant is optional, and a guarded
    library whose absence breaks the package later fails the import with the package's
    error."""
    nms = "RuntimeError: operator torchvision::nms does not exist"
    rule = LoadingRule(loads=(("pkg/sm*/ops.*", "ImportError: no ops"),),
                       fails_import=(("pkg/_C.so", nms),), optional=("pkg/MPI.*",),
                       on_use=("pkg/cu*/_bridge.*",), why="test")
    sources = {"pkg": ("import torch\ntry:\n    torch.ops.load_library('_C')\n"
                       "except (ImportError, OSError):\n    pass\n")}
    plan = _plan(sources, {"pkg/_C.so": None, "pkg/sm90/ops.so": None,
                           "pkg/MPI.mpich.so": "pkg.MPI", "pkg/cu13/_bridge.so": None},
                 ("pkg",), rule)
    assert [s.path for s in plan.loads] == [f"{SITE}/pkg/sm90/ops.so", f"{SITE}/pkg/_C.so"]
    assert plan.loads[1].reach is Reachability.GUARDED
    assert user_error(plan.place(f"{SITE}/pkg/_C.so").step, "x") == nms
    assert plan.place(f"{SITE}/pkg/_C.so").step.reach is Reachability.ALWAYS
    assert user_error(plan.place(f"{SITE}/pkg/sm90/ops.so").step, "x") == "ImportError: no ops"
    assert plan.place(f"{SITE}/pkg/MPI.mpich.so").step.reach is Reachability.GUARDED
    bridge = plan.place(f"{SITE}/pkg/cu13/_bridge.so")
    assert (bridge.name, bridge.step.reach) == ("pkg", Reachability.ON_USE)


def test_loads_match_files_by_name_stem_and_never_guess() -> None:
    """A load names its file by path tail or by the name before the first dot; an ambiguous
    name matches nothing rather than a guess."""
    sources = {"pkg": "import ctypes\nctypes.CDLL('libfoo')\nctypes.CDLL('common')\n"}
    plan = _plan(sources, {"pkg/lib/libfoo.so.1": None, "pkg/a/common.so": None,
                           "pkg/b/common.so": None}, ("pkg",))
    assert [s.path for s in plan.loads] == [f"{SITE}/pkg/lib/libfoo.so.1"]


def test_user_errors_by_how_a_file_is_loaded() -> None:
    """An extension's failure is an ImportError with the loader's text, ctypes' an OSError,
    torch.ops.load_library's the OSError torch raises with the path."""
    error = "libcudart.so.12: cannot open shared object file: No such file or directory"
    assert user_error(Step("/s/m.so", "m", Reachability.ALWAYS), error) == f"ImportError: {error}"
    assert user_error(Step("/s/l.so", None, Reachability.ALWAYS, LoadKind.CTYPES),
                      error) == f"OSError: {error}"
    assert user_error(Step("/s/l.so", None, Reachability.ALWAYS, LoadKind.TORCH_OPS),
                      error) == "OSError: Could not load this library: /s/l.so"


def test_only_marked_modules_are_parsed() -> None:
    """Finding load steps parses only the modules whose text names a loading function or a
    wrapper; the others are read as bytes only."""
    parsed: list[str] = []

    def counting(data: bytes, name: str, is_package: bool):  # type: ignore[no-untyped-def]
        parsed.append(name)
        return parse(data, name, is_package)

    texts = {f"{SITE}/pkg/__init__.py": b"import pkg.a\n",
             f"{SITE}/pkg/a.py": b"x = 1\n",
             f"{SITE}/pkg/b.py": b"import ctypes\nctypes.CDLL('libx')\n"}
    paths = {"pkg": f"{SITE}/pkg/__init__.py", "pkg.a": f"{SITE}/pkg/a.py",
             "pkg.b": f"{SITE}/pkg/b.py"}
    plan_distribution("pkg", ("pkg",), PackageCode(paths, texts.get, counting), {},
                      {"pkg/libx.so": f"{SITE}/pkg/libx.so"})
    assert parsed == ["pkg.b"]


def test_callers_of_a_function_the_interpreter_calls_are_not_looked_for() -> None:
    """A module-level `__getattr__` that loads what it is asked for is a wrapper no text calls
    by name (the interpreter does, with an attribute's name): the modules that mention
    `__getattr__` are not parsed as its callers. A wrapper called by name still is followed."""
    parsed: list[str] = []

    def counting(data: bytes, name: str, is_package: bool):  # type: ignore[no-untyped-def]
        parsed.append(name)
        return parse(data, name, is_package)

    texts = {f"{SITE}/pkg/__init__.py": (b"import ctypes\n"
                                        b"def __getattr__(name):\n    return ctypes.CDLL(name)\n"
                                        b"def load(name):\n    return ctypes.CDLL(name)\n"),
             f"{SITE}/pkg/a.py": b"class A:\n    def __getattr__(self, name):\n        return 1\n",
             f"{SITE}/pkg/b.py": b"from pkg import load\nload('libx')\n"}
    paths = {"pkg": f"{SITE}/pkg/__init__.py", "pkg.a": f"{SITE}/pkg/a.py",
             "pkg.b": f"{SITE}/pkg/b.py"}
    plan = plan_distribution("pkg", ("pkg",), PackageCode(paths, texts.get, counting), {},
                             {"pkg/libx.so": f"{SITE}/pkg/libx.so"})
    assert sorted(parsed) == ["pkg", "pkg.b"]
    assert [s.path for s in plan.loads] == [f"{SITE}/pkg/libx.so"]


def test_shipped_rules_parse() -> None:
    """The shipped rules name torchvision, sgl-kernel and mpi4py, each with its reason."""
    rules = load_loading_rules()
    assert {"torchvision", "sgl-kernel", "mpi4py", "cuda-core"} <= set(rules)
    assert all(rule.why for rule in rules.values())


def test_marked_reads_every_marker() -> None:
    """`marked`'s quick passes ("DLL", "ibrary") cover every loading function it looks for."""
    from abifit.sim.imports import LOAD_MARKERS, marked

    for marker in LOAD_MARKERS:
        assert marked(b"x = " + marker + b"(path)")
    assert not marked(b"import os\nos.listdir('.')\n")
