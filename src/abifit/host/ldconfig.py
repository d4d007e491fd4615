"""Host facts the ld.so simulation needs: the loader's cache, its configuration, its built-in paths.

Four things, each a pure parser plus (where the host has to be asked) a tiny probe:

- `/etc/ld.so.cache` (`read_ld_so_cache`): glibc's cache, parsed by `abifit.formats.ldcache`
  (the new format, the old one, and the old one with the new one embedded after it).
- `/etc/ld.so.conf` (`parse_ld_so_conf`, `read_ld_so_conf`): the directories ldconfig scans, with
  `include` globs resolved relative to the including file the way ldconfig does.
- The loader's built-in defaults (`parse_ld_so_help`, `loader_defaults`): the system search path and
  the glibc-hwcaps subdirectories that `ld.so --help` prints (glibc >= 2.33), and `$LIB` and
  `$PLATFORM`, which no help text prints: the probe runs the loader once with
  `LD_DEBUG=libs LD_LIBRARY_PATH=<tmp>/L/$LIB:<tmp>/P/$PLATFORM` and reads the expanded search path
  back from the trace. When the loader cannot be run, a table for Debian-style multiarch is used.
  The loader's glibc release is recorded (`ld.so --version`), because the subdirectories follow
  it: legacy hwcaps ones (`tls`, the platform, `x86_64`, ...) up to 2.36, glibc-hwcaps ones from
  2.33. For another release than the probed one (a manylinux preset), `hwcaps_search` computes
  them from this CPU (`parse_cpuinfo`) as that release's x86-64 ld.so does
  (`LoaderDefaults.for_glibc`).
- The environment (`split_ld_library_path`, `split_ld_preload`, `split_ld_so_preload_file`,
  `probe_host`): split exactly as ld.so splits them.

How `LdCache.lookup` follows glibc 2.36 (elf/dl-cache.c, `search_cache`): candidates are the entries
whose name equals the wanted one under `_dl_cache_libcmp`, which compares runs of digits by value
(so `libfoo.so.01` finds `libfoo.so.1`), in file order. An entry counts only if its flags pass the
architecture's `_dl_cache_check_flags` (`cache_flags_accepted`). Entries from glibc-hwcaps
subdirectories (ldconfig sorts them first) are used only when their subdirectory is one the loader
searches, best priority winning (the x86 ISA level such an entry records is taken to be supported
when its subdirectory is); otherwise the first plain entry wins. Entries that carry legacy
hwcap bits (libraries in `tls/`, `x86_64/` and other legacy subdirectories) count when every such
trailing directory is one the loader searches (`legacy_hwcaps`, by default only `tls`, which glibc
up to 2.36 always searches). The `osversion` field is not checked (ld.so only checks it when
`dl_osversion` is set, which current glibc does not do by default).
"""

from __future__ import annotations

import glob
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from abifit.errors import FormatError
from abifit.formats.elf import ElfClass, ElfImage, parse_elf
from abifit.formats.ldcache import (
    EM_386,
    EM_AARCH64,
    EM_X86_64,
    LD_SO_CACHE,
    LdCache,
    parse_ld_so_cache,
)
from abifit.formats.sources import FileSource

LD_SO_CONF = "/etc/ld.so.conf"
LD_SO_PRELOAD = "/etc/ld.so.preload"

