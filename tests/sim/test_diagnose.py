"""Load problems -> findings (`abifit.sim.diagnose`): kind, message, the derivation ("Because
..."), the hint, and the nearest definitions of a symbol whose signature changed.

Pure: each test feeds a `LoadProblem` and a `Context` of plain functions; no file is read.
tests/commands/test_doctor_fixtures.py checks the same findings end to end against real imports.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from abifit.formats.demangle import demangler_available
from abifit.report.derivation import explanation
from abifit.report.findings import trace_line
from abifit.sim.derivation import IndexFix, IndexMiss
from abifit.sim.diagnose import Context, diagnose
from abifit.sim.findings import FindingKind, SearchStep
from abifit.sim.loader import Attempt, LoadProblem, ProblemKind, Resolution, Via

EXT = "/site/extpkg/_ops.so"
HOST = "/site/hostpkg/lib/libhost.so"
PYTHON = "/usr/bin/python3.11"
OLD = "_ZN7hostlib10check_implEiPKcS1_ib"  # hostlib::check_impl(int, char const*, ..., int, bool)
NEW = "_ZN7hostlib10check_implEiPKcS1_jb"  # ... parameter 4 unsigned int
NO_ARGS = "_ZN7hostlib10check_implEv"  # hostlib::check_impl()
OLD_TEXT = "hostlib::check_impl(int, char const*, char const*, int, bool)"
NEW_TEXT = "hostlib::check_impl(int, char const*, char const*, unsigned int, bool)"
CHANGE = "same function hostlib::check_impl; parameter 4: `int` → `unsigned int`"

NOTHING = Context(owner=lambda _path: None, exports=lambda _path: (),
                  versions_defined=lambda _library: (), locate=lambda _name: (),
                  pip_package=lambda _name: None)
OWNERS = {EXT: "extpkg 1.0", HOST: "hostpkg 2.0"}

needs_demangler = pytest.mark.skipif(not demangler_available(),
                                     reason="needs libstdc++'s __cxa_demangle")


def undefined(symbol: str, *, version: str | None = None) -> LoadProblem:
    """The loader's problem for `symbol` undefined in EXT, with the scope it searched."""
    suffix = f", version {version}" if version else ""
    return LoadProblem(ProblemKind.UNDEFINED_SYMBOL, EXT,
                       f"{EXT}: undefined symbol: {symbol}{suffix}", symbol=symbol,
                       version=version, scope=(PYTHON, EXT, HOST))


# --- undefined symbols ---------------------------------------------------------------------------


@needs_demangler
def test_changed_parameter_is_the_nearest_definition() -> None:
    """An int -> unsigned int change is the nearest definition, named with the rebuild hint."""
    exports = {EXT: [NEW + "_not_this"], HOST: [NO_ARGS, NEW, "_ZN7hostlib5otherEv"]}
    ctx = replace(NOTHING, owner=OWNERS.get, exports=lambda path: exports.get(path, ()),
                  rebuild_hint=lambda obj, provider: f"rebuild {obj} against {provider}")
    finding = diagnose(undefined(OLD), "extpkg._ops", ctx)
    assert (finding.kind, finding.object, finding.module, finding.symbol, finding.version) == (
        FindingKind.UNDEFINED_SYMBOL, EXT, "extpkg._ops", OLD, None)
    assert finding.message == f"{EXT}: undefined symbol: {OLD}"
    assert explanation(finding).splitlines()[:2] == [
        f"Because {EXT} (extpkg 1.0) needs `{OLD_TEXT}` and none of the 3 objects in its lookup "
        "scope defines it, the import fails.",
        f"Nearest definition, in {HOST} (hostpkg 2.0): `{NEW_TEXT}` — {CHANGE}.",
    ]
    assert finding.demangled == OLD_TEXT
    first = finding.nearest[0]
    assert (first.mangled, first.text, first.path, first.owner, first.same_function,
            first.description) == (NEW, NEW_TEXT, HOST, "hostpkg 2.0", True, CHANGE)
    assert "; ".join(first.differences) == first.change == CHANGE.split("; ", 1)[1]
    assert [n.mangled for n in finding.nearest] == [NEW, NO_ARGS]
    assert finding.hint == f"rebuild {EXT} against {HOST}"


