"""What a glibc release searches: the release, the CPU, `hwcaps_search`, `LoaderDefaults.for_glibc`.

Differential where this machine can answer: the subdirectories and `$PLATFORM` computed for the
running glibc on this CPU are those its ld.so shows in a real `LD_DEBUG=libs` trace, and the
legacy subdirectories appear in that trace exactly when the release is 2.36 or older. Other
releases and CPUs are checked against tables read from glibc's source (elf/dl-hwcaps.c,
sysdeps/x86/cpu-features.c, sysdeps/x86/get-isa-level.h of 2.17 to 2.42), and the legacy order
against a transliteration of `_dl_important_hwcaps`' string construction.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from abifit.formats.elf import parse_elf
from abifit.formats.sources import FileSource
from abifit.host import ldconfig
from abifit.host.ldconfig import (
    CpuFeatures,
    DefaultsSource,
    GlibcVersion,
    HwcapsSearch,
    LoaderDefaults,
    apply_search_probe,
    fallback_defaults,
    glibc_version_of,
    hwcaps_search,
    legacy_subdirs,
    loader_defaults,
    parse_cpuinfo,
    parse_glibc_version,
    parse_ld_so_help,
)

X86_64 = platform.machine() == "x86_64"

BASE = "fpu cx8 cmov mmx fxsr sse sse2"
V2 = BASE + " cx16 lahf_lm popcnt pni ssse3 sse4_1 sse4_2"
V3 = V2 + " avx avx2 f16c fma abm movbe bmi1 bmi2"
V4 = V3 + " avx512f avx512bw avx512cd avx512dq avx512vl"


def cpu(vendor: str, flags: str) -> CpuFeatures:
    return CpuFeatures("x86_64", vendor, frozenset(flags.split()))


AMD_ZEN = cpu("AuthenticAMD", V3)
AMD_ZEN4 = cpu("AuthenticAMD", V4)
INTEL_NEHALEM = cpu("GenuineIntel", V2)
INTEL_HASWELL = cpu("GenuineIntel", V3)
INTEL_SKYLAKE_SP = cpu("GenuineIntel", V4)
INTEL_XEON_PHI = cpu("GenuineIntel", V3 + " avx512f avx512cd avx512er avx512pf")
CPUS = (AMD_ZEN, AMD_ZEN4, INTEL_NEHALEM, INTEL_HASWELL, INTEL_SKYLAKE_SP, INTEL_XEON_PHI)


def v(text: str) -> GlibcVersion:
    found = parse_glibc_version(text)
    assert found is not None
    return found


# ---------------------------------------------------------------------------------------------
# The release and the CPU


@pytest.mark.parametrize(("text", "expected"), [
    ("ld.so (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright (C) 2022",
     GlibcVersion(2, 36)),
    ("ld.so (Ubuntu GLIBC 2.39-0ubuntu8.4) stable release version 2.39.\n", GlibcVersion(2, 39)),
    ("ld.so (GNU libc) development release version 2.42.9000.\n", GlibcVersion(2, 42)),
    ("glibc 2.17", GlibcVersion(2, 17)),
    ("2.41", GlibcVersion(2, 41)),
    ("musl libc (x86_64)", None),
], ids=["debian-ld-so", "ubuntu-ld-so", "development", "confstr", "bare", "none"])
def test_parse_glibc_version(text: str, expected: GlibcVersion | None) -> None:
    """The release of `ld.so --version`, of confstr(_CS_GNU_LIBC_VERSION), or of a bare string."""
    assert parse_glibc_version(text) == expected


def test_glibc_versions_order_by_number() -> None:
    """2.9 < 2.17 < 2.36 < 2.37: compared as numbers, printed as glibc writes them."""
    assert GlibcVersion(2, 9) < GlibcVersion(2, 17) < GlibcVersion(2, 36) < GlibcVersion(2, 37)
    assert str(GlibcVersion(2, 36)) == "2.36"


def _running_glibc() -> GlibcVersion | None:
    try:
        return parse_glibc_version(os.confstr("CS_GNU_LIBC_VERSION") or "")
    except (ValueError, OSError):
        return None


def _running_libc() -> str | None:
    """The libc.so.6 this Python mapped (from /proc/self/maps)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    found = re.search(r"(/\S*/libc\.so\.6)$", maps, re.M)
    return found.group(1) if found else None


