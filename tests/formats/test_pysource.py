"""Reading what a Python module does when imported: imports, loads, wrapper calls, and how sure
each one is to run; checked on sources shaped like torchaudio, torchvision and sgl-kernel, and
run over every module of the test environment's site-packages."""

from __future__ import annotations

import ast
import sys
import textwrap
import time
from pathlib import Path

import pytest

from abifit.errors import FormatError
from abifit.formats.pysource import (
    Call,
    Event,
    Import,
    Load,
    LoadKind,
    ModuleCode,
    Reach,
    Wrapper,
    read_module,
)

ALWAYS, GUARDED, ON_USE = Reach.ALWAYS, Reach.GUARDED, Reach.ON_USE
CTYPES, TORCH_OPS, IMPORT_MODULE = LoadKind.CTYPES, LoadKind.TORCH_OPS, LoadKind.IMPORT_MODULE
FA3_MESSAGE = "Can not import FA3 in sgl_kernel. Please check your installation."


def read(source: str, name: str = "pkg.mod", is_package: bool = False) -> ModuleCode:
    return read_module(textwrap.dedent(source), name, is_package)


def events(source: str, name: str = "pkg.mod", is_package: bool = False) -> list[Event]:
    return list(read(source, name, is_package).events)


# ---------------------------------------------------------------------------------------------
# Imports and how sure they are to run


def test_module_level_import_always() -> None:
    """An import at module level always runs, as written (`as` names dropped)."""
    assert events("import a.b.c\nimport d.e as x\nfrom f.g import h, i as j\n") == [
        Event(Import("a.b.c"), ALWAYS, 1),
        Event(Import("d.e"), ALWAYS, 2),
        Event(Import("f.g", ("h", "i")), ALWAYS, 3),
    ]


def test_one_import_statement_of_several_modules() -> None:
    """`import a, b` is two imports on one line, in order."""
    assert events("import a, b\n") == [Event(Import("a"), ALWAYS, 1), Event(Import("b"), ALWAYS, 1)]


@pytest.mark.parametrize("source", [
    "def f():\n    import a\n",
    "async def f():\n    import a\n",
    "class C:\n    def m(self):\n        import a\n",
    "def f():\n    def g():\n        import a\n",
    "def f():\n    try:\n        import a\n    except ImportError:\n        pass\n",
], ids=["function", "async-function", "method", "nested-function", "guarded-in-function"])
def test_import_in_function_on_use(source: str) -> None:
    """An import in a function body runs only when the function is called, however guarded."""
    [event] = events(source)
    assert (event.what, event.reach) == (Import("a"), ON_USE)


@pytest.mark.parametrize("source", [
    "if x:\n    pass\nelse:\n    import a\n",
    "with x:\n    import a\n",
    "for x in y:\n    import a\n",
    "while x:\n    import a\n",
    "class C:\n    import a\n",
    "try:\n    pass\nfinally:\n    import a\n",
    "match x:\n    case 1:\n        import a\n",
], ids=["else", "with", "for", "while", "class-body", "finally", "match-case"])
def test_import_in_block_always(source: str) -> None:
    """Imports in the blocks that run at import time (branches, loops, class bodies) always run."""
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "import" in text)
    assert events(source) == [Event(Import("a"), ALWAYS, line)]


@pytest.mark.parametrize("handler", [
    "except ImportError:", "except ModuleNotFoundError:", "except OSError:",
    "except Exception:", "except BaseException:", "except:", "except (ValueError, ImportError):",
    "except builtins.ImportError as e:", "except ValueError:\n    raise\nexcept ImportError:",
], ids=["ImportError", "ModuleNotFoundError", "OSError", "Exception", "BaseException", "bare",
        "tuple", "builtins-qualified", "second-handler"])
def test_try_catching_import_failure_guarded(handler: str) -> None:
    """A try whose handler catches a failed import and goes on guards its body."""
    code = events(f"try:\n    import a\n{handler}\n    a = None\n")
    assert code[0] == Event(Import("a"), GUARDED, 2)


def test_handler_body_guarded() -> None:
    """A fallback in a handler runs only after a failure: guarded."""
    source = "try:\n    import a\nexcept ImportError:\n    import b\nelse:\n    import c\n"
    assert events(source) == [Event(Import("a"), GUARDED, 2), Event(Import("b"), GUARDED, 4),
                              Event(Import("c"), ALWAYS, 6)]


