"""The whole-run cache of `abifit doctor`: a kept result is taken only while everything the run
looked at is unchanged, and what it looks at is recorded completely.

The environment is a real venv with two packages built at test time: `hostpkg` ships a library
and `extpkg` an extension module that needs it by soname through its RUNPATH. Each change to the
environment is followed by a run with the cache (a miss that stores), a second one (a hit: no
progress line at all) and a run without any cache, which must give the same report.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest

from abifit.engines.doctor import DoctorReport, doctor
from abifit.host import observe
from fixtures.build import compile_c

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
HOST_C = "int host_fn(int x) { return x + 1; }\n"
HOST_C_WITHOUT = "int other_fn(int x) { return x - 1; }\n"
EXT_C = """
extern int host_fn(int);
void *PyInit__ext(void) { host_fn(1); return 0; }
"""
NEW_C = "void *PyInit__new(void) { return 0; }\n"


@dataclass
class Env:
    root: Path
    python: Path
    site: Path

    @property
    def library(self) -> Path:
        return self.site / "hostpkg" / "libhost.so"


def _dist_info(site: Path, name: str, files: list[str], requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(exist_ok=True)
    meta = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"]
    meta += [f"Requires-Dist: {r}\n" for r in requires]
    (info / "METADATA").write_text("".join(meta))
    rows = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in rows))


def _build_host(env: Env, source: str) -> None:
    src = env.root / "host.c"
    src.write_text(source)
    compile_c(src, env.root / "libhost.so", soname="libhost.so")
    shutil.copyfile(env.root / "libhost.so", env.library)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def make_env(tmp_path: Path) -> Env:
    """The venv with hostpkg and extpkg installed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    made = Env(tmp_path, tmp_path / "venv" / "bin" / "python", site)
    for name in ("hostpkg", "extpkg"):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
    _build_host(made, HOST_C)
    ext_src = tmp_path / "ext.c"
    ext_src.write_text(EXT_C)
    compile_c(ext_src, site / "extpkg" / f"_ext{SUFFIX}", libs=[made.library],
              runpath=["$ORIGIN/../hostpkg"])
    _dist_info(site, "hostpkg", ["hostpkg/__init__.py", "hostpkg/libhost.so"])
    _dist_info(site, "extpkg", ["extpkg/__init__.py", f"extpkg/_ext{SUFFIX}"], ("hostpkg",))
    return made


@dataclass(frozen=True)
class Run:
    report: DoctorReport
    progress: tuple[str, ...]

    @property
    def hit(self) -> bool:
        return not self.progress


def run(env: Env, cache: Path | None, environ: dict[str, str] | None = None) -> Run:
    said: list[str] = []
    report = doctor(str(env.python), [], verify=False, cache_dir=cache,
                    environ=environ if environ is not None else {"PATH": os.environ["PATH"]},
                    progress=said.append, gpus=(), remote=None)
    return Run(report, tuple(said))


def settle() -> None:
    """Let the changes just made fall out of the window `observe.settled` refuses."""
    time.sleep(observe.SETTLE_NS / 1e9 + 0.1)


def check_change(env: Env, cache: Path, environ: dict[str, str] | None = None) -> DoctorReport:
    """After a change: a miss, then a hit, both equal to a run without a cache."""
    settle()
    first = run(env, cache, environ)
    assert not first.hit
    second = run(env, cache, environ)
    assert second.hit
    fresh = run(env, None, environ)
    assert first.report == second.report == fresh.report
    return fresh.report


def loads(report: DoctorReport) -> dict[str, bool]:
    return {m.module: m.loads for m in report.modules}