def test_glibc_version_of_the_running_libc() -> None:
    """The newest GLIBC_2.N node of this process's libc.so.6 is its release, or the release
    before it where that one added no symbols (2.37, 2.40 on x86-64)."""
    running, libc = _running_glibc(), _running_libc()
    if running is None or libc is None:
        pytest.skip("not a glibc process, or /proc/self/maps unreadable")
    with FileSource(libc) as source:
        found = glibc_version_of(parse_elf(source))
    assert found is not None and found <= running
    assert (found.major, running.minor - found.minor) in ((running.major, 0), (running.major, 1))


CPUINFO = """\
processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
flags		: fpu vme sse2 avx2 avx512f

processor	: 1
vendor_id	: AuthenticAMD
flags		: fpu
"""


def test_parse_cpuinfo_reads_the_first_processor() -> None:
    """The vendor and flags of the first processor block; a text without them gives empties."""
    assert parse_cpuinfo(CPUINFO, "x86_64") == CpuFeatures(
        "x86_64", "GenuineIntel", frozenset({"fpu", "vme", "sse2", "avx2", "avx512f"}))
    assert parse_cpuinfo("", "aarch64") == CpuFeatures("aarch64", "", frozenset())


# ---------------------------------------------------------------------------------------------
# The legacy subdirectories: glibc's power set


def _glibc_power_set(temp: list[str]) -> list[str]:
    """`_dl_important_hwcaps` (elf/dl-hwcaps.c, 2.17 to 2.36) transliterated: the packed string,
    then each entry's length and start as glibc computes them; entries without their '/'."""
    cnt = len(temp)
    if cnt == 1:
        return [temp[0], ""]
    parts = [temp[1], temp[0]] if cnt == 2 else []
    if cnt > 2:
        n = 1 << (cnt - 1)
        while True:
            n -= 2
            parts += [temp[cnt - 1], *(temp[m] for m in range(cnt - 2, 0, -1) if n & 1 << m),
                      temp[0]]
            if n == 0:
                break
    packed = "".join(p + "/" for p in parts)
    size = 1 << cnt
    lens, starts = [0] * size, [0] * size
    for n in reversed(range(cnt)):
        for rp, m in enumerate(reversed(range(size))):
            if m & 1 << n:
                lens[rp] += len(temp[n]) + 1
    n, rp = size - 2, 2
    while n != 1 << (cnt - 1):
        n -= 1
        starts[rp] = starts[rp - 2] + lens[rp - 2] if n & 1 else starts[rp - 1]
        rp += 1
    while True:
        starts[rp] = starts[rp - (1 << (cnt - 1))] + len(temp[cnt - 1]) + 1
        rp += 1
        n -= 1
        if n == 0:
            break
    return [packed[s:s + n_].rstrip("/") for s, n_ in zip(starts, lens, strict=True)]


@given(st.lists(st.sampled_from(["x86_64", "avx512_1", "haswell", "xeon_phi", "sse2", "i686"]),
                min_size=0, max_size=4))
def test_legacy_subdirs_are_glibcs_power_set(names: list[str]) -> None:
    """For any capability names before `tls`, the subdirectories and their order are those of
    glibc's own construction (the last, empty entry is the directory itself)."""
    temp = [*names, "tls"]
    assert [*legacy_subdirs(temp), ""] == _glibc_power_set(temp)


def test_legacy_subdirs_of_an_amd_cpu_on_2_36() -> None:
    """hwcap x86_64, platform x86_64, tls: the nine-directory list this machine's ld.so prints
    (the two x86_64 names give repeats, which ld.so tries twice)."""
    assert legacy_subdirs(("x86_64", "x86_64", "tls")) == (
        "tls/x86_64/x86_64", "tls/x86_64", "tls/x86_64", "tls", "x86_64/x86_64", "x86_64",
        "x86_64")


# ---------------------------------------------------------------------------------------------
# hwcaps_search: releases and CPUs

HASWELL_AVX512 = (
    "tls/haswell/avx512_1/x86_64", "tls/haswell/avx512_1", "tls/haswell/x86_64", "tls/haswell",
    "tls/avx512_1/x86_64", "tls/avx512_1", "tls/x86_64", "tls", "haswell/avx512_1/x86_64",
    "haswell/avx512_1", "haswell/x86_64", "haswell", "avx512_1/x86_64", "avx512_1", "x86_64")
AMD_LEGACY = ("tls/x86_64/x86_64", "tls/x86_64", "tls/x86_64", "tls", "x86_64/x86_64", "x86_64",
              "x86_64")
