"""Symbol binding by set lookups (`sim.loader`'s `Exports`, `Needs`, `unbound`) against glibc's
check_match applied definition by definition, as the loader did before it indexed exports: on
drawn symbol tables, and on real libraries (the host's C and C++ runtimes, torch's libraries).
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abifit.formats.elf import (
    SHN_UNDEF,
    VER_FLG_BASE,
    Binding,
    ByteOrder,
    DynamicInfo,
    ElfClass,
    ElfImage,
    FileType,
    SymbolTable,
    SymbolType,
    VersionDef,
    VersionName,
    Visibility,
    parse_elf,
)
from abifit.formats.sources import FileSource
from abifit.sim.loader import Reference, exports_of, needs_of, unbound

HOST_LIBRARIES = [Path("/usr/lib/x86_64-linux-gnu") / name for name in
                  ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1")]
VERSIONS = (None, "V2", "V3", "V4", "V9")  # V9 is defined by no table
NAMES = ("a", "b", "c", "d")
BOUND = frozenset({Binding.GLOBAL, Binding.WEAK, Binding.GNU_UNIQUE})
TYPES = frozenset({SymbolType.NOTYPE, SymbolType.OBJECT, SymbolType.FUNC, SymbolType.COMMON,
                   SymbolType.TLS, SymbolType.GNU_IFUNC})


# --- the rules, definition by definition ----------------------------------------------------


def definitions(image: ElfImage) -> dict[str, list[tuple[int, bool, str | None]]]:
    """name -> (version index, hidden, version) of each definition other objects can bind to:
    defined, not local, of an allowed type and visibility, with a value (or TLS)."""
    table = image.symbols
    found: dict[str, list[tuple[int, bool, str | None]]] = defaultdict(list)
    for i, name in enumerate(table.names):
        kind = table.info[i] & 0xF
        if (table.section_indexes[i] == SHN_UNDEF or table.info[i] >> 4 not in BOUND
                or kind not in TYPES
                or table.other[i] & 0x3 in (Visibility.HIDDEN, Visibility.INTERNAL)
                or (table.values[i] == 0 and kind != SymbolType.TLS)):
            continue
        version, _file, hidden = table.version_of(i)
        index = table.versym[i] & 0x7FFF if table.versym is not None else 1
        found[name].append((index, hidden, version))
    return found


def rule_binds(image: ElfImage, defs: list[tuple[int, bool, str | None]],
               version: str | None) -> bool:
    """glibc's check_match for a reference at `version` against the definitions of its name."""
    if not defs:
        return False
    if image.symbols.versym is None:
        return True
    if version is not None:
        own_versions = bool(image.version_defs)
        return any(v == version or (not hidden and (index == 0
                                                    or (index == 1 and not own_versions)))
                   for index, hidden, v in defs)
    return (any(index <= 2 for index, _hidden, _v in defs)
            or sum(1 for _index, hidden, _v in defs if not hidden) == 1)


def assert_binds_as_the_rules(image: ElfImage,
                              versions: Callable[[str], Iterable[str | None]]) -> int:
    """Each name of the table (and one it lacks) at each of its `versions`; how many."""
    exports = exports_of(image)
    defs = definitions(image)
    checked = 0
    for name in {*image.symbols.names, "__nothing_defines_this__"}:
        for version in versions(name):
            assert exports.binds(name, version) is rule_binds(image, defs.get(name, []),
                                                               version), (name, version)
            checked += 1
    return checked


# --- drawn tables -----------------------------------------------------------------------------


# each field drawn mostly as a definition others bind to, so that names meet several of them
entries = st.tuples(
    st.sampled_from(NAMES[:3]),
    st.sampled_from([SHN_UNDEF, 7, 7, 7]),
    st.sampled_from([Binding.LOCAL, Binding.GLOBAL, Binding.GLOBAL, Binding.WEAK,
                     Binding.GNU_UNIQUE]),
    st.sampled_from([SymbolType.NOTYPE, SymbolType.FUNC, SymbolType.FUNC, SymbolType.SECTION,
                     SymbolType.TLS, SymbolType.GNU_IFUNC]),
    st.sampled_from([Visibility.DEFAULT] * 3 + list(Visibility)),
    st.sampled_from([0, 0x1000, 0x1000, 0x1000]),
    st.integers(0, 5),  # a version index: 5 is not in the table's version names
    st.booleans(),  # hidden
)


