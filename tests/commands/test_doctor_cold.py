"""What a cold `doctor` reads, and how little: heads of programs, tables without interning,
the Python code of a distribution read in one call (with the modules that mention its wrappers),
each against the whole reading it stands for."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from abifit import workers
from abifit.engines import plans
from abifit.engines.doctor import InstalledCode, system_libraries
from abifit.engines.plans import code_digest, parse, survey
from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.pysource import ModuleCode, compile_error
from abifit.formats.sources import FileSource
from abifit.host.environment import Distribution
from abifit.host.ldconfig import probe_host
from abifit.host.localfs import LocalObjects, parse_file, parse_head
from abifit.host.natives import NativeFile
from abifit.sim.imports import DistributionPlan, PackageCode, load_steps, mentions_in, wrappers_of
from abifit.sim.loader import Process, cached_paths
from abifit.sim.process import search_config
from fixtures.build import compile_c

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

LIBRARY = """
#include <math.h>
double lib_value(double x) { return cos(x) + 1.0; }
"""
PROGRAM = """
#include <stdio.h>
extern double lib_value(double);
int main(void) { printf("%f\\n", lib_value(0.5)); return 0; }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A library (libvalue.so, needing libm) and a program that links to it."""
    root = tmp_path_factory.mktemp("cold")
    (root / "value.c").write_text(LIBRARY)
    (root / "prog.c").write_text(PROGRAM)
    lib = compile_c(root / "value.c", root / "libvalue.so", soname="libvalue.so",
                    libs=["-lm"])
    prog = compile_c(root / "prog.c", root / "prog", shared=False, libs=[lib],
                     runpath=["$ORIGIN"])
    return lib, prog


def _full(path: Path) -> ElfImage:
    with FileSource(str(path)) as source:
        return parse_elf(source)


def _readelf_needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines()
            if "(NEEDED)" in line]


@pytest.mark.parametrize("which", [0, 1])
def test_a_head_is_the_whole_view_but_its_symbols(built: tuple[Path, Path], which: int) -> None:
    """`parse_head` reads what a file is and what it links to as the whole parse does (and as
    `readelf -d` lists it), and no symbol nor relocation."""
    path = built[which]
    head, full = parse_head(str(path)), _full(path)
    assert len(full.symbols) > 0 and len(head.symbols) == 0
    assert head.relocated_symbols is None and full.relocated_symbols is not None
    for name in ("file_type", "interpreter", "dynamic", "version_needs", "version_defs",
                 "sections", "loads", "machine", "elf_class"):
        assert getattr(head, name) == getattr(full, name), name
    assert list(head.needed) == _readelf_needed(path)


def test_tables_without_interning_equal_interned_ones(built: tuple[Path, Path]) -> None:
    """A table read without interning its names is equal to the interned one, and stays
    uninterned through a pickle (the form in which a worker hands it over)."""
    lib = built[0]
    interned = _full(lib)
    with FileSource(str(lib)) as source:
        plain = parse_elf(source, intern=False)
    assert plain == interned
    assert all(sys.intern(n) is n for n in interned.symbols.names)
    back = pickle.loads(pickle.dumps(plain))
    assert back == interned and back.symbols.intern is False
    assert any(sys.intern(n) is not n for n in back.symbols.names if n)


def test_local_objects_give_heads_and_whole_images(built: tuple[Path, Path]) -> None:
    """Heads are asked ahead for programs, whole images for libraries: `head` of a library
    parsed whole is that image, `head` of a program is a head, and `image` of a program is
    still the whole view (never a head)."""
    lib, prog = (str(p) for p in built)
    source = LocalObjects()
    source.prefetch([lib], heads=[prog])
    assert source.head(lib) is source.image(lib)
    head = source.head(prog)
    assert len(head.symbols) == 0 and head.needed == _full(built[1]).needed
    whole = source.image(prog)
    assert whole == _full(built[1]) and len(whole.symbols) > 0
    assert source.head(prog) is whole  # once the whole view is known, it serves heads too
    if workers.parallel():  # the heads and images above came from worker processes
        assert workers.run(parse_head, prog) == head


@pytest.fixture
def busy_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Future[None]]:
    """One worker process, busy for a while with the first call: calls submitted now wait,
    not started, in the queue of the one thread that hands calls to it."""
    pool = workers._Pool(1)
    submitter = ThreadPoolExecutor(1)
    monkeypatch.setattr(workers, "_pool", pool)
    monkeypatch.setattr(workers, "_submitter", submitter)
    busy = workers.submit(time.sleep, 1.5)
    yield busy
    busy.result()
    submitter.shutdown()
    pool.close()


def test_a_parse_no_worker_has_started_is_made_here(built: tuple[Path, Path],
                                                    busy_worker: Future[None]) -> None:
    """An image asked for while its parse still waits for a worker is parsed here, and the
    waiting parse taken back, rather than waited for: the same image, before the worker is
    free."""
    lib, prog = (str(p) for p in built)
    source = LocalObjects(None, relocations=False)
    source.prefetch([lib], heads=[prog])
    coming = [*source._coming.values(), *source._heads_coming.values()]
    assert len(coming) == 2 and not any(c.running() or c.done() for c in coming)
    assert source.image(lib) == parse_file(lib, None, relocations=False)
    assert source.head(prog) == parse_head(prog)
    assert all(c.cancelled() for c in coming) and not busy_worker.done()


def test_python_code_no_worker_has_started_is_read_here(busy_worker: Future[None]) -> None:
    """The same for a module's code read ahead (`ParseAhead`)."""
    text = PACKAGE["ta/_extension/utils.py"].encode()
    reader = plans.ParseAhead(None, parse)
    reader.ahead([(text, "ta._extension.utils", False)])
    (coming,) = reader._coming.values()
    assert reader(text, "ta._extension.utils", False) == parse(text, "ta._extension.utils",
                                                               False)
    assert coming.cancelled() and not busy_worker.done()


