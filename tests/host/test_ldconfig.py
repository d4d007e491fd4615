"""Host facts for the ld.so simulation: cache, configuration, loader defaults, environment.

Differential wherever a real tool can answer: caches are built at test time by the host's
`ldconfig -r ROOT -c FORMAT` from tiny libraries compiled with gcc (64-bit, 32-bit and x32, with and
without libc, in glibc-hwcaps and legacy hwcap subdirectories) and compared line by line with
`ldconfig -p`; lookups are compared with what the real ld.so picks (`LD_DEBUG=libs` on the host
cache, `dlopen` in a private mount namespace for the built ones); ld.so.conf reading is compared
with `ldconfig -v -N -X`; the splitting of LD_LIBRARY_PATH and LD_PRELOAD with ld.so's own trace.
Corrupt caches are one-field edits of built ones, plus random truncations and byte flips.
"""

from __future__ import annotations

import os
import platform
import random
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abifit.errors import FormatError
from abifit.formats.elf import ByteOrder, ElfClass, parse_elf
from abifit.formats.ldcache import (
    CacheArch,
    CacheFormat,
    CacheLibType,
    LdCache,
    LdCacheEntry,
    cache_flags_accepted,
    cache_id_for,
    cache_name_key,
    describe_flags,
    parse_ld_so_cache,
)
from abifit.formats.sources import FileSource
from abifit.host import ldconfig
from abifit.host.ldconfig import (
    ConfDirectory,
    ConfLine,
    ConfLineKind,
    DefaultsSource,
    LoaderDefaults,
    apply_search_probe,
    fallback_defaults,
    loader_defaults,
    parse_ld_so_conf,
    parse_ld_so_help,
    probe_host,
    read_ld_so_cache,
    read_ld_so_conf,
    read_ld_so_conf_entries,
    split_ld_library_path,
    split_ld_preload,
    split_ld_so_preload_file,
)
from fixtures.build import BuildError, compile_c

GCC = shutil.which("gcc")
LDCONFIG = shutil.which("ldconfig") or next(
    (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
)
X86_64 = platform.machine() == "x86_64"
X86_64_ID = 0x303

needs_ldconfig = pytest.mark.skipif(LDCONFIG is None, reason="needs ldconfig")
needs_x86_64_toolchain = pytest.mark.skipif(
    GCC is None or LDCONFIG is None or not X86_64, reason="needs gcc and ldconfig on x86-64"
)

LIB_C = "int abifit_probe(void) { return 1; }\n"
DLOPEN_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *handle = dlopen(argv[1], RTLD_LAZY);
    struct link_map *map;
    if (handle != NULL && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0)
        printf("%s\n", map->l_name);
    else
        printf("-\n");
    return 0;
}
"""


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def _host_ld_so() -> str:
    with FileSource(sys.executable) as source:
        interpreter = parse_elf(source).interpreter
    assert interpreter is not None
    return interpreter


# ---------------------------------------------------------------------------------------------
# Library trees and caches built at test time


@dataclass(frozen=True)
class Lib:
    """One library to compile: where, with which soname and which gcc flags."""

    path: str
    soname: str
    flags: tuple[str, ...] = ()


PLAIN_LIBS = (
    Lib("mnt/d1/libfoo.so.1", "libfoo.so.1"),
    Lib("mnt/d1/libbar.so.2", "libbar.so.2", ("-nostdlib",)),
    Lib("mnt/d2/libfoo.so.1", "libfoo.so.1"),
    Lib("mnt/d2/libnum.so.10", "libnum.so.10"),
    Lib("mnt/d32/libfoo.so.1", "libfoo.so.1", ("-m32", "-nostdlib")),
    Lib("mnt/d32/libonly32.so.1", "libonly32.so.1",
        ("-m32", "-nostdlib", "-Lstub", "-Wl,--no-as-needed", "-l:libc.so.6")),
    Lib("mnt/d32/libx.so.3", "libx.so.3", ("-mx32", "-nostdlib")),
)
HWCAPS_LIBS = (
    *PLAIN_LIBS,
    Lib("mnt/d1/glibc-hwcaps/x86-64-v3/libfoo.so.1", "libfoo.so.1"),
    Lib("mnt/d1/glibc-hwcaps/x86-64-v4/libfoo.so.1", "libfoo.so.1"),
    Lib("mnt/d1/glibc-hwcaps/x86-64-v4/libv4.so.1", "libv4.so.1"),
    Lib("mnt/d1/tls/libtl.so.1", "libtl.so.1"),
    Lib("mnt/d2/libtl.so.1", "libtl.so.1"),
    Lib("mnt/d1/x86_64/libpl.so.1", "libpl.so.1"),
    Lib("mnt/d2/libpl.so.1", "libpl.so.1"),
)


def _compile(root: Path, lib: Lib) -> None:
    try:
        compile_c(root / "lib.c", root / lib.path, optimize=None, flags=lib.flags,
                  soname=lib.soname, cwd=root)
    except BuildError as e:
        pytest.skip(f"gcc cannot build {lib.path}: {e.stderr[:200]}")


def _build_tree(root: Path, libs: tuple[Lib, ...]) -> None:
    """Compile `libs` under `root`, with a 32-bit stub libc.so.6 to link the libc6 one against."""
    (root / "lib.c").write_text(LIB_C)
    _compile(root, Lib("stub/libc.so.6", "libc.so.6", ("-m32", "-nostdlib")))
    for lib in libs:
        _compile(root, lib)
    (root / "etc").mkdir()
    (root / "etc/ld.so.conf").write_text("/mnt/d1\n/mnt/d2\n/mnt/d32\n")


def _build_cache(root: Path, fmt: str) -> Path:
    """`ldconfig -r ROOT`: the cache, the config and the aux cache all stay inside ROOT."""
    assert LDCONFIG is not None
    name = f"/ld.so.cache.{fmt}"
    done = _run([LDCONFIG, "-r", str(root), "-c", fmt, "-C", name, "-f", "/etc/ld.so.conf"])
    assert done.returncode == 0, done.stderr
    return root / name.lstrip("/")


@dataclass(frozen=True)
class Built:
    """The trees and their caches."""

    plain_root: Path
    hwcaps_root: Path
    caches: dict[str, Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Two library trees; the plain one in all three formats, the hwcaps one in the new format.

    (ldconfig 2.36 cannot write the compat or old format for a tree with hwcap subdirectories:
    it writes old-format entries past the end of their array and aborts with a heap corruption.)
    """
    if GCC is None or LDCONFIG is None or not X86_64:
        pytest.skip("needs gcc and ldconfig on x86-64")
    plain = tmp_path_factory.mktemp("plain")
    hwcaps = tmp_path_factory.mktemp("hwcaps")
    _build_tree(plain, PLAIN_LIBS)
    _build_tree(hwcaps, HWCAPS_LIBS)
    caches = {fmt: _build_cache(plain, fmt) for fmt in ("new", "compat", "old")}
    caches["hwcaps"] = _build_cache(hwcaps, "new")
    return Built(plain, hwcaps, caches)


