"""What a Python module does to the process when it is imported, read from its source alone.

Package code loads native code in three ways: it imports modules (some of them extension
modules), it loads libraries itself (`ctypes.CDLL`, `ctypes.cdll.LoadLibrary`, `ctypes.PyDLL`,
`torch.ops.load_library`, `torch.classes.load_library`), and it imports modules by name
(`importlib.import_module("pkg._ext")`). `read_module` finds each of these in a module's source
with `ast`, never executing it, in the order the statements run, and says how sure each one is
to run when the module is imported (`Reach`):

- `ALWAYS`: at module level (also inside `if`, `with`, `for` and class bodies, and inside a `try`
  whose handlers do not catch its failure);
- `GUARDED`: inside a `try` whose handler catches `ImportError`, `ModuleNotFoundError`,
  `OSError`, `Exception`, `BaseException` (or a bare `except:`) and does not raise again;
- `ON_USE`: inside a function or method body: it runs only when the function is called.

A handler that raises (`raise`, or `raise ImportError("...")`) does not guard: the import still
fails, with the handler's exception; `Event.masked` records the user-visible text when the
handler raises a new exception of a known type with a constant message. Statements under
`if TYPE_CHECKING:` never run and are skipped.

What a load loads is rarely a constant: torchaudio calls `_load_lib("libtorchaudio")`, whose
body builds `_LIB_DIR / f"{lib}.so"` and calls `torch.ops.load_library(path)`. So a load keeps
the string constants its argument is built from (`hints`), following local names to the
expression assigned to them, and a function whose load depends on one of its parameters is a
`Wrapper`; a call of a wrapper with constant arguments is recorded as a `Call`, which the
simulation (`abifit.sim.imports`) resolves to a load, across modules too.

Pure: text in, frozen values out. A module that does not parse is a `FormatError`.
"""

from __future__ import annotations

import ast
import builtins
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import cast

from abifit.errors import FormatError


class Reach(Enum):
    """How sure a statement is to run when its module is imported, surest first."""

    ALWAYS = "always"
    GUARDED = "guarded"
    ON_USE = "on-use"

    def __lt__(self, other: Reach) -> bool:
        order = (Reach.ALWAYS, Reach.GUARDED, Reach.ON_USE)
        return order.index(self) < order.index(other)

    def weaker(self, other: Reach) -> Reach:
        """The less sure of two (a guarded import inside an on-use function: on use)."""
        return max(self, other)


class LoadKind(Enum):
    """How package code loads a library or module itself."""

    CTYPES = "ctypes"  # ctypes.CDLL / cdll.LoadLibrary / PyDLL / CDLL(...) after from-import
    TORCH_OPS = "torch.ops.load_library"  # also torch.classes.load_library
    IMPORT_MODULE = "importlib.import_module"


@dataclass(frozen=True, slots=True)
class Import:
    """`import a.b.c` (module "a.b.c", names ()) or `from a.b import c, d` (module "a.b",
    names ("c", "d")); relative imports are made absolute."""

    module: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Load:
    """A library or module loaded by package code; `hints` are the string constants its
    argument is made of (`("libtorchaudio", ".so")`, `("/", "lib", "_C")`), `param` the index of
    the enclosing function's parameter the argument depends on (None: none)."""

    kind: LoadKind
    hints: tuple[str, ...]
    param: int | None = None
    global_: bool = False  # ctypes mode=RTLD_GLOBAL


