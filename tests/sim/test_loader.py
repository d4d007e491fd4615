"""The ld.so simulation (`abifit.sim.loader`) on small real libraries, against the real loader.

The libraries are compiled from tests/fixtures/loader/ without libc (`-nostdlib`), so the
simulated world is closed: a tiny executable, the libraries a test arranges in its tmp_path, and
a `SearchConfig` whose ld.so.cache is a dictionary and whose system directories are the test's
own. Files are read through `LocalObjects`, as doctor reads them.

Where the host's cache and system directories play no part, the same sequence of
`dlopen(RTLD_NOW)` calls runs in a real Python process (`ctypes.CDLL` in a subprocess, with the
same LD_LIBRARY_PATH): its error must be the simulated one, word for word, and the files it
mapped (from /proc/self/maps) the objects of the simulated process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from abifit.formats.ldcache import cache_id_for
from abifit.host.localfs import LocalObjects
from abifit.sim.loader import (
    ASSUMED_DIR,
    LoadResult,
    ProblemKind,
    Process,
    SearchConfig,
    Via,
)
from fixtures.build import STUBS, compile_c
from helpers import FIXTURES

SOURCES = FIXTURES / "loader"
CANNOT_OPEN = ": cannot open shared object file: No such file or directory"
LOCAL, GLOBAL = False, True

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@dataclass(frozen=True)
class DictCache:
    """An ld.so.cache stand-in: soname -> path, for every architecture."""

    paths: Mapping[str, str]

    def lookup(self, soname: str, arch_flags: int, *, hwcaps_subdirs: Sequence[str] = (),
               legacy_hwcaps: Sequence[str] = ("tls",)) -> str | None:
        return self.paths.get(soname)


CLOSED = SearchConfig(system_dirs=())  # no host directory: only what a test names


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every object the tests arrange, by name (a path under the build directory)."""
    out = tmp_path_factory.mktemp("loader")

    def lib(name: str, source: str | Path, *, flags: Sequence[str] = (),
            libs: Sequence[Path | str] = (), soname: str | None = None,
            rpath: Sequence[str] = (), runpath: Sequence[str] = ()) -> Path:
        return compile_c(SOURCES / source, out / name, flags=["-nostdlib", *flags], libs=libs,
                         soname=soname, rpath=rpath, runpath=runpath)

    dep = lib("libdep.so", "dep.c", soname="libdep.so")
    mid = lib("libmid.so", "needs.c", soname="libmid.so", flags=["-Wl,--no-as-needed"],
              libs=[dep])
    nosoname = lib("nosoname/libnosoname.so", "dep.c")
    ver2 = lib("ver2/libver.so", "ver.c", soname="libver.so",
               flags=["-DV2", f"-Wl,--version-script={SOURCES / 'ver2.map'}"])
    extra = lib("extra/libdep.so", "dep.c", soname="libdep.so", flags=["-DEXTRA"])
    libcuda = lib("libcuda.so.1", STUBS / "libcuda_stub.c", soname="libcuda.so.1")
    objects = {
        "exe": compile_c(SOURCES / "exe.c", out / "exe", shared=False, flags=["-nostdlib"]),
        "exe_rpath": compile_c(SOURCES / "exe.c", out / "exe_rpath", shared=False,
                               flags=["-nostdlib"], rpath=["$ORIGIN/e"]),
        "libdep.so": dep,
        "extra/libdep.so": extra,
        "libmid.so": mid,
        "libuser.so": lib("libuser.so", "user.c", libs=[dep]),
        "rpath/libuser.so": lib("rpath/libuser.so", "user.c", libs=[dep], rpath=["$ORIGIN/r"]),
        "runpath/libuser.so": lib("runpath/libuser.so", "user.c", libs=[dep],
                                  runpath=["$ORIGIN/n"]),
        "nodeflib/libuser.so": lib("nodeflib/libuser.so", "user.c", libs=[dep],
                                   runpath=["$ORIGIN/n"], flags=["-Wl,-z,nodefaultlib"]),
        "tokens/libuser.so": lib("tokens/libuser.so", "user.c", libs=[dep],
                                 runpath=["${ORIGIN}/$LIB/$PLATFORM"]),
        "libloose.so": lib("libloose.so", "user.c"),
        "libextra_user.so": lib("libextra_user.so", "user.c", flags=["-DWANT_EXTRA"],
                                libs=[extra], rpath=["$ORIGIN"]),
        "rpath/libtop.so": lib("rpath/libtop.so", "needs.c", flags=["-Wl,--no-as-needed"],
                               libs=[mid], rpath=["$ORIGIN/r"]),
        "runpath/libtop.so": lib("runpath/libtop.so", "needs.c", flags=["-Wl,--no-as-needed"],
                                 libs=[mid], runpath=["$ORIGIN/r"]),
        "libnosoname.so": nosoname,
        "libnosoname_user.so": lib("libnosoname_user.so", "user.c",
                                   flags=[f"-L{nosoname.parent}"], libs=["-lnosoname"]),
        "ver1/libver.so": lib("ver1/libver.so", "ver.c", soname="libver.so",
                              flags=[f"-Wl,--version-script={SOURCES / 'ver1.map'}"]),
        "ver2/libver.so": ver2,
        "libver_user.so": lib("libver_user.so", "ver_user.c", libs=[ver2], rpath=["$ORIGIN"]),
        "libweak.so": lib("libweak.so", "weak.c"),
        "_drv.so": lib("_drv.so", FIXTURES / "check" / "drv.c",
                       libs=[libcuda]),
    }
    return objects


