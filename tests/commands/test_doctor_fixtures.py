"""Differential tests of `abifit doctor`: its predictions against real imports in a real venv.

The packages of tests/fixtures/doctor/ (sources and `build.py` there) are compiled once per
module, installed as wheels into a fresh CPython 3.11 venv, and then, for every fixture, two things
run with the same environment (LD_LIBRARY_PATH, LD_PRELOAD): `abifit doctor <pkg> --json` and
`python -c "import <pkg>"` in the venv. The predicted verdict must be the real one, and a
predicted error must appear verbatim in the real ImportError.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from abifit.host.ldconfig import GlibcVersion, hwcaps_search, parse_cpuinfo
from fixtures.doctor import build
from helpers import schema, validate

EXT = ".cpython-311-x86_64-linux-gnu.so"
LD_ENV_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
               "CONDA_PREFIX")

Json = dict[str, object]
SCHEMA = schema("doctor")


def _running_glibc() -> tuple[int, int] | None:
    """The release of the C library this Python runs on (confstr), None when not glibc."""
    try:
        found = re.search(r"(\d+)\.(\d+)", os.confstr("CS_GNU_LIBC_VERSION") or "")
    except (ValueError, OSError):
        return None
    return (int(found[1]), int(found[2])) if found else None


RUNNING_GLIBC = _running_glibc()
# glibc up to 2.36 searches the legacy hwcaps subdirectories (tls, the platform, x86_64 ...)
LEGACY_SEARCHED = RUNNING_GLIBC is not None and RUNNING_GLIBC <= (2, 36)

# Loader environments: nothing set, LD_LIBRARY_PATH set, LD_PRELOAD set.
PLAIN, LD_PATH, PRELOAD = "plain", "ld-library-path", "preload"


@dataclass(frozen=True, slots=True)
class Case:
    """One fixture run: the package imported, the loader environment, what really happens.

    `loads` and `error` (a fragment of the real ImportError) state what the fixture is built to
    do; each test first checks that the real loader does it, then compares abifit with it.
    """

    id: str
    package: str
    loads: bool
    error: str | None = None
    env: str = PLAIN
    needs_32bit: bool = False
    needs_hwcaps: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.package, self.env


CANNOT_OPEN = ": cannot open shared object file: No such file or directory"
PARAM_SYMBOL = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"

CASES = (
    Case("host-extension-loads", "hostpkg", True),
    Case("parameter-type-changed", "ext_param", False, f"undefined symbol: {PARAM_SYMBOL}"),
    Case("function-removed", "ext_removed", False, "undefined symbol: _ZN4host12legacy_entryEi"),
    Case("string-abi-mismatch", "ext_abi", False, "undefined symbol: _ZN4host8describeERKSs"),
    Case("library-off-search-path", "ext_missing_lib", False, "libnvrtc.so.13" + CANNOT_OPEN),
    Case("library-in-nvidia-wheel-only", "ext_missing_cand", False,
         "libnvJitLink.so.13" + CANNOT_OPEN),
    Case("symbol-past-a-missing-library", "ext_past", False, "libnvJitLink.so.13" + CANNOT_OPEN),
    Case("soname-matches-loaded-host", "ext_soname_ok", True),
    Case("rpath-inherited-by-dependency", "ext_rpath", True),
    Case("runpath-not-inherited", "ext_runpath", False, "libleaf_n.so" + CANNOT_OPEN),
    Case("rpath-beats-ld-library-path", "ext_prec_rpath", True, env=LD_PATH),
    Case("ld-library-path-beats-runpath", "ext_prec_runpath", False,
         "undefined symbol: prec_extra", env=LD_PATH),
    Case("runpath-without-ld-library-path", "ext_prec_runpath", True),
    Case("found-through-ld-library-path", "ext_ldpath", True, env=LD_PATH),
    Case("not-found-without-ld-library-path", "ext_ldpath", False, "libldp.so" + CANNOT_OPEN),
    Case("platform-token-in-ld-library-path", "ext_ldtoken", True, env=LD_PATH),
    Case("legacy-hwcaps-subdirectory", "ext_legacy", LEGACY_SEARCHED,
         None if LEGACY_SEARCHED else "libldleg.so" + CANNOT_OPEN),
    Case("version-not-defined", "ext_version", False, "version `HOST_2.0' not found (required by "),
    Case("weak-undefined-symbol", "ext_weak", True),
    Case("wrong-elf-class-skipped", "ext_class32", True, needs_32bit=True),
    Case("wrong-elf-class-only-candidate", "ext_classonly", False,
         "libcls_o.so: wrong ELF class: ELFCLASS32", needs_32bit=True),
    Case("rtld-local-symbols-not-global", "ext_local_scope", False,
         "undefined symbol: host_core_version"),
    Case("versioned-reference-unversioned-definition", "ext_nover", True),
    Case("relocation-order", "ext_reloc_order", False, "undefined symbol: zz_missing_var"),
    Case("dependency-relocated-first", "ext_dep_first", False,
         "lib/libdfirst.so: undefined symbol: dfirst_missing"),
    Case("glibc-hwcaps-subdirectory-first", "ext_hwcaps", True, needs_hwcaps=True),
    Case("rpath-ignored-below-runpath-object", "ext_runpath_mid", False,
         "libleaf_m.so" + CANNOT_OPEN),
    Case("same-soname-in-two-packages", "ext_dupe_b", True),
    Case("ld-preload-in-global-scope", "ext_preload", True, env=PRELOAD),
    Case("no-ld-preload", "ext_preload", False, "undefined symbol: preload_value"),
)
BY_ID = {c.id: c for c in CASES}


@dataclass(frozen=True, slots=True)
class Venv:
    """The fixture venv: its interpreter, site-packages and the loader environments to use."""

    python: str
    site: Path
    envs: dict[str, dict[str, str]]
    has_32bit: bool
    hidden_cuda: Path
    wheels: tuple[Path, ...]  # those installed


@dataclass(frozen=True, slots=True)
class Outcome:
    """`abifit doctor <pkg> --json` and `import <pkg>` for one case."""

    returncode: int
    doc: Json
    stderr: str
    real_loads: bool
    real_error: str

    def module(self, package: str) -> Json:
        """The doctor status of `<package>._ext` (or hostpkg._C)."""
        name = "hostpkg._C" if package == "hostpkg" else f"{package}._ext"
        found = [m for m in self.modules() if m["module"] == name]
        assert len(found) == 1, f"no single status for {name}: {self.doc}"
        return found[0]

    def modules(self) -> list[Json]:
        modules = self.doc["modules"]
        assert isinstance(modules, list)
        return modules

    def findings(self) -> list[Json]:
        findings = self.doc["findings"]
        assert isinstance(findings, list)
        return findings


def _python311() -> str | None:
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    return shutil.which("python3.11")


def _env(venv: Venv, name: str) -> dict[str, str]:
    return {**_env_without_ld(), **venv.envs[name]}


def _env_without_ld() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LD_ENV_VARS}


@cache
def _searches_hwcaps_v2() -> bool:
    """Whether this host's ld.so searches glibc-hwcaps/x86-64-v2 (glibc >= 2.33 on such a CPU)."""
    ld_so = "/lib64/ld-linux-x86-64.so.2"
    if not os.path.exists(ld_so):
        return False
    done = subprocess.run([ld_so, "--help"], capture_output=True, text=True, check=False)
    return re.search(rf"{build.HWCAPS} \(supported, searched\)", done.stdout) is not None


