"""Distributions recorded as `*.egg-info`, and loose extension modules no distribution claims.

Unit tests read site directories laid out under tmp_path. The differential tests build, in a fresh
venv, one package of each kind from the sources of tests/fixtures/doctor/ (through
`fixtures.build.compile_c`):

- `eggpkg`: an egg-info directory whose `installed-files.txt` lists `eggpkg/_ext` (loads);
- `debpkg`: an egg-info directory as Debian ships them (PKG-INFO, top_level.txt, requires.txt
  naming eggpkg, no file list), whose `debpkg/_ext` needs `libldp.so`, installed nowhere (fails);
- `eggsingle`: a single-file `eggsingle-1.0.egg-info` and the module `eggsingle` (loads);
- `loosemod` (loads) and `loosepkg/_ext` (needs `libldp.so`, fails): no metadata at all.

Then `abifit doctor --json` runs on the venv and `python -c "import X"` in it: the prediction must
be what the real import does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from abifit.host.environment import (
    InterpreterFacts,
    egg_info_requires,
    list_distributions,
)
from abifit.host.natives import NO_DISTRIBUTION, loose_files, scan_native_files, search_dirs
from fixtures.build import ROOT, compile_c
from helpers import schema, validate

EXT = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
SUFFIXES = (EXT, ".abi3.so", ".so")
DOCTOR_SOURCES = ROOT / "doctor"
CANNOT_OPEN = "libldp.so: cannot open shared object file: No such file or directory"
SCHEMA = schema("doctor")

Json = dict[str, object]


def _facts(*sys_path: Path, stdlib: tuple[Path, ...] = ()) -> InterpreterFacts:
    return InterpreterFacts(
        executable=sys.executable, version="3.11.0", implementation="cpython", prefix="/p",
        base_prefix="/p", sys_path=tuple(map(str, sys_path)),
        site_packages=tuple(map(str, sys_path)), dlopen_flags=2, ext_suffix=EXT,
        extension_suffixes=SUFFIXES, stdlib_dirs=tuple(map(str, stdlib)),
    )


def _write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def _pkg_info(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA description.\n"


# --- reading egg-info metadata -----------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("pycairo>=1.16.0\n", ("pycairo>=1.16.0",)),
    ("a\n\n[crypto]\ncryptography>=3.4\n", ("a", 'cryptography>=3.4; extra == "crypto"')),
    ('[:python_version < "3.8"]\nimportlib-metadata\n',
     ('importlib-metadata; (python_version < "3.8")',)),
    ('[tests:sys_platform == "linux"]\npytest\n',
     ('pytest; (sys_platform == "linux") and extra == "tests"',)),
    ("# a comment\n\n", ()),
], ids=["plain", "extra", "marker", "extra-and-marker", "empty"])
def test_requires_txt_becomes_requires_dist(text: str, expected: tuple[str, ...]) -> None:
    """requires.txt sections become the markers of Requires-Dist lines, as importlib.metadata
    reads them."""
    assert egg_info_requires(text) == expected


def test_egg_info_with_installed_files_lists_them(tmp_path: Path) -> None:
    """An egg-info directory's installed-files.txt (relative to it) gives its files."""
    info = tmp_path / "eggpkg-1.0.egg-info"
    _write(info / "PKG-INFO", _pkg_info("eggpkg", "1.0"))
    _write(info / "installed-files.txt", f"../eggpkg/__init__.py\n../eggpkg/_ext{EXT}\n"
                                         "PKG-INFO\n")
    [dist] = list_distributions(_facts(tmp_path))
    assert (dist.name, dist.version, dist.inferred) == ("eggpkg", "1.0", False)
    assert dist.files == (str(tmp_path / "eggpkg/__init__.py"),
                          str(tmp_path / f"eggpkg/_ext{EXT}"), str(info / "PKG-INFO"))