def read_ld_so_cache(path: str = LD_SO_CACHE) -> LdCache | None:
    """The host's cache, or None when it cannot be read (as ld.so then runs without one).

    A file that can be read but is not a valid cache raises `FormatError`.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return parse_ld_so_cache(data, path)


# ---------------------------------------------------------------------------------------------
# ld.so.conf


class ConfLineKind(Enum):
    """What a meaningful line of ld.so.conf says."""

    DIRECTORY = "directory"
    INCLUDE = "include"
    HWCAP = "hwcap"


@dataclass(frozen=True, slots=True)
class ConfLine:
    """One directory, one include pattern (a line may hold several) or an ignored hwcap line."""

    kind: ConfLineKind
    value: str
    lineno: int


@dataclass(frozen=True, slots=True)
class ConfDirectory:
    """A directory named by ld.so.conf, with the file and line that named it."""

    path: str
    source: str
    lineno: int


_C_SPACE = " \t\n\v\f\r"
_BLANKS = (" ", "\t")
_MAX_INCLUDE_DEPTH = 32


def parse_ld_so_conf(text: str) -> list[ConfLine]:
    """The lines of one ld.so.conf file, read as ldconfig's `parse_conf` reads them.

    `#` starts a comment anywhere; `include` followed by a blank takes blank-separated glob
    patterns; `hwcap` (any case) followed by a blank is ignored by ldconfig; anything else is one
    directory, cut at the first `=` (the old `dir=libc6` syntax), with trailing whitespace and
    slashes removed; a line that is then empty (such as `/`) names nothing.
    """
    lines: list[ConfLine] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.split("\0", 1)[0].split("#", 1)[0].lstrip(_C_SPACE)
        if not line:
            continue
        if line.startswith("include") and line[7:8] in _BLANKS:
            patterns = re.split("[ \t]", line[8:])
            lines += [ConfLine(ConfLineKind.INCLUDE, p, lineno) for p in patterns if p]
        elif line[:5].lower() == "hwcap" and line[5:6] in _BLANKS:
            lines.append(ConfLine(ConfLineKind.HWCAP, line[6:], lineno))
        else:
            directory = line.split("=", 1)[0].rstrip(_C_SPACE).rstrip("/")
            if directory:
                lines.append(ConfLine(ConfLineKind.DIRECTORY, directory, lineno))
    return lines


def _read_conf_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError:  # ldconfig skips a file it cannot open (and a directory reads as empty)
        return None


def _include_paths(config_file: str, pattern: str) -> list[str]:
    """As ldconfig's `parse_conf_include`: relative patterns start at the including file's dir."""
    if not pattern.startswith("/") and "/" in config_file:
        pattern = os.path.join(os.path.dirname(config_file), pattern)
    return sorted(glob.glob(pattern))  # glob64 sorts, in the C locale


def _walk_conf(path: str, stack: tuple[str, ...]) -> Iterator[ConfDirectory]:
    text = _read_conf_text(path)
    if text is None:
        return
    for line in parse_ld_so_conf(text):
        if line.kind is ConfLineKind.DIRECTORY:
            yield ConfDirectory(line.value, path, line.lineno)
        elif line.kind is ConfLineKind.INCLUDE and len(stack) < _MAX_INCLUDE_DEPTH:
            for included in _include_paths(path, line.value):
                if os.path.realpath(included) not in stack:
                    yield from _walk_conf(included, (*stack, os.path.realpath(included)))


def read_ld_so_conf_entries(path: str = LD_SO_CONF) -> tuple[ConfDirectory, ...]:
    """Every directory line reached from `path`, includes expanded in place, in order.

    A file that is already being read higher up the include chain is not read again (ldconfig
    itself recurses until it runs out of file descriptors), and includes nest at most 32 deep.
    Missing or unreadable files contribute nothing, as with ldconfig.
    """
    return tuple(_walk_conf(path, (os.path.realpath(path),)))


def read_ld_so_conf(path: str = LD_SO_CONF) -> tuple[str, ...]:
    """The directories ld.so.conf names, in order, each once.

    Directories are not checked for existence; ldconfig skips the ones it cannot stat and merges
    the ones that are the same inode (a merged /usr), which is a fact about the disk, not the file.
    """
    return tuple(dict.fromkeys(entry.path for entry in read_ld_so_conf_entries(path)))


# ---------------------------------------------------------------------------------------------
# The loader's built-in defaults


class DefaultsSource(Enum):
    """Where `LoaderDefaults` came from."""

    LD_SO_HELP = "ld.so --help"
    FALLBACK = "fallback table"


@dataclass(frozen=True, slots=True, order=True)
class GlibcVersion:
    """A glibc release (`2.36`), which decides the subdirectories its ld.so searches."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


# Releases that changed the search (see `hwcaps_search`).
GLIBC_2_26 = GlibcVersion(2, 26)  # x86: $PLATFORM haswell/xeon_phi on Intel, hwcap avx512_1
GLIBC_2_27 = GlibcVersion(2, 27)  # x86-64: hwcap x86_64 added back, $PLATFORM never unset
GLIBC_HWCAPS = GlibcVersion(2, 33)  # glibc-hwcaps subdirectories searched first
GLIBC_NO_LEGACY = GlibcVersion(2, 37)  # legacy hwcaps subdirectories no longer searched