def arrange(root: Path, built: dict[str, Path], layout: Mapping[str, str]) -> Path:
    """Copy built objects into `root` (relative path -> built name); returns `root` resolved.

    Copies, not links: each is a file of its own, as in separate packages."""
    for where, name in layout.items():
        target = root / where
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[name], target)
    return root.resolve()


def simulate(exe: Path, *opens: tuple[Path, bool],
             config: SearchConfig = CLOSED) -> tuple[Process, list[LoadResult]]:
    """A simulated process started from `exe` that dlopens each path (RTLD_NOW, RTLD_GLOBAL
    when its flag says so) until one fails."""
    process = Process(LocalObjects(), config, str(exe))
    assert process.startup is not None and process.startup.loads, process.startup
    results = []
    for path, global_ in opens:
        results.append(process.dlopen(str(path), global_=global_))
        if not results[-1].loads:
            break
    return process, results


@dataclass(frozen=True)
class RealLoad:
    """What a real Python process saw: the first dlopen error and the files it has mapped."""

    error: str | None
    mapped: frozenset[str]


REAL_DLOPEN = """
import ctypes, json, os, sys
root, opens = sys.argv[1], json.loads(sys.argv[2])
error = None
for path, global_ in opens:
    try:
        ctypes.CDLL(path, mode=os.RTLD_NOW | (os.RTLD_GLOBAL if global_ else os.RTLD_LOCAL))
    except OSError as e:
        error = str(e)
        break
with open("/proc/self/maps") as maps:
    fields = [line.split(maxsplit=5) for line in maps]
mapped = sorted({f[5].strip() for f in fields if len(f) == 6 and f[5].startswith(root + "/")})
print(json.dumps({"error": error, "mapped": mapped}))
"""