@dataclass(frozen=True, slots=True)
class Call:
    """A call of a function by a name that may be a wrapper (`_load_lib("libtorchaudio")`):
    `function` is the called name as written (`_load_lib`, `utils._load_lib`), `args` the
    positional arguments that are string constants (None where not constant)."""

    function: str
    args: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class Event:
    """One thing a module does when imported, in the order it happens."""

    what: Import | Load | Call
    reach: Reach
    line: int
    masked: str | None = None  # what the user sees when it fails: "ImportError: Can not ..."


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A module-level function whose body loads a library named by one of its parameters."""

    name: str
    param: int
    kind: LoadKind


@dataclass(frozen=True, slots=True)
class ModuleCode:
    """What importing one module does: its events in order, and the wrappers it defines."""

    name: str
    events: tuple[Event, ...]
    wrappers: tuple[Wrapper, ...]


def compile_error(source: bytes, version: tuple[int, int]) -> str | None:
    """What CPython `version` raises compiling `source`, as its traceback's last line shows it
    (`SyntaxError: invalid syntax`); None when it compiles, and when this interpreter cannot
    tell: a newer version's grammar, text that this version refuses otherwise than with a
    SyntaxError (NUL bytes). An older version's grammar is asked of this parser
    (`feature_version`), which may pass code the older one refuses, never the reverse; the
    compiler's own checks (`return` outside a function) only for this version."""
    if version > sys.version_info[:2]:
        return None
    try:
        if version == sys.version_info[:2]:
            compile(source, "<module>", "exec", dont_inherit=True)
        else:
            ast.parse(source, feature_version=version)
    except SyntaxError as e:  # IndentationError and TabError too
        return f"{type(e).__name__}: {e.msg}"
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def read_module(source: str | bytes, name: str, is_package: bool) -> ModuleCode:
    """The events and wrappers of module `name` (`is_package`: its file is `__init__.py`, which
    changes what relative imports mean). Raises FormatError when the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        at = f" (line {e.lineno})" if e.lineno else ""
        raise FormatError(name, f"not valid Python: {e.msg}{at}") from e
    except ValueError as e:  # NUL bytes (Python 3.11), text that is not UTF-8
        raise FormatError(name, f"not valid Python: {e}") from e
    except (RecursionError, MemoryError) as e:  # the parser's stack, on pathological nesting
        raise FormatError(name, "not valid Python: nested too deeply to parse") from e
    package = name if is_package else name.rpartition(".")[0]
    reader = _Reader(name, package, tree)
    reader.body(tree.body, _Context(Reach.ALWAYS, None, _Scope("module", tree.body), None))
    return reader.result()


# ---------------------------------------------------------------------------------------------
# What the module calls

_LOADS = {
    "ctypes.CDLL": LoadKind.CTYPES,
    "ctypes.PyDLL": LoadKind.CTYPES,
    "ctypes.cdll.LoadLibrary": LoadKind.CTYPES,
    "ctypes.pydll.LoadLibrary": LoadKind.CTYPES,
    "torch.ops.load_library": LoadKind.TORCH_OPS,
    "torch.classes.load_library": LoadKind.TORCH_OPS,
    "importlib.import_module": LoadKind.IMPORT_MODULE,
}
_ARGUMENT = {LoadKind.CTYPES: "name", LoadKind.TORCH_OPS: "path",
             LoadKind.IMPORT_MODULE: "name"}  # the keyword of the first parameter
_CATCHING = frozenset(f"{prefix}{kind}" for prefix in ("", "builtins.") for kind in (
    "ImportError", "ModuleNotFoundError", "OSError", "EnvironmentError", "IOError", "Exception",
    "BaseException"))  # handlers of these catch a failed import or library load
_BUILTINS = frozenset(dir(builtins))
_LOGGERS = frozenset({"logger", "logging", "log", "lg", "warnings"})  # lowercased, less "_"
_COMMON_METHODS = frozenset({
    "startswith", "endswith", "split", "rsplit", "join", "replace", "format", "strip", "lstrip",
    "rstrip", "partition", "rpartition", "find", "rfind", "index", "count", "encode", "decode",
    "get", "setdefault", "pop"})  # str and dict methods: called with strings, never wrappers
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # fields that hold blocks
_CLAUSES = (ast.ExceptHandler, ast.match_case)  # the block is their body
_LEAVES = (ast.Constant, ast.Name, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop,
           ast.boolop, ast.stmt)  # no call below (statements are read as statements)
_DEPTH = 50  # how deep hints and messages follow an expression (operands, names, calls)


_NOT_NODES = frozenset({"id", "attr", "arg", "name", "module", "level", "conversion",
                        "is_async", "kind", "type_comment", "simple", "ctx", "op"})
_LEAF_TYPES = frozenset({type(None), str, int, *(
    kind for kind in vars(ast).values()
    if isinstance(kind, type) and issubclass(kind, _LEAVES))})  # exact types: no subclasses


_BRANCH_FIELDS: dict[type, tuple[str, ...]] = {}


def _branch_fields(kind: type) -> tuple[str, ...]:
    """The fields of an AST node type that may hold nodes below it: not names, numbers,
    contexts or operators (kept in `_BRANCH_FIELDS`)."""
    fields = tuple(name for name in getattr(kind, "_fields", ()) if name not in _NOT_NODES)
    _BRANCH_FIELDS[kind] = fields
    return fields


def _dotted(expr: ast.expr) -> str | None:
    """`a.b.c` for a name or a chain of attributes of a name, else None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


