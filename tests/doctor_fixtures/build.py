"""Build the packages of the `abifit doctor` differential tests from the sources next to this file.

`build_packages(dest, python)` compiles every library and extension module with gcc/g++ (several
at a time), then writes one real wheel per package (files plus `NAME-VER.dist-info/{METADATA,
WHEEL,RECORD}` with sha256 RECORD lines) into `dest/wheels`. The wheels are meant to be installed
with `pip install --no-deps --no-index` into a fresh venv of `python` (a CPython 3.11).

Packages and what they play:

- `hostpkg` (torch): `hostpkg/lib/libhost_core.so` ("version 2": `c10_cuda_check_implementation`
  takes an `unsigned int` line, `host::legacy_entry` is gone) and the extension `hostpkg._C`,
  which reaches it through DT_RPATH `$ORIGIN/lib`. Version 1 of libhost_core.so is built only to
  link other extensions against, as if they were built against host 1.x; it is never installed.
- `ext_param`, `ext_removed`, `ext_abi`: built against host 1.x (no RPATH, like sgl-kernel);
  `ext_soname_ok`: built against host 2.x (no RPATH, no Requires-Dist).
- `ext_missing_lib`: needs `libnvrtc.so.13`, which exists only in `dest/build/cuda-13.0/lib64`;
  `ext_missing_cand`: needs `libnvJitLink.so.13`, which the `nvidia-nvjitlink` wheel puts in
  `site-packages/nvidia/cu13/lib` (not on any search path).
- `ext_rpath` / `ext_runpath`: `$ORIGIN/a` as DT_RPATH / DT_RUNPATH; `a/libdep_*.so` needs
  `a/libleaf_*.so` and has no search path of its own.
- `ext_prec_rpath` / `ext_prec_runpath`: a full `libprec_*.so` (defines `prec_extra`) in `$ORIGIN/p`
  as DT_RPATH / DT_RUNPATH, and a copy without `prec_extra` in `dest/build/ldlib`.
- `ext_ldpath`: needs `libldp.so`, which lies only in `dest/build/ldlib`.
- `ext_version`: linked against libverhost.so defining HOST_1.0 and HOST_2.0; installs one that
  defines only HOST_1.0.
- `ext_weak`: a weak undefined reference nobody defines.
- `ext_class32` / `ext_classonly` (only when `gcc -m32` works): a 32-bit `libcls_*.so` first on the
  DT_RPATH, then a 64-bit one / no other.
- `ext_local_scope`: calls a function of libhost_core.so without DT_NEEDED on it (RTLD_LOCAL).
- `ext_nover`: refers to `nover_value@NOVER_1.0`; the installed libnover.so has no version script.
- `ext_reloc_order`, `ext_dep_first`: several undefined symbols; which one ld.so reports first.
- `ext_hwcaps`: `lib/libhw.so` lacks `prec_extra`, `lib/glibc-hwcaps/x86-64-v2/libhw.so` has it.
- `ext_ldtoken`: needs `libldtok.so` from `dest/build/tok/x86_64`, named in LD_LIBRARY_PATH as
  `.../tok/$PLATFORM`.
- `ext_runpath_mid`: DT_RPATH `$ORIGIN/a`; `a/libdep_m.so` has a DT_RUNPATH of its own, so the
  extension's DT_RPATH does not apply to its `libleaf_m.so`.
- `ext_dupe_a`, `ext_dupe_b`: each ships its own `lib/libdupe.so`; only b's defines `prec_extra`.
- `ext_preload`: calls `preload_value`, defined by `dest/build/preload/libpreload.so` (LD_PRELOAD).

`Built.ld_library_path` lists the directories for LD_LIBRARY_PATH (with `$PLATFORM` unexpanded),
`Built.preload` the library for LD_PRELOAD.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SOURCES = Path(__file__).resolve().parent
VERSION = "1.0"
PLATFORM = "x86_64"  # what ld.so expands $PLATFORM to on x86-64
HWCAPS = "x86-64-v2"  # a glibc-hwcaps subdirectory (glibc >= 2.33) every x86-64-v2 CPU searches


class BuildError(RuntimeError):
    """A step that should always build did not."""


@dataclass(frozen=True, slots=True)
class Step:
    """One compiler run: `output` (relative to the build directory) from `source`."""

    output: str
    source: str
    flags: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    cxx: bool = False
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Package:
    """One wheel: wheel path -> built file (relative to the build directory) or text."""

    name: str
    files: Mapping[str, str]
    texts: Mapping[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    needs_32bit: bool = False


@dataclass(frozen=True, slots=True)
class Built:
    """What `build_packages` made."""

    wheels: tuple[Path, ...]
    packages: tuple[str, ...]
    ld_library_path: tuple[Path, ...]
    preload: Path
    hidden_cuda: Path
    has_32bit: bool
    skipped: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Python:
    """The target interpreter's build facts."""

    include: str
    ext_suffix: str