def test_handler_that_raises_masks() -> None:
    """sgl-kernel's flash_attn: a handler that raises ImportError with a constant message does
    not guard; the import always runs and its failure shows that message."""
    source = f"""\
        try:
            from sgl_kernel import flash_ops
        except:
            raise ImportError(
                "{FA3_MESSAGE}"
            )
        """
    assert events(source, "sgl_kernel.flash_attn") == [
        Event(Import("sgl_kernel", ("flash_ops",)), ALWAYS, 2, f"ImportError: {FA3_MESSAGE}")]


@pytest.mark.parametrize(("raise_", "masked"), [
    ('raise RuntimeError(f"no {name} here: {e}")', "RuntimeError: no ... here: ..."),
    ('raise RuntimeError("part one, " "part two") from e', "RuntimeError: part one, part two"),
    ('raise builtins.ImportError("x" + "y")', "ImportError: xy"),
    ("raise ImportError", "ImportError"),
    ('if e.name == "a":\n        raise errors.Missing("no a")', "errors.Missing: no a"),
    ("raise", None),
    ("raise e", None),
    ("raise ImportError(str(e)) from e", None),
], ids=["f-string", "constant-from-e", "concatenated", "class-only", "conditional-custom",
        "bare", "re-raise-name", "non-constant"])
def test_masked_message(raise_: str, masked: str | None) -> None:
    """What the user sees when a raising handler rewrites the failure (None: the original)."""
    code = events(f"try:\n    import a\nexcept ImportError as e:\n    {raise_}\n")
    assert code == [Event(Import("a"), ALWAYS, 2, masked)]


def test_raise_in_nested_def_of_handler_does_not_count() -> None:
    """A raise inside a function defined in a handler does not make the handler raise."""
    source = "try:\n    import a\nexcept ImportError:\n    def f():\n        raise\n"
    assert events(source) == [Event(Import("a"), GUARDED, 2)]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11 syntax")
def test_except_star_guards() -> None:
    """`except* ImportError:` guards like `except ImportError:`."""
    source = "try:\n    import a\nexcept* ImportError:\n    pass\n"
    assert events(source) == [Event(Import("a"), GUARDED, 2)]


def test_try_not_catching_import_failure_always() -> None:
    """A try whose handlers cannot catch a failed import (ValueError) leaves its body ALWAYS."""
    source = "try:\n    import a\nexcept (ValueError, KeyError):\n    pass\n"
    assert events(source) == [Event(Import("a"), ALWAYS, 2)]


def test_guarded_inside_masked_keeps_guard() -> None:
    """Nested tries combine: the weaker reach wins (a guarded import in a raising try)."""
    source = """\
        try:
            try:
                import a
            except ImportError:
                pass
            import b
        except ImportError:
            raise RuntimeError("b is missing")
        """
    assert events(source) == [
        Event(Import("a"), GUARDED, 3, "RuntimeError: b is missing"),
        Event(Import("b"), ALWAYS, 6, "RuntimeError: b is missing"),
    ]


@pytest.mark.parametrize("test", ["TYPE_CHECKING", "typing.TYPE_CHECKING", "t.TYPE_CHECKING",
                                  '__name__ == "__main__"'],
                         ids=["TYPE_CHECKING", "typing-TYPE_CHECKING", "alias-TYPE_CHECKING",
                              "main-guard"])
def test_branch_that_never_runs_at_import_skipped(test: str) -> None:
    """`if TYPE_CHECKING:` (and the `__main__` guard) never runs at import; its else does."""
    source = f"if {test}:\n    import a\nelse:\n    import b\n"
    assert events(source) == [Event(Import("b"), ALWAYS, 4)]


def test_not_type_checking_runs_body_only() -> None:
    """`if not TYPE_CHECKING:` runs its body, never its else."""
    source = "if not TYPE_CHECKING:\n    import a\nelse:\n    import b\n"
    assert events(source) == [Event(Import("a"), ALWAYS, 2)]