@needs_demangler
def test_shallow_diagnosis_skips_the_search() -> None:
    """With deep=False no scope is searched: the derivation alone, no nearest, no hint."""
    ctx = replace(NOTHING, exports=lambda _path: [NEW],
                  rebuild_hint=lambda _obj, _provider: "never asked")
    finding = diagnose(undefined(OLD), None, ctx, deep=False)
    assert explanation(finding) == (
        f"Because {EXT} needs `{OLD_TEXT}` and none of the 3 objects in its lookup scope defines "
        "it, the import fails.")
    assert (finding.nearest, finding.hint, finding.module) == ((), None, None)


def test_a_definition_at_another_version_is_named() -> None:
    """A name defined at another version than the one wanted is said so in the derivation."""
    ctx = replace(NOTHING, exports=lambda path: ["prec_extra"] if path == HOST else ())
    finding = diagnose(undefined("prec_extra", version="HOST_2.0"), "extpkg._ops", ctx)
    assert finding.version == "HOST_2.0"
    assert explanation(finding).splitlines() == [
        f"Because {EXT} needs `prec_extra` at version HOST_2.0 and none of the 3 objects in its "
        "lookup scope defines it, the import fails.",
        f"{HOST} defines that name, but not at version HOST_2.0.",
    ]
    assert finding.nearest == () and finding.hint is None


@needs_demangler
def test_string_abi_change_is_explained() -> None:
    """An old-ABI std::string parameter against a cxx11 definition: the ABI line follows."""
    old, new = ("_ZN4host8describeERKSs",
                "_ZN4host8describeERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE")
    finding = diagnose(undefined(old), None, replace(NOTHING, exports=lambda _path: [new]))
    assert explanation(finding).splitlines()[-1] == (
        "The std::string ABIs differ: one side was built with -D_GLIBCXX_USE_CXX11_ABI=0 (the old "
        "ABI), the other with the cxx11 ABI.")
    assert finding.nearest[0].mangled == new
    assert finding.nearest[0].description.startswith("same function host::describe; parameter 1: ")
    assert finding.nearest[0].differences[-1] == "std::string ABI: old → cxx11"


# --- missing versions ----------------------------------------------------------------------------

LIBSTDCXX = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"


@pytest.mark.parametrize(("defined", "newest"), [
    (("GLIBCXX_3.4", "GLIBCXX_3.4.29", "GLIBCXX_3.4.30", "CXXABI_1.3.13"), "GLIBCXX_3.4.30"),
    (("CXXABI_1.3", "CXXABI_1.3.13"), None),
], ids=["same-family", "no-version-of-the-family"])
def test_missing_version_names_the_newest_one_defined(defined: tuple[str, ...],
                                                      newest: str | None) -> None:
    """A missing version names the newest one of its family defined, and hints a newer library."""
    problem = LoadProblem(
        ProblemKind.MISSING_VERSION, EXT,
        f"{LIBSTDCXX}: version `GLIBCXX_3.4.32' not found (required by {EXT})",
        version="GLIBCXX_3.4.32", library=LIBSTDCXX)
    ctx = replace(NOTHING, owner=OWNERS.get,
                  versions_defined=lambda library: defined if library == LIBSTDCXX else ())
    finding = diagnose(problem, "extpkg._ops", ctx)
    assert (finding.kind, finding.library, finding.version, finding.message) == (
        FindingKind.MISSING_VERSION, LIBSTDCXX, "GLIBCXX_3.4.32", problem.message)
    because = (f"Because {EXT} (extpkg 1.0) requires version GLIBCXX_3.4.32 and the {LIBSTDCXX} "
               "that the loader found does not define it, the import fails.")
    assert explanation(finding).splitlines() == [
        because, *([f"The newest GLIBCXX version it defines is {newest}."] if newest else [])]
    assert finding.hint == (
        "use a newer libstdc++.so.6 (for example from a newer toolchain or conda's "
        "libstdcxx-ng), or a build of the package made for this system")