def python_facts(python: str) -> Python:
    """Python.h's directory and the extension suffix of `python`."""
    script = ("import json, sysconfig; print(json.dumps([sysconfig.get_paths()['include'], "
              "sysconfig.get_config_var('EXT_SUFFIX')]))")
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    include, suffix = json.loads(done.stdout)
    return Python(include, suffix)


def _lib(output: str, source: str, *flags: str, after: tuple[str, ...] = (),
         cxx: bool = False, optional: bool = False) -> Step:
    soname = output.rsplit("/", 1)[-1]
    return Step(output, source, (f"-Wl,-soname,{soname}", *flags), after, cxx, optional)


def _link(*outputs: str) -> tuple[str, ...]:
    """Linker flags that put each built library into DT_NEEDED, by its exact file name."""
    flags = ["-Wl,--no-as-needed"]
    for out in outputs:
        directory, name = out.rsplit("/", 1)
        flags += [f"-L{{build}}/{directory}", f"-Wl,-rpath-link,{{build}}/{directory}",
                  f"-l:{name}"]
    return tuple(flags)


def steps(ext: str) -> tuple[Step, ...]:
    """Every compiler run; `ext` is the extension suffix (.cpython-311-x86_64-linux-gnu.so)."""

    def module(package: str, source: str, *flags: str, libs: tuple[str, ...] = (),
               name: str = "_ext", cxx: bool = False, optional: bool = False) -> Step:
        return Step(f"tree/{package}/{package}/{name}{ext}", source,
                    ("-I{include}", f"-DMODULE={name}", *flags, *_link(*libs)), libs, cxx,
                    optional)

    v1, v2 = "v1/libhost_core.so", "v2/libhost_core.so"
    rpath = "-Wl,--disable-new-dtags,-rpath,$ORIGIN/{}"
    runpath = "-Wl,--enable-new-dtags,-rpath,$ORIGIN/{}"
    m32 = ("-m32", "-nostdlib")
    return (
        _lib(v1, "host_core.cpp", "-DHOST_VERSION=1", cxx=True),
        _lib(v2, "host_core.cpp", "-DHOST_VERSION=2", cxx=True),
        module("hostpkg", "host_C.c", rpath.format("lib"), libs=(v2,), name="_C"),
        module("ext_param", "ext_param.cpp", libs=(v1,), cxx=True),
        module("ext_removed", "ext_removed.cpp", libs=(v1,), cxx=True),
        module("ext_abi", "ext_abi.cpp", "-D_GLIBCXX_USE_CXX11_ABI=0", libs=(v1,), cxx=True),
        module("ext_soname_ok", "ext_soname_ok.cpp", libs=(v2,), cxx=True),
        _lib("cuda-13.0/lib64/libnvrtc.so.13", "cuda_stub.c"),
        _lib("jit/libnvJitLink.so.13", "cuda_stub.c"),
        module("ext_missing_lib", "ext_cuda.c", "-DUSE_NVRTC",
               libs=("cuda-13.0/lib64/libnvrtc.so.13",)),
        module("ext_missing_cand", "ext_cuda.c", libs=("jit/libnvJitLink.so.13",)),
        _lib("rpath/libleaf_r.so", "leaf.c"),
        _lib("rpath/libdep_r.so", "dep.c", *_link("rpath/libleaf_r.so"),
             after=("rpath/libleaf_r.so",)),
        module("ext_rpath", "ext_dep.c", rpath.format("a"), libs=("rpath/libdep_r.so",)),
        _lib("runpath/libleaf_n.so", "leaf.c"),
        _lib("runpath/libdep_n.so", "dep.c", *_link("runpath/libleaf_n.so"),
             after=("runpath/libleaf_n.so",)),
        module("ext_runpath", "ext_dep.c", runpath.format("a"), libs=("runpath/libdep_n.so",)),
        _lib("prec_full/libprec_r.so", "prec.c", "-DFULL"),
        _lib("prec_full/libprec_n.so", "prec.c", "-DFULL"),
        _lib("ldlib/libprec_r.so", "prec.c"),
        _lib("ldlib/libprec_n.so", "prec.c"),
        module("ext_prec_rpath", "ext_prec.c", rpath.format("p"),
               libs=("prec_full/libprec_r.so",)),
        module("ext_prec_runpath", "ext_prec.c", runpath.format("p"),
               libs=("prec_full/libprec_n.so",)),
        _lib("ldlib/libldp.so", "ldp.c"),
        module("ext_ldpath", "ext_ldpath.c", libs=("ldlib/libldp.so",)),
        _lib("verhost1/libverhost.so", "verhost.c",
             f"-Wl,--version-script={SOURCES / 'verhost1.map'}"),
        _lib("verhost2/libverhost.so", "verhost.c", "-DV2",
             f"-Wl,--version-script={SOURCES / 'verhost2.map'}"),
        module("ext_version", "ext_version.c", runpath.format("lib"),
               libs=("verhost2/libverhost.so",)),
        module("ext_weak", "ext_weak.c"),
        _lib("cls64/libcls_a.so", "cls.c"),
        _lib("cls64/libcls_o.so", "cls.c"),
        _lib("cls32/libcls_a.so", "cls.c", *m32, optional=True),
        _lib("cls32/libcls_o.so", "cls.c", *m32, optional=True),
        module("ext_class32", "ext_cls.c", rpath.format("lib32:$ORIGIN/lib64"),
               libs=("cls64/libcls_a.so",)),
        module("ext_classonly", "ext_cls.c", rpath.format("lib32"),
               libs=("cls64/libcls_o.so",)),
        module("ext_local_scope", "ext_local.c"),
        _lib("nover_linked/libnover.so", "nover.c",
             f"-Wl,--version-script={SOURCES / 'nover.map'}"),
        _lib("nover_plain/libnover.so", "nover.c"),
        module("ext_nover", "ext_nover.c", rpath.format("lib"),
               libs=("nover_linked/libnover.so",)),
        module("ext_reloc_order", "ext_order.c"),
        _lib("dfirst/libdfirst.so", "dfirst.c"),
        module("ext_dep_first", "ext_dfirst.c", rpath.format("lib"),
               libs=("dfirst/libdfirst.so",)),
        _lib("hw_full/libhw.so", "prec.c", "-DFULL"),
        _lib("hw_lite/libhw.so", "prec.c"),
        module("ext_hwcaps", "ext_prec.c", rpath.format("lib"), libs=("hw_full/libhw.so",)),
        _lib(f"tok/{PLATFORM}/libldtok.so", "ldp.c"),
        module("ext_ldtoken", "ext_ldpath.c", libs=(f"tok/{PLATFORM}/libldtok.so",)),
        _lib("mid/libleaf_m.so", "leaf.c"),
        _lib("mid/libdep_m.so", "dep.c", runpath.format("nowhere"), *_link("mid/libleaf_m.so"),
             after=("mid/libleaf_m.so",)),
        module("ext_runpath_mid", "ext_dep.c", rpath.format("a"), libs=("mid/libdep_m.so",)),
        _lib("dupe_a/libdupe.so", "prec.c"),
        _lib("dupe_b/libdupe.so", "prec.c", "-DFULL"),
        module("ext_dupe_a", "ext_dupe.c", rpath.format("lib"), libs=("dupe_a/libdupe.so",)),
        module("ext_dupe_b", "ext_dupe.c", "-DWANT_EXTRA", rpath.format("lib"),
               libs=("dupe_b/libdupe.so",)),
        _lib("preload/libpreload.so", "preload.c"),
        module("ext_preload", "ext_preload.c"),
    )