@pytest.mark.parametrize(("source", "name", "is_package", "expected"), [
    ("from . import x", "pkg.sub", True, Import("pkg.sub", ("x",))),
    ("from .m import y", "pkg.sub", True, Import("pkg.sub.m", ("y",))),
    ("from .. import y", "pkg.sub", True, Import("pkg", ("y",))),
    ("from . import x", "pkg.sub.mod", False, Import("pkg.sub", ("x",))),
    ("from .. import y", "pkg.sub.mod", False, Import("pkg", ("y",))),
    ("from ..m import y", "pkg.sub.mod", False, Import("pkg.m", ("y",))),
    ("from . import x", "pkg", True, Import("pkg", ("x",))),
], ids=["package-dot", "package-dot-module", "package-dotdot", "module-dot", "module-dotdot",
        "module-dotdot-module", "top-package-dot"])
def test_relative_import_made_absolute(source: str, name: str, is_package: bool,
                                       expected: Import) -> None:
    """Relative imports are resolved against the module's package (itself, for a package)."""
    assert events(source, name, is_package) == [Event(expected, ALWAYS, 1)]


@pytest.mark.parametrize(("source", "name", "is_package"), [
    ("from ... import x", "pkg.sub.mod", False),
    ("from .. import x", "pkg", True),
    ("from . import x", "mod", False),
], ids=["three-dots-in-two-levels", "two-dots-at-top", "dot-in-top-module"])
def test_relative_import_with_too_many_dots_skipped(source: str, name: str,
                                                    is_package: bool) -> None:
    """A relative import that leaves the top-level package is skipped."""
    assert events(source, name, is_package) == []


def test_star_import() -> None:
    """`from x import *` names `*`."""
    assert events("from sgl_kernel.allreduce import *\n") == [
        Event(Import("sgl_kernel.allreduce", ("*",)), ALWAYS, 1)]


def test_events_in_source_order() -> None:
    """Events come in the order they run: by line, then column, functions at their place."""
    source = """\
        import a
        def f():
            import b
        x = g("c"); import d
        """
    assert [e.what for e in events(source)] == [
        Import("a"), Import("b"), Call("g", ("c",)), Import("d")]


# ---------------------------------------------------------------------------------------------
# The shapes of real packages

TORCHAUDIO_UTILS = """\
    import os
    from pathlib import Path

    import torch

    _LIB_DIR = Path(__file__).parent.parent / "lib"


    def _get_lib_path(lib: str):
        suffix = "pyd" if os.name == "nt" else "so"
        return _LIB_DIR / f"{lib}.{suffix}"


    def _load_lib(lib: str) -> bool:
        path = _get_lib_path(lib)
        if not path.exists():
            return False
        torch.ops.load_library(path)
        return True
    """

TORCHAUDIO_EXTENSION = """\
    from torchaudio._internal.module_utils import is_module_available
    from .utils import _load_lib

    _IS_EXT = is_module_available("torchaudio.lib._torchaudio")
    if _IS_EXT:
        _load_lib("libtorchaudio")
        import torchaudio.lib._torchaudio
    """


def test_torchaudio_wrapper() -> None:
    """torchaudio's `_load_lib(lib)` loads the library its parameter names: a wrapper."""
    code = read(TORCHAUDIO_UTILS, "torchaudio._extension.utils")
    assert code.wrappers == (Wrapper("_load_lib", 0, TORCH_OPS),)
    assert code.events[-1] == Event(Load(TORCH_OPS, (), param=0), ON_USE, 18)


def test_torchaudio_wrapper_call() -> None:
    """torchaudio's extension package calls the wrapper with a constant, then imports the
    extension module; both always run."""
    code = read(TORCHAUDIO_EXTENSION, "torchaudio._extension", is_package=True)
    assert code.events[2:] == (
        Event(Call("is_module_available", ("torchaudio.lib._torchaudio",)), ALWAYS, 4),
        Event(Call("_load_lib", ("libtorchaudio",)), ALWAYS, 6),
        Event(Import("torchaudio.lib._torchaudio"), ALWAYS, 7),
    )
    assert code.events[1] == Event(
        Import("torchaudio._extension.utils", ("_load_lib",)), ALWAYS, 2)
    assert code.wrappers == ()