_RELEASE = re.compile(r"release version (\d+)\.(\d+)")
_ANY_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)")
_GLIBC_NODE = re.compile(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?")


def parse_glibc_version(text: str) -> GlibcVersion | None:
    """The release in `ld.so --version` ("... stable release version 2.36."), in
    `confstr(_CS_GNU_LIBC_VERSION)` ("glibc 2.36") or alone ("2.36"); None when there is none."""
    found = _RELEASE.search(text) or _ANY_VERSION.search(text)
    return GlibcVersion(int(found[1]), int(found[2])) if found else None


def glibc_version_of(image: ElfImage) -> GlibcVersion | None:
    """The newest `GLIBC_2.N` version node a libc.so.6 defines, or None when it defines none.

    A lower bound of the release: one that adds no symbol adds no node (the x86-64 libc.so.6 of
    glibc 2.37 and 2.40 define none, so they read as 2.36 and 2.39).
    """
    nodes = (_GLIBC_NODE.fullmatch(d.name) for d in image.version_defs if not d.is_base)
    return max((GlibcVersion(int(m[1]), int(m[2])) for m in nodes if m), default=None)


@dataclass(frozen=True, slots=True)
class LoaderDefaults:
    """What the dynamic loader searches without being told.

    `system_dirs`: the built-in search path (after the cache). `lib`, `platform`: what `$LIB` and
    `$PLATFORM` expand to. `hwcaps_subdirs`: glibc-hwcaps subdirectories searched, best first.
    `legacy_hwcaps_subdirs`: legacy hwcap subdirectory names searched (glibc <= 2.36: the platform,
    `tls`, hwcap names such as `x86_64`). `searched_subdirs`: the subdirectories ld.so tries under
    every search directory before the directory itself, in its order, repeats included (from the
    `LD_DEBUG=libs` probe; `glibc-hwcaps/<name>` for each of `hwcaps_subdirs` otherwise).
    `glibc`: the release of this loader, None when unknown.
    """

    system_dirs: tuple[str, ...]
    lib: str
    platform: str
    hwcaps_subdirs: tuple[str, ...]
    legacy_hwcaps_subdirs: tuple[str, ...] = ()
    searched_subdirs: tuple[str, ...] = ()
    source: DefaultsSource = DefaultsSource.LD_SO_HELP
    glibc: GlibcVersion | None = None

    @property
    def cache_legacy_hwcaps(self) -> tuple[str, ...]:
        """The legacy subdirectory names whose ld.so.cache entries the loader takes: those it
        searches; when none are known, `tls` for a release that still searches it (before
        2.37, or unknown) and none from 2.37. (2.37 to 2.39 still took an entry whose bits
        matched, 2.40 takes none; but ldconfig writes no such entries from 2.37 on.)"""
        if self.legacy_hwcaps_subdirs:
            return self.legacy_hwcaps_subdirs
        return ("tls",) if self.glibc is None or self.glibc < GLIBC_NO_LEGACY else ()

    def for_glibc(self, glibc: GlibcVersion, cpu: CpuFeatures | None) -> LoaderDefaults:
        """These defaults as the loader of release `glibc` has them on `cpu`.

        The same defaults when `glibc` is the release they were read from (a probed list is
        exact). Otherwise the system directories and `$LIB` stay (a layout of the distribution),
        and the subdirectories and `$PLATFORM` are computed (`hwcaps_search`). For a machine
        that is not modelled (not x86-64, or no CPU facts), the subdirectories the target cannot
        have are dropped: glibc-hwcaps before 2.33, legacy ones from 2.37 (legacy ones a newer
        loader did not search cannot be added back).
        """
        if glibc == self.glibc:
            return self
        computed = hwcaps_search(glibc, cpu) if cpu is not None else None
        if computed is not None:
            return replace(self, platform=computed.platform,
                           hwcaps_subdirs=computed.hwcaps_subdirs,
                           legacy_hwcaps_subdirs=computed.legacy_hwcaps_subdirs,
                           searched_subdirs=computed.searched_subdirs, glibc=glibc)
        hwcaps_ok, legacy_ok = glibc >= GLIBC_HWCAPS, glibc < GLIBC_NO_LEGACY
        kept = tuple(s for s in self.searched_subdirs
                     if (hwcaps_ok if s.startswith("glibc-hwcaps/") else legacy_ok))
        return replace(self, hwcaps_subdirs=self.hwcaps_subdirs if hwcaps_ok else (),
                       legacy_hwcaps_subdirs=self.legacy_hwcaps_subdirs if legacy_ok else (),
                       searched_subdirs=kept, glibc=glibc)


_SECTION_SEARCH = "Shared library search path:"
_SECTION_HWCAPS = "Subdirectories of glibc-hwcaps directories"
_SECTION_LEGACY = "Legacy HWCAP subdirectories"


def _help_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """Indented `name (notes)` lines of ld.so --help, grouped under their section headings."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        if not line.startswith("  "):
            heading = next((h for h in (_SECTION_SEARCH, _SECTION_HWCAPS, _SECTION_LEGACY)
                            if line.startswith(h)), None)
            current = sections.setdefault(heading, []) if heading else None
        elif current is not None:
            item, sep, notes = line.strip().rpartition(" (")
            if sep and notes.endswith(")"):
                current.append((item, notes[:-1]))
            else:
                current.append((line.strip(), ""))
    return sections


def _guess_lib(first_system_dir: str) -> str:
    """`$LIB` from the first system directory: a multiarch triplet keeps its parent (Debian)."""
    parts = first_system_dir.strip("/").split("/")
    if "-linux-" in parts[-1] and len(parts) > 1:
        return "/".join(parts[-2:])
    return parts[-1]


def parse_ld_so_help(text: str, name: str = "ld.so --help") -> LoaderDefaults:
    """Read `ld.so --help` (glibc >= 2.33); `$LIB` is guessed from the first system directory.

    Raises `FormatError` when the text has no system search path (not ld.so, or an older glibc).
    """
    sections = _help_sections(text)
    system = tuple(d for d, notes in sections.get(_SECTION_SEARCH, []) if
                   notes == "system search path")
    if not system:
        raise FormatError(name, "no 'Shared library search path' with system directories")
    hwcaps = tuple(n for n, notes in sections.get(_SECTION_HWCAPS, []) if "searched" in notes)
    legacy = sections.get(_SECTION_LEGACY, [])
    platform_name = next((n for n, notes in legacy if notes.startswith("AT_PLATFORM")), "")
    legacy_names = tuple(dict.fromkeys(n for n, notes in legacy if "searched" in notes))
    subdirs = tuple(f"glibc-hwcaps/{n}" for n in hwcaps)
    return LoaderDefaults(system, _guess_lib(system[0]), platform_name, hwcaps, legacy_names,
                          subdirs)


_SEARCH_PATH_LINE = re.compile(r"search path=(.*?)\s+\(LD_LIBRARY_PATH\)\s*$", re.M)


def apply_search_probe(
    defaults: LoaderDefaults, trace: str, lib_dir: str, platform_dir: str
) -> LoaderDefaults:
    """Refine `defaults` from an `LD_DEBUG=libs` trace of a run whose LD_LIBRARY_PATH was
    `<lib_dir>/$LIB:<platform_dir>/$PLATFORM`: the expansions and the subdirectory order.

    Returns `defaults` unchanged when the trace has no LD_LIBRARY_PATH search path.
    """
    found = _SEARCH_PATH_LINE.search(trace)
    if found is None:
        return defaults
    components = found.group(1).split(":")
    lib = _probe_group(components, lib_dir + "/")
    plat = _probe_group(components, platform_dir + "/")
    if lib is None:
        return defaults
    base, subdirs = lib
    return replace(defaults, lib=base, platform=plat[0] if plat else defaults.platform,
                   searched_subdirs=subdirs)


def _probe_group(components: list[str], prefix: str) -> tuple[str, tuple[str, ...]] | None:
    """The expansion under `prefix` and the subdirectories tried before it (the base comes last)."""
    group = [c[len(prefix):] for c in components if c.startswith(prefix)]
    if not group:
        return None
    base = group[-1]
    subdirs = tuple(g[len(base) + 1:] for g in group[:-1] if g.startswith(base + "/"))
    return base, subdirs


_MULTIARCH: Mapping[tuple[int, int], tuple[str, str]] = {
    (ElfClass.ELF64, EM_X86_64): ("x86_64-linux-gnu", "x86_64"),
    (ElfClass.ELF64, EM_AARCH64): ("aarch64-linux-gnu", "aarch64"),
    (ElfClass.ELF32, EM_386): ("i386-linux-gnu", "i686"),
}


def fallback_defaults(elf_class: int, machine: int) -> LoaderDefaults:
    """Debian-style multiarch defaults for when the loader cannot be asked.

    Known: x86-64, AArch64, i386; any other machine gets `/lib:/usr/lib`, `$LIB` = `lib` and no
    platform. No hwcaps subdirectories are assumed (they depend on the CPU).
    """
    known = _MULTIARCH.get((elf_class, machine))
    if known is None:
        return LoaderDefaults(("/lib", "/usr/lib"), "lib", "", (),
                              source=DefaultsSource.FALLBACK)
    triplet, plat = known
    dirs = (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib")
    return LoaderDefaults(dirs, f"lib/{triplet}", plat, (), source=DefaultsSource.FALLBACK)


# What a glibc release searches on a CPU


@dataclass(frozen=True, slots=True)
class CpuFeatures:
    """What ld.so reads off the CPU to choose its subdirectories and `$PLATFORM`: the loader's
    architecture as `uname -m` names it (only `x86_64` is modelled), the vendor (`vendor_id`:
    `GenuineIntel`, `AuthenticAMD`) and the feature flags as /proc/cpuinfo names them (`abm` is
    LZCNT, `pni` SSE3, `lahf_lm` LAHF/SAHF in 64-bit mode)."""

    machine: str
    vendor: str
    flags: frozenset[str]


def parse_cpuinfo(text: str, machine: str) -> CpuFeatures:
    """The first processor of /proc/cpuinfo: its `vendor_id` and `flags` lines."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if values:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            values.setdefault(key.strip(), value.strip())
    return CpuFeatures(machine, values.get("vendor_id", ""),
                       frozenset(values.get("flags", "").split()))


@dataclass(frozen=True, slots=True)
class HwcapsSearch:
    """What one glibc release searches on one CPU, in `LoaderDefaults`' terms: `platform` is
    what `$PLATFORM` expands to ("" where that release leaves it unset: glibc 2.26 off Intel,
    where ld.so drops a path that names it)."""

    platform: str
    hwcaps_subdirs: tuple[str, ...]
    legacy_hwcaps_subdirs: tuple[str, ...]
    searched_subdirs: tuple[str, ...]


# sysdeps/x86/get-isa-level.h: each level needs the one below; v3 needs BMI1/BMI2 from 2.37.
_X86_64_LEVELS = (
    ("x86-64-v2", frozenset({"cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2", "cx16",
                             "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2"})),
    ("x86-64-v3", frozenset({"avx", "avx2", "f16c", "fma", "abm", "movbe"})),
    ("x86-64-v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
)
_V3_FROM_2_37 = frozenset({"bmi1", "bmi2"})
# sysdeps/x86/cpu-features.c (2.26 and later): Intel CPUs only.
_HASWELL = frozenset({"avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt"})
_AVX512_1 = frozenset({"avx512bw", "avx512dq", "avx512vl"})


def _x86_64_levels(glibc: GlibcVersion, flags: frozenset[str]) -> tuple[str, ...]:
    """The glibc-hwcaps subdirectories the CPU supports, best first."""
    levels: list[str] = []
    for name, needs in _X86_64_LEVELS:
        if name == "x86-64-v3" and glibc >= GLIBC_NO_LEGACY:
            needs = needs | _V3_FROM_2_37
        if not needs <= flags:
            break
        levels.insert(0, name)
    return tuple(levels)


def _x86_64_capabilities(glibc: GlibcVersion,
                         cpu: CpuFeatures) -> tuple[str | None, tuple[str, ...]]:
    """`dl_platform` and the legacy hwcap names (lowest bit first) of x86-64 `init_cpu_features`.

    Before 2.26 the platform is the kernel's AT_PLATFORM (`x86_64`) and no hwcap is important.
    From 2.26 an Intel CPU with AVX-512 ER and PF is `xeon_phi`; one with AVX-512 BW, DQ and VL
    gets the hwcap `avx512_1`; else one with the Haswell features is `haswell`. 2.26 cleared the
    platform first (BZ #22299) and had no `x86_64` hwcap (BZ #22093); 2.27 fixed both.
    """
    if glibc < GLIBC_2_26:
        return "x86_64", ()
    names = ["x86_64"] if glibc >= GLIBC_2_27 else []
    platform_name: str | None = None
    if cpu.vendor == "GenuineIntel":
        flags = cpu.flags
        if {"avx512f", "avx512cd"} <= flags:
            if "avx512er" in flags:
                platform_name = "xeon_phi" if "avx512pf" in flags else None
            elif flags >= _AVX512_1:
                names.append("avx512_1")
        if platform_name is None and flags >= _HASWELL:
            platform_name = "haswell"
    if platform_name is None and glibc >= GLIBC_2_27:
        platform_name = "x86_64"
    return platform_name, tuple(names)


def legacy_subdirs(names: Sequence[str]) -> tuple[str, ...]:
    """glibc's power set of legacy capability names (elf/dl-hwcaps.c, `_dl_important_hwcaps`
    up to 2.36), most specific first, without the last, empty entry (the directory itself).

    `names` in glibc's order: the hwcap names by bit, the platform, `tls`. Entry `i` holds the
    names whose bit in `i` is clear, written from the last name to the first:
    `tls/x86_64/x86_64`, `tls/x86_64`, `tls/x86_64`, `tls`, `x86_64/x86_64`, ... for
    (`x86_64`, `x86_64`, `tls`).
    """
    count = len(names)
    return tuple("/".join(names[n] for n in reversed(range(count)) if not i >> n & 1)
                 for i in range((1 << count) - 1))


def hwcaps_search(glibc: GlibcVersion, cpu: CpuFeatures) -> HwcapsSearch | None:
    """What the x86-64 ld.so of release `glibc` searches on `cpu`; None for another machine.

    Before 2.33 the legacy subdirectories only; from 2.33 to 2.36 the glibc-hwcaps ones
    (`glibc-hwcaps/x86-64-v3` ...) first, then the legacy ones; from 2.37 the glibc-hwcaps ones
    only. `$PLATFORM` expands to `dl_platform` in every release (2.37 removed the legacy
    search, not the platform: an Intel Haswell or later still expands it to `haswell`).
    """
    if cpu.machine != "x86_64":
        return None
    levels = _x86_64_levels(glibc, cpu.flags) if glibc >= GLIBC_HWCAPS else ()
    platform_name, hwcaps = _x86_64_capabilities(glibc, cpu)
    searched = tuple(f"glibc-hwcaps/{level}" for level in levels)
    legacy: tuple[str, ...] = ()
    if glibc < GLIBC_NO_LEGACY:
        platform_part = (platform_name,) if platform_name else ()
        searched += legacy_subdirs((*hwcaps, *platform_part, "tls"))
        # as ld.so --help lists them: the platform, tls, the hwcap names from the highest bit
        legacy = tuple(dict.fromkeys((*platform_part, "tls", *reversed(hwcaps))))
    return HwcapsSearch(platform_name or "", levels, legacy, searched)


# Host probes: tiny, private, replaceable in tests.


def _run(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(list(argv), env=dict(env), capture_output=True, text=True,
                              errors="replace", timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None


def _ld_so_help(ld_so: str) -> str | None:
    """The output of `ld.so --help`, or None when it cannot be run."""
    done = _run([ld_so, "--help"], {"PATH": os.defpath})
    return done.stdout if done is not None and done.returncode == 0 else None


def _ld_so_version(ld_so: str) -> str | None:
    """The output of `ld.so --version` (glibc >= 2.33), or None when it cannot be run."""
    done = _run([ld_so, "--version"], {"PATH": os.defpath})
    return done.stdout if done is not None and done.returncode == 0 else None


def _libc_version() -> str | None:
    """The running Python's C library, as `confstr(_CS_GNU_LIBC_VERSION)` names it."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def _read_cpuinfo() -> str:
    """/proc/cpuinfo, or "" where it cannot be read."""
    return _read_optional_text("/proc/cpuinfo")


def host_cpu(machine: str | None = None) -> CpuFeatures | None:
    """This machine's CPU (`machine`: the loader's architecture, default `uname -m`), or None
    where /proc/cpuinfo cannot be read."""
    text = _read_cpuinfo()
    return parse_cpuinfo(text, machine or platform.machine()) if text else None


def _search_trace(ld_so: str, program: str, lib_dir: str, platform_dir: str) -> str | None:
    """The LD_DEBUG=libs trace of `ld.so --list program` with the probe's LD_LIBRARY_PATH."""
    env = {"PATH": os.defpath, "LD_DEBUG": "libs",
           "LD_LIBRARY_PATH": f"{lib_dir}/$LIB:{platform_dir}/$PLATFORM"}
    done = _run([ld_so, "--list", program], env)
    return done.stderr if done is not None else None


def _elf_identity(path: str) -> tuple[int, int, str | None] | None:
    """ELF class, machine and PT_INTERP of a file, or None when it is not a readable ELF file."""
    try:
        with FileSource(path) as source:
            image = parse_elf(source)
    except (OSError, FormatError):
        return None
    return image.elf_class, image.machine, image.interpreter


def _interpreter_and_program(ld_so: str | None) -> tuple[str | None, str | None]:
    """The loader to ask (PT_INTERP of this Python, else of /bin/sh) and a program it can load."""
    for program in (sys.executable, "/bin/sh"):
        identity = _elf_identity(program) if program else None
        if identity is None or identity[2] is None:
            continue
        interp = identity[2]
        if ld_so is None:
            return interp, program
        if os.path.realpath(interp) == os.path.realpath(ld_so):
            return ld_so, program
    return ld_so, None


def _host_machine() -> tuple[int, int]:
    machine = platform.machine()
    table = {"x86_64": (2, EM_X86_64), "aarch64": (2, EM_AARCH64), "i686": (1, EM_386)}
    return table.get(machine, (2, 0))


def loader_defaults(ld_so: str | None = None) -> LoaderDefaults:
    """Ask the host's dynamic loader for its defaults (see the module docstring for how).

    `ld_so` defaults to the interpreter of the running Python (else of /bin/sh). If the loader
    cannot be run or does not print a search path, `fallback_defaults` for its machine is used.
    The release comes from `ld.so --version` (glibc >= 2.33), else from the running Python's C
    library; what the help does not say (before 2.33 there is no --help) is then computed for
    that release on this CPU (`hwcaps_search`), and the probe's trace, where it works,
    replaces the subdirectories, `$LIB` and `$PLATFORM` with what the loader really does.
    """
    ld_so, program = _interpreter_and_program(ld_so)
    if ld_so is None:
        return replace(fallback_defaults(*_host_machine()),
                       glibc=parse_glibc_version(_libc_version() or ""))
    identity = _elf_identity(ld_so)
    machine = identity[:2] if identity else _host_machine()
    try:
        defaults = parse_ld_so_help(_ld_so_help(ld_so) or "", f"{ld_so} --help")
    except FormatError:
        defaults = fallback_defaults(*machine)
    glibc = (parse_glibc_version(_ld_so_version(ld_so) or "")
             or parse_glibc_version(_libc_version() or ""))
    cpu = host_cpu(_MULTIARCH.get(machine, ("", "unknown"))[1]) if glibc is not None else None
    computed = hwcaps_search(glibc, cpu) if glibc is not None and cpu is not None else None
    if computed is not None:
        defaults = _with_computed_search(defaults, computed)
    if program is not None:
        defaults = _probe_expansions(defaults, ld_so, program)
    if not defaults.platform:
        defaults = replace(defaults, platform=fallback_defaults(*machine).platform)
    return replace(defaults, glibc=glibc)


def _with_computed_search(defaults: LoaderDefaults, computed: HwcapsSearch) -> LoaderDefaults:
    """`defaults` completed with what `computed` (the same release on this CPU) knows: the
    glibc-hwcaps subdirectories and `$PLATFORM` where they are a table's guess (no help text),
    the legacy names where the help lists none, and the subdirectories in the loader's order
    (the help's glibc-hwcaps ones, then the legacy ones)."""
    guessed = defaults.source is DefaultsSource.FALLBACK
    hwcaps = computed.hwcaps_subdirs if guessed else defaults.hwcaps_subdirs
    legacy = tuple(s for s in computed.searched_subdirs if not s.startswith("glibc-hwcaps/"))
    return replace(
        defaults,
        platform=computed.platform if guessed or not defaults.platform else defaults.platform,
        hwcaps_subdirs=hwcaps,
        legacy_hwcaps_subdirs=defaults.legacy_hwcaps_subdirs or computed.legacy_hwcaps_subdirs,
        searched_subdirs=(*(f"glibc-hwcaps/{name}" for name in hwcaps), *legacy))


def _probe_expansions(defaults: LoaderDefaults, ld_so: str, program: str) -> LoaderDefaults:
    with tempfile.TemporaryDirectory(prefix="abifit-ld-probe-") as tmp:
        lib_dir, platform_dir = os.path.join(tmp, "L"), os.path.join(tmp, "P")
        trace = _search_trace(ld_so, program, lib_dir, platform_dir)
    return apply_search_probe(defaults, trace or "", lib_dir, platform_dir)


# ---------------------------------------------------------------------------------------------
# The environment


def split_ld_library_path(value: str | None) -> tuple[str, ...]:
    """LD_LIBRARY_PATH as ld.so's `fillin_rpath` splits it.

    Both `:` and `;` separate; an empty entry is kept as `""`, which ld.so searches as the current
    directory (it prints it as `.`); trailing slashes are dropped (`/` stays `/`); a directory
    given twice is searched once. Dynamic string tokens (`$ORIGIN`, `$LIB`) are left unexpanded.
    """
    if not value:
        return ()
    dirs = (part.rstrip("/") or ("/" if part else "") for part in re.split("[:;]", value))
    return tuple(dict.fromkeys(dirs))


def split_ld_preload(value: str | None) -> tuple[str, ...]:
    """LD_PRELOAD as rtld.c `handle_preload_list` splits it: at spaces and colons only.

    Tabs and newlines are part of a name (glibc's comment says "white space", its code does not).
    Repeats are kept: ld.so tries each one.
    """
    return tuple(part for part in re.split("[ :]", value or "") if part)


def split_ld_so_preload_file(text: str) -> tuple[str, ...]:
    """The names in /etc/ld.so.preload: `#` comments to end of line, separated by blanks, `:`."""
    without_comments = re.sub("#[^\n]*", " ", text)
    return tuple(part for part in re.split("[ \t\n:]", without_comments) if part)


@dataclass(frozen=True, slots=True)
class HostFacts:
    """Everything about the host that decides where ld.so finds a library."""

    ld_library_path: tuple[str, ...]
    ld_preload: tuple[str, ...]
    ld_so_preload: tuple[str, ...]
    conf_dirs: tuple[str, ...]
    cache: LdCache | None
    defaults: LoaderDefaults


def _read_optional_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    except OSError:
        return ""


def probe_host(
    env: Mapping[str, str],
    *,
    ld_so: str | None = None,
    cache_path: str = LD_SO_CACHE,
    conf_path: str = LD_SO_CONF,
    preload_path: str = LD_SO_PRELOAD,
) -> HostFacts:
    """Read the host's loader files and ask its loader; `env` supplies the LD_* variables.

    A missing or unreadable cache gives `cache=None`; a corrupt one raises `FormatError`.
    """
    return HostFacts(
        ld_library_path=split_ld_library_path(env.get("LD_LIBRARY_PATH")),
        ld_preload=split_ld_preload(env.get("LD_PRELOAD")),
        ld_so_preload=split_ld_so_preload_file(_read_optional_text(preload_path)),
        conf_dirs=read_ld_so_conf(conf_path),
        cache=read_ld_so_cache(cache_path),
        defaults=loader_defaults(ld_so),
    )