@cache
def _real_search() -> tuple[str, tuple[str, ...]]:
    """What this host's ld.so expands $PLATFORM to, and the subdirectories it tries under each
    directory (repeats included), from a real LD_DEBUG=libs trace of a directory that does not
    exist, searched once."""
    env = {"PATH": os.defpath, "LD_DEBUG": "libs", "LD_LIBRARY_PATH": "/abifit-none/$PLATFORM"}
    done = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, check=False)
    found = re.search(r"search path=(.*?)\s+\(LD_LIBRARY_PATH\)", done.stderr)
    assert found is not None, done.stderr
    *subdirs, base = found.group(1).split(":")
    return base.removeprefix("/abifit-none/"), tuple(s[len(base) + 1:] for s in subdirs)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv holding every fixture package, installed from real wheels by pip."""
    python = _python311()
    if python is None:
        pytest.skip("python3.11 is needed: the fixtures are CPython 3.11 extension modules")
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc and g++ are needed to build the fixtures")
    root = tmp_path_factory.mktemp("doctor-fixtures")
    built = build.build_packages(root, python, platform=_real_search()[0])
    env_dir = root / "venv"
    if importlib.util.find_spec("pip") is not None:
        subprocess.run([python, "-m", "venv", "--without-pip", str(env_dir)], check=True)
        pip = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python")]
    else:
        subprocess.run([python, "-m", "venv", str(env_dir)], check=True)
        pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                    "-q", *map(str, built.wheels)], check=True, env=_env_without_ld())
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    envs = {PLAIN: {}, PRELOAD: {"LD_PRELOAD": str(built.preload)},
            LD_PATH: {"LD_LIBRARY_PATH": ":".join(str(d) for d in built.ld_library_path)}}
    return Venv(str(env_dir / "bin" / "python"), site, envs, built.has_32bit, built.hidden_cuda,
                tuple(built.wheels))


def run_doctor(venv: Venv, *args: str, env: str = PLAIN) -> tuple[int, Json, str]:
    """`abifit doctor ARGS --python VENV --json --no-cache --no-index`: exit code, document,
    stderr; with `--index` among ARGS, without `--no-index` (the live index is asked).

    The document is empty when doctor printed none (an analysis error, exit code 2)."""
    index = "--index" in args
    args = tuple(a for a in args if a != "--index")
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", *args, "--python", venv.python, "--json",
         "--no-cache", *(() if index else ("--no-index",))],
        capture_output=True, text=True, env=_env(venv, env), timeout=300, check=False,
    )
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = {}
    return done.returncode, doc, done.stderr


def real_import(venv: Venv, package: str, *, env: str = PLAIN,
                debug: bool = False) -> tuple[bool, str]:
    """`python -c "import PACKAGE"` in the venv: whether it worked, and its stderr."""
    variables = _env(venv, env)
    if debug:
        variables["LD_DEBUG"] = "libs"
    done = subprocess.run([venv.python, "-c", f"import {package}"], capture_output=True,
                          text=True, env=variables, timeout=120, check=False)
    return done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def outcomes(venv: Venv) -> dict[tuple[str, str], Outcome]:
    """Both sides of every case, run in parallel once for the module."""

    def both(case: Case) -> Outcome:
        code, doc, stderr = run_doctor(venv, case.package, env=case.env)
        loads, error = real_import(venv, case.package, env=case.env)
        return Outcome(code, doc, stderr, loads, error)

    cases = [c for c in CASES if venv.has_32bit or not c.needs_32bit]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip((c.key for c in cases), pool.map(both, cases), strict=True))


def outcome_of(outcomes: dict[tuple[str, str], Outcome], venv: Venv, case_id: str) -> Outcome:
    """The outcome of a case, after checking that the real loader does what the case says."""
    case = BY_ID[case_id]
    if case.needs_32bit and not venv.has_32bit:
        pytest.skip("gcc -m32 cannot build the 32-bit library here")
    if case.needs_hwcaps and not _searches_hwcaps_v2():
        pytest.skip(f"this ld.so does not search glibc-hwcaps/{build.HWCAPS}")
    out = outcomes[case.key]
    assert out.returncode in (0, 1) and out.doc, f"doctor failed: {out.stderr}"
    assert out.real_loads is case.loads, f"the fixture misbehaves: {out.real_error}"
    if case.error is not None:
        assert case.error in out.real_error
        assert "ImportError" in out.real_error
    return out


def the_finding(out: Outcome, package: str) -> Json:
    """The first finding for the package's module (the one whose message is its error)."""
    module = out.module(package)
    findings = [f for f in out.findings() if f["module"] == module["module"]]
    assert findings, out.doc
    assert findings[0]["message"] == module["error"]
    return findings[0]


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_prediction_matches_real_import(
    case_id: str, venv: Venv, outcomes: dict[tuple[str, str], Outcome]
) -> None:
    """doctor's verdict and first error for the package are what `import <pkg>` really does."""
    case = BY_ID[case_id]
    out = outcome_of(outcomes, venv, case_id)
    module = out.module(case.package)
    predicted = "loads" if module["loads"] else f"fails: {module['error']}"
    assert module["loads"] is out.real_loads, (
        f"predicted {predicted}; real import: {out.real_error.strip() or 'loads'}")
    if not out.real_loads:
        assert isinstance(module["error"], str)
        assert module["error"] in out.real_error, (
            f"predicted error {module['error']!r} is not in the real one: {out.real_error}")
    assert out.returncode == (0 if out.real_loads else 1), out.doc