def test_torchvision_guarded_load_and_wrapper() -> None:
    """torchvision's extension: the load of `_C` is guarded by `except (ImportError, OSError)`,
    and `_load_library(lib_name)` is a wrapper."""
    source = """\
        import torch
        from ._internally_replaced_utils import _get_extension_path

        try:
            lib_path = _get_extension_path("_C")
            torch.ops.load_library(lib_path)
            _HAS_OPS = True
        except (ImportError, OSError):
            pass


        def _load_library(lib_name):
            lib_path = _get_extension_path(lib_name)
            torch.ops.load_library(lib_path)
        """
    code = read(source, "torchvision.extension")
    assert code.events[2:] == (
        Event(Call("_get_extension_path", ("_C",)), GUARDED, 5),
        Event(Load(TORCH_OPS, ("_C",)), GUARDED, 6),
        Event(Load(TORCH_OPS, (), param=0), ON_USE, 14),
    )
    assert code.wrappers == (Wrapper("_load_library", 0, TORCH_OPS),)


def test_wrapper_in_module_level_try() -> None:
    """A function defined inside a module-level `if`/`try` is still module-level."""
    source = """\
        import ctypes
        if True:
            try:
                def load(directory, name):
                    ctypes.CDLL(name)
            except ImportError:
                pass
        """
    assert read(source).wrappers == (Wrapper("load", 1, CTYPES),)


def test_method_or_nested_function_is_no_wrapper() -> None:
    """Methods and nested functions load on use but are not module-level wrappers."""
    source = """\
        import ctypes
        class Loader:
            def load(self, name):
                ctypes.CDLL(name)
        def outer():
            def inner(name):
                ctypes.CDLL(name)
        """
    code = read(source)
    assert [e.what for e in code.events[1:]] == [Load(CTYPES, (), 1), Load(CTYPES, (), 0)]
    assert code.wrappers == ()


# ---------------------------------------------------------------------------------------------
# Loads


@pytest.mark.parametrize(("source", "global_"), [
    ('import ctypes\nctypes.CDLL("libcudart.so.12", mode=ctypes.RTLD_GLOBAL)', True),
    ('import ctypes, os\nctypes.CDLL("libcudart.so.12", os.RTLD_GLOBAL | os.RTLD_NOW)', True),
    ('from ctypes import CDLL, RTLD_GLOBAL\nCDLL("libcudart.so.12", mode=RTLD_GLOBAL)', True),
    ('import ctypes\nm = ctypes.RTLD_GLOBAL\nctypes.CDLL("libcudart.so.12", mode=m)', True),
    ('import ctypes\nctypes.CDLL("libcudart.so.12")', False),
    ('import ctypes\nctypes.CDLL("libcudart.so.12", mode=ctypes.RTLD_LOCAL)', False),
], ids=["keyword", "positional-or", "from-import", "through-a-name", "default", "local"])
def test_ctypes_rtld_global(source: str, global_: bool) -> None:
    """A ctypes load with RTLD_GLOBAL in its mode is global."""
    assert events(source)[-1].what == Load(CTYPES, ("libcudart.so.12",), global_=global_)


@pytest.mark.parametrize("source", [
    'import ctypes\nctypes.CDLL("libx.so")',
    'import ctypes\nctypes.PyDLL("libx.so")',
    'import ctypes\nctypes.cdll.LoadLibrary("libx.so")',
    'import ctypes\nctypes.pydll.LoadLibrary("libx.so")',
    'from ctypes import CDLL\nCDLL("libx.so")',
    'from ctypes import CDLL as Library\nLibrary("libx.so")',
    'import ctypes as c\nc.CDLL("libx.so")',
    'from ctypes import cdll\ncdll.LoadLibrary("libx.so")',
    'from ctypes import *\nCDLL("libx.so")',
    'import ctypes.util\nctypes.CDLL(name="libx.so")',
], ids=["CDLL", "PyDLL", "cdll", "pydll", "from-import", "from-import-as", "import-as",
        "from-import-cdll", "star", "keyword"])
def test_ctypes_load_spellings(source: str) -> None:
    """Every spelling of a ctypes load is a load, as imported."""
    assert events(source)[-1] == Event(Load(CTYPES, ("libx.so",)), ALWAYS, 2)


def test_loads_through_several_star_imports() -> None:
    """Each name called as written stands for the load it is in the modules imported with
    `*`, the first of them that has it (here `torch.ops` and `torch.classes` both have
    `load_library`); a name none of them has is no load."""
    found = events('from os import *\nfrom torch.ops import *\nfrom torch.classes import *\n'
                   'from ctypes import *\nload_library("a.so")\nCDLL("b.so")\n'
                   'cdll.LoadLibrary("c.so")\nLoadLibrary("d.so")\n')
    assert [e.what for e in found if isinstance(e.what, Load)] == [
        Load(TORCH_OPS, ("a.so",)), Load(CTYPES, ("b.so",)), Load(CTYPES, ("c.so",))]