HW = "glibc-hwcaps/"
V432 = ("x86-64-v4", "x86-64-v3", "x86-64-v2")


@pytest.mark.parametrize(("cpu_", "release", "expected"), [
    (AMD_ZEN, "2.36", HwcapsSearch("x86_64", V432[1:], ("x86_64", "tls"),
                                   (HW + "x86-64-v3", HW + "x86-64-v2", *AMD_LEGACY))),
    (AMD_ZEN, "2.41", HwcapsSearch("x86_64", V432[1:], (), (HW + "x86-64-v3", HW + "x86-64-v2"))),
    (AMD_ZEN, "2.28", HwcapsSearch("x86_64", (), ("x86_64", "tls"), AMD_LEGACY)),
    (AMD_ZEN, "2.17", HwcapsSearch("x86_64", (), ("x86_64", "tls"),
                                   ("tls/x86_64", "tls", "x86_64"))),
    (AMD_ZEN, "2.26", HwcapsSearch("", (), ("tls",), ("tls",))),
    (INTEL_SKYLAKE_SP, "2.36", HwcapsSearch(
        "haswell", V432, ("haswell", "tls", "avx512_1", "x86_64"),
        (*(HW + level for level in V432), *HASWELL_AVX512))),
    (INTEL_SKYLAKE_SP, "2.41", HwcapsSearch("haswell", V432, (), tuple(HW + lv for lv in V432))),
    (INTEL_SKYLAKE_SP, "2.17", HwcapsSearch("x86_64", (), ("x86_64", "tls"),
                                            ("tls/x86_64", "tls", "x86_64"))),
    (INTEL_HASWELL, "2.26", HwcapsSearch("haswell", (), ("haswell", "tls"),
                                         ("tls/haswell", "tls", "haswell"))),
    (INTEL_XEON_PHI, "2.28", HwcapsSearch(
        "xeon_phi", (), ("xeon_phi", "tls", "x86_64"),
        ("tls/xeon_phi/x86_64", "tls/xeon_phi", "tls/x86_64", "tls", "xeon_phi/x86_64",
         "xeon_phi", "x86_64"))),
    (INTEL_NEHALEM, "2.34", HwcapsSearch("x86_64", ("x86-64-v2",), ("x86_64", "tls"),
                                         (HW + "x86-64-v2", *AMD_LEGACY))),
], ids=["amd-2.36", "amd-2.41", "amd-2.28", "amd-2.17", "amd-2.26", "skylake-sp-2.36",
        "skylake-sp-2.41", "skylake-sp-2.17", "haswell-2.26", "xeon-phi-2.28", "nehalem-2.34"])
def test_hwcaps_search_by_release_and_cpu(cpu_: CpuFeatures, release: str,
                                          expected: HwcapsSearch) -> None:
    """Subdirectories, their order and $PLATFORM as each release's x86-64 ld.so has them: an
    Intel Haswell or later is `haswell` from 2.26 on (2.37 removed the legacy search, not the
    platform), 2.26 left the platform unset elsewhere and had no x86_64 hwcap."""
    assert hwcaps_search(v(release), cpu_) == expected


@pytest.mark.parametrize("cpu_", CPUS, ids=lambda c: f"{c.vendor}-{len(c.flags)}")
@pytest.mark.parametrize("minor", range(17, 43))
def test_legacy_exactly_up_to_2_36_and_glibc_hwcaps_from_2_33(cpu_: CpuFeatures,
                                                            minor: int) -> None:
    """On every CPU: legacy subdirectories (tls among them) exactly up to 2.36, glibc-hwcaps
    ones only from 2.33 and always first."""
    found = hwcaps_search(GlibcVersion(2, minor), cpu_)
    assert found is not None
    legacy = [s for s in found.searched_subdirs if not s.startswith(HW)]
    hwcaps = [s for s in found.searched_subdirs if s.startswith(HW)]
    assert ("tls" in legacy) is (minor <= 36) and bool(legacy) is (minor <= 36)
    assert bool(hwcaps) is (minor >= 33)
    assert found.searched_subdirs == (*hwcaps, *legacy)
    assert bool(found.legacy_hwcaps_subdirs) is (minor <= 36)