PACKAGE = {
    "ta/__init__.py": "from ta import _extension\n",
    "ta/_extension/__init__.py": ("from ta._extension.utils import _load_lib\n"
                                  "if True:\n    _load_lib('libtorchaudio')\n"),
    "ta/_extension/utils.py": ("import torch\nfrom pathlib import Path\n"
                               "_LIB_DIR = Path(__file__).parent.parent / 'lib'\n"
                               "def _load_lib(lib):\n    path = _LIB_DIR / f'{lib}.so'\n"
                               "    torch.ops.load_library(path)\n"),
    "ta/other.py": "# mentions _load_libs and not_load_lib only\nx = 1\n",
    "ta/late.py": "from ta._extension.utils import _load_lib\n_load_lib('libother')\n",
}


@pytest.mark.parametrize("kept", [plans.KEPT_TEXT, 60])
def test_a_whole_survey_finds_what_reading_the_texts_finds(
        tmp_path: Path, kept: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution read in one call finds the modules that name a loading function, the
    wrappers they define and the modules that mention those (as whole words), and reads them;
    the load steps made from it are those made by reading every text on demand. Texts past
    the bytes a survey keeps are read again, to the same answer."""
    monkeypatch.setattr(plans, "KEPT_TEXT", kept)
    modules = []
    for rel, text in PACKAGE.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        name = rel[:-3].replace("/", ".").removesuffix(".__init__")
        modules.append((name, str(path)))
    found = survey(modules, None, True)
    assert found.marked == (str(tmp_path / "ta/_extension/utils.py"),)
    assert found.mentions == (("_load_lib", ("ta._extension", "ta._extension.utils",
                                             "ta.late")),)
    assert len(found.codes) == 3  # utils, then the two callers; `ta.other` is not read
    sources = dict(modules)
    texts = {path: Path(path).read_bytes() for path in sources.values()}
    files = {"ta/lib/libtorchaudio.so": "/s/ta/lib/libtorchaudio.so",
             "ta/lib/libother.so": "/s/ta/lib/libother.so"}
    by_reading = load_steps(PackageCode(sources, texts.get, parse), files)

    def unread(path: str) -> bytes | None:  # the surveyed code: only the digests' texts read
        return texts[path] if path in {sources[n] for n in ("ta._extension", "ta.late",
                                                           "ta._extension.utils")} else None

    given = {digest: code for digest, code in found.codes}

    def parse_given(data: bytes, name: str, is_package: bool) -> ModuleCode | None:
        return given[code_digest(data, name, is_package)]

    marked_names = [n for n, p in modules if p in found.marked]
    surveyed = PackageCode(sources, unread, parse_given, loading=marked_names,
                           mentions=dict(found.mentions))
    assert load_steps(surveyed, files) == by_reading
    assert {s.path for s in by_reading} == set(files.values())


def _package_modules(root: Path) -> list[tuple[str, str]]:
    modules = []
    for rel, text in PACKAGE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules.append((rel[:-3].replace("/", ".").removesuffix(".__init__"), str(path)))
    return modules


@pytest.mark.parametrize("parts", [1, 2, 3, 5, 8])
def test_a_survey_in_parts_finds_what_the_whole_survey_finds(tmp_path: Path, parts: int) -> None:
    """A distribution read in parts on the other cores, then searched for the modules that
    mention the wrappers found (here the wrapper is defined in one part and called from
    another), gives the whole survey's answer: the same modules marked, read and found
    mentioning, and the same files observed. It cannot be cancelled, as a survey not started
    can (its parts are the workers')."""
    modules = _package_modules(tmp_path)
    whole = survey(modules, None, True)
    coming = plans.survey_in_parts(modules, None, parts)
    assert not coming.cancel()  # begun: a caller gathering surveys cannot take it over
    found = coming.result(timeout=60)
    assert found.marked == whole.marked
    assert dict(found.codes) == dict(whole.codes) and len(found.codes) == len(whole.codes)
    assert found.mentions == whole.mentions
    assert dict(found.seen) == dict(whole.seen)


def test_a_survey_compiles_the_top_level_modules_for_the_version(tmp_path: Path) -> None:
    """Given a CPython version, a survey (whole or in parts) compiles each top-level module
    for it, as `import_verdicts` would (`compile_error`), and no submodule; without one,
    nothing is compiled."""
    texts = {"good": "x = 1\n", "bad": "def f(:\n    pass\n", "bad.sub": "def g(:\n"}
    modules = []
    for name, text in texts.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        modules.append((name, str(path)))
    version = (sys.version_info[0], sys.version_info[1])
    wanted = {str(tmp_path / "good.py"): None,
              str(tmp_path / "bad.py"): compile_error(texts["bad"].encode(), version)}
    assert (wanted[str(tmp_path / "bad.py")] or "").startswith("SyntaxError")
    assert dict(survey(modules, None, True, version).compiled) == wanted
    found = plans.survey_in_parts(modules, None, 2, version).result(timeout=60)
    assert dict(found.compiled) == wanted
    assert survey(modules, None, True).compiled == ()


def test_a_survey_in_parts_without_wrappers_reads_no_more(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no part finds a wrapper, nothing is searched for: the parts' answers are the
    answer; a part that fails fails the survey, for the caller to read the modules itself."""
    modules = [m for m in _package_modules(tmp_path) if m[0] != "ta._extension.utils"]
    calls: list[str] = []
    submit = workers.submit

    def counting(function, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(function.__name__)
        return submit(function, *args, **kwargs)

    monkeypatch.setattr(workers, "submit", counting)
    found = plans.survey_in_parts(modules, None, 2).result(timeout=60)
    assert calls == ["survey", "survey"] and found.mentions == () and found.marked == ()
    assert found == survey(modules, None, False)

    def failing(function, *args, **kwargs):  # type: ignore[no-untyped-def]
        if len(calls) == 2:
            broken: Future[object] = Future()
            broken.set_exception(OSError("worker gone"))
            return broken
        return counting(function, *args, **kwargs)

    monkeypatch.setattr(workers, "submit", failing)
    calls.clear()
    failed = plans.survey_in_parts(_package_modules(tmp_path), None, 3)
    with pytest.raises(OSError, match="worker gone"):
        failed.result(timeout=60)


def _site_of_packages(root: Path, count: int) -> tuple[list[Distribution], list[NativeFile]]:
    """`count` distributions in a site under `root`, each a copy of PACKAGE under its own
    top-level name (`ta0`, `ta1`, ...) with its two libraries, and their native files."""
    site = root / "site"
    dists, natives = [], []
    for i in range(count):
        top = f"ta{i}"
        files = []
        for rel, text in PACKAGE.items():
            path = site / rel.replace("ta/", f"{top}/", 1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("ta.", f"{top}.").replace("from ta ", f"from {top} "))
            files.append(str(path))
        for lib in ("libtorchaudio.so", "libother.so"):
            path = site / top / "lib" / lib
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            files.append(str(path))
            natives.append(NativeFile(str(path), f"ta{i}", None))
        info = site / f"ta{i}-1.0.dist-info"
        info.mkdir()
        dists.append(Distribution(f"ta{i}", "1.0", info, tuple(files)))
    return dists, natives


def _what_plans_say(made: dict[str, DistributionPlan], natives: list[NativeFile],
                    ) -> dict[str, object]:
    """Of each plan, its top-level names, the libraries it loads, and how each of its native
    files is reached."""
    return {key: (plan.tops, plan.loads,
                  [plan.place(n.path) for n in natives if n.distribution == key])
            for key, plan in made.items()}


@pytest.mark.skipif(not workers.parallel(), reason="needs worker processes (2 cores or more)")
def test_surveys_no_worker_has_started_are_made_here(tmp_path: Path) -> None:
    """While every worker is busy, the surveys waiting for one are made by the caller when it
    asks for the plans, rather than waited for; the plans are those made when the workers
    read every distribution, and those made by reading the texts on demand (no workers)."""
    dists, natives = _site_of_packages(tmp_path, 4)
    by_workers = InstalledCode()
    by_workers.start(dists)
    expected = _what_plans_say(by_workers.plans(dists, natives), natives)
    alone = InstalledCode()  # not started: every text read on demand
    assert _what_plans_say(alone.plans(dists, natives), natives) == expected
    assert all(len(loads) == 2 for _, loads, _ in expected.values())  # type: ignore[misc]

    busy = [workers.submit(time.sleep, 3.0) for _ in range(workers.workers_wanted())]
    try:
        time.sleep(0.2)  # every submitting thread now waits on a busy worker
        stolen = InstalledCode()
        stolen.start(dists)
        began = time.perf_counter()
        assert _what_plans_say(stolen.plans(dists, natives), natives) == expected
        assert time.perf_counter() - began < 2.0 and not any(b.done() for b in busy)
    finally:
        for b in busy:
            b.result(timeout=60)


def test_mentions_and_wrappers_helpers() -> None:
    """`mentions_in` matches whole words only; `wrappers_of` keeps a name's first definition."""
    texts = [("a", b"call(_load_lib)"), ("b", b"_load_libs()"), ("c", None), ("d", b"x._load_lib")]
    assert mentions_in("_load_lib", texts) == ["a", "d"]
    code = parse(PACKAGE["ta/_extension/utils.py"].encode(), "ta._extension.utils", False)
    assert code is not None
    assert list(wrappers_of([code, None, code])) == ["_load_lib"]


def _ldconfig_paths() -> dict[str, str]:
    """soname -> path of the x86-64 entries `ldconfig -p` lists (the first of each)."""
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True,
                         check=True).stdout
    found: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        name, _, rest = line.strip().partition(" (")
        if "x86-64" in rest.split(")")[0]:
            found.setdefault(name, rest.rpartition(" => ")[2])
    return found


@pytest.mark.skipif(not Path("/sbin/ldconfig").exists() or sys.platform != "linux",
                    reason="needs ldconfig")
def test_system_libraries_are_found_where_ldconfig_lists_them(built: tuple[Path, Path]) -> None:
    """The libraries outside the environment that its files name, read ahead of the
    simulation, are where `ldconfig -p` says; the environment's own are left out."""
    lib, prog = built
    natives = [NativeFile(str(lib), "pkg", None), NativeFile(str(prog), "pkg", None)]
    config = search_config(probe_host(dict(os.environ)))
    paths = system_libraries(natives, parse_head, config)
    listed = _ldconfig_paths()
    if "x86_64" not in os.uname().machine or not {"libc.so.6", "libm.so.6"} <= listed.keys():
        pytest.skip("not an x86-64 glibc system")
    assert sorted(map(os.path.realpath, paths)) == sorted(
        os.path.realpath(listed[name]) for name in ("libc.so.6", "libm.so.6"))
    assert not any("libvalue" in p for p in paths)
    assert cached_paths(config, ["libno-such-library.so.9"], parse_head(str(lib))) == []


QUIET = """
__asm__(".globl zz_quiet_missing");  /* undefined, and no relocation references it */
int quiet_ok(void) { return 1; }
"""
LOUD = """
__asm__(".globl zz_quiet_missing");
extern int zz_loud_b(void);
extern int zz_loud_a(void);
int loud(void) { return zz_loud_b() + zz_loud_a(); }
"""
REAL = """
import ctypes, os, sys
try:
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)
    print("loads")
except OSError as e:
    print(e)
"""


def _real_dlopen(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", REAL, str(path)], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.parametrize("relocations", [True, False])
def test_relocations_read_when_a_symbol_is_missing_agree_with_dlopen(
        tmp_path: Path, relocations: bool) -> None:
    """Views without relocation tables bind every undefined symbol; when one is missing, the
    relocations are read, so that (as for the real loader) a symbol no relocation references
    fails nothing, and the first missing one is the one ld.so names."""
    (tmp_path / "quiet.c").write_text(QUIET)
    (tmp_path / "loud.c").write_text(LOUD)
    quiet = compile_c(tmp_path / "quiet.c", tmp_path / "libquiet.so")
    loud = compile_c(tmp_path / "loud.c", tmp_path / "libloud.so")
    assert "zz_quiet_missing" in subprocess.run(["nm", "-D", str(quiet)], capture_output=True,
                                                text=True, check=True).stdout
    config = search_config(probe_host(dict(os.environ)))
    source = LocalObjects(relocations=relocations)
    process = Process(source, config, sys.executable)
    assert process.startup is not None and process.startup.loads
    assert _real_dlopen(quiet) == "loads"
    assert process.dlopen(str(quiet)).loads
    real = _real_dlopen(loud)
    assert "undefined symbol" in real
    result = process.dlopen(str(loud))
    assert not result.loads and result.error is not None
    assert result.error.rpartition("undefined symbol: ")[2] == real.rpartition(
        "undefined symbol: ")[2]
    assert "zz_quiet_missing" not in result.error
    assert source.image(str(loud)).relocated_symbols is not None  # read for the failure