def _string(expr: ast.expr) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """The absolute name of `from {"." * level}{module} import ...` in `package` (None: more
    dots than the package has parts)."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level > len(parts):
        return None
    base = parts[: len(parts) - level + 1]
    return ".".join([*base, module] if module else base)


def _blocks(node: ast.stmt) -> list[ast.stmt]:
    """The statements of the blocks nested in a statement, in source order."""
    return [inner for name in _BLOCKS for block in getattr(node, name, ())
            for inner in (block.body if isinstance(block, _CLAUSES) else [block])]


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, in no particular order."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        stack += _blocks(node)


def _aliases(tree: ast.Module, package: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """What each imported name stands for (`c` -> `ctypes`, `CDLL` -> `ctypes.CDLL`), and the
    modules imported with `*`; wherever the import is."""
    names: dict[str, str] = {}
    stars: list[str] = []
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.partition(".")[0]
                names[alias.asname or head] = alias.name if alias.asname else head
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node.module, node.level, package)
            for alias in node.names if module is not None else ():
                if alias.name == "*":
                    stars.append(f"{module}")
                else:
                    names[alias.asname or alias.name] = f"{module}.{alias.name}"
    return names, tuple(stars)


# ---------------------------------------------------------------------------------------------
# Names and what is assigned to them


@dataclass(eq=False, slots=True)
class _Scope:
    """The names a module, class or function body assigns (read when first asked: most
    modules load nothing), and a function's parameters."""

    kind: str  # "module", "class" or "function"
    body: list[ast.stmt]
    parent: _Scope | None = None
    owner: ast.AST | None = None  # the function whose parameters these are
    params: dict[str, int | None] = field(default_factory=dict)  # None: not positional
    _bound: dict[str, list[_Binding]] | None = None

    @property
    def bound(self) -> dict[str, list[_Binding]]:
        """The assignments to each name, by end position."""
        if self._bound is None:
            self._bound = _assigned(self)
        return self._bound

    def enclosing(self) -> _Scope | None:
        """The next scope a name is looked up in (a function's names skip class bodies)."""
        outer = self.parent
        while outer is not None and outer.kind == "class":
            outer = outer.parent
        return outer


@dataclass(frozen=True, eq=False, slots=True)
class _Binding:
    """`name = value`, ending at `end` (line, column), in `scope`."""

    end: tuple[int, int]
    value: ast.expr
    scope: _Scope


_NEW_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _assigned(scope: _Scope) -> dict[str, list[_Binding]]:
    """What the statements of a scope's body assign, nested scopes left out."""
    bound: dict[str, list[_Binding]] = {}
    stack: list[ast.AST] = list(scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _NEW_SCOPES):
            continue
        for target, value, end in _assignments(node):
            bound.setdefault(target, []).append(_Binding(end, value, scope))
        stack.extend(ast.iter_child_nodes(node))
    for bindings in bound.values():
        bindings.sort(key=lambda b: b.end)
    return bound


def _assignments(node: ast.AST) -> list[tuple[str, ast.expr, tuple[int, int]]]:
    """(name, value, end of the assignment) of what `node` assigns to plain names."""
    if isinstance(node, ast.Assign):
        pairs = [p for target in node.targets for p in _pairs(target, node.value)]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        pairs = _pairs(node.target, node.value)
    elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        before = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
        pairs = [(node.target.id, ast.BinOp(before, node.op, node.value))]
    elif isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.iter, _end(node.iter))]  # the loop body sees it
    elif isinstance(node, ast.NamedExpr):
        pairs = [(node.target.id, node.value)]
    else:
        return []
    return [(target, value, _end(node)) for target, value in pairs]


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v)]
    return []


def _end(node: ast.expr | ast.stmt) -> tuple[int, int]:
    return node.end_lineno or node.lineno, node.end_col_offset or 0


def _parameters(args: ast.arguments) -> dict[str, int | None]:
    """A function's parameters: positional ones by index, the others None."""
    named: dict[str, int | None] = {a.arg: None for a in args.kwonlyargs}
    named.update({a.arg: None for a in (args.vararg, args.kwarg) if a is not None})
    named.update({a.arg: i for i, a in enumerate([*args.posonlyargs, *args.args])})
    return named


_Param = tuple[_Scope, int]