def test_x86_64_v3_needs_bmi_from_2_37() -> None:
    """get-isa-level.h asks for BMI1 and BMI2 at level 3 from 2.37 only."""
    no_bmi = cpu("AuthenticAMD", V3.replace(" bmi1 bmi2", ""))
    assert hwcaps_search(v("2.36"), no_bmi) == hwcaps_search(v("2.36"), AMD_ZEN)
    found = hwcaps_search(v("2.37"), no_bmi)
    assert found is not None and found.hwcaps_subdirs == ("x86-64-v2",)


def test_hwcaps_search_models_x86_64_only() -> None:
    """Another machine is not modelled: None."""
    assert hwcaps_search(v("2.36"), CpuFeatures("aarch64", "", frozenset())) is None


# ---------------------------------------------------------------------------------------------
# LoaderDefaults for another release

DEBIAN_236 = LoaderDefaults(
    system_dirs=("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"),
    lib="lib/x86_64-linux-gnu", platform="x86_64", hwcaps_subdirs=("x86-64-v3", "x86-64-v2"),
    legacy_hwcaps_subdirs=("x86_64", "tls"),
    searched_subdirs=(HW + "x86-64-v3", HW + "x86-64-v2", *AMD_LEGACY), glibc=GlibcVersion(2, 36))


def test_for_glibc_keeps_the_probed_defaults_of_the_same_release() -> None:
    """The release the defaults were read from: the probed list, unchanged (it is exact)."""
    assert DEBIAN_236.for_glibc(v("2.36"), INTEL_SKYLAKE_SP) is DEBIAN_236


def test_for_glibc_computes_another_release_on_this_cpu() -> None:
    """Another release: system directories and $LIB kept, the rest computed for the CPU."""
    newer = DEBIAN_236.for_glibc(v("2.41"), INTEL_SKYLAKE_SP)
    assert (newer.system_dirs, newer.lib) == (DEBIAN_236.system_dirs, DEBIAN_236.lib)
    assert newer.platform == "haswell" and newer.glibc == v("2.41")
    assert newer.searched_subdirs == tuple(HW + level for level in V432)
    older = DEBIAN_236.for_glibc(v("2.17"), AMD_ZEN)
    assert older.searched_subdirs == ("tls/x86_64", "tls", "x86_64")
    assert older.hwcaps_subdirs == () and older.legacy_hwcaps_subdirs == ("x86_64", "tls")


@pytest.mark.parametrize("cpu_", [None, CpuFeatures("aarch64", "", frozenset())],
                         ids=["no-cpu", "aarch64"])
def test_for_glibc_without_a_model_drops_what_the_release_lacks(
        cpu_: CpuFeatures | None) -> None:
    """No CPU facts or an unmodelled machine: glibc-hwcaps dropped before 2.33, legacy
    subdirectories from 2.37; the platform kept."""
    old = DEBIAN_236.for_glibc(v("2.28"), cpu_)
    assert old.searched_subdirs == AMD_LEGACY and old.hwcaps_subdirs == ()
    new = DEBIAN_236.for_glibc(v("2.41"), cpu_)
    assert new.searched_subdirs == (HW + "x86-64-v3", HW + "x86-64-v2")
    assert new.legacy_hwcaps_subdirs == () and new.platform == "x86_64"


@pytest.mark.parametrize(("legacy", "glibc", "expected"), [
    (("x86_64", "tls"), GlibcVersion(2, 36), ("x86_64", "tls")),
    ((), GlibcVersion(2, 28), ("tls",)),
    ((), None, ("tls",)),
    ((), GlibcVersion(2, 41), ()),
], ids=["listed", "unlisted-2.28", "unknown-release", "2.41"])
def test_cache_legacy_hwcaps(legacy: tuple[str, ...], glibc: GlibcVersion | None,
                             expected: tuple[str, ...]) -> None:
    """The legacy names whose cache entries count: the searched ones, else tls before 2.37."""
    defaults = replace(DEBIAN_236, legacy_hwcaps_subdirs=legacy, glibc=glibc)
    assert defaults.cache_legacy_hwcaps == expected


# ---------------------------------------------------------------------------------------------
# loader_defaults: the release recorded, and what help and trace do not say computed

HASWELL_CPUINFO = f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {V3}\n"