def real_dlopen(root: Path, *opens: tuple[Path, bool],
                ld_library_path: Sequence[Path] = ()) -> RealLoad:
    """The same dlopen calls in a fresh Python process (the differential oracle)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    if ld_library_path:
        env["LD_LIBRARY_PATH"] = ":".join(map(str, ld_library_path))
    done = subprocess.run(
        [sys.executable, "-c", REAL_DLOPEN, str(root), json.dumps([[str(p), g] for p, g in opens])],
        capture_output=True, text=True, env=env, timeout=60, check=True)
    said = json.loads(done.stdout)
    return RealLoad(said["error"], frozenset(said["mapped"]))


def assert_real_agrees(process: Process, results: list[LoadResult], real: RealLoad) -> None:
    """The real loader failed with the simulated error (or not at all) and mapped the objects
    the simulated process holds, the executable aside."""
    assert real.error == results[-1].error
    assert real.mapped == {p for p in process.objects if p != process.executable}


# --- the search order ----------------------------------------------------------------------------


def every_place(root: Path) -> SearchConfig:
    """LD_LIBRARY_PATH `root/l`, an ld.so.cache that sends libdep.so to `root/c`, and the system
    directories `root/s1` and `root/s2`."""
    return replace(CLOSED, ld_library_path=(str(root / "l"),),
                   cache=DictCache({"libdep.so": str(root / "c" / "libdep.so")}),
                   cache_id=cache_id_for, system_dirs=(str(root / "s1"), str(root / "s2")))


# (directory, how it was reached, whose path it was): DT_RPATH of the object, then of its loaders
# up to the executable (the caller of dlopen), LD_LIBRARY_PATH, DT_RUNPATH (an object that has one
# uses no DT_RPATH at all), ld.so.cache, the system directories; DF_1_NODEFLIB ends the search
# before the cache.
@pytest.mark.parametrize(("user", "expected"), [
    ("rpath/libuser.so", [("app/r", Via.RPATH, "app"), ("e", Via.RPATH, "exe"),
                          ("l", Via.LD_LIBRARY_PATH, None), ("c", Via.CACHE, None),
                          ("s1", Via.SYSTEM, None), ("s2", Via.SYSTEM, None)]),
    ("runpath/libuser.so", [("l", Via.LD_LIBRARY_PATH, None), ("app/n", Via.RUNPATH, "app"),
                            ("c", Via.CACHE, None), ("s1", Via.SYSTEM, None),
                            ("s2", Via.SYSTEM, None)]),
    ("nodeflib/libuser.so", [("l", Via.LD_LIBRARY_PATH, None), ("app/n", Via.RUNPATH, "app")]),
], ids=["rpath", "runpath", "runpath-nodefaultlib"])
def test_search_order_for_a_library_found_nowhere(
        built: dict[str, Path], tmp_path: Path, user: str,
        expected: list[tuple[str, Via, str | None]]) -> None:
    """A library found nowhere is looked for in ld.so's order, and fails with dlerror()'s text."""
    root = arrange(tmp_path, built, {"exe": "exe_rpath", "app/libuser.so": user})
    config = every_place(root)
    target = root / "app" / "libuser.so"
    process, (result,) = simulate(root / "exe", (target, LOCAL), config=config)
    assert not result.loads
    (problem,) = result.problems
    assert (problem.kind, problem.object, problem.library) == (
        ProblemKind.MISSING_LIBRARY, str(target), "libdep.so")
    assert problem.message == result.error == "libdep.so" + CANNOT_OPEN
    assert problem.resolution is not None
    owners = {"app": str(target), "exe": str(root / "exe"), None: None}
    assert [(a.path, a.via, a.owner, a.outcome) for a in problem.resolution.attempts] == [
        (str(root / d / "libdep.so"), via, owners[owner], "not found")
        for d, via, owner in expected]
    assert_real_agrees(process, [result],
                       real_dlopen(root, (target, LOCAL), ld_library_path=[root / "l"]))


@pytest.mark.parametrize(("user", "copies", "winner", "via"), [
    ("rpath/libuser.so", ("app/r", "l"), "app/r", Via.RPATH),
    ("runpath/libuser.so", ("l", "app/n"), "l", Via.LD_LIBRARY_PATH),
    ("runpath/libuser.so", ("app/n", "c", "s1"), "app/n", Via.RUNPATH),
    ("runpath/libuser.so", ("c", "s1"), "c", Via.CACHE),
    ("runpath/libuser.so", ("s2",), "s2", Via.SYSTEM),
], ids=["rpath-before-ld-library-path", "ld-library-path-before-runpath",
        "runpath-before-cache", "cache-before-system-dirs", "system-dirs-last"])
def test_the_first_place_holding_the_library_gives_it(
        built: dict[str, Path], tmp_path: Path, user: str, copies: tuple[str, ...],
        winner: str, via: Via) -> None:
    """Of several copies of a library, the one first in search order is mapped, as ld.so maps it."""
    layout = {"exe": "exe", "app/libuser.so": user,
              **{f"{d}/libdep.so": "libdep.so" for d in copies}}
    root = arrange(tmp_path, built, layout)
    config = every_place(root)
    target = root / "app" / "libuser.so"
    process, (result,) = simulate(root / "exe", (target, LOCAL), config=config)
    assert result.loads and result.problems == ()
    (resolution,) = [r for r in result.resolutions if r.name == "libdep.so"]
    assert (resolution.path, resolution.via) == (str(root / winner / "libdep.so"), via)
    assert resolution.attempts[-1].outcome == "found"
    assert result.search_list == (str(target), str(root / winner / "libdep.so"))
    if via not in (Via.CACHE, Via.SYSTEM):
        assert_real_agrees(process, [result],
                           real_dlopen(root, (target, LOCAL), ld_library_path=[root / "l"]))


@pytest.mark.parametrize(("top", "loads"), [("rpath/libtop.so", True),
                                            ("runpath/libtop.so", False)],
                         ids=["rpath-inherited", "runpath-not-inherited"])
def test_rpath_reaches_dependencies_and_runpath_does_not(
        built: dict[str, Path], tmp_path: Path, top: str, loads: bool) -> None:
    """A DT_RPATH also finds the dependencies of what it loaded; a DT_RUNPATH does not."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libtop.so": top,
                                     "app/r/libmid.so": "libmid.so",
                                     "app/r/libdep.so": "libdep.so"})
    target = root / "app" / "libtop.so"
    process, (result,) = simulate(root / "exe", (target, LOCAL))
    assert result.loads is loads
    (resolution,) = [r for r in result.resolutions if r.name == "libdep.so"]
    assert resolution.requester == str(root / "app" / "r" / "libmid.so")
    if loads:
        assert (resolution.via, resolution.attempts[-1].owner) == (Via.RPATH, str(target))
    else:
        assert result.error == "libdep.so" + CANNOT_OPEN
        assert resolution.attempts == ()  # no DT_RPATH applies and nothing else is configured
    assert_real_agrees(process, [result], real_dlopen(root, (target, LOCAL)))