def _lookup(scope: _Scope, name: str, at: tuple[int, int]) -> _Binding | _Param | None:
    """What `name`, used at `at` in `scope`, stands for: the last assignment before the use
    (in its own scope; the last one at all in an enclosing scope), or a parameter."""
    bound = scope.bound.get(name, [])
    before = [b for b in bound if b.end <= at]
    if before:
        return before[-1]
    if name in scope.params:
        index = scope.params[name]
        return None if index is None else (scope, index)
    if bound:
        return bound[0]
    outer = scope.enclosing()
    while outer is not None:
        if name in outer.bound:
            return outer.bound[name][-1]
        if name in outer.params:
            index = outer.params[name]
            return None if index is None else (outer, index)
        outer = outer.enclosing()
    return None


def _operands(expr: ast.expr) -> list[ast.expr]:
    """The parts of an expression that a string built from it is built from."""
    if isinstance(expr, ast.Call):
        base = [expr.func.value] if isinstance(expr.func, ast.Attribute) else []
        return [*base, *expr.args, *(k.value for k in expr.keywords)]
    if isinstance(expr, ast.BinOp):
        return [expr.left, expr.right]
    if isinstance(expr, ast.IfExp):
        return [expr.body, expr.orelse]
    if isinstance(expr, (ast.BoolOp, ast.JoinedStr)):
        return list(expr.values)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return list(expr.elts)
    if isinstance(expr, (ast.FormattedValue, ast.Attribute, ast.Subscript, ast.Starred)):
        return [expr.value]
    return []


class _Hints:
    """The string constants an expression is built from, in source order, and the first
    parameter of a function it depends on."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.param: _Param | None = None
        self._followed: set[int] = set()  # bindings already read (cycles, shared names)

    def read(self, expr: ast.expr, scope: _Scope, depth: int = 0) -> None:
        """Add what `expr`, in `scope`, is built from."""
        if depth > _DEPTH:
            return
        text = _string(expr)
        if text is not None and text not in self.found:
            self.found.append(text)
        elif isinstance(expr, ast.Name):
            meaning = _lookup(scope, expr.id, (expr.lineno, expr.col_offset))
            if isinstance(meaning, _Binding) and id(meaning) not in self._followed:
                self._followed.add(id(meaning))
                self.read(meaning.value, meaning.scope, depth + 1)
            elif isinstance(meaning, tuple) and self.param is None:
                self.param = meaning
        for part in _operands(expr):
            self.read(part, scope, depth + 1)


def _rtld_global(expr: ast.expr, scope: _Scope, depth: int = 0) -> bool:
    """Whether a `mode=` expression includes RTLD_GLOBAL (through names assigned it)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == "RTLD_GLOBAL":
            return True
        if isinstance(node, ast.Name):
            meaning = _lookup(scope, node.id, (node.lineno, node.col_offset))
            if node.id == "RTLD_GLOBAL" or (
                    depth < 3 and isinstance(meaning, _Binding)
                    and _rtld_global(meaning.value, meaning.scope, depth + 1)):
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Handlers


def _catches_load_failure(kind: ast.expr | None) -> bool:
    """Whether `except kind:` catches a failed import or library load."""
    if kind is None:
        return True
    kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(_dotted(k) in _CATCHING for k in kinds)


def _first_raise(body: list[ast.stmt]) -> ast.Raise | None:
    """The first `raise` in a block, nested blocks included, nested definitions not."""
    for node in body:
        if isinstance(node, ast.Raise):
            return node
        found = None if isinstance(node, _NEW_SCOPES) else _first_raise(_blocks(node))
        if found is not None:
            return found
    return None


def _message(node: ast.Raise, caught_as: str | None) -> str | None:
    """What the user sees of `raise X("text")` ("X: text"); None for a re-raise or a message
    that is not a constant."""
    exc = node.exc
    if isinstance(exc, ast.Call):
        kind = _dotted(exc.func)
        text = _text(exc.args[0]) if exc.args else ""
        if kind is None or text is None:
            return None
        kind = kind.removeprefix("builtins.")
        return f"{kind}: {text}" if text else kind
    if isinstance(exc, ast.Name) and exc.id != caught_as and exc.id in _BUILTINS:
        return exc.id  # `raise ImportError`
    return None


def _text(expr: ast.expr, depth: int = 0) -> str | None:
    """A message's text: constants, f-strings (`...` for each formatted part) and their sums."""
    if depth > _DEPTH:
        return None
    if isinstance(expr, ast.JoinedStr):
        return "".join(_string(v) or "" if isinstance(v, ast.Constant) else "..."
                       for v in expr.values)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _text(expr.left, depth + 1), _text(expr.right, depth + 1)
        return None if left is None or right is None else left + right
    return _string(expr)


