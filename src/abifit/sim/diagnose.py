"""Load problems -> findings a person can act on: what fails, the derivation, and a fix.

Pure: the facts it needs beyond the loader's result (which package owns a file, the definitions
in scope, where else a library exists) arrive through a `Context`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from abifit.sim.findings import Finding, FindingKind, NearestDefinition, SearchStep
from abifit.sim.loader import LoadProblem, ProblemKind, Resolution, crashes

if TYPE_CHECKING:
    from abifit.formats.demangle import SignatureDiff


INDEX_FIX = "From the index: "  # what begins the paragraph of a wheel `library_fix` found


@dataclass(frozen=True, slots=True)
class Context:
    """What diagnosis may ask about the machine, supplied by the caller."""

    owner: Callable[[str], str | None]
    exports: Callable[[str], Collection[str]]
    versions_defined: Callable[[str], tuple[str, ...]]
    locate: Callable[[str], tuple[str, ...]]
    pip_package: Callable[[str], str | None]
    rebuild_hint: Callable[[str, str], str | None] = lambda _obj, _provider: None
    # (soname, the object needing it) -> (hint, explanation) from the wheels on the index that
    # ship the soname; hint None when none was found (the explanation says why); a fix from a
    # wheel found begins with `INDEX_FIX` and ends the finding's explanation
    library_fix: Callable[[str, str], tuple[str | None, str] | None] = lambda _s, _o: None
    # what is known of a name's history ("introduced in CPython 3.12"), when anything is
    symbol_note: Callable[[str], str | None] = lambda _s: None
    # where the libraries are, in the words of a hint: this machine, a preset, a profile
    where: str = "here"


def _label(path: str, ctx: Context) -> str:
    owner = ctx.owner(path)
    return f"{path} ({owner})" if owner else path


def _trace(resolution: Resolution | None) -> tuple[SearchStep, ...]:
    if resolution is None:
        return ()
    return tuple(SearchStep(a.path, a.via.value, a.owner, a.outcome)
                 for a in resolution.attempts)


def _definition(diff: SignatureDiff, path: str, ctx: Context) -> NearestDefinition:
    return NearestDefinition(diff.new.mangled, diff.new.text, path, ctx.owner(path),
                             diff.same_function, tuple(diff.differences()), diff.describe())


FAILS = "the import fails"  # what a problem leads to, unless the caller knows better
OPTIONAL = "it does not load"  # ... for a module package code does without


def diagnose(problem: LoadProblem, module: str | None, ctx: Context, deep: bool = True,
             outcome: str = FAILS) -> Finding:
    """The finding for one load problem; `deep` searches the scope for nearest definitions;
    `outcome` ends the derivation ("..., the import fails.")."""
    if problem.kind is ProblemKind.UNDEFINED_SYMBOL:
        return _undefined_symbol(problem, module, ctx, deep, outcome)
    if problem.kind is ProblemKind.MISSING_VERSION:
        return _missing_version(problem, module, ctx, outcome)
    if problem.kind is ProblemKind.NUMPY_C_API:
        return _numpy_c_api(problem, module, ctx, outcome)
    return _missing_library(problem, module, ctx, outcome)


def _numpy_c_api(problem: LoadProblem, module: str | None, ctx: Context,
                 outcome: str) -> Finding:
    """A module that loads and whose import raises, beside this NumPy (`sim.numpyabi`):
    `version` holds the NumPy it needs, `library` the running NumPy's release, `detail` the
    reason and what is printed before the error."""
    reason, printed = (*problem.detail, "", "")[:2]
    owner = ctx.owner(problem.object)
    lines = [f"Because {_label(problem.object, ctx)} uses NumPy's C API and {reason}, "
             f"{outcome if outcome == FAILS else 'its import raises'}."]
    if printed:
        lines.append(f"Printed first: {printed}")
    lines.append(f"The import raises: {problem.message}")
    package = owner.split()[0] if owner else "the package"
    hint = (f"`pip install '{problem.version}'`, or a release of {package} built for numpy "
            f"{problem.library}")
    return Finding(kind=FindingKind.NUMPY_C_API, object=problem.object, message=problem.message,
                   explanation="\n".join(lines), module=module, library="numpy",
                   version=problem.version, hint=hint)


def _demangled(symbol: str) -> str | None:
    """The demangled text of a C++ symbol; None for a C name."""
    from abifit.formats.demangle import (
        demangle,  # ctypes and libstdc++ only when a symbol is explained
    )

    text = demangle(symbol)
    return text if text != symbol else None


def _undefined_symbol(
    problem: LoadProblem, module: str | None, ctx: Context, deep: bool, outcome: str
) -> Finding:
    from abifit.formats.demangle import nearest

    symbol = problem.symbol or ""
    scope = [p for p in problem.scope if p != problem.object]
    where: dict[str, str] = {}
    near: list[SignatureDiff] = []
    if deep:
        for path in scope:
            for diff in nearest(symbol, ctx.exports(path), limit=3):
                if diff.new.mangled != symbol and diff.new.mangled not in where:
                    where[diff.new.mangled] = path
                    near.append(diff)
        near = sorted(near, key=lambda d: (not d.same_function, d.change_count))[:3]
    holder = next((p for p in scope if symbol in ctx.exports(p)), None)
    demangled = _demangled(symbol)
    lines = [
        f"Because {_label(problem.object, ctx)} needs `{demangled or symbol}`"
        + (f" at version {problem.version}" if problem.version else "")
        + f" and none of the {len(problem.scope)} objects in its lookup scope defines it, "
        + (f"{outcome} even once {_joined(problem.behind)} {_is(problem.behind)} found "
           f"(counted in the scope: {_joined(problem.stand_ins)})." if problem.behind
           else f"{outcome}.")
    ]
    note = ctx.symbol_note(symbol)
    if note is not None:
        lines.append(f"{symbol}: {note}.")
    if holder is not None and problem.version is not None:
        lines.append(f"{holder} defines that name, but not at version {problem.version}.")
    for diff in near:
        lines.append(f"Nearest definition, in {_label(where[diff.new.mangled], ctx)}: "
                     f"`{diff.new.text}` — {diff.describe()}.")
        if diff.string_abi_changed:
            lines.append("The std::string ABIs differ: one side was built with "
                         "-D_GLIBCXX_USE_CXX11_ABI=0 (the old ABI), the other with the cxx11 ABI.")
    hint = ctx.rebuild_hint(problem.object, where[near[0].new.mangled]) if near else None
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        explanation="\n".join(lines), module=module, symbol=symbol, version=problem.version,
        hint=hint, nearest=tuple(_definition(d, where[d.new.mangled], ctx) for d in near),
        behind=problem.behind, demangled=demangled,
    )


def _joined(items: Iterable[str]) -> str:
    listed = list(items)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} and {listed[-1]}"


def _is(items: Collection[str]) -> str:
    return "is" if len(items) == 1 else "are"


_VERSION_NUMBER = re.compile(r"^([A-Za-z_]+?)_?(\d+(?:\.\d+)*)$")


def newest_version(names: Iterable[str], like: str) -> str | None:
    """The newest of `names` in the same family as `like` (GLIBCXX_3.4.30 -> GLIBCXX_3.4.*)."""
    wanted = _VERSION_NUMBER.match(like)
    if wanted is None:
        return None
    family = wanted.group(1)
    best: tuple[tuple[int, ...], str] | None = None
    for name in names:
        m = _VERSION_NUMBER.match(name)
        if m is None or m.group(1) != family:
            continue
        key = tuple(int(x) for x in m.group(2).split("."))
        if best is None or key > best[0]:
            best = (key, name)
    return best[1] if best else None


def newest_sentence(newest: str) -> str:
    """The sentence of a missing version's explanation that names the newest version of its
    family the library defines (a report that shows `Finding.newest` apart leaves it out)."""
    return f"The newest {newest.split('_')[0]} version it defines is {newest}."


def _release(version: str) -> tuple[int, ...]:
    """GLIBC_2.35 -> (2, 35)."""
    return tuple(int(x) for x in version.split("_", 1)[1].split(".") if x.isdigit())


def _missing_version(problem: LoadProblem, module: str | None, ctx: Context,
                     outcome: str) -> Finding:
    library = problem.library or ""
    version = problem.version or ""
    newest = newest_version(ctx.versions_defined(library), version)
    lines = [f"Because {_label(problem.object, ctx)} requires version {version} and the "
             f"{library} that the loader found does not define it, {outcome}."]
    if newest:
        lines.append(newest_sentence(newest))
    soname = library.rsplit("/", 1)[-1]
    if version.startswith("GLIBC_") and newest:
        # the release is libc.so.6's newest node: libm's or libpthread's lag behind it
        libc = newest_version(ctx.versions_defined(posixpath.join(posixpath.dirname(library),
                                                                  "libc.so.6")), version)
        has = (libc if libc and _release(libc) > _release(newest) else newest).split("_", 1)[1]
        hint = (f"{soname} is glibc's, which comes with the system (glibc {has} "
                f"{ctx.where}): use a "
                f"build of the package made for glibc {has} or older (a manylinux_"
                f"{has.replace('.', '_')} wheel or an older tag), or a system with glibc "
                f"{version.split('_', 1)[1]} or newer")
    else:
        hint = (f"use a newer {soname} (for example from a newer toolchain or conda's "
                "libstdcxx-ng), or a build of the package made for this system")
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        explanation="\n".join(lines), module=module, library=library, version=version, hint=hint,
        newest=newest,
    )


def _unreadable(problem: LoadProblem, module: str | None, ctx: Context,
                outcome: str) -> Finding:
    """A file the loader found but cannot map: damaged, empty, or not a shared object."""
    name = problem.library or ""
    attempt = next((a for a in (problem.resolution.attempts if problem.resolution else ())
                    if a.outcome.startswith("unreadable")), None)
    path = attempt.path if attempt else name
    reason = attempt.outcome.removeprefix("unreadable: ") if attempt else "unreadable"
    needer = ("" if problem.object == path
              else f"{_label(problem.object, ctx)} needs {name}, and ")
    lines = [f"Because {needer}{_label(path, ctx)} cannot be read as a shared object "
             f"({reason}), {outcome}."]
    if crashes(problem.message):
        lines.append("The file ends inside what the loader maps of it: touching a page past its "
                     "end raises SIGBUS, which kills the process; no `except` around the import "
                     "runs.")
    owner = ctx.owner(path)
    hint = (f"reinstall {owner}: the file is damaged (truncated, empty or not a shared object)"
            if owner else f"replace {path}: it is damaged (truncated, empty or not a shared "
            "object)")
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        explanation="\n".join(lines), module=module, library=name, hint=hint,
        trace=_trace(problem.resolution),
    )


def _missing_library(problem: LoadProblem, module: str | None, ctx: Context,
                     outcome: str) -> Finding:
    if problem.kind is ProblemKind.UNREADABLE_OBJECT:
        return _unreadable(problem, module, ctx, outcome)
    name = problem.library or ""
    trace = _trace(problem.resolution)
    found = ctx.locate(name)
    lines = [f"Because {_label(problem.object, ctx)} needs {name} and the loader did not find "
             f"it in the {len(trace)} places it looked (paths considered, in order, below), "
             f"{outcome}."]
    if problem.kind is ProblemKind.WRONG_ELF_CLASS:
        lines.append("A file of that name exists on the search path but is built for another "
                     "ELF class (32-bit vs 64-bit).")
    hint: str | None
    if found:
        lines.append("Files with that name on this machine: " + ", ".join(found) + ".")
        directory = found[0].rsplit("/", 1)[0]
        hint = (f"add {directory} to the loader's path: `echo {directory} | sudo tee "
                f"/etc/ld.so.conf.d/abifit.conf && sudo ldconfig`, or "
                f"`export LD_LIBRARY_PATH={directory}:$LD_LIBRARY_PATH`")
    elif name.startswith("libcuda.so"):
        lines.append("No file with that name was found on this machine.")
        hint = (f"{name} is the NVIDIA driver's library, not a pip package: install the NVIDIA "
                "driver (a machine without an NVIDIA GPU cannot load this module)")
    else:
        package = ctx.pip_package(name)
        lines.append("No file with that name was found on this machine.")
        quoted = f"'{package}'" if package and any(c in package for c in "<>=!~ ;") else package
        hint = (f"`pip install {quoted}` provides {name}" if package
                else f"install the package that provides {name}")
        fix = ctx.library_fix(name, problem.object)
        if fix is not None:
            lines.append(fix[1])
            hint = fix[0] or hint
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        explanation="\n".join(lines), module=module, library=name, hint=hint, trace=trace,
        candidates=found,
    )