def _render(cache: LdCache) -> list[str]:
    """The cache printed the way `ldconfig -p` prints it."""
    lines = [f"{len(cache.entries)} libs found in cache `{cache.name}'"]
    lines += [f"\t{e.soname} ({e.description}) => {e.path}" for e in cache.entries]
    if cache.generator is not None:
        lines.append(f"Cache generated by: {cache.generator}")
    return lines


def _ldconfig_p(path: Path | str) -> list[str]:
    assert LDCONFIG is not None
    done = _run([LDCONFIG, "-p", "-C", str(path)])
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


# ---------------------------------------------------------------------------------------------
# The cache against ldconfig -p


@needs_ldconfig
def test_host_cache_matches_ldconfig_p() -> None:
    """Every line `ldconfig -p` prints for the host cache is reproduced, in the same order."""
    if not os.path.exists(ldconfig.LD_SO_CACHE):
        pytest.skip("no /etc/ld.so.cache")
    cache = read_ld_so_cache()
    assert cache is not None
    assert _render(cache) == _ldconfig_p(ldconfig.LD_SO_CACHE)
    assert len(cache.entries) > 0


@pytest.mark.parametrize(("key", "fmt"), [("new", CacheFormat.NEW), ("compat", CacheFormat.COMPAT),
                                          ("old", CacheFormat.OLD), ("hwcaps", CacheFormat.NEW)])
def test_built_cache_matches_ldconfig_p(built: Built, key: str, fmt: CacheFormat) -> None:
    """Caches ldconfig writes in each format parse to exactly what `ldconfig -p -C` prints."""
    path = built.caches[key]
    cache = parse_ld_so_cache(path.read_bytes(), str(path))
    assert cache.format is fmt
    assert cache.byte_order is ByteOrder.LITTLE
    assert _render(cache) == _ldconfig_p(path)


def test_built_caches_cover_the_flag_kinds(built: Built) -> None:
    """The built trees produce libc6 x86-64, x32 and i386 entries and a plain ELF one."""
    cache = parse_ld_so_cache(built.caches["new"].read_bytes())
    flags = {e.soname: e.flags for e in cache.entries if "/d32/" in e.path}
    assert flags == {"libfoo.so.1": CacheLibType.ELF, "libonly32.so.1": CacheLibType.ELF_LIBC6,
                     "libx.so.3": CacheArch.X8664_LIBX32 | CacheLibType.ELF_LIBC6}
    assert {e.flags for e in cache.entries if "/d32/" not in e.path} == {X86_64_ID}


def test_hwcaps_entries_are_decoded(built: Built) -> None:
    """glibc-hwcaps entries carry their subdirectory name; legacy ones their bits; order is kept."""
    cache = parse_ld_so_cache(built.caches["hwcaps"].read_bytes())
    foo = [(e.path.removeprefix("/mnt/"), e.hwcaps_subdir, e.is_glibc_hwcaps)
           for e in cache.by_soname("libfoo.so.1")]
    assert foo == [
        ("d1/glibc-hwcaps/x86-64-v3/libfoo.so.1", "x86-64-v3", True),
        ("d1/glibc-hwcaps/x86-64-v4/libfoo.so.1", "x86-64-v4", True),
        ("d1/libfoo.so.1", None, False),
        ("d2/libfoo.so.1", None, False),
        ("d32/libfoo.so.1", None, False),
    ]
    (tls,) = [e for e in cache.by_soname("libtl.so.1") if e.hwcap]
    assert tls.hwcap == 1 << 63 and not tls.is_glibc_hwcaps


# ---------------------------------------------------------------------------------------------
# Lookups against the real loader


def _cache_answers(trace: str) -> dict[str, str | None]:
    """From an LD_DEBUG=libs trace: for each library looked up in the cache, what it found."""
    answers: dict[str, str | None] = {}
    current: str | None = None
    after_cache = False
    for line in trace.splitlines():
        text = line.split(":", 1)[-1].strip()
        if found := re.match(r"find library=(\S+) \[\d+\]; searching", text):
            current, after_cache = found.group(1), False
        elif text.startswith("search cache=") and current is not None:
            after_cache = True
            answers[current] = None
        elif after_cache and current is not None:
            trying = re.match(r"trying file=(.*)", text)
            answers[current] = trying.group(1) if trying else None
            current, after_cache = None, False
    return answers


@needs_x86_64_toolchain
def test_lookup_agrees_with_ld_so_on_the_host_cache(tmp_path: Path) -> None:
    """For every library the real ld.so looks up in the host cache, `lookup` gives the same file.

    A program that needs every soname in the cache is linked and run with `ld.so --list`
    (which maps and relocates but runs no code); the trace shows each cache answer.
    """
    cache = read_ld_so_cache()
    if cache is None:
        pytest.skip("no readable /etc/ld.so.cache")
    names = sorted({e.soname for e in cache.entries if e.flags == X86_64_ID}
                   - {"ld-linux-x86-64.so.2"})
    dirs = sorted({os.path.dirname(e.path) for e in cache.entries})
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    try:
        compile_c(tmp_path / "m.c", tmp_path / "needs-all", shared=False, optimize=None,
                  flags=[*(f"-L{d}" for d in dirs), "-Wl,--no-as-needed,--allow-shlib-undefined"],
                  libs=[f"-l:{n}" for n in names])
    except BuildError as e:
        pytest.skip(f"cannot link against every cached library: {e.stderr[-300:]}")
    done = _run([_host_ld_so(), "--list", str(tmp_path / "needs-all")],
                env={"PATH": os.defpath, "LD_DEBUG": "libs"})
    answers = _cache_answers(done.stderr)
    assert len(answers) >= len(names) // 2
    defaults = loader_defaults()
    ours = {name: cache.lookup(name, X86_64_ID, hwcaps_subdirs=defaults.hwcaps_subdirs,
                               legacy_hwcaps=defaults.legacy_hwcaps_subdirs) for name in answers}
    assert ours == answers


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or not os.path.isdir("/mnt"):
        return False
    if not os.path.exists(ldconfig.LD_SO_CACHE):
        return False
    return _run(["unshare", "-m", "true"]).returncode == 0


