"""Load problems -> findings a person can act on: what fails, the derivation, and a fix.

The derivation is records of facts (`sim.derivation`), in the order of the sentences
`report.derivation` writes from them. Pure: the facts it needs beyond the loader's result (which
package owns a file, the definitions in scope, where else a library exists) arrive through a
`Context`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from abifit.sim.derivation import (
    CutShort,
    DefinedAtOtherVersion,
    FilesFound,
    ImportRaises,
    IndexFix,
    IndexMiss,
    NearestDefinition,
    NearestLine,
    NeedsLibrary,
    NeedsSymbol,
    NewestVersion,
    NoFileFound,
    Outcome,
    PrintedFirst,
    RequiresVersion,
    Sentence,
    StringAbiDiffers,
    SymbolNote,
    Unreadable,
    UsesNumpyApi,
    WrongElfClass,
)
from abifit.sim.findings import Finding, FindingKind, SearchStep
from abifit.sim.loader import LoadProblem, ProblemKind, Resolution, crashes

if TYPE_CHECKING:
    from abifit.formats.demangle import SignatureDiff


@dataclass(frozen=True, slots=True)
class Context:
    """What diagnosis may ask about the machine, supplied by the caller."""

    owner: Callable[[str], str | None]
    exports: Callable[[str], Collection[str]]
    versions_defined: Callable[[str], tuple[str, ...]]
    locate: Callable[[str], tuple[str, ...]]
    pip_package: Callable[[str], str | None]
    rebuild_hint: Callable[[str, str], str | None] = lambda _obj, _provider: None
    # (soname, the object needing it) -> (hint, sentence) from the wheels on the index that
    # ship the soname: an `IndexFix`, which ends the finding's derivation, or, with hint None,
    # the `IndexMiss` that says why none was found
    library_fix: Callable[[str, str], tuple[str | None, IndexFix | IndexMiss] | None] = (
        lambda _s, _o: None)
    # what is known of a name's history ("introduced in CPython 3.12"), when anything is
    symbol_note: Callable[[str], str | None] = lambda _s: None
    # where the libraries are, in the words of a hint: this machine, a preset, a profile
    where: str = "here"


def _trace(resolution: Resolution | None) -> tuple[SearchStep, ...]:
    if resolution is None:
        return ()
    return tuple(SearchStep(a.path, a.via.value, a.owner, a.outcome)
                 for a in resolution.attempts)


def _definition(diff: SignatureDiff, path: str, ctx: Context) -> NearestDefinition:
    return NearestDefinition(diff.new.mangled, diff.new.text, path, ctx.owner(path),
                             diff.same_function, tuple(diff.differences()), diff.describe())


def diagnose(problem: LoadProblem, module: str | None, ctx: Context, deep: bool = True,
             outcome: Outcome = Outcome.IMPORT_FAILS) -> Finding:
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
                 outcome: Outcome) -> Finding:
    """A module that loads and whose import raises, beside this NumPy (`sim.numpyabi`):
    `version` holds the NumPy it needs, `library` the running NumPy's release, `numpy_reason`
    the contract broken and `printed` what is printed before the error."""
    owner = ctx.owner(problem.object)
    derivation: list[Sentence] = [UsesNumpyApi(problem.object, owner, problem.numpy_reason,
                                               outcome)]
    if problem.printed:
        derivation.append(PrintedFirst(problem.printed))
    derivation.append(ImportRaises(problem.message))
    package = owner.split()[0] if owner else "the package"
    hint = (f"`pip install '{problem.version}'`, or a release of {package} built for numpy "
            f"{problem.library}")
    return Finding(kind=FindingKind.NUMPY_C_API, object=problem.object, message=problem.message,
                   derivation=tuple(derivation), module=module, library="numpy",
                   version=problem.version, hint=hint)


def _demangled(symbol: str) -> str | None:
    """The demangled text of a C++ symbol; None for a C name."""
    from abifit.formats.demangle import (
        demangle,  # ctypes and libstdc++ only when a symbol is explained
    )

    text = demangle(symbol)
    return text if text != symbol else None


def _undefined_symbol(
    problem: LoadProblem, module: str | None, ctx: Context, deep: bool, outcome: Outcome
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
    derivation: list[Sentence] = [NeedsSymbol(
        problem.object, ctx.owner(problem.object), symbol, demangled, problem.version,
        len(problem.scope), outcome, problem.behind, problem.stand_ins)]
    note = ctx.symbol_note(symbol)
    if note is not None:
        derivation.append(SymbolNote(symbol, note))
    if holder is not None and problem.version is not None:
        derivation.append(DefinedAtOtherVersion(holder, problem.version))
    definitions = tuple(_definition(d, where[d.new.mangled], ctx) for d in near)
    for diff, definition in zip(near, definitions, strict=True):
        derivation.append(NearestLine(definition))
        if diff.string_abi_changed:
            derivation.append(StringAbiDiffers())
    hint = ctx.rebuild_hint(problem.object, where[near[0].new.mangled]) if near else None
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        derivation=tuple(derivation), module=module, symbol=symbol, version=problem.version,
        hint=hint, nearest=definitions, behind=problem.behind, demangled=demangled,
    )


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


def _release(version: str) -> tuple[int, ...]:
    """GLIBC_2.35 -> (2, 35)."""
    return tuple(int(x) for x in version.split("_", 1)[1].split(".") if x.isdigit())


def _missing_version(problem: LoadProblem, module: str | None, ctx: Context,
                     outcome: Outcome) -> Finding:
    library = problem.library or ""
    version = problem.version or ""
    newest = newest_version(ctx.versions_defined(library), version)
    derivation: list[Sentence] = [RequiresVersion(problem.object, ctx.owner(problem.object),
                                                  version, library, outcome)]
    if newest:
        derivation.append(NewestVersion(newest))
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
        derivation=tuple(derivation), module=module, library=library, version=version,
        hint=hint, newest=newest,
    )


def _unreadable(problem: LoadProblem, module: str | None, ctx: Context,
                outcome: Outcome) -> Finding:
    """A file the loader found but cannot map: damaged, empty, or not a shared object."""
    name = problem.library or ""
    attempt = next((a for a in (problem.resolution.attempts if problem.resolution else ())
                    if a.outcome.startswith("unreadable")), None)
    path = attempt.path if attempt else name
    reason = attempt.outcome.removeprefix("unreadable: ") if attempt else "unreadable"
    owner = ctx.owner(path)
    derivation: list[Sentence] = [Unreadable(problem.object, ctx.owner(problem.object), name,
                                             path, owner, reason, outcome)]
    if crashes(problem.message):
        derivation.append(CutShort())
    hint = (f"reinstall {owner}: the file is damaged (truncated, empty or not a shared object)"
            if owner else f"replace {path}: it is damaged (truncated, empty or not a shared "
            "object)")
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        derivation=tuple(derivation), module=module, library=name, hint=hint,
        trace=_trace(problem.resolution),
    )


def _missing_library(problem: LoadProblem, module: str | None, ctx: Context,
                     outcome: Outcome) -> Finding:
    if problem.kind is ProblemKind.UNREADABLE_OBJECT:
        return _unreadable(problem, module, ctx, outcome)
    name = problem.library or ""
    trace = _trace(problem.resolution)
    found = ctx.locate(name)
    derivation: list[Sentence] = [NeedsLibrary(problem.object, ctx.owner(problem.object), name,
                                               len(trace), outcome)]
    if problem.kind is ProblemKind.WRONG_ELF_CLASS:
        derivation.append(WrongElfClass())
    hint: str | None
    if found:
        derivation.append(FilesFound(found))
        directory = found[0].rsplit("/", 1)[0]
        hint = (f"add {directory} to the loader's path: `echo {directory} | sudo tee "
                f"/etc/ld.so.conf.d/abifit.conf && sudo ldconfig`, or "
                f"`export LD_LIBRARY_PATH={directory}:$LD_LIBRARY_PATH`")
    elif name.startswith("libcuda.so"):
        derivation.append(NoFileFound())
        hint = (f"{name} is the NVIDIA driver's library, not a pip package: install the NVIDIA "
                "driver (a machine without an NVIDIA GPU cannot load this module)")
    else:
        package = ctx.pip_package(name)
        derivation.append(NoFileFound())
        quoted = f"'{package}'" if package and any(c in package for c in "<>=!~ ;") else package
        hint = (f"`pip install {quoted}` provides {name}" if package
                else f"install the package that provides {name}")
        fix = ctx.library_fix(name, problem.object)
        if fix is not None:
            derivation.append(fix[1])
            hint = fix[0] or hint
    return Finding(
        kind=FindingKind(problem.kind.value), object=problem.object, message=problem.message,
        derivation=tuple(derivation), module=module, library=name, hint=hint, trace=trace,
        candidates=found,
    )