def test_path_tokens_expand_from_the_search_config(built: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """A DT_RUNPATH of `${ORIGIN}/$LIB/$PLATFORM` expands with the config's lib and platform."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libuser.so": "tokens/libuser.so",
                                     "app/lib64/haswell/libdep.so": "libdep.so"})
    target = root / "app" / "libuser.so"
    found = replace(CLOSED, lib="lib64", platform="haswell")
    _, (result,) = simulate(root / "exe", (target, LOCAL), config=found)
    assert result.loads
    assert result.search_list[-1] == str(root / "app" / "lib64" / "haswell" / "libdep.so")
    elsewhere = replace(CLOSED, lib="lib64", platform="x86_64")
    _, (result,) = simulate(root / "exe", (target, LOCAL), config=elsewhere)
    assert result.problems[0].resolution is not None
    assert [a.path for a in result.problems[0].resolution.attempts] == [
        str(root / "app" / "lib64" / "x86_64" / "libdep.so")]


# --- objects already in the process --------------------------------------------------------------


def test_a_loaded_soname_satisfies_a_needed_entry(built: dict[str, Path],
                                                  tmp_path: Path) -> None:
    """A DT_NEEDED name matches the DT_SONAME of an object already loaded, with no search."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so": "libdep.so",
                                     "b/libuser.so": "libuser.so"})
    opens = ((root / "a" / "libdep.so", LOCAL), (root / "b" / "libuser.so", LOCAL))
    process, results = simulate(root / "exe", *opens)
    assert [r.loads for r in results] == [True, True]
    (resolution,) = results[1].resolutions
    assert (resolution.name, resolution.path, resolution.via, resolution.attempts) == (
        "libdep.so", str(root / "a" / "libdep.so"), Via.LOADED, ())
    assert process.loaded("libdep.so") == str(root / "a" / "libdep.so")
    assert_real_agrees(process, results, real_dlopen(root, *opens))