def _branches(test: ast.expr) -> tuple[bool, bool]:
    """Whether the body and the else of `if test:` can run at import (`TYPE_CHECKING` and
    `__name__ == "__main__"` are false then)."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    name = _dotted(inner)
    false = (name is not None and name.rpartition(".")[2] == "TYPE_CHECKING") or (
        isinstance(inner, ast.Compare) and _dotted(inner.left) == "__name__"
        and len(inner.comparators) == 1 and isinstance(inner.ops[0], ast.Eq)
        and _string(inner.comparators[0]) == "__main__")
    if not false:
        return True, True
    return (True, False) if negated else (False, True)


# ---------------------------------------------------------------------------------------------
# Reading the statements in order


@dataclass(frozen=True, slots=True)
class _Context:
    """Where a statement stands: how sure it is to run, the error a handler turns its failure
    into, its scope, and the module-level function it is in."""

    reach: Reach
    masked: str | None
    scope: _Scope
    top: ast.FunctionDef | ast.AsyncFunctionDef | None


class _Reader:
    """The events of one module, in the order its statements run."""

    def __init__(self, name: str, package: str, tree: ast.Module) -> None:
        self.name = name
        self.package = package
        self.aliases, self.stars = _aliases(tree, package)
        # what a name called as written stands for through `from m import *`: the first such m
        self.starred: dict[str, str] = {}
        for module in self.stars:
            for load in _LOADS:
                if load.startswith(module + "."):
                    self.starred.setdefault(load[len(module) + 1:], load)
        self.events: list[tuple[int, int, int, Event]] = []
        self.wrappers: list[Wrapper] = []

    def result(self) -> ModuleCode:
        self.events.sort(key=lambda e: e[:3])
        return ModuleCode(self.name, tuple(e[3] for e in self.events),
                          tuple(dict.fromkeys(self.wrappers)))

    def add(self, node: ast.stmt | ast.expr, what: Import | Load | Call, reach: Reach,
            masked: str | None) -> None:
        event = Event(what, reach, node.lineno, masked)
        self.events.append((node.lineno, node.col_offset, len(self.events), event))

    def body(self, statements: list[ast.stmt], ctx: _Context) -> None:
        for statement in statements:
            self.statement(statement, ctx)

    def statement(self, node: ast.stmt, ctx: _Context) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imports(node, ctx)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node, ctx)
        elif isinstance(node, ast.ClassDef):
            self.expressions([*node.bases, *node.keywords], ctx)
            self.body(node.body, replace(ctx, scope=_Scope("class", node.body, ctx.scope)))
        elif isinstance(node, ast.If):
            self.expressions([node.test], ctx)
            body, orelse = _branches(node.test)
            self.body(node.body if body else [], ctx)
            self.body(node.orelse if orelse else [], ctx)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":  # 3.11's except*
            self.attempt(cast(ast.Try, node), ctx)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            exc = node.exc  # making the exception is no call of a wrapper
            self.expressions([*exc.args, *exc.keywords, *([node.cause] if node.cause else [])],
                             ctx)
        else:  # a simple statement; or a loop, with or match: its headers, then its blocks
            self.expressions([c for c in ast.iter_child_nodes(node)
                              if not isinstance(c, (ast.stmt, ast.match_case))], ctx)
            guards = [c.guard for c in node.cases if c.guard] if isinstance(node, ast.Match) else []
            self.expressions(guards, ctx)
            self.body(_blocks(node), ctx)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Context) -> None:
        """A function's body runs when it is called (decorators and defaults are not read)."""
        scope = _Scope("function", node.body, ctx.scope, node, _parameters(node.args))
        top = node if ctx.scope.kind == "module" else ctx.top
        self.body(node.body, _Context(Reach.ON_USE, None, scope, top))

    def imports(self, node: ast.Import | ast.ImportFrom, ctx: _Context) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.add(node, Import(alias.name), ctx.reach, ctx.masked)
            return
        module = _absolute(node.module, node.level, self.package)
        if module is not None:
            names = tuple(alias.name for alias in node.names)
            self.add(node, Import(module, names), ctx.reach, ctx.masked)

    def attempt(self, node: ast.Try, ctx: _Context) -> None:
        """A try statement: its body guarded or masked by the handlers; the handlers run only
        after a failure, so they are guarded themselves."""
        self.body(node.body, _guarded(ctx, node.handlers))
        fallback = replace(ctx, reach=ctx.reach.weaker(Reach.GUARDED))
        for handler in node.handlers:
            self.body(handler.body, fallback)
        self.body(node.orelse, ctx)
        self.body(node.finalbody, ctx)

    def expressions(self, nodes: Sequence[ast.AST], ctx: _Context) -> None:
        """The calls in expressions (lambda bodies run on use)."""
        stack = [(node, ctx) for node in nodes]
        while stack:
            node, here = stack.pop()
            kind = type(node)
            if kind is ast.Lambda:
                lambda_ = cast(ast.Lambda, node)
                on_use = replace(here, reach=Reach.ON_USE, masked=None)
                stack += [(lambda_.args, here), (lambda_.body, on_use)]
                continue
            if kind is ast.Call:
                self.call(cast(ast.Call, node), here)
            fields = _BRANCH_FIELDS.get(kind)
            for name in _branch_fields(kind) if fields is None else fields:
                # ast.iter_child_nodes, without the leaves
                value = getattr(node, name, None)
                if type(value) is list:
                    stack += [(v, here) for v in value if type(v) not in _LEAF_TYPES
                              and isinstance(v, ast.AST)]
                elif type(value) not in _LEAF_TYPES and isinstance(value, ast.AST):
                    stack.append((value, here))

    def call(self, node: ast.Call, ctx: _Context) -> None:
        written = _dotted(node.func)
        if written is None:
            return
        canonical = self.canonical(written)
        kind = _LOADS.get(canonical)
        if kind is not None:
            self.load(node, kind, ctx)
            return
        args = tuple(_string(arg) for arg in node.args)
        if any(arg is not None for arg in args) and _may_wrap(written, canonical):
            self.add(node, Call(written, args), ctx.reach, ctx.masked)

    def canonical(self, written: str) -> str:
        """The dotted name a called name stands for, through the module's imports."""
        head, dot, rest = written.partition(".")
        if head in self.aliases:
            return self.aliases[head] + dot + rest
        return self.starred.get(written, written)

    def load(self, node: ast.Call, kind: LoadKind, ctx: _Context) -> None:
        arg = node.args[0] if node.args else _keyword(node, _ARGUMENT[kind])
        hints = _Hints()
        module = self.module_name(node, arg) if kind is LoadKind.IMPORT_MODULE else None
        if arg is not None and module is None:
            hints.read(arg, ctx.scope)
        modes = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "mode")]
        global_ = kind is LoadKind.CTYPES and any(_rtld_global(m, ctx.scope) for m in modes)
        param = hints.param[1] if hints.param else None
        found = (module,) if module is not None else tuple(hints.found)
        self.add(node, Load(kind, found, param, global_), ctx.reach, ctx.masked)
        if hints.param is not None and ctx.top is not None and hints.param[0].owner is ctx.top:
            self.wrappers.append(Wrapper(ctx.top.name, hints.param[1], kind))

    def module_name(self, node: ast.Call, arg: ast.expr | None) -> str | None:
        """The module `importlib.import_module(arg, package)` imports, when it is constant
        (a relative name made absolute when the package is known)."""
        name = _string(arg) if arg is not None else None
        if name is None or not name.startswith("."):
            return name
        package = _keyword(node, "package") or (node.args[1] if len(node.args) > 1 else None)
        known = {"__package__": self.package, "__name__": self.name}
        base = _string(package) if package is not None else None
        if isinstance(package, ast.Name):
            base = known.get(package.id)
        level = len(name) - len(name.lstrip("."))
        absolute = _absolute(name[level:] or None, level, base) if base else None
        return absolute or name


def _guarded(ctx: _Context, handlers: list[ast.ExceptHandler]) -> _Context:
    """The context of a try body: guarded when a handler that catches a failed load goes on,
    masked when every such handler raises."""
    catching = [h for h in handlers if _catches_load_failure(h.type)]
    if not catching:
        return ctx
    raises = [_first_raise(h.body) for h in catching]
    if any(r is None for r in raises):
        return replace(ctx, reach=ctx.reach.weaker(Reach.GUARDED))
    first = raises[0]
    masked = _message(first, catching[0].name) if first is not None else None
    return replace(ctx, masked=masked or ctx.masked)


def _may_wrap(written: str, canonical: str) -> bool:
    """Whether a call with strings may be a call of a wrapper: not a builtin, a logger, a
    string method or the standard library."""
    head = written.partition(".")[0]
    if head in ("self", "cls") or head.lower().strip("_") in _LOGGERS:
        return False
    if "." not in written and written in _BUILTINS:
        return False
    if "." in written and written.rpartition(".")[2] in _COMMON_METHODS:
        return False
    return canonical.partition(".")[0] not in sys.stdlib_module_names