LOOKUP_NAMES = ("libfoo.so.1", "libfoo.so.01", "libfoo.so.0001", "libbar.so.2", "libnum.so.010",
                "libtl.so.1", "libpl.so.1", "libv4.so.1", "libonly32.so.1", "libx.so.3",
                "libabifit-none.so.7")


@needs_x86_64_toolchain
@pytest.mark.parametrize("key", ["new", "compat", "old", "hwcaps"])
def test_lookup_agrees_with_dlopen_on_built_caches(built: Built, key: str, tmp_path: Path) -> None:
    """With a built cache bind-mounted over /etc/ld.so.cache (in a private mount namespace),
    `dlopen` of each name opens exactly the file `lookup` predicts (or fails where it says None).

    Covers numeric name matching (`libfoo.so.01`), glibc-hwcaps priority, legacy `tls/` and
    platform subdirectories, i386/x32 entries the x86-64 loader skips, and directory order.
    """
    if not _can_unshare():
        pytest.skip("needs unshare -m (a private mount namespace) and /mnt")
    (tmp_path / "dl.c").write_text(DLOPEN_C)
    program = compile_c(tmp_path / "dl.c", tmp_path / "dl", shared=False, optimize=None,
                        libs=["-ldl"])
    root = built.hwcaps_root if key == "hwcaps" else built.plain_root
    cache_path = built.caches[key]
    script = (f'mount --bind "{cache_path}" /etc/ld.so.cache && mount --bind "{root}/mnt" /mnt && '
              f'for n in "$@"; do "{program}" "$n"; done')
    done = _run(["unshare", "-m", "sh", "-c", script, "sh", *LOOKUP_NAMES],
                env={"PATH": os.defpath})
    assert done.returncode == 0, done.stderr
    real = dict(zip(LOOKUP_NAMES, done.stdout.split(), strict=True))
    cache = parse_ld_so_cache(cache_path.read_bytes())
    defaults = loader_defaults()
    ours = {n: cache.lookup(n, X86_64_ID, hwcaps_subdirs=defaults.hwcaps_subdirs,
                            legacy_hwcaps=defaults.legacy_hwcaps_subdirs) or "-"
            for n in LOOKUP_NAMES}
    assert ours == real


def _hwcaps_cache() -> LdCache:
    entries = (
        LdCacheEntry("libfoo.so.1", "/d/glibc-hwcaps/x86-64-v3/libfoo.so.1", X86_64_ID,
                     (1 << 62) | (3 << 32) | 1, 0, "x86-64-v3"),
        LdCacheEntry("libfoo.so.1", "/d/glibc-hwcaps/x86-64-v2/libfoo.so.1", X86_64_ID,
                     (1 << 62) | (2 << 32) | 0, 0, "x86-64-v2"),
        LdCacheEntry("libfoo.so.1", "/d/tls/libfoo.so.1", X86_64_ID, 1 << 63),
        LdCacheEntry("libfoo.so.1", "/d/x86_64/libfoo.so.1", X86_64_ID, 1 << 1),
        LdCacheEntry("libfoo.so.1", "/d/libfoo.so.1", X86_64_ID, 0),
        LdCacheEntry("libfoo.so.1", "/e/libfoo.so.1", 1, 0),
        LdCacheEntry("libbar.so.2", "/e/libbar.so.2", 1, 0),
    )
    return LdCache("mem", CacheFormat.NEW, ByteOrder.LITTLE, entries)


@pytest.mark.parametrize(
    ("arch_flags", "hwcaps", "legacy", "expected"),
    [
        (X86_64_ID, ("x86-64-v3", "x86-64-v2"), ("x86_64", "tls"),
         "/d/glibc-hwcaps/x86-64-v3/libfoo.so.1"),
        (X86_64_ID, ("x86-64-v2",), ("x86_64", "tls"), "/d/glibc-hwcaps/x86-64-v2/libfoo.so.1"),
        (X86_64_ID, ("x86-64-v2", "x86-64-v3"), (), "/d/glibc-hwcaps/x86-64-v2/libfoo.so.1"),
        (X86_64_ID, (), ("tls",), "/d/tls/libfoo.so.1"),
        (X86_64_ID, (), ("x86_64",), "/d/x86_64/libfoo.so.1"),
        (X86_64_ID, (), (), "/d/libfoo.so.1"),
        (0x003, ("x86-64-v3",), ("tls",), "/e/libfoo.so.1"),
        (0xA03, (), (), None),
    ],
    ids=["v3-best", "v2-only", "priority-order", "tls", "platform", "plain", "i386-takes-ELF",
         "aarch64-none"],
)
def test_lookup_rules(
    arch_flags: int, hwcaps: tuple[str, ...], legacy: tuple[str, ...], expected: str | None
) -> None:
    """glibc-hwcaps by priority, then the first usable plain or legacy entry of the right flags."""
    cache = _hwcaps_cache()
    assert cache.lookup("libfoo.so.1", arch_flags, hwcaps_subdirs=hwcaps,
                        legacy_hwcaps=legacy) == expected


def test_lookup_default_uses_tls_but_no_hwcaps() -> None:
    """Without loader facts, glibc-hwcaps and platform entries are skipped and tls/ is used."""
    assert _hwcaps_cache().lookup("libfoo.so.1", X86_64_ID) == "/d/tls/libfoo.so.1"
    assert _hwcaps_cache().lookup("libbar.so.2", X86_64_ID) is None
    assert _hwcaps_cache().lookup("libbar.so.02", 0x003) == "/e/libbar.so.2"


