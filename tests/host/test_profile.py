"""Host profiles and manylinux presets (`abifit.host.profile`): the glibc release each records,
and the loader search that follows from it (`sim.process.search_config`).

A preset's loader is checked against the tables of `hwcaps_search` for a fixed CPU, whatever
glibc this machine has; profiles are written and read back, including one that records no glibc
release (its loader could not say), whose release then comes from its libc.so.6. What reading a
profile refuses (pickles, bombs, crafted data) is in tests/formats/test_datacodec.py.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import FileSource
from abifit.host.ldconfig import (
    CpuFeatures,
    GlibcVersion,
    HostFacts,
    HwcapsSearch,
    LoaderDefaults,
    glibc_version_of,
    hwcaps_search,
)
from abifit.host.profile import (
    HostSnapshot,
    Preset,
    dumps,
    host_profile,
    load_presets,
    loads,
    snapshot_host,
)
from abifit.sim.process import search_config

V3 = ("fpu cx8 cmov mmx fxsr sse sse2 cx16 lahf_lm popcnt pni ssse3 sse4_1 sse4_2 avx avx2 f16c "
      "fma abm movbe bmi1 bmi2")
SKYLAKE_SP = CpuFeatures("x86_64", "GenuineIntel", frozenset(
    (V3 + " avx512f avx512bw avx512cd avx512dq avx512vl").split()))
HW = "glibc-hwcaps/"
SYSTEM = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")
LEGACY_236 = ("tls/x86_64/x86_64", "tls/x86_64", "tls/x86_64", "tls", "x86_64/x86_64",
              "x86_64", "x86_64")

# This machine's loader as a Debian 12 (2.36) and a Debian 13 (2.41) host probe it, AMD CPU.
DEBIAN_12 = LoaderDefaults(SYSTEM, "lib/x86_64-linux-gnu", "x86_64", ("x86-64-v3", "x86-64-v2"),
                           ("x86_64", "tls"), (HW + "x86-64-v3", HW + "x86-64-v2", *LEGACY_236),
                           glibc=GlibcVersion(2, 36))
DEBIAN_13 = LoaderDefaults(SYSTEM, "lib/x86_64-linux-gnu", "x86_64", ("x86-64-v3", "x86-64-v2"),
                           (), (HW + "x86-64-v3", HW + "x86-64-v2"), glibc=GlibcVersion(2, 41))


def facts_with(defaults: LoaderDefaults) -> HostFacts:
    return HostFacts(("/opt/ld",), ("libx.so",), (), ("/etc/dir",), None, defaults)


def synthetic_preset(glibc: str) -> Preset:
    return Preset(f"manylinux_{glibc.replace('.', '_')}", "synthetic", glibc, {})


PRESETS = sorted({p.name: p for p in load_presets().values()}.values(), key=lambda p: p.name)
ALL = [*PRESETS, synthetic_preset("2.41")]


@pytest.mark.parametrize("machine", [DEBIAN_12, DEBIAN_13], ids=["on-2.36", "on-2.41"])
@pytest.mark.parametrize("preset", ALL, ids=[p.name for p in ALL])
def test_a_preset_searches_as_its_glibc(preset: Preset, machine: LoaderDefaults) -> None:
    """Whatever glibc this machine has, a preset's loader (and so doctor's and check's search
    and trace) has the subdirectories and $PLATFORM of the preset's glibc on this CPU: legacy
    ones up to 2.36, none from 2.37, glibc-hwcaps ones only from 2.33 (this machine's probed
    ones where its glibc is the preset's)."""
    glibc = preset.glibc_version
    facts = preset.facts(facts_with(machine), SKYLAKE_SP)
    computed = hwcaps_search(glibc, SKYLAKE_SP)
    assert computed is not None
    expected = computed if glibc != machine.glibc else HwcapsSearch(
        machine.platform, machine.hwcaps_subdirs, machine.legacy_hwcaps_subdirs,
        machine.searched_subdirs)
    assert facts.defaults.glibc == glibc
    assert (facts.defaults.system_dirs, facts.defaults.lib) == (SYSTEM, machine.lib)
    assert (facts.ld_library_path, facts.ld_preload, facts.conf_dirs) == ((), (), ())
    config = search_config(facts)
    assert config.subdirs == tuple(dict.fromkeys(expected.searched_subdirs))
    assert config.platform == expected.platform
    assert ("tls" in config.subdirs) is (glibc <= GlibcVersion(2, 36))
    assert any(s.startswith(HW) for s in config.subdirs) is (glibc >= GlibcVersion(2, 33))
    assert config.hwcaps == (expected.hwcaps_subdirs if glibc >= GlibcVersion(2, 33) else ())
    assert ("tls" in config.legacy_hwcaps) is (glibc <= GlibcVersion(2, 36))


def test_the_manylinux2014_preset_is_glibc_2_17() -> None:
    """manylinux2014 (glibc 2.17): $PLATFORM is the kernel's x86_64 even on an Intel CPU, and
    the search is tls/x86_64, tls, x86_64 before each directory; no glibc-hwcaps."""
    preset = load_presets()["manylinux2014"]
    assert preset.glibc_version == GlibcVersion(2, 17)
    facts = preset.facts(facts_with(DEBIAN_13), SKYLAKE_SP)
    assert search_config(facts).subdirs == ("tls/x86_64", "tls", "x86_64")
    assert facts.defaults.platform == "x86_64" and facts.defaults.hwcaps_subdirs == ()


def test_a_preset_without_cpu_facts_drops_what_its_glibc_lacks() -> None:
    """Without CPU facts: this machine's list, less what the preset's release did not search."""
    old = load_presets()["manylinux_2_28"].facts(facts_with(DEBIAN_12), None)
    assert old.defaults.searched_subdirs == LEGACY_236
    new = synthetic_preset("2.41").facts(facts_with(DEBIAN_12), None)
    assert new.defaults.searched_subdirs == (HW + "x86-64-v3", HW + "x86-64-v2")


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs /proc/cpuinfo")
@pytest.mark.parametrize("name", ["manylinux2014", "manylinux_2_28", "manylinux_2_34"])
def test_host_profile_of_a_preset_takes_the_policys_glibc(name: str) -> None:
    """`--host manylinux_X_Y` on this machine: the policy's glibc, legacy subdirectories (all
    three releases are <= 2.36), glibc-hwcaps ones only for 2.34."""
    facts = host_profile(name, None, {}).facts
    assert facts.defaults.glibc == load_presets()[name].glibc_version
    assert "tls" in facts.defaults.searched_subdirs
    hwcaps = any(s.startswith(HW) for s in facts.defaults.searched_subdirs)
    assert hwcaps is (name == "manylinux_2_34")


# ---------------------------------------------------------------------------------------------
# Saved profiles


def _running_libc() -> tuple[str, ElfImage]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        pytest.skip("/proc/self/maps is not readable")
    found = re.search(r"(/\S*/libc\.so\.6)$", maps, re.M)
    if found is None:
        pytest.skip("not a glibc process")
    with FileSource(found.group(1)) as source:
        return found.group(1), parse_elf(source)


def _snapshot(defaults: LoaderDefaults, libc: tuple[str, ElfImage] | None) -> HostSnapshot:
    libraries = {libc[0]: ("1:2", libc[1])} if libc else {}
    return HostSnapshot(facts_with(defaults), sys.executable, libraries, "ELF64 x86-64", "0")


def test_a_profile_keeps_its_glibc_release() -> None:
    """A profile written and read back records the loader's release."""
    snapshot = _snapshot(DEBIAN_13, None)
    assert loads(dumps(snapshot), "p").facts.defaults.glibc == GlibcVersion(2, 41)


def _dumps_without_release(snapshot: HostSnapshot) -> bytes:
    """The profile of a loader that could not say its glibc release."""
    defaults = replace(snapshot.facts.defaults, glibc=None)
    return dumps(replace(snapshot, facts=replace(snapshot.facts, defaults=defaults)))


def test_a_profile_without_release_takes_it_from_its_libc() -> None:
    """A profile that records no release loads; its release is the newest GLIBC_2.N node of
    its libc.so.6, and everything else is as saved."""
    libc = _running_libc()
    snapshot = _snapshot(DEBIAN_12, libc)
    loaded = loads(_dumps_without_release(snapshot), "old.profile")
    assert loaded.facts.defaults.glibc == glibc_version_of(libc[1])
    assert replace(loaded.facts.defaults, glibc=None) == replace(DEBIAN_12, glibc=None)


def test_a_profile_without_release_or_libc_has_an_unknown_release() -> None:
    """No libc.so.6 in the profile: the release stays unknown, and the cache still takes tls."""
    loaded = loads(_dumps_without_release(_snapshot(DEBIAN_12, None)), "old.profile")
    assert loaded.facts.defaults.glibc is None
    assert search_config(loaded.facts).subdirs == tuple(dict.fromkeys(DEBIAN_12.searched_subdirs))


def test_snapshot_host_fills_an_unknown_release_from_libc() -> None:
    """A loader that could not say its release: the saved profile takes libc.so.6's."""
    path, image = _running_libc()
    with FileSource(sys.executable) as source:
        exe = parse_elf(source)
    images = {sys.executable: exe, path: image}
    snapshot = snapshot_host(facts_with(replace(DEBIAN_12, glibc=None)), sys.executable, [path],
                             images.get, lambda p: p, "0")
    assert snapshot.facts.defaults.glibc == glibc_version_of(image)


def test_the_oldest_manylinux_presets() -> None:
    """manylinux1 (glibc 2.5, CentOS 5's libstdc++: GLIBCXX_3.4.8, CXXABI_1.3.1, no
    CXXABI_TM_1, no ZLIB node) and manylinux2010 (glibc 2.12, GLIBCXX_3.4.13, ZLIB_1.2.2.4)."""
    one, ten = load_presets()["manylinux1"], load_presets()["manylinux2010"]
    assert (one.name, one.glibc, ten.name, ten.glibc) == ("manylinux_2_5", "2.5",
                                                          "manylinux_2_12", "2.12")
    for preset, glibcxx, cxxabi, zlib in ((one, "GLIBCXX_3.4.8", "CXXABI_1.3.1", None),
                                          (ten, "GLIBCXX_3.4.13", "CXXABI_1.3.3",
                                           "ZLIB_1.2.2.4")):
        libc = preset.versions["libc.so.6"]
        libstdcxx = preset.versions["libstdc++.so.6"]
        assert libc is not None and libc[-1] == f"GLIBC_{preset.glibc}"
        assert libstdcxx is not None and "CXXABI_TM_1" not in libstdcxx
        assert glibcxx in libstdcxx and cxxabi in libstdcxx
        assert max((v for v in libstdcxx if v.startswith("GLIBCXX_")),
                   key=lambda v: tuple(map(int, v[8:].split(".")))) == glibcxx
        zlib_nodes = preset.versions["libz.so.1"]
        assert zlib_nodes is not None and (zlib_nodes[-1:] or (None,))[0] == zlib


def test_a_presets_libraries_come_with_what_they_need() -> None:
    """The policy's other libraries bring, on a real host, what they need: libGL.so.1 its
    libGLdispatch.so.0 and libGLX.so.0 (and what those need), glib its libpcre2-8.so.0; what
    nothing allowed needs stays out, and glibc's own needs add nothing."""
    from abifit.formats.ldcache import LdCacheEntry

    preset = load_presets()["manylinux2014"]
    needs = {"/l/libGL.so.1": ("libGLdispatch.so.0", "libGLX.so.0", "libc.so.6"),
             "/l/libGLX.so.0": ("libX11.so.6", "libGLdispatch.so.0"),
             "/l/libglib-2.0.so.0": ("libpcre2-8.so.0",),
             "/l/libc.so.6": ("ld-linux-x86-64.so.2",)}
    sonames = ["libGL.so.1", "libGLdispatch.so.0", "libGLX.so.0", "libglib-2.0.so.0",
               "libpcre2-8.so.0", "libc.so.6", "libunrelated.so.1", "libX11.so.6"]
    entries = [LdCacheEntry(soname=s, path=f"/l/{s}", flags=0x303, hwcap=0) for s in sonames]
    allowed = preset._with_needs(entries, lambda path: needs.get(path, ()))
    assert {"libGLdispatch.so.0", "libGLX.so.0", "libpcre2-8.so.0"} <= allowed
    assert "libunrelated.so.1" not in allowed