def test_a_library_without_soname_matches_only_by_its_path(built: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """A loaded library without DT_SONAME does not satisfy a DT_NEEDED of its file name."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libnosoname.so": "libnosoname.so",
                                     "b/libuser.so": "libnosoname_user.so"})
    opens = ((root / "a" / "libnosoname.so", LOCAL), (root / "b" / "libuser.so", LOCAL))
    process, results = simulate(root / "exe", *opens)
    assert [r.loads for r in results] == [True, False]
    assert results[1].error == "libnosoname.so" + CANNOT_OPEN
    assert process.loaded("libnosoname.so") is None
    assert_real_agrees(process, results, real_dlopen(root, *opens))


def test_the_same_file_under_another_name_is_one_object(built: dict[str, Path],
                                                        tmp_path: Path) -> None:
    """dlopen of a symlink to a loaded file returns the loaded object: nothing new is mapped."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so.1": "libdep.so"})
    (root / "a" / "libdep.so").symlink_to("libdep.so.1")
    process, results = simulate(root / "exe", (root / "a" / "libdep.so.1", LOCAL),
                                (root / "a" / "libdep.so", LOCAL))
    assert [r.loads for r in results] == [True, True]
    assert results[1].search_list == (str(root / "a" / "libdep.so.1"),)
    assert process.objects == (str(root / "exe"), str(root / "a" / "libdep.so.1"))


def test_a_second_copy_of_a_soname_is_reported(built: dict[str, Path], tmp_path: Path) -> None:
    """A second file with a loaded DT_SONAME, opened by path, is mapped and named a duplicate."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so": "libdep.so",
                                     "b/libdep.so": "libdep.so"})
    opens = ((root / "a" / "libdep.so", LOCAL), (root / "b" / "libdep.so", LOCAL))
    process, results = simulate(root / "exe", *opens)
    assert [r.duplicates for r in results] == [
        (), (("libdep.so", str(root / "b" / "libdep.so"), str(root / "a" / "libdep.so")),)]
    assert_real_agrees(process, results, real_dlopen(root, *opens))


def test_a_copy_of_the_process_is_independent(built: dict[str, Path], tmp_path: Path) -> None:
    """What a copy of a process loads stays out of the original."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so": "libdep.so"})
    process, _ = simulate(root / "exe")
    clone = process.copy()
    assert clone.dlopen(str(root / "a" / "libdep.so")).loads
    assert clone.loaded("libdep.so") == str(root / "a" / "libdep.so")
    assert process.loaded("libdep.so") is None
    assert process.objects == (str(root / "exe"),)


# --- versions and symbols ------------------------------------------------------------------------


def test_a_missing_version_fails_the_load(built: dict[str, Path], tmp_path: Path) -> None:
    """A required version the found library lacks fails the load with glibc's message."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libver_user.so": "libver_user.so",
                                     "app/libver.so": "ver1/libver.so"})
    target, library = root / "app" / "libver_user.so", root / "app" / "libver.so"
    process, (result,) = simulate(root / "exe", (target, LOCAL))
    assert not result.loads
    problem = result.problems[0]
    assert (problem.kind, problem.object, problem.version, problem.library) == (
        ProblemKind.MISSING_VERSION, str(target), "VER_2", str(library))
    assert result.error == problem.message == (
        f"{library}: version `VER_2' not found (required by {target})")
    assert process.objects == (str(root / "exe"),)
    assert_real_agrees(process, [result], real_dlopen(root, (target, LOCAL)))


def test_the_version_it_was_linked_against_loads(built: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """With the libver.so that defines VER_2 beside it, libver_user.so loads."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libver_user.so": "libver_user.so",
                                     "app/libver.so": "ver2/libver.so"})
    target = root / "app" / "libver_user.so"
    process, results = simulate(root / "exe", (target, LOCAL))
    assert results[0].loads
    assert_real_agrees(process, results, real_dlopen(root, (target, LOCAL)))


def test_an_undefined_symbol_names_the_object_and_its_scope(built: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """An undefined symbol fails the load naming the object and the scope it searched."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libextra_user.so": "libextra_user.so",
                                     "app/libdep.so": "libdep.so"})
    target = root / "app" / "libextra_user.so"
    process, (result,) = simulate(root / "exe", (target, LOCAL))
    (problem,) = result.problems
    assert (problem.kind, problem.object, problem.symbol, problem.version) == (
        ProblemKind.UNDEFINED_SYMBOL, str(target), "dep_extra", None)
    assert result.error == problem.message == f"{target}: undefined symbol: dep_extra"
    assert problem.scope == (str(root / "exe"), str(target), str(root / "app" / "libdep.so"))
    assert process.objects == (str(root / "exe"),)
    assert_real_agrees(process, [result], real_dlopen(root, (target, LOCAL)))


def test_a_weak_undefined_symbol_is_no_problem(built: dict[str, Path], tmp_path: Path) -> None:
    """A weak reference that nothing defines does not stop the load."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/libweak.so": "libweak.so"})
    target = root / "app" / "libweak.so"
    process, results = simulate(root / "exe", (target, LOCAL))
    assert results[0].loads and results[0].problems == ()
    assert_real_agrees(process, results, real_dlopen(root, (target, LOCAL)))