@pytest.mark.parametrize("source", [
    'CDLL("libx.so")',
    'import ctypes.util\nctypes.util.find_library("x")',
    'import mylib\nmylib.CDLL("libx.so")',
], ids=["not-imported", "find_library", "other-module"])
def test_not_a_ctypes_load(source: str) -> None:
    """A CDLL not from ctypes, or `find_library`, is not a load."""
    assert not [e for e in events(source) if isinstance(e.what, Load)]


@pytest.mark.parametrize(("source", "expected"), [
    ('import torch\ntorch.ops.load_library("lib/libx.so")', Load(TORCH_OPS, ("lib/libx.so",))),
    ('import torch\ntorch.classes.load_library("libx.so")', Load(TORCH_OPS, ("libx.so",))),
    ('import importlib\nimportlib.import_module("pkg._C")', Load(IMPORT_MODULE, ("pkg._C",))),
    ('from importlib import import_module\nimport_module("pkg._C")',
     Load(IMPORT_MODULE, ("pkg._C",))),
    ('import importlib\nimportlib.import_module("._C", package="pkg.sub")',
     Load(IMPORT_MODULE, ("pkg.sub._C",))),
    ('import importlib\nimportlib.import_module("..ext", "pkg.sub")',
     Load(IMPORT_MODULE, ("pkg.ext",))),
    ('import importlib\nimportlib.import_module("._C", __package__)',
     Load(IMPORT_MODULE, ("pkg._C",))),
    ('import importlib\nimportlib.import_module("._C")', Load(IMPORT_MODULE, ("._C",))),
    ('import importlib\nimportlib.import_module(f"pkg.{x}_ext")',
     Load(IMPORT_MODULE, ("pkg.", "_ext"))),
], ids=["torch-ops", "torch-classes", "import_module", "from-import", "package-keyword",
        "package-positional", "package-dunder", "relative-unknown-package", "f-string"])
def test_torch_and_importlib_loads(source: str, expected: Load) -> None:
    """torch and importlib loads; a constant relative module name is made absolute when its
    package is known."""
    assert events(source)[-1] == Event(expected, ALWAYS, 2)


@pytest.mark.parametrize(("source", "hints"), [
    ('os.path.join(os.path.dirname(__file__), "lib", "libx.so")', ("lib", "libx.so")),
    ('Path(__file__).parent / "lib" / f"lib{name}.so"', ("lib", ".so")),
    ('str(Path(__file__).with_name("libx.so"))', ("libx.so",)),
    ('"%s/libx.so" % base', ("%s/libx.so",)),
    ('here + "/libx.so"', ("/tmp", "/libx.so")),
    ('"{}/libx.so".format(here)', ("{}/libx.so", "/tmp")),
    ('paths["cuda"]', ("a", "b")),
    ('"a" + "b" + "a"', ("a", "b")),
], ids=["os-path-join", "pathlib-f-string", "str-of-path", "percent", "name", "format-method",
        "subscript-base", "no-duplicates"])
def test_hints(source: str, hints: tuple[str, ...]) -> None:
    """A load's hints: the string constants its argument is built from, in source order."""
    code = events(f'import ctypes\nhere = "/tmp"\npaths = ["a", "b"]\nctypes.CDLL({source})\n')
    assert code[-1].what == Load(CTYPES, hints)


def test_hints_follow_last_assignment_before_load() -> None:
    """A name stands for its last assignment before the load, in its own scope."""
    source = """\
        import ctypes
        p = "first.so"
        p = "second.so"
        ctypes.CDLL(p)
        p = "third.so"
        """
    assert events(source)[-1].what == Load(CTYPES, ("second.so",))


def test_hints_follow_module_names_from_a_function() -> None:
    """A function's load follows module-level names, and parameters by position."""
    source = """\
        import ctypes, os
        _DIR = os.path.join(os.path.dirname(__file__), "lib")
        def load(kind, name="x", *, mode=0):
            path = os.path.join(_DIR, name + ".so")
            path += ".1"
            ctypes.CDLL(path)
        """
    code = read(source)
    assert code.events[-1].what == Load(CTYPES, ("lib", ".so", ".1"), param=1)
    assert code.wrappers == (Wrapper("load", 1, CTYPES),)