def _libcmp(a: str, b: str) -> int:
    """A transliteration of glibc's `_dl_cache_libcmp` (elf/dl-cache.c), as the oracle."""
    i = j = 0
    while i < len(a):
        if a[i] in "0123456789":
            if j < len(b) and b[j] in "0123456789":
                si, sj = i, j
                while i < len(a) and a[i] in "0123456789":
                    i += 1
                while j < len(b) and b[j] in "0123456789":
                    j += 1
                va, vb = int(a[si:i]), int(b[sj:j])
                if va != vb:
                    return va - vb
            else:
                return 1
        elif j < len(b) and b[j] in "0123456789":
            return -1
        elif j >= len(b) or a[i] != b[j]:
            return ord(a[i]) - (ord(b[j]) if j < len(b) else 0)
        else:
            i += 1
            j += 1
    return 0 - (ord(b[j]) if j < len(b) else 0)


@settings(max_examples=300, deadline=None)
@given(st.text("ab.019", max_size=8), st.text("ab.019", max_size=8))
def test_cache_name_key_equality_is_libcmp_equality(a: str, b: str) -> None:
    """Two names have equal keys exactly when glibc's comparison calls them equal."""
    assert (cache_name_key(a) == cache_name_key(b)) == (_libcmp(a, b) == 0)


# ---------------------------------------------------------------------------------------------
# Flags


@pytest.mark.parametrize(
    ("elf_class", "machine", "e_flags", "expected"),
    [
        (ElfClass.ELF64, 62, 0, 0x0303),
        (ElfClass.ELF32, 62, 0, 0x0803),
        (ElfClass.ELF32, 3, 0, 0x0003),
        (ElfClass.ELF64, 183, 0, 0x0A03),
        (ElfClass.ELF64, 21, 0, 0x0503),
        (ElfClass.ELF32, 20, 0, 0x0003),
        (ElfClass.ELF64, 22, 0, 0x0403),
        (ElfClass.ELF64, 43, 0, 0x0103),
        (ElfClass.ELF64, 50, 0, 0x0203),
        (ElfClass.ELF32, 40, 0x05000400, 0x0903),
        (ElfClass.ELF32, 40, 0x05000200, 0x0B03),
        (ElfClass.ELF64, 243, 0x4, 0x1003),
        (ElfClass.ELF64, 243, 0x0, 0x0F03),
        (ElfClass.ELF64, 258, 0x43, 0x1203),
        (ElfClass.ELF64, 258, 0x41, 0x1103),
        (ElfClass.ELF64, 8, 0x0, 0x0703),
        (ElfClass.ELF64, 8, 0x400, 0x0E03),
        (ElfClass.ELF32, 8, 0x20, 0x0603),
        (ElfClass.ELF32, 8, 0x420, 0x0D03),
        (ElfClass.ELF32, 8, 0x0, 0x0003),
        (ElfClass.ELF32, 8, 0x400, 0x0C03),
        (ElfClass.ELF64, 9999, 0, 0x0003),
    ],
    ids=["x86-64", "x32", "i386", "aarch64", "ppc64", "ppc", "s390x", "sparc64", "ia64",
         "arm-hf", "arm-sf", "riscv-double", "riscv-soft", "loongarch-double", "loongarch-soft",
         "mips-n64", "mips-n64-nan2008", "mips-n32", "mips-n32-nan2008", "mips-o32",
         "mips-o32-nan2008", "unknown"],
)
def test_cache_id_for(elf_class: int, machine: int, e_flags: int, expected: int) -> None:
    """The loader id follows each architecture's _DL_CACHE_DEFAULT_ID."""
    assert cache_id_for(elf_class, machine, e_flags) == expected


@pytest.mark.parametrize(
    ("flags", "cache_id", "accepted"),
    [(0x303, 0x303, True), (0x003, 0x303, False), (0x001, 0x303, False), (0x803, 0x303, False),
     (0x001, 0x003, True), (0x003, 0x003, True), (0x303, 0x003, False), (0x903, 0x903, True),
     (0x003, 0x903, True), (0xB03, 0x903, False), (0x001, 0x903, False), (0xA03, 0xA03, True),
     (0x003, 0xA03, False)],
)
def test_cache_flags_accepted(flags: int, cache_id: int, accepted: bool) -> None:
    """Generic loaders take ELF and libc6, Arm takes libc6 too, the others only their own id."""
    assert cache_flags_accepted(flags, cache_id) is accepted


@pytest.mark.parametrize(
    ("flags", "text"),
    [(0x303, "libc6,x86-64"), (0x001, "ELF"), (0x003, "libc6"), (0x803, "libc6,x32"),
     (0xA03, "libc6,AArch64"), (0x903, "libc6,hard-float"), (0x1003, "libc6,double-float"),
     (0x0D03, "libc6,N32,nan2008"), (0x0007, "unknown"), (0x7703, "libc6,30464"),
     (0x1203, "libc6,double-float")],
)
def test_describe_flags(flags: int, text: str) -> None:
    """Flags render as ldconfig -p renders them, unknown bits as decimal."""
    assert describe_flags(flags) == text


def test_entry_description_has_hwcap_and_os_abi() -> None:
    """Legacy hwcap bits print in hex, named ones by name, an OS ABI as name and version."""
    legacy = LdCacheEntry("a", "/a", 0x303, 2, 0x00030200)
    named = LdCacheEntry("a", "/a", 0x303, 1 << 62, 0x07000000, "x86-64-v2")
    assert legacy.description == "libc6,x86-64, hwcap: 0x0000000000000002, OS ABI: Linux 3.2.0"
    assert named.description == 'libc6,x86-64, hwcap: "x86-64-v2", OS ABI: Unknown OS 0.0.0'
    assert named.isa_level == 0 and LdCacheEntry("a", "/a", 3, (1 << 62) | (3 << 32)).isa_level == 3


# ---------------------------------------------------------------------------------------------
# Corrupt caches