@pytest.mark.parametrize("global_", [GLOBAL, LOCAL], ids=["rtld-global", "rtld-local"])
def test_rtld_global_symbols_serve_later_loads(built: dict[str, Path], tmp_path: Path,
                                               global_: bool) -> None:
    """Symbols of an RTLD_GLOBAL object serve later loads; those of an RTLD_LOCAL one do not."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so": "libdep.so",
                                     "b/libloose.so": "libloose.so"})
    opens = ((root / "a" / "libdep.so", global_), (root / "b" / "libloose.so", LOCAL))
    process, results = simulate(root / "exe", *opens)
    assert results[1].loads is global_
    if not global_:
        assert results[1].error == f"{root / 'b' / 'libloose.so'}: undefined symbol: dep_value"
    assert_real_agrees(process, results, real_dlopen(root, *opens))


@pytest.mark.parametrize("promoted", [False, True], ids=["local", "promoted"])
def test_rtld_global_of_a_loaded_object_promotes_it_and_its_dependencies(
        built: dict[str, Path], tmp_path: Path, promoted: bool) -> None:
    """dlopen(RTLD_GLOBAL) of an object loaded RTLD_LOCAL makes it and what it depends on
    global: libloose.so then binds dep_value to libdep.so, which only libuser.so links (as
    cuda.core's tensor bridge binds torch's aoti_torch_* after ctypes.CDLL(torch._C,
    RTLD_GLOBAL) of a torch imported before)."""
    root = arrange(tmp_path, built, {"exe": "exe", "rpath/libuser.so": "rpath/libuser.so",
                                     "rpath/r/libdep.so": "libdep.so",
                                     "b/libloose.so": "libloose.so"})
    user = root / "rpath" / "libuser.so"
    opens = ((user, LOCAL), *(((user, GLOBAL),) if promoted else ()),
             (root / "b" / "libloose.so", LOCAL))
    process, results = simulate(root / "exe", *opens)
    assert results[-1].loads is promoted
    assert_real_agrees(process, results, real_dlopen(root, *opens))


def test_ld_preload_is_in_the_global_scope(built: dict[str, Path], tmp_path: Path) -> None:
    """A library in LD_PRELOAD is mapped at startup and defines symbols for later loads."""
    root = arrange(tmp_path, built, {"exe": "exe", "a/libdep.so": "libdep.so",
                                     "b/libloose.so": "libloose.so"})
    config = replace(CLOSED, ld_preload=(str(root / "a" / "libdep.so"),))
    process, (result,) = simulate(root / "exe", (root / "b" / "libloose.so", LOCAL),
                                  config=config)
    assert process.startup is not None
    assert process.startup.search_list == (str(root / "exe"), str(root / "a" / "libdep.so"))
    assert result.loads


@pytest.mark.parametrize("assumed", [False, True], ids=["not-assumed", "assumed"])
def test_an_assumed_driver_library_defines_its_api(built: dict[str, Path], tmp_path: Path,
                                                   assumed: bool) -> None:
    """A missing libcuda.so.1 fails the load unless assumed; then a placeholder defines cu*."""
    root = arrange(tmp_path, built, {"exe": "exe", "app/_drv.so": "_drv.so"})
    rules = (("libcuda.so.1", r"cu[A-Z]\w*"),) if assumed else ()
    _, (result,) = simulate(root / "exe", (root / "app" / "_drv.so", LOCAL),
                            config=replace(CLOSED, assumed=rules))
    assert result.loads is assumed
    (resolution,) = result.resolutions
    if assumed:
        assert (resolution.path, resolution.via) == (f"{ASSUMED_DIR}/libcuda.so.1", Via.ASSUMED)
    else:
        assert result.error == "libcuda.so.1" + CANNOT_OPEN