def packages(ext: str) -> tuple[Package, ...]:
    """Every wheel, its files taken from the build directory."""

    def ext_package(name: str, libs: Mapping[str, str] | None = None, *,
                    imports_host: bool = False, requires_host: bool = False,
                    needs_32bit: bool = False) -> Package:
        init = ("import hostpkg  # noqa: F401\n" if imports_host else "") + "from . import _ext\n"
        files = {f"{name}/_ext{ext}": f"tree/{name}/{name}/_ext{ext}", **(libs or {})}
        return Package(name, files, {f"{name}/__init__.py": init},
                       ("hostpkg",) if requires_host else (), needs_32bit)

    host = {"imports_host": True, "requires_host": True}
    return (
        Package("hostpkg", {f"hostpkg/_C{ext}": f"tree/hostpkg/hostpkg/_C{ext}",
                            "hostpkg/lib/libhost_core.so": "v2/libhost_core.so"},
                {"hostpkg/__init__.py": "from . import _C\n"}),
        ext_package("ext_param", **host),
        ext_package("ext_removed", **host),
        ext_package("ext_abi", **host),
        ext_package("ext_soname_ok", imports_host=True),
        ext_package("ext_missing_lib"),
        ext_package("ext_missing_cand"),
        Package("nvidia-nvjitlink", {"nvidia/cu13/lib/libnvJitLink.so.13":
                                     "jit/libnvJitLink.so.13"}),
        ext_package("ext_rpath", {"ext_rpath/a/libdep_r.so": "rpath/libdep_r.so",
                                  "ext_rpath/a/libleaf_r.so": "rpath/libleaf_r.so"}),
        ext_package("ext_runpath", {"ext_runpath/a/libdep_n.so": "runpath/libdep_n.so",
                                    "ext_runpath/a/libleaf_n.so": "runpath/libleaf_n.so"}),
        ext_package("ext_prec_rpath", {"ext_prec_rpath/p/libprec_r.so": "prec_full/libprec_r.so"}),
        ext_package("ext_prec_runpath",
                    {"ext_prec_runpath/p/libprec_n.so": "prec_full/libprec_n.so"}),
        ext_package("ext_ldpath"),
        ext_package("ext_version", {"ext_version/lib/libverhost.so": "verhost1/libverhost.so"}),
        ext_package("ext_weak"),
        ext_package("ext_class32", {"ext_class32/lib32/libcls_a.so": "cls32/libcls_a.so",
                                    "ext_class32/lib64/libcls_a.so": "cls64/libcls_a.so"},
                    needs_32bit=True),
        ext_package("ext_classonly", {"ext_classonly/lib32/libcls_o.so": "cls32/libcls_o.so"},
                    needs_32bit=True),
        ext_package("ext_local_scope", **host),
        ext_package("ext_nover", {"ext_nover/lib/libnover.so": "nover_plain/libnover.so"}),
        ext_package("ext_reloc_order"),
        ext_package("ext_dep_first", {"ext_dep_first/lib/libdfirst.so": "dfirst/libdfirst.so"}),
        ext_package("ext_hwcaps", {"ext_hwcaps/lib/libhw.so": "hw_lite/libhw.so",
                                   f"ext_hwcaps/lib/glibc-hwcaps/{HWCAPS}/libhw.so":
                                   "hw_full/libhw.so"}),
        ext_package("ext_ldtoken"),
        ext_package("ext_runpath_mid", {"ext_runpath_mid/a/libdep_m.so": "mid/libdep_m.so",
                                        "ext_runpath_mid/a/libleaf_m.so": "mid/libleaf_m.so"}),
        ext_package("ext_dupe_a", {"ext_dupe_a/lib/libdupe.so": "dupe_a/libdupe.so"}),
        ext_package("ext_dupe_b", {"ext_dupe_b/lib/libdupe.so": "dupe_b/libdupe.so"}),
        ext_package("ext_preload"),
    )