def _u32(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + struct.pack("<I", value) + data[offset + 4:]


def _extension_offset(data: bytes) -> int:
    return int(struct.unpack_from("<I", data, 32)[0])


CORRUPTIONS: dict[str, tuple[str, Callable[[bytes], bytes], int, str]] = {
    # name: (which cache, edit, offset in the error, words of the problem)
    "empty": ("new", lambda d: b"", 0, "truncated"),
    "cut-in-new-header": ("new", lambda d: d[:30], 0, "truncated cache header"),
    "cut-in-old-header": ("old", lambda d: d[:14], 0, "truncated cache header"),
    "random-bytes": ("new", lambda d: random.Random(7).randbytes(4096), 0, "not an ld.so cache"),
    "new-nlibs-2**31": ("new", lambda d: _u32(d, 20, 2**31), 20, "claims 2147483648 entries"),
    "old-nlibs-2**31": ("old", lambda d: _u32(d, 12, 2**31), 12, "claims 2147483648 entries"),
    "key-past-end": ("new", lambda d: _u32(d, 48 + 4, 0xFFFFFF00), 52, "points past the end"),
    "value-past-end": ("old", lambda d: _u32(d, 16 + 8, 0x7FFFFFFF), 24, "points past the end"),
    "unterminated-string": ("old", lambda d: d[:-1], -1, "not NUL-terminated"),
    "overlong-string": ("old", lambda d: d.rstrip(b"\0") + b"x" * 5000 + b"\0", -6,
                        "not NUL-terminated"),
    "invalid-endianness": ("new", lambda d: d[:28] + b"\x01" + d[29:], 28, "invalid"),
    "extension-misaligned": ("new", lambda d: _u32(d, 32, _extension_offset(d) + 2), -2,
                             "multiple of 4"),
    "extension-past-end": ("new", lambda d: _u32(d, 32, 0xFFFFFFF0), 0xFFFFFFF0,
                           "extension directory"),
    "extension-bad-magic": ("new", lambda d: _u32(d, _extension_offset(d), 1), -3, "magic"),
    "extension-count-2**31": ("new", lambda d: _u32(d, _extension_offset(d) + 4, 2**31), -4,
                              "claims 2147483648 sections"),
    "extension-section-past-end": ("new", lambda d: _u32(d, _extension_offset(d) + 16,
                                                         0xFFFFFF00), -5, "past the end"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_corrupt_cache_raises_one_line_format_error(built: Built, case: str) -> None:
    """Each one-field corruption is a FormatError naming the file, the problem and the offset."""
    which, edit, offset, words = CORRUPTIONS[case]
    data = built.caches[which].read_bytes()
    bad = edit(data)
    # Strings share suffixes, so an unterminated one is reported somewhere inside the last string.
    last_string = range(len(bad.rstrip(b"\0").rsplit(b"\0", 1)[0]) + 1, len(bad))
    expected_offset = {
        -1: last_string,
        -6: last_string,
        -2: _extension_offset(data) + 2,
        -3: _extension_offset(data),
        -4: _extension_offset(data) + 4,
        -5: _extension_offset(data) + 8,
    }.get(offset, offset)
    with pytest.raises(FormatError) as raised:
        parse_ld_so_cache(bad, "/x/ld.so.cache")
    error = raised.value
    assert error.where == "/x/ld.so.cache"
    assert words in error.problem
    if isinstance(expected_offset, range):
        assert error.offset in expected_offset
    else:
        assert error.offset == expected_offset
    assert "\n" not in str(error) and str(error).startswith("/x/ld.so.cache: ")


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["new", "compat", "old", "hwcaps"]),
    st.one_of(
        st.tuples(st.just("cut"), st.integers(0, 10_000)),
        st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, 10_000),
                                                      st.integers(0, 255)), min_size=1,
                                            max_size=6)),
    ),
)
def test_random_damage_raises_only_format_error(
    built: Built, which: str, damage: tuple[str, object]
) -> None:
    """Truncations and byte flips anywhere either parse or raise FormatError, nothing else."""
    data = bytearray(built.caches[which].read_bytes())
    kind, how = damage
    if kind == "cut":
        assert isinstance(how, int)
        del data[how % (len(data) + 1):]
    else:
        assert isinstance(how, list)
        for position, value in how:
            data[position % len(data)] = value
    try:
        cache = parse_ld_so_cache(bytes(data))
    except FormatError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(cache, LdCache)


def test_read_ld_so_cache_missing_is_none(tmp_path: Path) -> None:
    """A cache that cannot be read is no cache (ld.so then runs without one)."""
    assert read_ld_so_cache(str(tmp_path / "absent")) is None
    assert read_ld_so_cache(str(tmp_path)) is None


# ---------------------------------------------------------------------------------------------
# ld.so.conf


def test_parse_ld_so_conf_reads_lines_as_ldconfig_does() -> None:
    """Comments, includes with several patterns, hwcap lines, old `=type`, slashes, blanks."""
    text = ("# comment\n"
            "   /usr/local/lib   # trailing comment\n"
            "include conf.d/*.conf\tother.conf  more/*.conf\n"
            "includes/dir\n"
            "HWCAP 0 nosegneg\n"
            "/opt/old=libc6\n"
            "/opt/trailing///\n"
            "/\n"
            "\t\n"
            "/opt/x\x00ignored\n"
            "include\n")
    assert parse_ld_so_conf(text) == [
        ConfLine(ConfLineKind.DIRECTORY, "/usr/local/lib", 2),
        ConfLine(ConfLineKind.INCLUDE, "conf.d/*.conf", 3),
        ConfLine(ConfLineKind.INCLUDE, "other.conf", 3),
        ConfLine(ConfLineKind.INCLUDE, "more/*.conf", 3),
        ConfLine(ConfLineKind.DIRECTORY, "includes/dir", 4),
        ConfLine(ConfLineKind.HWCAP, "0 nosegneg", 5),
        ConfLine(ConfLineKind.DIRECTORY, "/opt/old", 6),
        ConfLine(ConfLineKind.DIRECTORY, "/opt/trailing", 7),
        ConfLine(ConfLineKind.DIRECTORY, "/opt/x", 10),
        ConfLine(ConfLineKind.DIRECTORY, "include", 11),
    ]