def test_a_glibc_version_is_told_by_libcs_release() -> None:
    """libm.so.6 of glibc 2.34 defines nothing newer than GLIBC_2.32: the host's glibc is the
    newest node of the libc.so.6 beside it (mlx-cpu's libmlx.so on a manylinux_2_34 host)."""
    libm, libc = "/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libc.so.6"
    nodes = {libm: ("GLIBC_2.2.5", "GLIBC_2.29", "GLIBC_2.32"),
             libc: ("GLIBC_2.2.5", "GLIBC_2.32", "GLIBC_2.34")}
    problem = LoadProblem(
        ProblemKind.MISSING_VERSION, EXT,
        f"{libm}: version `GLIBC_2.35' not found (required by {EXT})",
        version="GLIBC_2.35", library=libm)
    finding = diagnose(problem, "extpkg._ops",
                       replace(NOTHING, versions_defined=lambda path: nodes.get(path, ())))
    assert finding.hint == (
        "libm.so.6 is glibc's, which comes with the system (glibc 2.34 here): use a build of "
        "the package made for glibc 2.34 or older (a manylinux_2_34 wheel or an older tag), or "
        "a system with glibc 2.35 or newer")
    # on a preset (`check --host manylinux_2_34`), the hint names that host, not "here"
    preset = diagnose(problem, "extpkg._ops",
                      replace(NOTHING, versions_defined=lambda path: nodes.get(path, ()),
                              where="on the manylinux_2_34 host"))
    assert "(glibc 2.34 on the manylinux_2_34 host)" in (preset.hint or "")


# --- missing libraries ---------------------------------------------------------------------------

SEARCHED = Resolution(EXT, "libfoo.so.1", None, None, (
    Attempt("/site/extpkg/lib/libfoo.so.1", Via.RUNPATH, EXT, "not found"),
    Attempt("/usr/lib/x86_64-linux-gnu/libfoo.so.1", Via.CACHE, None, "not found"),
    Attempt("/lib/libfoo.so.1", Via.SYSTEM, None, "not found"),
))


def missing(name: str = "libfoo.so.1", kind: ProblemKind = ProblemKind.MISSING_LIBRARY
            ) -> LoadProblem:
    resolution = replace(SEARCHED, name=name, attempts=tuple(
        replace(a, path=a.path.replace("libfoo.so.1", name)) for a in SEARCHED.attempts))
    return LoadProblem(kind, EXT, f"{name}: cannot open shared object file: No such file or "
                       "directory", library=name, resolution=resolution)


def test_missing_library_traces_the_search() -> None:
    """The derivation counts the places looked; the trace lists them with how each was reached."""
    finding = diagnose(missing(), "extpkg._ops", replace(NOTHING, owner=OWNERS.get))
    assert (finding.kind, finding.library, finding.candidates) == (
        FindingKind.MISSING_LIBRARY, "libfoo.so.1", ())
    assert finding.trace == (
        SearchStep("/site/extpkg/lib/libfoo.so.1", "DT_RUNPATH", EXT, "not found"),
        SearchStep("/usr/lib/x86_64-linux-gnu/libfoo.so.1", "ld.so.cache", None, "not found"),
        SearchStep("/lib/libfoo.so.1", "system directory", None, "not found"),
    )
    assert [trace_line(step) for step in finding.trace] == [
        f"/site/extpkg/lib/libfoo.so.1  [DT_RUNPATH of {EXT}: not found]",
        "/usr/lib/x86_64-linux-gnu/libfoo.so.1  [ld.so.cache: not found]",
        "/lib/libfoo.so.1  [system directory: not found]",
    ]
    assert explanation(finding).splitlines() == [
        f"Because {EXT} (extpkg 1.0) needs libfoo.so.1 and the loader did not find it in the 3 "
        "places it looked (paths considered, in order, below), the import fails.",
        "No file with that name was found on this machine.",
    ]
    assert finding.hint == "install the package that provides libfoo.so.1"


def test_a_copy_elsewhere_on_the_machine_gives_the_path_to_add() -> None:
    """Copies found elsewhere are candidates; the hint puts the first one's directory on a path."""
    found = ("/opt/foo/lib/libfoo.so.1", "/home/u/libfoo.so.1")
    finding = diagnose(missing(), None, replace(NOTHING, locate=lambda _name: found))
    assert finding.candidates == found
    assert explanation(finding).splitlines()[-1] == (
        "Files with that name on this machine: /opt/foo/lib/libfoo.so.1, /home/u/libfoo.so.1.")
    assert finding.hint == (
        "add /opt/foo/lib to the loader's path: `echo /opt/foo/lib | sudo tee "
        "/etc/ld.so.conf.d/abifit.conf && sudo ldconfig`, or "
        "`export LD_LIBRARY_PATH=/opt/foo/lib:$LD_LIBRARY_PATH`")