def test_egg_info_without_file_list_infers_top_level(tmp_path: Path) -> None:
    """Without a file list, the packages and modules top_level.txt names are its files (not
    their __pycache__), and requires.txt its requirements."""
    info = tmp_path / "PyGObject-3.42.2.egg-info"
    _write(info / "PKG-INFO", _pkg_info("PyGObject", "3.42.2"))
    _write(info / "top_level.txt", "gi\npygtkcompat\n")
    _write(info / "requires.txt", "pycairo>=1.16.0\n\n[dev]\npytest\n")
    init = _write(tmp_path / "gi/__init__.py")
    ext = _write(tmp_path / f"gi/_gi{EXT}")
    sub = _write(tmp_path / "gi/overrides/GLib.py")
    _write(tmp_path / "gi/__pycache__/x.cpython-311.pyc")
    module = _write(tmp_path / "pygtkcompat.py")
    _write(tmp_path / "other/__init__.py")
    [dist] = list_distributions(_facts(tmp_path))
    assert (dist.key, dist.inferred) == ("pygobject", True)
    assert set(dist.files) == {str(init), str(ext), str(sub), str(module)}
    assert dist.requires == ("pycairo>=1.16.0", 'pytest; extra == "dev"')


def test_single_file_egg_info_claims_its_name(tmp_path: Path) -> None:
    """A single-file egg-info is its PKG-INFO; with no top_level.txt, the module of its own
    name is its file."""
    _write(tmp_path / "eggsingle-1.0.egg-info", _pkg_info("eggsingle", "1.0"))
    module = _write(tmp_path / f"eggsingle{EXT}")
    _write(tmp_path / "unrelated.py")
    [dist] = list_distributions(_facts(tmp_path))
    assert (dist.name, dist.version, dist.files) == ("eggsingle", "1.0", (str(module),))


def test_dist_info_wins_over_egg_info_of_the_same_name(tmp_path: Path) -> None:
    """Debian's dist-packages may hold both a dist-info and an egg-info of one distribution:
    one is listed, the dist-info."""
    _write(tmp_path / "cryptography-38.0.4.dist-info/METADATA", _pkg_info("cryptography", "38"))
    _write(tmp_path / "cryptography-38.0.4.dist-info/RECORD", "cryptography/__init__.py,,\n")
    _write(tmp_path / "cryptography.egg-info/PKG-INFO", _pkg_info("cryptography", "38"))
    _write(tmp_path / "cryptography.egg-info/top_level.txt", "cryptography\n")
    [dist] = list_distributions(_facts(tmp_path))
    assert dist.metadata_dir.suffix == ".dist-info" and not dist.inferred


# --- loose files -------------------------------------------------------------------------------


def test_loose_files_top_modules_and_unclaimed_packages(tmp_path: Path) -> None:
    """Extension modules at the top and files of unclaimed regular packages are candidates;
    claimed packages, plain directories, non-importable subdirectories and Python files are
    not walked or listed."""
    site = tmp_path
    top = _write(site / f"loosemod{EXT}")
    pkg_ext = _write(site / f"loosepkg/_ext{EXT}")
    _write(site / "loosepkg/__init__.py")
    sub_ext = _write(site / f"loosepkg/sub/_c{EXT}")
    _write(site / f"loosepkg/sub.libs/libx{EXT}")
    _write(site / f"loosepkg/__pycache__/y{EXT}")
    owned_init = _write(site / "owned/__init__.py")
    _write(site / f"owned/_unlisted{EXT}")
    _write(site / f"build/lib/deep{EXT}")  # no __init__.py: not a package, not walked
    owned_top = _write(site / f"listed{EXT}")
    found = loose_files([str(site)], SUFFIXES, {str(owned_init), str(owned_top)})
    assert found == [str(top), str(pkg_ext), str(sub_ext)]


def test_search_dirs_leave_out_the_interpreters_own(tmp_path: Path) -> None:
    """The stdlib and lib-dynload are the interpreter's: not searched for loose modules; a
    directory on the path twice is searched once, a missing one not at all."""
    stdlib, dynload, site = tmp_path / "lib", tmp_path / "lib/lib-dynload", tmp_path / "site"
    for d in (dynload, site):
        d.mkdir(parents=True)
    facts = _facts(stdlib, dynload, site, site, tmp_path / "missing", stdlib=(stdlib, dynload))
    assert search_dirs(facts) == [str(site)]