def test_hints_follow_loops_and_survive_cycles() -> None:
    """A loop variable stands for what it iterates; a name assigned from itself stops."""
    source = """\
        import ctypes
        x = x + "a"
        for name in ("liba.so", "libb.so"):
            ctypes.CDLL(name + x)
        """
    assert events(source)[-1].what == Load(CTYPES, ("liba.so", "libb.so", "a"))


def test_keyword_only_parameter_is_not_positional() -> None:
    """A load that depends on a keyword-only parameter has no positional parameter."""
    source = "import ctypes\ndef load(*, name):\n    ctypes.CDLL(name)\n"
    code = read(source)
    assert (code.events[-1].what, code.wrappers) == (Load(CTYPES, ()), ())


def test_load_in_lambda_on_use() -> None:
    """A lambda's body runs on use."""
    source = 'import ctypes\nload = lambda: ctypes.CDLL("libx.so")\n'
    assert events(source)[-1] == Event(Load(CTYPES, ("libx.so",)), ON_USE, 2)


# ---------------------------------------------------------------------------------------------
# Calls


def test_call_with_constant_arguments() -> None:
    """A call of a plain or dotted name with a string constant is recorded, None for the other
    positional arguments."""
    source = 'from . import utils\nutils._load_lib("libx", n, "y", *rest, key="z")\n'
    assert events(source)[-1] == Event(Call("utils._load_lib", ("libx", None, "y", None)),
                                       ALWAYS, 2)


@pytest.mark.parametrize("source", [
    "_load_lib(name)", '_load_lib(f"lib{x}")', '_load_lib(name="libx")', "_load_lib()",
    '_load_lib("x".upper())',
], ids=["name", "f-string", "keyword", "no-arguments", "method-result"])
def test_call_without_constant_is_not_recorded(source: str) -> None:
    """A call with no positional string constant is no Call event."""
    assert events(source) == []


@pytest.mark.parametrize("source", [
    'print("x")', 'getattr(m, "x")', 'isinstance(x, "y")', 'open("f")', 'ValueError("x")',
    'logger.debug("x")', 'logging.getLogger("x")', '_LG.info("x")', 'warnings.warn("x")',
    'os.environ.get("X")', 'os.getenv("X")', '"/".join("ab")', 'p.startswith("x")',
    'name.replace("a", "b")', 're.compile("x")', 'self._load("x")', 'cls.load("x")',
    'from warnings import warn\nwarn("x")', 'import os.path as p\np.exists("a")', 'f()("x")',
], ids=["print", "getattr", "isinstance", "open", "exception", "logger", "logging", "_LG",
        "warnings", "environ-get", "getenv", "join", "startswith", "replace", "re", "self", "cls",
        "from-warnings", "stdlib-alias", "call-result"])
def test_calls_that_are_never_wrappers_skipped(source: str) -> None:
    """Builtins, loggers, string methods, the standard library and methods are not recorded."""
    assert [e for e in events(source) if isinstance(e.what, Call)] == []


def test_calls_in_headers_recorded_decorators_not() -> None:
    """Calls in headers (if tests, loop iterables, with items, match guards, class bases) run at
    import; decorators and defaults are not read."""
    source = """\
        if load("a"):
            pass
        for x in load("b"):
            pass
        with load("c"):
            pass
        match x:
            case 1 if load("d"):
                pass
        class C(base("e")):
            pass
        @register("f")
        def g(x=load("g")):
            pass
        """
    assert [(e.what, e.reach) for e in events(source)] == [
        (Call("load", (arg,)), ALWAYS) for arg in "abcd"] + [(Call("base", ("e",)), ALWAYS)]


def test_calls_in_guarded_and_function_context() -> None:
    """Calls take the reach of where they are."""
    source = """\
        try:
            _load_lib("a")
        except OSError:
            pass
        def f():
            _load_lib("b")
        """
    assert events(source) == [Event(Call("_load_lib", ("a",)), GUARDED, 2),
                              Event(Call("_load_lib", ("b",)), ON_USE, 6)]


# ---------------------------------------------------------------------------------------------
# Sources that do not parse