def test_kept_result_follows_every_change(env: Env, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    report = check_change(env, cache)
    assert loads(report) == {"extpkg._ext": True}

    _build_host(env, HOST_C_WITHOUT)  # the library loses the function the module needs
    report = check_change(env, cache)
    assert loads(report) == {"extpkg._ext": False}
    assert "host_fn" in (report.modules[0].error or "")

    _build_host(env, HOST_C)
    new = env.root / "new.c"
    new.write_text(NEW_C)
    compile_c(new, env.site / "extpkg" / f"_new{SUFFIX}")
    report = check_change(env, cache)
    assert loads(report) == {"extpkg._ext": True}  # the RECORD does not list it: not scanned
    _dist_info(env.site, "extpkg", ["extpkg/__init__.py", f"extpkg/_ext{SUFFIX}",
                                    f"extpkg/_new{SUFFIX}"], ("hostpkg",))
    report = check_change(env, cache)
    assert loads(report) == {"extpkg._ext": True, "extpkg._new": True}

    env.library.unlink()  # the module's library is gone
    report = check_change(env, cache)
    assert loads(report)["extpkg._ext"] is False

    # a copy of the library where the locator looks (CONDA_PREFIX/lib): its report names it
    prefix = tmp_path / "conda"
    (prefix / "lib").mkdir(parents=True)
    shutil.copyfile(env.root / "libhost.so", prefix / "lib" / "libhost.so")
    with_prefix = {"PATH": os.environ["PATH"], "CONDA_PREFIX": str(prefix)}
    report = check_change(env, cache, with_prefix)
    assert str(prefix / "lib" / "libhost.so") in repr(report.findings)
    assert run(env, cache).report != report  # without the variable: the other kept result

    # the library back, by LD_LIBRARY_PATH only: the loader's facts are part of the key
    with_path = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": str(prefix / "lib")}
    report = check_change(env, cache, with_path)
    assert loads(report)["extpkg._ext"] is True

    # hostpkg's code comes to load its library itself, which makes the library a file to
    # check: a change seen only in a text that worker processes read
    _build_host(env, HOST_C)
    (env.site / "hostpkg" / "__init__.py").write_text("from hostpkg import _load\n")
    (env.site / "hostpkg" / "_load.py").write_text("x = 1\n")
    _dist_info(env.site, "hostpkg", ["hostpkg/__init__.py", "hostpkg/_load.py",
                                     "hostpkg/libhost.so"])
    check_change(env, cache)
    (env.site / "hostpkg" / "_load.py").write_text("import ctypes\nctypes.CDLL('libhost.so')\n")
    report = check_change(env, cache)
    assert str(env.library) in {m.path for m in report.modules}


def test_a_change_too_recent_is_not_kept(env: Env, tmp_path: Path) -> None:
    """A run that observed a file changed in the last second stores nothing: a change in the
    same clock tick after the observation would not change its stamp."""
    cache = tmp_path / "cache"
    settle()
    run(env, cache)
    assert run(env, cache).hit
    os.utime(env.library)  # now
    assert not run(env, cache).hit
    assert not run(env, cache).hit  # the run after the change kept nothing
    settle()
    assert not run(env, cache).hit
    assert run(env, cache).hit


def test_verify_and_packages_are_not_taken_from_another_run(env: Env, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    settle()
    run(env, cache)
    said: list[str] = []
    only = doctor(str(env.python), ["extpkg"], verify=False, cache_dir=cache,
                  environ={"PATH": os.environ["PATH"]}, progress=said.append, gpus=())
    assert said  # another key: a miss
    assert [m.module for m in only.modules] == ["extpkg._ext"]
    verified = doctor(str(env.python), [], verify=True, cache_dir=cache,
                      environ={"PATH": os.environ["PATH"]}, progress=lambda _: None, gpus=())
    assert verified.verification is not None and all(v.agrees for v in verified.verification)


# ---------------------------------------------------------------------------------------------
# Completeness: every file-system call made while recording is one the recorder noted


@contextmanager
def raw_calls() -> Iterator[list[tuple[str, str, observe.Recorder]]]:
    """Every path given to os.stat, os.lstat, os.scandir, os.listdir, os.readlink, os.open and open
    while a recorder is active, with the first recorder active (doctor's own: a survey made in
    doctor's process records its reads too, and each is noted by every recorder active)."""
    seen: list[tuple[str, str, observe.Recorder]] = []
    patched: list[tuple[object, str, Callable[..., object]]] = []

    def wrap(owner: object, name: str) -> None:
        real = getattr(owner, name)

        def spy(path: object, *args: object, **kwargs: object) -> object:
            if observe._recorders and isinstance(path, (str, os.PathLike)):
                seen.append((name, os.fspath(path), observe._recorders[0]))  # type: ignore
            return real(path, *args, **kwargs)

        patched.append((owner, name, real))
        setattr(owner, name, spy)

    for name in ("stat", "lstat", "scandir", "listdir", "readlink", "open"):
        wrap(os, name)
    wrap(builtins, "open")
    wrap(io, "open")
    try:
        yield seen
    finally:
        for owner, name, real in patched:
            setattr(owner, name, real)


def test_every_call_is_noted(env: Env, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    own = str(Path(observe.__file__).resolve().parent.parent)
    (env.site / "hostpkg" / "sub").mkdir()
    os.symlink(env.library, env.site / "hostpkg" / "sub" / "link.so")
    for cache_dir in (None, cache, cache):  # cold, then the ELF views from the cache
        shutil.rmtree(cache / "runs-v1", ignore_errors=True)
        with raw_calls() as seen:
            run(env, cache_dir)
        assert seen  # the spies saw calls, all made under doctor's one recorder
        recorder = seen[0][2]
        assert all(r is recorder for _call, _path, r in seen)
        noted = {path for _kind, path in recorder.seen}
        missed = {(call, path) for call, path, _r in seen
                  if path not in noted and not path.startswith((str(cache), own))}
        assert not missed


# ---------------------------------------------------------------------------------------------
# The calls themselves against the os and glob functions they stand for


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    for d in ("a/b/c", "a/.h/c", "lib/python3.11/site-packages", "lib/python3.12", "x[1]"):
        (root / d).mkdir(parents=True)
    for f in ("a/f.so", "a/.g.so", "a/b/c/lib.so.1", "x[1]/y"):
        (root / f).write_text("")
    os.symlink("b", root / "a" / "lb")
    os.symlink(root / "a" / "lb" / "c", root / "abs")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.symlink("nothere", root / "a" / "dang.so")
    os.symlink("../lb/..", root / "a" / "b" / "up")
    return root


def test_realpath_resolves_as_the_os_does(tree: Path) -> None:
    names = ["a", "b", "c", "lb", "abs", "loop1", "loop2", "dang.so", "up", "..", ".", "x", ""]
    rng = random.Random(7)
    with observe.recording() as recorder:
        for _ in range(5000):
            path = str(tree) + "/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 5)))
            assert observe.realpath(path) == os.path.realpath(path), path
    assert recorder.seen[(observe.READLINK, str(tree / "a" / "lb"))] == "b"


def test_glob_matches_glob_and_pathlib(tree: Path) -> None:
    import glob

    patterns = ["*", "a/*", "a/*.so", "a/.*", "*/*/c", "a/*/c/*", "lib/python3*/site-packages",
                "a/lb/*", "a/**", "*/b", "x[[]1]/*", "a/dang.so", "a/none", "[ab]/?.so"]
    for pattern in patterns:
        full = os.path.join(glob.escape(str(tree)), pattern)
        if "**" not in pattern:
            assert observe.glob(full, hidden=False) == glob.glob(full), pattern
        mine = observe.glob(full, hidden=True)
        theirs = [str(p) for p in Path(tree).glob(pattern)]
        assert sorted(mine) == sorted(theirs), pattern


def test_unchanged_sees_changes(tree: Path) -> None:
    with observe.recording() as recorder:
        observe.isfile(str(tree / "a" / "f.so"))
        observe.scandir(str(tree / "a" / "b"))
        observe.exists(str(tree / "a" / "nothing"))
    kept = recorder.observations()
    assert observe.unchanged(kept)
    (tree / "a" / "b" / "new").write_text("")  # an entry added to a listed directory
    assert not observe.unchanged(kept)
    (tree / "a" / "b" / "new").unlink()
    with observe.recording() as recorder:
        observe.exists(str(tree / "a" / "nothing"))
    kept = recorder.observations()
    (tree / "a" / "nothing").write_text("")  # a path that was missing is there
    assert not observe.unchanged(kept)


def test_a_stat_the_lstat_answers_is_not_kept_and_changes_are_still_seen(tree: Path) -> None:
    """The `stat` of a path whose `lstat` answered the same (not a link) is left out of what
    is kept; a link's `stat` stays (it answers for the target). Changing the file, or making
    the path a link to an identical file, is still seen."""
    plain, link = tree / "a" / "f.so", tree / "a" / "lb"
    with observe.recording() as recorder:
        for path in (plain, link):
            observe.lstat(str(path))
            observe.stat(str(path))
    kept = recorder.observations()
    kinds, paths, _ = kept.columns()
    assert sorted(zip(kinds, paths, strict=True)) == sorted(
        [("lstat", str(plain)), ("lstat", str(link)), ("stat", str(link))])
    assert observe.unchanged(kept)
    plain.write_text("changed")
    assert not observe.unchanged(kept)
    with observe.recording() as recorder:
        observe.lstat(str(plain))
        observe.stat(str(plain))
    kept = recorder.observations()
    assert kept.columns()[0] == ("lstat",)
    twin = tree / "a" / "twin.so"
    shutil.copy2(plain, twin)
    plain.unlink()
    plain.symlink_to(twin)
    assert not observe.unchanged(kept)


def test_unchanged_reads_links_missing_names_and_refuses_what_it_cannot_read(tree: Path) -> None:
    """A link's target is asked again (a retargeted link is a change), a name with a NUL byte
    stays missing, and observations whose bytes are not three columns of known kinds count
    as changed (the run is made again)."""
    link = tree / "a" / "link"
    link.symlink_to("f.so")
    with observe.recording() as recorder:
        observe.realpath(str(link))
        observe.exists(str(tree / "a" / "no\x00name"))
    kept = recorder.observations()
    assert "readlink" in kept.columns()[0]
    assert observe.unchanged(kept)
    link.unlink()
    link.symlink_to("elsewhere.so")
    assert not observe.unchanged(kept)
    for packed in (b"", b"\xc1", msgpack.packb([["stat"], ["/"]]),
                   msgpack.packb([["chmod"], ["/"], [0]]), msgpack.packb([["stat"], [1], [0]])):
        assert not observe.unchanged(observe.Observations(packed)), packed


def test_a_guess_is_the_check_of_the_run_noted_last_and_counts_for_its_own_key_only(
        tree: Path) -> None:
    """`RunCache.guess` checks the run whose key was noted last under a name, before the key of
    a run is known; `printed` takes that check only for the same key, and checks any other key
    itself."""
    from abifit.host.runcache import Guess, ReadEnviron, RunCache

    runs = RunCache(tree / "cache", "doctor")
    watched = tree / "a" / "f.so"
    assert runs.guess("python", {}) is None  # nothing noted
    for key, said in (("key-1", "one"), ("key-2", "two")):
        with observe.recording() as recorder:
            observe.isfile(str(watched))
        recorder.started_ns += 2 * observe.SETTLE_NS  # as if the file was older
        assert runs.put(key, ReadEnviron({}), recorder, said, said)
    runs.remember("python", "key-1")
    guessed = runs.guess("python", {})
    assert guessed is not None and guessed.key == "key-1" and guessed.stored is not None
    assert runs.printed("key-1", {}, str, guessed) == "one"
    assert runs.printed("key-2", {}, str, guessed) == "two"  # another key: checked itself
    # a guess that found the run changed counts for its key, and for no other
    assert runs.printed("key-1", {}, str, Guess("key-1", None)) is None
    assert runs.printed("key-2", {}, str, Guess("key-1", None)) == "two"
    watched.write_text("changed")
    changed = runs.guess("python", {})
    assert changed == Guess("key-1", None)
    assert runs.printed("key-1", {}, str, changed) is None
    assert runs.printed("key-2", {}, str) is None


_CLI = """
import io, json, sys
from abifit import workers
from abifit.cli import main
workers.fork_workers()  # as the `abifit` command: the kept run's check is made by a fork
out = io.StringIO()
sys.stdout = out
code = main(sys.argv[1:])
sys.stdout = sys.__stdout__
print(json.dumps([code, out.getvalue(), "abifit.engines.doctor" in sys.modules]))
"""


def test_a_warm_doctor_prints_the_kept_run_without_simulating(env: Env, tmp_path: Path) -> None:
    """`abifit doctor` again on an unchanged environment prints what the first run printed, in
    each form and with the same exit status under each --fail-on, from the kept run: in a
    process that never imports the simulation (`commands.doctor`). A change brings it back."""
    # a guarded module whose library nothing provides: a prerequisite (the stack fits, unless
    # prerequisites are to count)
    made = env.root / "madeup.c"
    made.write_text("int madeup_fn(void) { return 3; }\n")
    compile_c(made, env.root / "libmadeup.so.3", soname="libmadeup.so.3")
    pre = env.root / "pre.c"
    pre.write_text("extern int madeup_fn(void);\n"
                   "void *PyInit__pre(void) { madeup_fn(); return 0; }\n")
    compile_c(pre, env.site / "extpkg" / f"_pre{SUFFIX}", libs=[env.root / "libmadeup.so.3"])
    (env.root / "libmadeup.so.3").unlink()
    (env.site / "extpkg" / "__init__.py").write_text(
        "try:\n    from extpkg import _pre\nexcept ImportError:\n    _pre = None\n")
    _dist_info(env.site, "extpkg", ["extpkg/__init__.py", f"extpkg/_ext{SUFFIX}",
                                    f"extpkg/_pre{SUFFIX}"], ("hostpkg",))
    cache = tmp_path / "cache"

    def doctor_cli(*extra: str) -> tuple[int, str, bool]:
        argv = ["doctor", "--python", str(env.python), "--cache-dir", str(cache), *extra]
        done = subprocess.run([sys.executable, "-c", _CLI, *argv], capture_output=True,
                              text=True, check=True, env={**os.environ, "NO_COLOR": "1"})
        code, printed, simulated = json.loads(done.stdout.splitlines()[-1])
        return code, printed, simulated

    forms = [(), ("--json",), ("--verbose",), ("--fail-on", "prerequisite"),
             ("--fail-on", "fails")]
    fresh = {form: doctor_cli(*form, "--no-cache") for form in forms}  # nothing kept
    assert all(simulated for _, _, simulated in fresh.values())
    assert fresh[()][0] == 0 and fresh[("--fail-on", "prerequisite")][0] == 1
    assert "1 needs a prerequisite" in fresh[()][1]
    assert json.loads(fresh[("--json",)][1])["verdict"] == "fits"
    settle()
    assert doctor_cli()[2]  # the first run with the cache simulates and keeps its run
    for form in forms:
        code, printed, simulated = doctor_cli(*form)
        assert (code, printed) == fresh[form][:2], form
        assert not simulated, form

    # the run noted last for the interpreter is checked while it answers; a run of another key
    # (offline) is noted in its place, and the next run checks its own kept run and notes it
    from abifit.engines.kept import latest_name
    from abifit.host.runcache import RunCache

    runs, name = RunCache(cache, "doctor"), latest_name(str(env.python), ())
    noted = runs.guess(name, {})
    assert noted is not None
    assert doctor_cli("--no-index")[2]
    offline = runs.guess(name, {})
    assert offline is not None and offline.key != noted.key
    assert doctor_cli() == (*fresh[()][:2], False)
    again = runs.guess(name, {})
    assert again is not None and again.key == noted.key

    _build_host(env, HOST_C_WITHOUT)  # the library loses the function a module needs
    settle()
    code, printed, simulated = doctor_cli()
    assert simulated and code == 1 and printed.splitlines()[-1].startswith("degraded")
    assert doctor_cli() == (code, printed, False)