@pytest.mark.skipif(not X86_64, reason="models the x86-64 loader")
def test_loader_defaults_computes_what_an_old_loader_does_not_say(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A glibc 2.28 loader (no --help, no --version) whose trace cannot be read: the release
    from the C library, and the subdirectories, legacy names and $PLATFORM of 2.28 on this
    (Intel Haswell) CPU instead of the table's guess."""
    monkeypatch.setattr(ldconfig, "_ld_so_help", lambda ld_so: None)
    monkeypatch.setattr(ldconfig, "_ld_so_version", lambda ld_so: None)
    monkeypatch.setattr(ldconfig, "_search_trace", lambda *args: None)
    monkeypatch.setattr(ldconfig, "_libc_version", lambda: "glibc 2.28")
    monkeypatch.setattr(ldconfig, "_read_cpuinfo", lambda: HASWELL_CPUINFO)
    defaults = loader_defaults()
    assert defaults.glibc == v("2.28") and defaults.source is DefaultsSource.FALLBACK
    assert defaults.platform == "haswell"
    assert defaults.legacy_hwcaps_subdirs == ("haswell", "tls", "x86_64")
    assert defaults.searched_subdirs == legacy_subdirs(("x86_64", "haswell", "tls"))


def test_loader_defaults_record_the_running_release() -> None:
    """This machine's loader records its glibc release (that of the running Python's libc)."""
    running = _running_glibc()
    if running is None:
        pytest.skip("not a glibc process")
    assert loader_defaults().glibc == running


# ---------------------------------------------------------------------------------------------
# Against this machine's ld.so


def _host_ld_so() -> str:
    with FileSource(sys.executable) as source:
        interpreter = parse_elf(source).interpreter
    assert interpreter is not None
    return interpreter


def _real_probe(tmp_path: Path) -> LoaderDefaults:
    """The subdirectories and expansions the host's ld.so prints in a real LD_DEBUG=libs trace
    (two directories that do not exist, searched once each), read without `loader_defaults`."""
    lib_dir, platform_dir = str(tmp_path / "L"), str(tmp_path / "P")
    env = {"PATH": os.defpath, "LD_DEBUG": "libs",
           "LD_LIBRARY_PATH": f"{lib_dir}/$LIB:{platform_dir}/$PLATFORM"}
    done = subprocess.run([_host_ld_so(), "--list", sys.executable], env=env, capture_output=True,
                          text=True, check=False)
    start = replace(fallback_defaults(2, 62), searched_subdirs=("<none>",))
    probed = apply_search_probe(start, done.stderr, lib_dir, platform_dir)
    if probed.searched_subdirs == ("<none>",):
        pytest.skip("this ld.so does not trace its search path")
    return probed


def _this_machine() -> tuple[GlibcVersion, CpuFeatures]:
    running = _running_glibc()
    if not X86_64 or running is None:
        pytest.skip("the model is of x86-64 glibc")
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("/proc/cpuinfo is not readable")
    return running, parse_cpuinfo(text, "x86_64")


def test_computed_search_is_the_real_one_on_this_machine(tmp_path: Path) -> None:
    """The subdirectories (order and repeats included) and $PLATFORM computed for this glibc on
    this CPU are those of the real trace; the glibc-hwcaps and legacy names those of --help."""
    running, this_cpu = _this_machine()
    probed = _real_probe(tmp_path)
    computed = hwcaps_search(running, this_cpu)
    assert computed is not None
    assert computed.searched_subdirs == probed.searched_subdirs
    assert computed.platform == probed.platform
    help_text = subprocess.run([_host_ld_so(), "--help"], capture_output=True, text=True,
                               check=False).stdout
    if "Shared library search path" in help_text:  # glibc >= 2.33
        helped = parse_ld_so_help(help_text)
        assert computed.hwcaps_subdirs == helped.hwcaps_subdirs
        assert computed.legacy_hwcaps_subdirs == helped.legacy_hwcaps_subdirs


def test_legacy_subdirs_appear_in_the_real_trace_exactly_up_to_2_36(tmp_path: Path) -> None:
    """The real trace holds legacy subdirectories (tls, the platform, x86_64 ...) exactly when
    the running glibc is 2.36 or older, and the loader's defaults say the same."""
    running = _running_glibc()
    if running is None:
        pytest.skip("not a glibc process")
    legacy = [s for s in _real_probe(tmp_path).searched_subdirs if not s.startswith(HW)]
    assert bool(legacy) is (running <= GlibcVersion(2, 36)), (running, legacy)
    assert ("tls" in legacy) is (running <= GlibcVersion(2, 36))
    assert bool(loader_defaults().legacy_hwcaps_subdirs) is (running <= GlibcVersion(2, 36))