def test_scan_claims_each_file_once(tmp_path: Path) -> None:
    """A file both a listed and an inferred distribution claim is the listed one's; a file no
    one claims is loose, and only with `loose`."""
    listed = tmp_path / "listedpkg-1.0.dist-info"
    _write(listed / "METADATA", _pkg_info("listedpkg", "1.0"))
    _write(listed / "RECORD", f"shared/__init__.py,,\nshared/_ext{EXT},,\n")
    _write(tmp_path / "guessed.egg-info/PKG-INFO", _pkg_info("guessed", "1.0"))
    _write(tmp_path / "guessed.egg-info/top_level.txt", "shared\n")
    _write(tmp_path / "shared/__init__.py")
    ext = tmp_path / f"shared/_ext{EXT}"
    loose = tmp_path / f"alone{EXT}"
    for path in (ext, loose):
        shutil.copyfile("/bin/true", path)  # an ELF file; no PyInit_*: a library
    facts = _facts(tmp_path)
    dists = list_distributions(facts)
    assert sorted(d.key for d in dists) == ["guessed", "listedpkg"]
    found = scan_native_files(facts, dists, lambda path: None)
    assert [(n.path, n.distribution) for n in found] == [(str(ext), "listedpkg")]
    found = scan_native_files(facts, dists, lambda path: None, loose=True)
    assert [(n.path, n.distribution) for n in found] == [(str(ext), "listedpkg"),
                                                         (str(loose), NO_DISTRIBUTION)]


# --- differential: a real venv -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Venv:
    python: str
    site: Path


def _target_facts(python: str) -> tuple[str, str]:
    script = ("import json, sysconfig; print(json.dumps([sysconfig.get_paths()['include'], "
              "sysconfig.get_config_var('EXT_SUFFIX')]))")
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    include, suffix = json.loads(done.stdout)
    return include, suffix


def _module(source: str, out: Path, name: str, include: str, libs: tuple[Path, ...] = ()) -> None:
    compile_c(DOCTOR_SOURCES / source, out, libs=libs,
              flags=[f"-I{include}", f"-I{DOCTOR_SOURCES}", f"-DMODULE={name}",
                     "-Wl,--no-as-needed"])


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv holding the egg-info, single-file egg-info and loose fixtures."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fixtures")
    root = tmp_path_factory.mktemp("egg-info")
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python")
    include, ext = _target_facts(python)
    if not (Path(include) / "Python.h").is_file():
        pytest.skip(f"Python.h is not in {include}")
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    # libldp.so exists only in the build directory, which nothing searches
    libldp = compile_c(DOCTOR_SOURCES / "ldp.c", root / "build" / "libldp.so",
                       soname="libldp.so")

    info = site / "eggpkg-1.0.egg-info"
    _write(info / "PKG-INFO", _pkg_info("eggpkg", "1.0"))
    _write(info / "installed-files.txt", f"../eggpkg/__init__.py\n../eggpkg/_ext{ext}\nPKG-INFO\n")
    _write(site / "eggpkg/__init__.py", "from eggpkg import _ext\n")
    _module("ext_weak.c", site / f"eggpkg/_ext{ext}", "_ext", include)

    info = site / "debpkg-2.0.egg-info"
    _write(info / "PKG-INFO", _pkg_info("debpkg", "2.0"))
    _write(info / "top_level.txt", "debpkg\n")
    _write(info / "requires.txt", "eggpkg>=1.0\n\n[test]\npytest\n")
    _write(site / "debpkg/__init__.py", "from debpkg import _ext\n")
    _module("ext_ldpath.c", site / f"debpkg/_ext{ext}", "_ext", include, (libldp,))

    _write(site / "eggsingle-1.0.egg-info", _pkg_info("eggsingle", "1.0"))
    _module("ext_weak.c", site / f"eggsingle{ext}", "eggsingle", include)

    _module("ext_weak.c", site / f"loosemod{ext}", "loosemod", include)
    _write(site / "loosepkg/__init__.py", "from loosepkg import _ext\n")
    _module("ext_ldpath.c", site / f"loosepkg/_ext{ext}", "_ext", include, (libldp,))
    return Venv(python, site)


def _clean_env() -> dict[str, str]:
    drop = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
            "CONDA_PREFIX")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run_doctor(venv: Venv, *args: str) -> tuple[int, Json, str]:
    """`abifit doctor ARGS --python VENV --json --no-cache --no-index`."""
    done = subprocess.run(
        [sys.executable, "-m", "abifit", "doctor", *args, "--python", venv.python, "--json",
         "--no-cache", "--no-index"],
        capture_output=True, text=True, env=_clean_env(), timeout=300, check=False)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = {}
    return done.returncode, doc, done.stderr