def test_the_driver_library_is_not_a_pip_package() -> None:
    """libcuda.so.1 found nowhere: the hint is the NVIDIA driver; no package is looked up."""

    def no_lookup(*_args: str) -> None:
        raise AssertionError("looked up a package for the driver")

    ctx = replace(NOTHING, pip_package=no_lookup, library_fix=no_lookup)
    finding = diagnose(missing("libcuda.so.1"), None, ctx)
    assert finding.hint == (
        "libcuda.so.1 is the NVIDIA driver's library, not a pip package: install the NVIDIA "
        "driver (a machine without an NVIDIA GPU cannot load this module)")
    assert explanation(finding).splitlines()[-1] == (
        "No file with that name was found on this machine.")


@pytest.mark.parametrize(("package", "fix", "hint", "last_line"), [
    ("nvidia-foo", None, "`pip install nvidia-foo` provides libfoo.so.1",
     "No file with that name was found on this machine."),
    ("nvidia-foo>=13,<14", None, "`pip install 'nvidia-foo>=13,<14'` provides libfoo.so.1",
     "No file with that name was found on this machine."),
    ("nvidia-foo", ("`pip install 'nvidia-foo==13.1.0'` provides libfoo.so.1 (in nvidia/lib)",
                    IndexFix("nvidia-foo 13.1.0 ships nvidia/lib/libfoo.so.1.")),
     "`pip install 'nvidia-foo==13.1.0'` provides libfoo.so.1 (in nvidia/lib)",
     "From the index: nvidia-foo 13.1.0 ships nvidia/lib/libfoo.so.1."),
    ("nvidia-foo", (None, IndexMiss("abifit found no wheel that ships libfoo.so.1 (the index "
                                    "is down)")),
     "`pip install nvidia-foo` provides libfoo.so.1",
     "abifit found no wheel that ships libfoo.so.1 (the index is down)."),
], ids=["package", "package-with-specifier-is-quoted", "wheel-on-the-index",
        "no-wheel-keeps-the-package-hint"])
def test_the_package_that_provides_the_library(
        package: str, fix: tuple[str | None, IndexFix | IndexMiss] | None, hint: str,
        last_line: str) -> None:
    """The provider package is the hint; a wheel found on the index replaces it."""
    asked: list[tuple[str, str]] = []

    def library_fix(soname: str, obj: str) -> tuple[str | None, IndexFix | IndexMiss] | None:
        asked.append((soname, obj))
        return fix

    ctx = replace(NOTHING, pip_package=lambda _name: package, library_fix=library_fix)
    finding = diagnose(missing(), None, ctx)
    assert asked == [("libfoo.so.1", EXT)]
    assert finding.hint == hint
    assert explanation(finding).splitlines()[-1] == last_line


def test_a_wrong_elf_class_keeps_its_kind() -> None:
    """A wrong ELF class keeps its kind, explained like a missing library."""
    finding = diagnose(missing(kind=ProblemKind.WRONG_ELF_CLASS), None, NOTHING)
    assert finding.kind is FindingKind.WRONG_ELF_CLASS
    lines = explanation(finding).splitlines()
    assert ("A file of that name exists on the search path but is built for another ELF class "
            "(32-bit vs 64-bit).") in lines
    assert lines[-1] == "No file with that name was found on this machine."


def test_an_unreadable_file_says_it_cannot_be_read() -> None:
    """A file the loader found but cannot map keeps its kind, and the finding says that it
    cannot be read (not that it is missing), with a hint to replace it."""
    finding = diagnose(missing(kind=ProblemKind.UNREADABLE_OBJECT), None, NOTHING)
    assert finding.kind is FindingKind.UNREADABLE_OBJECT
    assert "cannot be read as a shared object" in explanation(finding)
    assert "did not find it" not in explanation(finding)
    assert finding.hint is not None and "damaged" in finding.hint