def _conf_tree(root: Path) -> Path:
    """A configuration with relative and absolute globs, nesting, a missing target and dirs."""
    for d in ("a", "b", "c", "d", "e", "f", "g"):
        (root / "libs" / d).mkdir(parents=True)
    (root / "conf.d" / "sub").mkdir(parents=True)
    (root / "conf.d" / "dir.conf").mkdir()  # a directory matched by the glob reads as empty
    main = root / "ld.so.conf"
    main.write_text(f"{root}/libs/a\ninclude conf.d/*.conf\n{root}/libs/g\n"
                    f"include {root}/nothing-*.conf missing.conf\n")
    (root / "conf.d" / "20-b.conf").write_text(f"{root}/libs/b\ninclude sub/*.conf\n")
    (root / "conf.d" / "10-c.conf").write_text(f"# first by name\n{root}/libs/c/\n")
    (root / "conf.d" / ".hidden.conf").write_text(f"{root}/libs/f\n")
    (root / "conf.d" / "sub" / "x.conf").write_text(f"{root}/libs/d\n{root}/libs/a\n"
                                                     f"{root}/libs/missing\n")
    (root / "conf.d" / "30-e.conf").write_text(f"{root}/libs/e=libc6\n")
    return main


def test_read_ld_so_conf_follows_includes_in_order(tmp_path: Path) -> None:
    """Includes expand in place, relative to the including file, sorted, hidden files skipped."""
    main = _conf_tree(tmp_path)
    libs = tmp_path / "libs"
    assert read_ld_so_conf(str(main)) == tuple(
        str(libs / d) for d in ("a", "c", "b", "d", "missing", "e", "g"))
    entries = read_ld_so_conf_entries(str(main))
    assert entries[1] == ConfDirectory(str(libs / "c"), str(tmp_path / "conf.d/10-c.conf"), 2)
    assert len(entries) == 8  # /libs/a is named twice


@needs_ldconfig
def test_read_ld_so_conf_matches_ldconfig_on_a_tree(tmp_path: Path) -> None:
    """`ldconfig -v -N -X -f` names the same directories, from the same files and lines."""
    main = _conf_tree(tmp_path)
    assert _existing_unique(read_ld_so_conf_entries(str(main))) == _ldconfig_dirs(str(main))


@needs_ldconfig
def test_read_ld_so_conf_matches_ldconfig_on_the_host() -> None:
    """The host's /etc/ld.so.conf gives the directories `ldconfig -v` scans, minus built-ins."""
    if not os.path.exists(ldconfig.LD_SO_CONF):
        pytest.skip("no /etc/ld.so.conf")
    entries = read_ld_so_conf_entries()
    assert _existing_unique(entries) == _ldconfig_dirs(None)


def _existing_unique(entries: tuple[ConfDirectory, ...]) -> list[tuple[str, str, int]]:
    """What ldconfig keeps: directories that exist, each inode once, the first naming wins."""
    seen: set[tuple[int, int]] = set()
    kept = []
    for entry in entries:
        try:
            st_ = os.stat(entry.path)
        except OSError:
            continue
        if (st_.st_dev, st_.st_ino) not in seen:
            seen.add((st_.st_dev, st_.st_ino))
            kept.append((entry.path, entry.source, entry.lineno))
    return kept


def _ldconfig_dirs(config: str | None) -> list[tuple[str, str, int]]:
    assert LDCONFIG is not None
    argv = [LDCONFIG, "-v", "-N", "-X"] + (["-f", config] if config else [])
    done = _run(argv)
    assert done.returncode == 0, done.stderr
    found = []
    for line in done.stdout.splitlines():
        named = re.match(r"^(\S.*): \(from (.*):(\d+)\)$", line)
        if named and named.group(2) != "<builtin>" and "/glibc-hwcaps/" not in named.group(1):
            found.append((named.group(1), named.group(2), int(named.group(3))))
    return found


def test_read_ld_so_conf_survives_cycles(tmp_path: Path) -> None:
    """A file including itself or its includer is not read again; the directories come once."""
    (tmp_path / "a.conf").write_text("/a1\ninclude b.conf\ninclude a.conf\n/a2\n")
    (tmp_path / "b.conf").write_text("/b1\ninclude *.conf\n/b2\n")
    assert read_ld_so_conf(str(tmp_path / "a.conf")) == ("/a1", "/b1", "/b2", "/a2")


def test_read_ld_so_conf_bounds_include_depth(tmp_path: Path) -> None:
    """A chain of distinct files deeper than the limit stops instead of recursing on."""
    for i in range(100):
        (tmp_path / f"{i}.conf").write_text(f"/d{i}\ninclude {i + 1}.conf\n")
    dirs = read_ld_so_conf(str(tmp_path / "0.conf"))
    assert dirs[:3] == ("/d0", "/d1", "/d2") and 10 < len(dirs) < 100


def test_read_ld_so_conf_missing_file_is_empty(tmp_path: Path) -> None:
    """A configuration file that does not exist names no directories (as with ldconfig)."""
    assert read_ld_so_conf(str(tmp_path / "absent.conf")) == ()


# ---------------------------------------------------------------------------------------------
# Loader defaults


HELP_236 = """\
Usage: /lib64/ld-linux-x86-64.so.2 [OPTION]... EXECUTABLE-FILE [ARGS-FOR-PROGRAM...]
  --list                list all dependencies and how they are resolved

This program interpreter self-identifies as: /lib64/ld-linux-x86-64.so.2

Shared library search path:
  /opt/from-env (LD_LIBRARY_PATH)
  (libraries located via /etc/ld.so.cache)
  /lib/x86_64-linux-gnu (system search path)
  /usr/lib/x86_64-linux-gnu (system search path)
  /lib (system search path)
  /usr/lib (system search path)

Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4
  x86-64-v3 (supported, searched)
  x86-64-v2 (supported, masked)

Legacy HWCAP subdirectories under library search path directories:
  x86_64 (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  avx512_1
  x86_64 (supported, searched)
"""

HELP_FEDORA_237 = """\
Shared library search path:
  (libraries located via /etc/ld.so.cache)
  /lib64 (system search path)
  /usr/lib64 (system search path)

No subdirectories of glibc-hwcaps directories are searched.
"""


def test_parse_ld_so_help_debian_236() -> None:
    """System path, searched hwcaps only (not masked or unsupported), platform, legacy names."""
    assert parse_ld_so_help(HELP_236) == LoaderDefaults(
        system_dirs=("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"),
        lib="lib/x86_64-linux-gnu",
        platform="x86_64",
        hwcaps_subdirs=("x86-64-v3",),
        legacy_hwcaps_subdirs=("x86_64", "tls"),
        searched_subdirs=("glibc-hwcaps/x86-64-v3",),
    )