def demangle_with_cxxfilt(symbol: str) -> str:
    """What binutils' c++filt makes of a symbol."""
    return subprocess.run(["c++filt", symbol], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_parameter_change_is_explained(venv: Venv,
                                       outcomes: dict[tuple[str, str], Outcome]) -> None:
    """An int -> unsigned int parameter change is named, with the host's nearest definition."""
    out = outcome_of(outcomes, venv, "parameter-type-changed")
    finding = the_finding(out, "ext_param")
    assert finding["kind"] == "undefined-symbol"
    assert finding["symbol"] == PARAM_SYMBOL
    assert finding["message"].endswith(f": undefined symbol: {PARAM_SYMBOL}")
    assert "parameter 4: `int` → `unsigned int`" in finding["explanation"]
    assert finding["nearest"][0].startswith(PARAM_SYMBOL[:-2] + "jb ")
    assert "hostpkg/lib/libhost_core.so" in finding["explanation"]
    # the same, as fields: no reader has to take the prose apart
    assert finding["demangled"] == demangle_with_cxxfilt(PARAM_SYMBOL)
    nearest = finding["definitions"][0]
    assert nearest["mangled"] == PARAM_SYMBOL[:-2] + "jb" and nearest["same_function"] is True
    assert nearest["differences"] == ["parameter 4: `int` → `unsigned int`"]
    assert nearest["path"].endswith("hostpkg/lib/libhost_core.so")
    assert out.module("ext_param")["prerequisites"] == ["hostpkg"]


def test_string_abi_change_is_explained(venv: Venv,
                                        outcomes: dict[tuple[str, str], Outcome]) -> None:
    """An old-ABI std::string reference is matched to the cxx11 definition and the ABI named."""
    out = outcome_of(outcomes, venv, "string-abi-mismatch")
    finding = the_finding(out, "ext_abi")
    assert finding["symbol"] == "_ZN4host8describeERKSs"
    assert finding["nearest"][0].startswith(
        "_ZN4host8describeERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE ")
    assert "std::string ABI" in finding["explanation"]
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in finding["explanation"]


def test_removed_function_is_named(venv: Venv,
                                   outcomes: dict[tuple[str, str], Outcome]) -> None:
    """A function the host removed is reported demangled, and no other function is its match."""
    out = outcome_of(outcomes, venv, "function-removed")
    finding = the_finding(out, "ext_removed")
    assert finding["symbol"] == "_ZN4host12legacy_entryEi"
    assert "`host::legacy_entry(int)`" in finding["explanation"]
    assert not any(n.startswith("_ZN4host12legacy_entry") for n in finding["nearest"])


def test_missing_library_has_trace_and_hint(venv: Venv,
                                            outcomes: dict[tuple[str, str], Outcome]) -> None:
    """A library off every search path gets the paths searched and a hint that fixes it."""
    out = outcome_of(outcomes, venv, "library-off-search-path")
    finding = the_finding(out, "ext_missing_lib")
    assert finding["kind"] == "missing-library"
    assert finding["library"] == "libnvrtc.so.13"
    assert finding["trace"], finding
    assert all("/libnvrtc.so.13  [" in t and t.endswith("not found]") for t in finding["trace"])
    assert [s["path"] for s in finding["searched"]] == [t.split("  [")[0] for t in finding["trace"]]
    assert {s["outcome"] for s in finding["searched"]} == {"not found"}
    hidden = str(venv.hidden_cuda / "libnvrtc.so.13")
    assert os.path.isfile(hidden)
    assert hidden not in finding["candidates"]  # a private toolkit dir is not a place it looks
    hint = finding["hint"]
    assert isinstance(hint, str)
    if finding["candidates"]:
        assert "LD_LIBRARY_PATH" in hint
    else:
        assert "pip install" in hint and "libnvrtc.so.13" in hint


@pytest.mark.network
def test_missing_library_names_the_wheel_on_the_index(venv: Venv) -> None:
    """With the index (PyPI), the hint names the wheel whose file list holds libnvrtc.so.13."""
    code, doc, err = run_doctor(venv, "ext_missing_lib", "--index")
    assert code == 1, err
    finding = next(f for f in doc["findings"] if f["library"] == "libnvrtc.so.13")
    assert "pip install 'nvidia-cuda-nvrtc==13." in finding["hint"]
    assert "provides libnvrtc.so.13 (in nvidia/cu13/lib)" in finding["hint"]
    assert "nvidia/cu13/lib/libnvrtc.so.13" in finding["explanation"]


def test_missing_library_lists_wheel_copy(venv: Venv,
                                          outcomes: dict[tuple[str, str], Outcome]) -> None:
    """A library present only in site-packages/nvidia/cu13/lib is offered as a candidate."""
    out = outcome_of(outcomes, venv, "library-in-nvidia-wheel-only")
    finding = the_finding(out, "ext_missing_cand")
    copy = str(venv.site / "nvidia" / "cu13" / "lib" / "libnvJitLink.so.13")
    assert copy in finding["candidates"]
    assert str(venv.site / "nvidia" / "cu13" / "lib") in finding["hint"]
    assert out.module("ext_missing_cand")["prerequisites"] == ["nvidia-nvjitlink"]


def test_soname_match_needs_no_search(venv: Venv,
                                      outcomes: dict[tuple[str, str], Outcome]) -> None:
    """An extension without RPATH finds libhost_core.so because `import hostpkg` mapped it."""
    out = outcome_of(outcomes, venv, "soname-matches-loaded-host")
    module = out.module("ext_soname_ok")
    assert module["loads"] is True
    assert module["prerequisites"] == ["hostpkg"]  # from the soname: no Requires-Dist
    assert out.findings() == []  # in particular, no missing-library for libhost_core.so


def test_missing_version_names_library_and_versions(
    venv: Venv, outcomes: dict[tuple[str, str], Outcome]
) -> None:
    """A version the found library does not define is reported with the versions it does."""
    out = outcome_of(outcomes, venv, "version-not-defined")
    finding = the_finding(out, "ext_version")
    assert finding["kind"] == "missing-version"
    assert finding["version"] == "HOST_2.0"
    assert finding["library"] == str(venv.site / "ext_version" / "lib" / "libverhost.so")
    assert "HOST_1.0" in finding["explanation"]


def test_wrong_elf_class_is_its_own_kind(venv: Venv,
                                         outcomes: dict[tuple[str, str], Outcome]) -> None:
    """A 32-bit library as the only candidate is reported as wrong-elf-class, with its path."""
    out = outcome_of(outcomes, venv, "wrong-elf-class-only-candidate")
    finding = the_finding(out, "ext_classonly")
    assert finding["kind"] == "wrong-elf-class"
    lib32 = str(venv.site / "ext_classonly" / "lib32" / "libcls_o.so")
    assert any(t.startswith(lib32 + "  [") and "wrong ELF class" in t for t in finding["trace"])


def test_ld_library_path_copy_wins_over_runpath(
    venv: Venv, outcomes: dict[tuple[str, str], Outcome]
) -> None:
    """Under LD_LIBRARY_PATH the copy without prec_extra is chosen over the DT_RUNPATH one."""
    out = outcome_of(outcomes, venv, "ld-library-path-beats-runpath")
    finding = the_finding(out, "ext_prec_runpath")
    assert finding["kind"] == "undefined-symbol"
    assert finding["symbol"] == "prec_extra"
    assert finding["object"] == str(venv.site / "ext_prec_runpath" / f"_ext{EXT}")


def _ld_debug_tries(stderr: str, library: str) -> list[str]:
    """The files ld.so tried in its last search for `library` (from LD_DEBUG=libs output)."""
    blocks = re.split(r"^\s*\d+:\s+find library=", stderr, flags=re.M)
    searches = [b for b in blocks if b.startswith(f"{library} ")]
    assert searches, f"no search for {library} in the LD_DEBUG output"
    return re.findall(r"trying file=(\S+)", searches[-1].split("\n\n")[0])


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    it: Iterator[str] = iter(long)
    return all(any(item == other for other in it) for item in short)


def _in_search_dir(path: str) -> bool:
    """Whether `path` lies in a search directory itself, not in one of the subdirectories ld.so
    tries under it first (glibc-hwcaps, and the legacy hwcaps ones glibc <= 2.36 still
    searches); doctor lists those only when they hold the file."""
    directory = os.path.dirname(path)
    return not any(directory.endswith("/" + subdir) for subdir in _real_search()[1])


@pytest.mark.parametrize(("case_id", "library"), [
    ("library-off-search-path", "libnvrtc.so.13"),
    ("runpath-not-inherited", "libleaf_n.so"),
    ("not-found-without-ld-library-path", "libldp.so"),
    ("wrong-elf-class-only-candidate", "libcls_o.so"),
])
def test_search_trace_follows_ld_debug(case_id: str, library: str, venv: Venv,
                                       outcomes: dict[tuple[str, str], Outcome]) -> None:
    """doctor's trace is the files ld.so tried (LD_DEBUG=libs), in order, hwcaps dirs aside."""
    case = BY_ID[case_id]
    out = outcome_of(outcomes, venv, case_id)
    finding = the_finding(out, case.package)
    traced = [t.split("  [", 1)[0] for t in finding["trace"] if "ld.so.cache" not in t]
    loads, stderr = real_import(venv, case.package, env=case.env, debug=True)
    assert loads is False
    tried = _ld_debug_tries(stderr, library)
    assert _is_subsequence(traced, tried), (traced, tried)
    assert [p for p in traced if _in_search_dir(p)] == [p for p in tried if _in_search_dir(p)]


def test_search_subdirectories_follow_the_running_glibc(venv: Venv) -> None:
    """Under each LD_LIBRARY_PATH directory, `import ext_ldtoken` tries exactly the
    subdirectories abifit computes for this glibc on this CPU, in its order: legacy ones (tls
    among them) exactly when the glibc is 2.36 or older; and $PLATFORM expands to the
    platform abifit computes, where the fixture's library lies."""
    if RUNNING_GLIBC is None:
        pytest.skip("not a glibc process")
    computed = hwcaps_search(GlibcVersion(*RUNNING_GLIBC),
                             parse_cpuinfo(Path("/proc/cpuinfo").read_text(), "x86_64"))
    assert computed is not None
    loads, stderr = real_import(venv, "ext_ldtoken", env=LD_PATH, debug=True)
    assert loads, stderr
    found = re.search(r"search path=(.*?)\s+\(LD_LIBRARY_PATH\)", stderr)
    assert found is not None, stderr
    ldlib, tok = venv.envs[LD_PATH]["LD_LIBRARY_PATH"].split(":")
    tok = tok.replace("$PLATFORM", computed.platform)
    tried = found.group(1).split(":")
    assert tried == [path for d in (ldlib, tok)
                     for path in (*(f"{d}/{sub}" for sub in computed.searched_subdirs), d)]
    assert (f"{ldlib}/tls" in tried) is LEGACY_SEARCHED
    assert os.path.isfile(os.path.join(tok, "libldtok.so"))


@pytest.mark.parametrize("env", [PLAIN, LD_PATH, PRELOAD])
def test_verify_agrees_everywhere(env: str, venv: Venv) -> None:
    """`doctor --verify` on the whole venv: every prediction agrees with the real loader."""
    code, doc, stderr = run_doctor(venv, "--verify", env=env)
    assert code in (0, 1) and doc, stderr
    validate(doc, SCHEMA)
    verification = doc["verification"]
    assert isinstance(verification, list) and verification, stderr
    disagreeing = [f"{v['module']}: predicted {v['predicted_error'] or 'loads'}; real "
                   f"{'loads' if v['actual_loads'] else v['actual_error'] or v['note']}"
                   for v in verification if not v["agrees"]]
    assert not disagreeing, "\n".join(disagreeing)
    findings = doc["findings"]
    assert isinstance(findings, list)
    assert not any(f["kind"] == "model-disagreement" for f in findings)
    modules = doc["modules"]
    assert isinstance(modules, list)
    assert len(verification) == len(modules)
    assert code == (1 if findings else 0)


# --- binding past a missing library -------------------------------------------------------------


def test_symbols_past_a_missing_library_are_named(
        venv: Venv, outcomes: dict[tuple[str, str], Outcome]) -> None:
    """ext_past misses libnvJitLink.so.13 (a copy lies in site-packages/nvidia/cu13/lib): the
    symbol that copy does not define either is named beside the missing library, and the real
    loader, once LD_LIBRARY_PATH reaches the copy, fails on exactly that symbol."""
    out = outcome_of(outcomes, venv, "symbol-past-a-missing-library")
    findings = [f for f in out.findings() if f["module"] == "ext_past._ext"]
    assert [f["kind"] for f in findings] == ["missing-library", "undefined-symbol"]
    past = findings[1]
    assert past["symbol"] == "past_gone_symbol"
    assert past["behind"] == ["libnvJitLink.so.13"]
    copy = venv.site / "nvidia" / "cu13" / "lib"
    assert str(copy / "libnvJitLink.so.13") in past["explanation"]
    assert out.module("ext_past")["error"].endswith(CANNOT_OPEN)
    env = {**_env_without_ld(), "LD_LIBRARY_PATH": str(copy)}
    done = subprocess.run([venv.python, "-c", "import ext_past"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert "undefined symbol: past_gone_symbol" in done.stderr, done.stderr


def test_nothing_is_named_past_a_copy_that_defines_it(
        venv: Venv, outcomes: dict[tuple[str, str], Outcome]) -> None:
    """ext_missing_cand needs only what the located copy defines: the missing library alone."""
    out = outcome_of(outcomes, venv, "library-in-nvidia-wheel-only")
    kinds = [f["kind"] for f in out.findings() if f["module"] == "ext_missing_cand._ext"]
    assert kinds == ["missing-library"]


# --- checks shared with a fork ------------------------------------------------------------------

_COUNTING_FORKS = '''
import os, sys
from abifit import cli
from abifit import workers

made = []
fork_call = workers.fork_call


class Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def counted(function):
    fork = fork_call(function)
    made.append(fork is not None)
    if fork is not None and os.environ.get("FORK_TAKES_ALL"):
        return Done(fork.result())  # the fork took every ticket before this process starts
    return fork


workers.fork_call = counted
workers.fork_workers()
code = cli.main(sys.argv[1:])
sys.stderr.write(f"forks: {made}\\n")
sys.exit(code)
'''


def test_the_same_report_with_checks_shared_with_a_fork(venv: Venv, tmp_path: Path) -> None:
    """The `abifit` command checks the modules in this process and in a fork of it, each
    taking the next distribution's: the report of a venv holding every fixture package, with
    hostpkg._C replaced by a module that does not load (so the modules that need hostpkg's
    library are blocked by it), is the one this process makes alone, byte for byte; also
    when the fork made every check, and this process only took in what it found."""
    broken = tmp_path / "venv"
    subprocess.run([venv.python, "-m", "venv", "--without-pip", str(broken)], check=True)
    python = str(broken / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                    "--no-index", "--disable-pip-version-check", "-q", *map(str, venv.wheels)],
                   check=True, env=_env_without_ld())
    site = next(broken.glob("lib/python3*/site-packages"))
    shutil.copyfile(site / "ext_removed" / f"_ext{EXT}", site / "hostpkg" / f"_C{EXT}")
    script = tmp_path / "counting.py"
    script.write_text(_COUNTING_FORKS)
    runs = {}
    for name, env in (("alone", {"ABIFIT_WORKERS": "0"}), ("shared", {"ABIFIT_WORKERS": "2"}),
                      ("fork", {"ABIFIT_WORKERS": "2", "FORK_TAKES_ALL": "1"})):
        done = subprocess.run(
            [sys.executable, str(script), "doctor", "--python", python, "--json",
             "--no-cache", "--no-index"], capture_output=True, text=True, timeout=300,
            env={**_env_without_ld(), **env}, check=False)
        assert done.returncode == 1, done.stderr
        runs[name] = done
    assert "forks: [True]" not in runs["alone"].stderr
    assert "forks: [True]" in runs["shared"].stderr, runs["shared"].stderr
    assert "forks: [True]" in runs["fork"].stderr, runs["fork"].stderr
    doc = json.loads(runs["alone"].stdout)
    kinds = {f["kind"] for f in doc["findings"]}
    assert {"undefined-symbol", "missing-library", "blocked-by"} <= kinds, kinds
    assert runs["shared"].stdout == runs["alone"].stdout
    assert runs["fork"].stdout == runs["alone"].stdout