def _compile(step: Step, build: Path, python: Python) -> str | None:
    """Run one step; the compiler's complaint when it failed, else None."""
    out = build / step.output
    out.parent.mkdir(parents=True, exist_ok=True)
    values = {"build": str(build), "include": python.include}
    command = ["g++" if step.cxx else "gcc", "-shared", "-fPIC", "-O1",
               "-I" + str(SOURCES), str(SOURCES / step.source),
               *(flag.format(**values) for flag in step.flags), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return None
    return f"{' '.join(command)}\n{done.stderr.strip()}"


def compile_all(build: Path, python: Python) -> dict[str, str]:
    """Compile every step into `build`; returns output -> reason for optional steps that failed."""
    pending = list(steps(python.ext_suffix))
    done: set[str] = set()
    skipped: dict[str, str] = {}
    with ThreadPoolExecutor() as pool:
        while pending:
            ready = [s for s in pending if all(a in done or a in skipped for a in s.after)]
            if not ready:
                raise BuildError(f"unbuildable steps: {[s.output for s in pending]}")
            for step, problem in zip(ready, pool.map(lambda s: _compile(s, build, python), ready),
                                     strict=True):
                if problem is None:
                    done.add(step.output)
                elif step.optional:
                    skipped[step.output] = problem
                else:
                    raise BuildError(f"{step.output} did not build: {problem}")
            pending = [s for s in pending if s not in ready]
    return skipped


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def write_wheel(dest: Path, name: str, version: str, contents: Mapping[str, bytes],
                requires: tuple[str, ...] = ()) -> Path:
    """A wheel holding `contents` (wheel path -> bytes) and its dist-info; returns its path."""
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                + "".join(f"Requires-Dist: {r}\n" for r in requires))
    wheel_file = ("Wheel-Version: 1.0\nGenerator: abifit-tests\nRoot-Is-Purelib: false\n"
                  "Tag: cp311-cp311-linux_x86_64\n")
    members = {**contents, f"{dist_info}/METADATA": metadata.encode(),
               f"{dist_info}/WHEEL": wheel_file.encode()}
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in members.items()]
    record.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = dest / f"{stem}-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            info = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if member.endswith(".so") or ".so." in member
                                  else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def build_packages(dest: Path, python: str) -> Built:
    """Compile everything under `dest/build` and write the wheels into `dest/wheels`."""
    facts = python_facts(python)
    build, wheels_dir = dest / "build", dest / "wheels"
    build.mkdir(parents=True, exist_ok=True)
    wheels_dir.mkdir(parents=True, exist_ok=True)
    skipped = compile_all(build, facts)
    has_32bit = not skipped
    wheels = []
    names = []
    for package in packages(facts.ext_suffix):
        if package.needs_32bit and not has_32bit:
            continue
        contents = {path: (build / rel).read_bytes() for path, rel in package.files.items()}
        contents.update({path: text.encode() for path, text in package.texts.items()})
        wheels.append(write_wheel(wheels_dir, package.name, VERSION, contents, package.requires))
        names.append(package.name)
    return Built(tuple(wheels), tuple(names), (build / "ldlib", build / "tok" / "$PLATFORM"),
                 build / "preload" / "libpreload.so", build / "cuda-13.0" / "lib64", has_32bit,
                 skipped)