@pytest.fixture(scope="module")
def report(venv: Venv) -> Json:
    """`abifit doctor --json --verify` on the whole venv."""
    code, doc, err = run_doctor(venv, "--verify")
    assert code == 1 and doc, err  # debpkg and loosepkg fail
    validate(doc, SCHEMA)
    return doc


def _modules(doc: Json) -> dict[str, Json]:
    modules = doc["modules"]
    assert isinstance(modules, list)
    return {m["module"]: m for m in modules}


EXPECTED = {  # module -> (distribution, import, loads)
    "eggpkg._ext": ("eggpkg", "eggpkg", True),
    "debpkg._ext": ("debpkg", "debpkg", False),
    "eggsingle": ("eggsingle", "eggsingle", True),
    "loosemod": (NO_DISTRIBUTION, "loosemod", True),
    "loosepkg._ext": (NO_DISTRIBUTION, "loosepkg", False),
}


def test_every_kind_is_checked_with_its_distribution(report: Json) -> None:
    """Egg-info (listed and inferred), single-file egg-info and loose modules are all checked,
    each with its distribution, a loose one with none."""
    modules = _modules(report)
    assert {name: m["distribution"] for name, m in modules.items()} == {
        name: dist for name, (dist, _, _) in EXPECTED.items()}


def test_requires_txt_makes_a_prerequisite(report: Json) -> None:
    """debpkg's requires.txt names eggpkg: it is imported before debpkg's module."""
    assert _modules(report)["debpkg._ext"]["prerequisites"] == ["eggpkg"]


def test_interpreter_modules_are_not_checked(report: Json, venv: Venv) -> None:
    """Nothing of the interpreter's own directories (stdlib, lib-dynload) is checked."""
    script = ("import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps([p['stdlib'],"
              " p['platstdlib'], sysconfig.get_config_var('DESTSHARED')]))")
    done = subprocess.run([venv.python, "-c", script], capture_output=True, text=True,
                          check=True)
    own = [d for d in json.loads(done.stdout) if d]
    paths = [str(m["path"]) for m in _modules(report).values()]
    assert not [p for p in paths if any(p.startswith(d.rstrip("/") + "/") for d in own)
                and not p.startswith(str(venv.site))]


@pytest.mark.parametrize("module", list(EXPECTED))
def test_prediction_matches_real_import(module: str, report: Json, venv: Venv) -> None:
    """doctor's verdict and error for each module are what `python -c "import X"` does."""
    _, name, loads = EXPECTED[module]
    done = subprocess.run([venv.python, "-c", f"import {name}"], capture_output=True, text=True,
                          env=_clean_env(), timeout=120, check=False)
    assert (done.returncode == 0) is loads, f"the fixture misbehaves: {done.stderr}"
    status = _modules(report)[module]
    assert status["loads"] is loads, status
    if not loads:
        assert isinstance(status["error"], str) and CANNOT_OPEN in status["error"]
        assert status["error"] in done.stderr


def test_verify_agrees(report: Json) -> None:
    """--verify: the real loader agrees with every prediction, and real imports with every
    import verdict (the egg-info distributions get verdicts too)."""
    verification = report["verification"]
    assert isinstance(verification, list)
    assert {v["module"] for v in verification} == set(EXPECTED)
    assert all(v["agrees"] for v in verification), verification
    checks = report["import_checks"]
    assert isinstance(checks, list)
    assert {c["name"] for c in checks} >= {"eggpkg", "debpkg", "eggsingle"}
    assert all(c["agrees"] for c in checks), checks


@pytest.mark.parametrize(("name", "selected"), [
    ("loosemod", {"loosemod"}),
    ("loosepkg", {"loosepkg._ext"}),
    ("debpkg", {"debpkg._ext"}),
    ("eggsingle", {"eggsingle"}),
], ids=["loose-module", "loose-package", "inferred-egg-info", "single-file-egg-info"])
def test_doctor_selects_by_import_name(name: str, selected: set[str], venv: Venv) -> None:
    """`doctor NAME` selects a loose module by its import name, an egg-info's by its
    distribution."""
    code, doc, err = run_doctor(venv, name)
    assert code in (0, 1) and doc, err
    assert set(_modules(doc)) == selected