@st.composite
def images(draw: st.DrawFn) -> ElfImage:
    drawn = draw(st.lists(entries, max_size=12))
    versioned = draw(st.booleans())
    own_versions = draw(st.booleans())
    table = SymbolTable(
        names=tuple(e[0] for e in drawn),
        info=bytes((e[2] << 4) | e[3] for e in drawn),
        other=bytes(e[4] for e in drawn),
        section_indexes=array("H", (e[1] for e in drawn)),
        values=array("Q", (e[5] for e in drawn)),
        sizes=array("Q", (0 for _ in drawn)),
        versym=array("H", (e[6] | (0x8000 if e[7] else 0) for e in drawn)) if versioned
        else None,
        version_names={2: VersionName("V2", None), 3: VersionName("V3", None),
                       4: VersionName("V4", "libother.so")},
    )
    defs = (VersionDef(1, "libdrawn.so", VER_FLG_BASE, ()), VersionDef(2, "V2", 0, ()),
            VersionDef(3, "V3", 0, ("V2",))) if own_versions else ()
    return ElfImage(
        name="libdrawn.so", elf_class=ElfClass.ELF64, byte_order=ByteOrder.LITTLE, machine=62,
        file_type=FileType.DYN, osabi=0, interpreter=None, loads=(),
        dynamic=DynamicInfo((), "libdrawn.so", (), (), 0, 0), symbols=table,
        version_needs=(), version_defs=defs, sections=(), section_problem=None,
    )


@settings(max_examples=250, deadline=None)
@given(images())
def test_exports_bind_as_the_rules_do_definition_by_definition(image: ElfImage) -> None:
    """Whatever the bindings, types, visibilities, values, version indexes and hidden bits of
    a table, its index answers every reference as check_match does over its definitions."""
    assert_binds_as_the_rules(image, lambda _name: VERSIONS)


references = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VERSIONS)),
                      max_size=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(images(), max_size=4), st.lists(references, max_size=3))
def test_unbound_is_what_no_object_of_the_scope_binds(scope: list[ElfImage],
                                                      wanted: list[list[Reference]]) -> None:
    """The set operations over a scope leave exactly the references that no object of it
    binds, with the references of several objects asked at once."""
    exports = [exports_of(image) for image in scope]
    expected = {ref for refs in wanted for ref in refs
                if not any(e.binds(*ref) for e in exports)}
    assert unbound([needs_of(refs) for refs in wanted], exports) == expected


# --- real libraries ---------------------------------------------------------------------------


def image_of(path: Path) -> ElfImage:
    with FileSource(path) as source:
        return parse_elf(source)


def versions_in(images: Iterable[ElfImage]) -> Callable[[str], set[str | None]]:
    """name -> the versions the tables give it, none, and one nobody defines."""
    found: dict[str, set[str | None]] = defaultdict(lambda: {None, "NOBODY_1.0"})
    for image in images:
        for name, version in zip(image.symbols.names, image.symbols.versions(), strict=True):
            found[name].add(version)
    return lambda name: found[name]


@pytest.mark.skipif(not all(p.is_file() for p in HOST_LIBRARIES),
                    reason="needs the host's x86_64 C and C++ runtimes")
def test_host_runtimes_bind_as_the_rules() -> None:
    """libc (one name at several versions, hidden old ones), libm, libstdc++ and libgcc_s:
    every name of theirs, at every version any of them gives it, answered as the rules do."""
    libraries = [image_of(p) for p in HOST_LIBRARIES]
    versions = versions_in(libraries)
    assert sum(assert_binds_as_the_rules(image, versions) for image in libraries) > 20_000


@pytest.mark.slow
def test_torch_libraries_bind_as_the_rules(torch_dir: Path) -> None:
    """torch's libraries (tens of thousands of symbols each, no versions of their own), each
    name at the versions the libraries require it at."""
    libraries = [image_of(p) for p in sorted((torch_dir / "lib").glob("*.so*"))]
    assert libraries
    versions = versions_in(libraries)
    for image in libraries:
        assert_binds_as_the_rules(image, versions)