def test_parse_ld_so_help_without_hwcaps_or_legacy_section() -> None:
    """A lib64 layout guesses $LIB=lib64; no platform line leaves the platform empty."""
    assert parse_ld_so_help(HELP_FEDORA_237) == LoaderDefaults(("/lib64", "/usr/lib64"), "lib64",
                                                               "", ())


def test_parse_ld_so_help_rejects_other_text() -> None:
    """Text without a system search path (an older glibc, not ld.so) is a FormatError."""
    with pytest.raises(FormatError, match=r"ld\.so --help: no 'Shared library search path'"):
        parse_ld_so_help("Usage: ld.so [OPTION]...\n  --list   list\n")


def test_parse_ld_so_help_of_this_host_matches_its_search() -> None:
    """The host's help parses, and ld.so really searches those system directories, each with
    the subdirectories `loader_defaults` reports, in that order (seen with --inhibit-cache)."""
    ld_so = _host_ld_so()
    help_text = _run([ld_so, "--help"], env={"PATH": os.defpath})
    if "Shared library search path" not in help_text.stdout:
        pytest.skip("this ld.so predates glibc 2.33's --help")
    parsed = parse_ld_so_help(help_text.stdout)
    defaults = loader_defaults()
    assert defaults.system_dirs == parsed.system_dirs
    trace = _run([ld_so, "--inhibit-cache", "--list", "/bin/sh"],
                 env={"PATH": os.defpath, "LD_DEBUG": "libs"}).stderr
    found = re.search(r"search path=(.*?)\s+\(system search path\)", trace)
    assert found is not None
    chunk = len(defaults.searched_subdirs) + 1
    components = found.group(1).split(":")
    bases = tuple(components[i + chunk - 1] for i in range(0, len(components), chunk))
    assert bases == defaults.system_dirs
    assert components[:chunk - 1] == [f"{bases[0]}/{s}" for s in defaults.searched_subdirs]


@needs_x86_64_toolchain
def test_lib_and_platform_expand_as_the_loader_expands_them(tmp_path: Path) -> None:
    """A program with RUNPATH `<tmp>/$LIB:<tmp>/$PLATFORM` finds libraries placed under the
    reported `lib` and `platform` directories, so both values are what ld.so substitutes."""
    defaults = loader_defaults()
    assert defaults.platform
    (tmp_path / "lib.c").write_text(LIB_C)
    (tmp_path / "m.c").write_text("int abifit_probe(void); int abifit_plat(void);\n"
                                  "int main(void) { return abifit_probe() + abifit_plat() - 3; }\n")
    (tmp_path / "plat.c").write_text("int abifit_plat(void) { return 2; }\n")
    lib_dir, plat_dir = tmp_path / defaults.lib, tmp_path / defaults.platform
    lib_dir.mkdir(parents=True)
    plat_dir.mkdir(parents=True, exist_ok=True)
    for out, src in ((lib_dir / "libabifitlib.so", "lib.c"), (plat_dir / "libabifitplat.so",
                                                                "plat.c")):
        compile_c(tmp_path / src, out, optimize=None)
    compile_c(tmp_path / "m.c", tmp_path / "m", shared=False, optimize=None,
              flags=[f"-L{lib_dir}", f"-L{plat_dir}",
                     f"-Wl,-rpath,{tmp_path}/$LIB:{tmp_path}/$PLATFORM"],
              libs=["-labifitlib", "-labifitplat"])
    done = _run([str(tmp_path / "m")], env={"PATH": os.defpath})
    assert done.returncode == 0, done.stderr


TRACE = """\
      2401:	find library=libc.so.6 [0]; searching
      2401:	 search path=/t/L/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3:\
/t/L/lib/x86_64-linux-gnu/tls:/t/L/lib/x86_64-linux-gnu:/t/P/x86_64/glibc-hwcaps/x86-64-v3:\
/t/P/x86_64/tls:/t/P/x86_64		(LD_LIBRARY_PATH)
      2401:	  trying file=/t/L/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libc.so.6
"""


def test_apply_search_probe_reads_expansions_and_subdirectory_order() -> None:
    """The trace gives $LIB, $PLATFORM and the subdirectories tried before each directory."""
    start = fallback_defaults(ElfClass.ELF64, 62)
    probed = apply_search_probe(start, TRACE, "/t/L", "/t/P")
    assert (probed.lib, probed.platform) == ("lib/x86_64-linux-gnu", "x86_64")
    assert probed.searched_subdirs == ("glibc-hwcaps/x86-64-v3", "tls")
    assert apply_search_probe(start, "no trace here", "/t/L", "/t/P") == start


def test_loader_defaults_falls_back_when_ld_so_cannot_be_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No help, no trace, no release: the multiarch table for the loader's machine, marked as
    fallback."""
    monkeypatch.setattr(ldconfig, "_ld_so_help", lambda ld_so: None)
    monkeypatch.setattr(ldconfig, "_search_trace", lambda *args: None)
    monkeypatch.setattr(ldconfig, "_ld_so_version", lambda ld_so: None)
    monkeypatch.setattr(ldconfig, "_libc_version", lambda: None)
    defaults = loader_defaults()
    assert defaults == fallback_defaults(*_host_identity())
    assert defaults.source is DefaultsSource.FALLBACK


def test_loader_defaults_uses_the_probe_when_help_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --help output, $LIB, $PLATFORM and the subdirectories still come from the trace."""
    real = loader_defaults()
    monkeypatch.setattr(ldconfig, "_ld_so_help", lambda ld_so: "not the help you want")
    defaults = loader_defaults()
    assert defaults.source is DefaultsSource.FALLBACK
    assert defaults.system_dirs == fallback_defaults(*_host_identity()).system_dirs
    assert (defaults.lib, defaults.platform) == (real.lib, real.platform)
    assert defaults.searched_subdirs == real.searched_subdirs


def _host_identity() -> tuple[int, int]:
    with FileSource(_host_ld_so()) as source:
        image = parse_elf(source)
    return image.elf_class, image.machine