@pytest.mark.parametrize(("source", "problem"), [
    ("def f(:\n", "not valid Python: invalid syntax (line 1)"),
    (b"import a\x00\n", "not valid Python: source code string cannot contain null bytes"),
    ("import a\x00\n", "not valid Python: source code string cannot contain null bytes"),
    (b"\xff\xfe import a\n", "not valid Python: (unicode error)"),
], ids=["syntax-error", "nul-byte-bytes", "nul-byte-str", "not-utf8"])
def test_unparsable_source_format_error(source: str | bytes, problem: str) -> None:
    """A module that does not parse is a FormatError naming the module."""
    with pytest.raises(FormatError) as caught:
        read_module(source, "pkg.broken", False)
    assert caught.value.where == "pkg.broken"
    assert caught.value.problem.startswith(problem)


@pytest.mark.parametrize("source", [
    "x = " + "-" * 100_000 + "1\n",
    "x = " + "(" * 300 + ")" * 300 + "\n",
    "x = a" + " + a" * 100_000 + "\n",
    "import ctypes\np = 'a'" + " + 'a'" * 2_000 + "\nctypes.CDLL(p)\n",
    "import ctypes\n" + "".join(f"p{i} = p{i + 1}\n" for i in range(3_000)) + "ctypes.CDLL(p0)\n",
    "".join(" " * i + "if x:\n" for i in range(99)) + " " * 99 + "import a\n",
    "x = " + "f(" * 150 + ")" * 150 + "\n",
    "x = " + "lambda: " * 2_000 + 'f("a")\n',
    "".join(" " * i + "def f():\n" for i in range(99)) + " " * 99 + "import a\n",
], ids=["unary-chain", "parentheses", "binop-chain", "long-sum-into-load", "long-name-chain",
        "nested-ifs", "nested-calls", "nested-lambdas", "nested-defs"])
def test_deep_nesting_does_not_crash(source: str) -> None:
    """Pathological nesting gives a result or a FormatError, never a RecursionError."""
    try:
        code = read_module(source, "pkg.deep", False)
    except FormatError as e:
        assert e.where == "pkg.deep"
    else:
        assert code.name == "pkg.deep"


# ---------------------------------------------------------------------------------------------
# Every module of an installed environment


def installed_modules(limit: int = 3000) -> list[tuple[str, bool, Path]]:
    """(dotted name, is a package, path) of the modules of this environment's site-packages."""
    found: list[tuple[str, bool, Path]] = []
    for site in sorted(Path(sys.prefix).glob("lib/python3*/site-packages")):
        for path in sorted(site.rglob("*.py")):
            parts = path.relative_to(site).with_suffix("").parts
            package = parts[-1] == "__init__"
            found.append((".".join(parts[:-1] if package else parts), package, path))
    return found[:limit]


def test_reads_every_installed_module() -> None:
    """Every module of this environment's site-packages reads, or is a FormatError only where
    the interpreter's own parser rejects it too."""
    paths = installed_modules()
    assert len(paths) > 500
    start, read_, events_ = time.perf_counter(), 0, 0
    for name, package, path in paths:
        source = path.read_bytes()
        try:
            code = read_module(source, name, package)
        except FormatError:
            with pytest.raises((SyntaxError, ValueError, RecursionError, MemoryError)):
                ast.parse(source)
            continue
        assert [e.line for e in code.events] == sorted(e.line for e in code.events)
        read_ += 1
        events_ += len(code.events)
    print(f"read {read_} of {len(paths)} modules, {events_} events, "
          f"{time.perf_counter() - start:.2f}s")


def test_compile_error_says_what_python_raises() -> None:
    """What compiling a module raises under a version of CPython, as a traceback's last line;
    None where it compiles, or where this interpreter cannot tell (a newer grammar)."""
    import sys

    from abifit.formats.pysource import compile_error

    ours = sys.version_info[:2]
    assert compile_error(b"x = 1\n", ours) is None
    assert compile_error(b"def (:\n", ours) == "SyntaxError: invalid syntax"
    assert compile_error(b"return 1\n", ours) == "SyntaxError: 'return' outside function"
    assert compile_error(b"if x:\npass\n", ours).startswith("IndentationError: ")  # type: ignore[union-attr]
    assert compile_error(b"match x:\n    case 1:\n        pass\n", (3, 9)) is not None
    assert compile_error(b"match x:\n    case 1:\n        pass\n", ours) is None
    assert compile_error(b"def (:\n", (3, 99)) is None