@pytest.mark.parametrize(
    ("elf_class", "machine", "lib", "plat", "first"),
    [(2, 62, "lib/x86_64-linux-gnu", "x86_64", "/lib/x86_64-linux-gnu"),
     (2, 183, "lib/aarch64-linux-gnu", "aarch64", "/lib/aarch64-linux-gnu"),
     (1, 3, "lib/i386-linux-gnu", "i686", "/lib/i386-linux-gnu"),
     (2, 4242, "lib", "", "/lib")],
    ids=["x86-64", "aarch64", "i386", "unknown"],
)
def test_fallback_defaults(elf_class: int, machine: int, lib: str, plat: str, first: str) -> None:
    """The fallback table is Debian-style multiarch, with a plain /lib:/usr/lib default."""
    defaults = fallback_defaults(elf_class, machine)
    assert (defaults.lib, defaults.platform, defaults.system_dirs[0]) == (lib, plat, first)
    assert defaults.system_dirs[-2:] == ("/lib", "/usr/lib") and defaults.hwcaps_subdirs == ()


# ---------------------------------------------------------------------------------------------
# The environment


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ()), ("", ()), ("/a", ("/a",)), ("/a:/b;/c", ("/a", "/b", "/c")),
     (":/x//;/y:/x/:", ("", "/x", "/y")), ("//", ("/",)), ("/a::/b", ("/a", "", "/b")),
     ("$ORIGIN/../lib:$LIB", ("$ORIGIN/../lib", "$LIB"))],
    ids=["unset", "empty", "one", "both-separators", "empty-means-cwd", "root", "middle-empty",
         "tokens-kept"],
)
def test_split_ld_library_path(value: str | None, expected: tuple[str, ...]) -> None:
    """Split at ':' and ';', empty kept as '' (the current directory), slashes trimmed, once."""
    assert split_ld_library_path(value) == expected


@pytest.mark.parametrize("value", [":/x//;/y:/x/:", "/a;/b::/a/", "/tmp/abifit-no/one:/"])
def test_split_ld_library_path_matches_ld_so(value: str) -> None:
    """The directories ld.so searches for LD_LIBRARY_PATH are the split ones, in that order."""
    defaults = loader_defaults()
    trace = _run(["/bin/true"], env={"PATH": os.defpath, "LD_DEBUG": "libs",
                                    "LD_LIBRARY_PATH": value}).stderr
    found = re.search(r"search path=(.*?)\s+\(LD_LIBRARY_PATH\)", trace)
    if found is None:
        pytest.skip("this ld.so does not trace its search path")
    chunk = len(defaults.searched_subdirs) + 1
    components = found.group(1).split(":")
    bases = tuple(components[i + chunk - 1] for i in range(0, len(components), chunk))
    assert bases == split_ld_library_path(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ()), ("a.so b.so:c.so", ("a.so", "b.so", "c.so")), (" :a::b ", ("a", "b")),
     ("x\ty", ("x\ty",)), ("d d", ("d", "d"))],
    ids=["unset", "space-and-colon", "empty-pieces", "tab-is-not-a-separator", "repeats-kept"],
)
def test_split_ld_preload(value: str | None, expected: tuple[str, ...]) -> None:
    """LD_PRELOAD splits at spaces and colons only."""
    assert split_ld_preload(value) == expected


@pytest.mark.parametrize("value", ["abifit-no-a.so abifit-no-b.so:abifit-no-c.so",
                                   "abifit-no-x\tabifit-no-y", " :abifit-no-d::abifit-no-d "])
def test_split_ld_preload_matches_ld_so(value: str) -> None:
    """ld.so tries to preload exactly the split names, in order (each fails: none exists)."""
    done = _run(["/bin/true"], env={"PATH": os.defpath, "LD_PRELOAD": value})
    tried = tuple(re.findall(r"object '(.*?)' from LD_PRELOAD cannot be preloaded", done.stderr))
    assert tried == split_ld_preload(value)


def test_split_ld_so_preload_file() -> None:
    """The preload file separates with blanks, newlines and colons, and has # comments."""
    text = "# preload\n/a.so /b.so\t/c.so:/d.so # note\n\n/e.so#x\n"
    assert split_ld_so_preload_file(text) == ("/a.so", "/b.so", "/c.so", "/d.so", "/e.so")


def test_probe_host_reads_the_given_files(tmp_path: Path) -> None:
    """probe_host splits the environment and reads conf, preload and cache files it is given."""
    (tmp_path / "ld.so.conf").write_text("/x\ninclude c/*.conf\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.conf").write_text("/y\n")
    (tmp_path / "ld.so.preload").write_text("/p.so\n")
    facts = probe_host({"LD_LIBRARY_PATH": "/l1:/l2", "LD_PRELOAD": "q.so"},
                       cache_path=str(tmp_path / "absent"), conf_path=str(tmp_path / "ld.so.conf"),
                       preload_path=str(tmp_path / "ld.so.preload"))
    assert facts.ld_library_path == ("/l1", "/l2")
    assert facts.ld_preload == ("q.so",)
    assert facts.ld_so_preload == ("/p.so",)
    assert facts.conf_dirs == ("/x", "/y")
    assert facts.cache is None
    assert facts.defaults.system_dirs


def test_probe_host_reports_a_corrupt_cache(tmp_path: Path) -> None:
    """A cache file that exists but is corrupt is a FormatError, not a silent None."""
    (tmp_path / "ld.so.cache").write_bytes(b"glibc-ld.so.cache1.1" + b"\xff" * 40)
    with pytest.raises(FormatError, match=r"ld\.so\.cache: header claims"):
        probe_host({}, cache_path=str(tmp_path / "ld.so.cache"),
                   conf_path=str(tmp_path / "none"), preload_path=str(tmp_path / "none"))


def test_probe_host_on_this_host() -> None:
    """On the real host: the cache parses (or is absent) and the defaults name system dirs."""
    facts = probe_host({})
    assert facts.ld_library_path == () and facts.ld_preload == ()
    assert facts.defaults.system_dirs
    if os.path.exists(ldconfig.LD_SO_CACHE):
        assert facts.cache is not None and facts.cache.entries


def test_ld_cache_is_a_value() -> None:
    """Caches compare by content and `replace` rebuilds the name index."""
    cache = _hwcaps_cache()
    same = LdCache("mem", CacheFormat.NEW, ByteOrder.LITTLE, cache.entries)
    assert cache == same and hash(cache) == hash(same)
    fewer = replace(cache, entries=cache.entries[-1:])
    assert fewer.by_soname("libfoo.so.1") == () and len(fewer.by_soname("libbar.so.2")) == 1
