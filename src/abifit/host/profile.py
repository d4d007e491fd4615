"""A host profile: what a target machine's loader would find outside the wheels, saved there and
checked against elsewhere (`abifit doctor --save-host FILE`, then `abifit check --host FILE`).

It holds the machine's loader facts (`ldconfig.HostFacts`: LD_* settings, ld.so.cache, default
directories and subdirectories, the glibc release), the interpreter that starts the process,
and the dynamic views of the libraries a process there can find outside the wheels: every
library the ld.so cache lists (of the interpreter's ELF class and machine), everything the
profiled environment's modules loaded from outside its site-packages, and what those need in
turn. A check against the profile sees exactly these files; the NVIDIA driver's libraries are
assumed as on any host that lacks them.

The file is gzip-compressed data, never code: a header (`PROFILE_MAGIC`, the format `VERSION`,
a checksum) and the snapshot in `abifit.formats.datacodec`'s format, which decodes to plain
values and abifit's dataclasses only, each field checked against its type; so a profile from
elsewhere cannot run code, and one that is not a snapshot is one error. What reading builds is
bounded by the file's own size (`budget`): decompression stops at 64 MiB plus 32 times the
file's size, or `MAX_PROFILE_BYTES` (256 MiB; a profile of a machine with a few thousand
libraries in its ld.so cache takes tens of MiB), and decoding at 64 MiB plus 48 times it, as
`datacodec.Budget` counts (an abifit profile inflates about 4 times, and decodes to about 14
times its file's size so counted); so a small file cannot make abifit take much memory or time.
Profiles
saved by abifit releases that pickled them (format 1) are not read: they must be saved again. A
profile whose loader could not say its glibc release takes it from its libc.so.6
(`ldconfig.glibc_version_of`).

A manylinux preset is this machine's loader as the preset's glibc has it: the subdirectories
and `$PLATFORM` of that release on this CPU (`LoaderDefaults.for_glibc`), not this machine's.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from abifit.errors import FormatError
from abifit.formats.datacodec import OtherVersion, decode, frame, read_frame
from abifit.formats.elf import ElfImage
from abifit.formats.ldcache import LdCacheEntry
from abifit.formats.objects import ObjectSource
from abifit.host.ldconfig import CpuFeatures, GlibcVersion, HostFacts, glibc_version_of
from abifit.host.localfs import LocalObjects, read_named_file

DATA = Path(__file__).parent.parent / "data"

PROFILE_MAGIC = b"abifit-h"
VERSION = 3  # 1: a pickle; 2: the loader cache as `abifit.host.ldconfig` values
MAX_PROFILE_BYTES = 256 << 20  # uncompressed


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """A target machine as a check sees it: loader facts, the interpreter, system libraries
    (path -> (identity, dynamic view))."""

    facts: HostFacts
    executable: str
    libraries: Mapping[str, tuple[str, ElfImage]]
    machine: str
    abifit_version: str


class ProfileObjects:
    """The `ObjectSource` of a host profile: its captured files, and nothing else."""

    def __init__(self, snapshot: HostSnapshot) -> None:
        self._libraries = snapshot.libraries

    def is_file(self, path: str) -> bool:
        return os.path.normpath(path) in self._libraries

    def identity(self, path: str) -> str:
        found = self._libraries.get(os.path.normpath(path))
        return found[0] if found else path

    def image(self, path: str) -> ElfImage:
        found = self._libraries.get(os.path.normpath(path))
        if found is None:
            raise FormatError(path, "not in the host profile")
        return found[1]


def capture_paths(facts: HostFacts, used: Iterable[str], executable: str) -> list[str]:
    """The system files to capture: the interpreter, the files the environment's modules used
    from outside it, and every library the ld.so cache lists (what a wheel may ask for)."""
    paths = [executable, *used]
    if facts.cache is not None:
        paths += [e.path for e in facts.cache.entries]
    return list(dict.fromkeys(paths))


def snapshot_host(facts: HostFacts, executable: str, used: Iterable[str],
                  image: Callable[[str], ElfImage | None], identity: Callable[[str], str],
                  version: str) -> HostSnapshot:
    """Capture this machine for a profile: the interpreter, the base libraries and those `used`
    (paths the environment loaded from the system), closed over DT_NEEDED through the ld.so
    cache. Files of another ELF class or machine than the interpreter's are left out."""
    exe = image(executable)
    if exe is None:
        raise FormatError(executable, "the interpreter is not a readable ELF file")
    seen: dict[str, ElfImage | None] = {}

    def fitting(path: str) -> ElfImage | None:
        if path not in seen:
            found = image(path)
            same = found is not None and (found.elf_class, found.machine) == (exe.elf_class,
                                                                             exe.machine)
            seen[path] = found if same else None
        return seen[path]

    by_soname: dict[str, list[str]] = {}
    for entry in facts.cache.entries if facts.cache else ():
        by_soname.setdefault(entry.soname, []).append(entry.path)
    libraries: dict[str, tuple[str, ElfImage]] = {}
    queue = capture_paths(facts, used, executable)
    while queue:
        path = queue.pop(0)
        found = fitting(path)
        if found is None or os.path.normpath(path) in libraries:
            continue
        libraries[os.path.normpath(path)] = (identity(path), found)
        for soname in found.needed:
            target = next((p for p in by_soname.get(soname, ()) if fitting(p)), None)
            if target is not None:
                queue.append(target)
    return with_glibc(HostSnapshot(facts, executable, libraries,
                                   f"{exe.elf_class.name} {exe.machine_name}", version))


def with_glibc(snapshot: HostSnapshot) -> HostSnapshot:
    """The snapshot with its loader's glibc release: where the facts do not record it (a profile
    saved by an older abifit, or a loader that could not say), the release its libc.so.6 shows
    (`glibc_version_of`, a lower bound); unknown when it has none."""
    defaults = snapshot.facts.defaults
    if defaults.glibc is not None:
        return snapshot
    libc = next((image for path, (_, image) in snapshot.libraries.items()
                 if os.path.basename(path) == "libc.so.6"), None)
    glibc = glibc_version_of(libc) if libc is not None else None
    if glibc is None:
        return snapshot
    return replace(snapshot, facts=replace(snapshot.facts, defaults=replace(defaults, glibc=glibc)))


def dumps(snapshot: HostSnapshot) -> bytes:
    """A profile file's bytes."""
    return gzip.compress(frame(snapshot, PROFILE_MAGIC, VERSION), mtime=0)


def budget(size: int) -> tuple[int, int]:
    """What a profile file of `size` bytes may inflate to, and what decoding it may build."""
    return min((64 << 20) + 32 * size, MAX_PROFILE_BYTES), (64 << 20) + 48 * size


def loads(data: bytes, name: str) -> HostSnapshot:
    """The snapshot in a profile file's bytes; one FormatError for anything else."""
    inflated, built = budget(len(data))
    raw = _gunzip(data, name, inflated)
    if raw[:1] == b"\x80":
        raise FormatError(name, "a pickle, as abifit saved host profiles before format 2; "
                          "this abifit does not read pickles (reading one can run "
                          "code): save the profile again with `abifit doctor --save-host FILE`")
    try:
        snapshot = decode(read_frame(raw, PROFILE_MAGIC, VERSION, name), name, built)
    except OtherVersion as e:
        raise FormatError(name, f"host profile format {e.version} (this abifit reads "
                          f"{VERSION}): save it again with this abifit") from e
    except FormatError as e:
        raise FormatError(name, f"not an abifit host profile: {e.problem}") from e
    if not isinstance(snapshot, HostSnapshot):
        raise FormatError(name, f"not an abifit host profile: it holds a "
                          f"{type(snapshot).__qualname__}, not a host snapshot")
    return with_glibc(snapshot)


def _gunzip(data: bytes, name: str, limit: int) -> bytearray:
    """`data` gunzipped, refused once it passes `limit` bytes while decompressing."""
    inflate = zlib.decompressobj(wbits=31)  # gzip only
    out = bytearray()
    pending = data
    try:
        while not inflate.eof:
            piece = inflate.decompress(pending, min(16 << 20, limit + 1 - len(out)))
            pending = inflate.unconsumed_tail
            if not piece and not pending:
                raise FormatError(name, "not an abifit host profile: the gzip data is truncated")
            out += piece
            if len(out) > limit:
                raise FormatError(name, "not an abifit host profile: more than "
                                  f"{limit >> 20} MiB uncompressed from a file of "
                                  f"{len(data):,} bytes")
    except zlib.error as e:
        raise FormatError(name, f"not an abifit host profile (not gzip data: {e})") from e
    if inflate.unused_data:
        raise FormatError(name, "not an abifit host profile: data after the gzip stream")
    return out


def load(path: str) -> tuple[HostSnapshot, str]:
    """The profile at `path` and the sha256 of its bytes."""
    data = read_named_file(path, MAX_PROFILE_BYTES)
    return loads(data, path), hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# manylinux presets: a host known only by its policy


@dataclass(frozen=True, slots=True)
class Preset:
    """A manylinux host: the version nodes its system libraries define (soname -> names)."""

    name: str
    distribution: str
    glibc: str
    versions: Mapping[str, tuple[str, ...] | None]  # None: any version node

    def _with_needs(self, entries: Iterable[LdCacheEntry],
                    needed: Callable[[str], Iterable[str]]) -> set[str]:
        """The preset's sonames and, transitively, what the policy's other libraries (those
        without a version limit) need among this machine's `entries`."""
        by_soname: dict[str, list[str]] = {}
        for e in entries:
            by_soname.setdefault(e.soname, []).append(e.path)
        allowed = set(self.versions)
        todo = [p for soname, limit in self.versions.items() if limit is None
                for p in by_soname.get(soname, ())]
        while todo:
            for soname in needed(todo.pop()):
                if soname not in allowed and soname in by_soname:
                    allowed.add(soname)
                    todo += by_soname[soname]
        return allowed

    @property
    def glibc_version(self) -> GlibcVersion:
        """The policy's glibc release (`glibc`, "2.28")."""
        major, minor = self.glibc.split(".")
        return GlibcVersion(int(major), int(minor))

    def facts(self, host: HostFacts, cpu: CpuFeatures | None,
              needed: Callable[[str], Iterable[str]] | None = None) -> HostFacts:
        """This machine's loader as the preset's glibc has it on `cpu` (its subdirectories and
        `$PLATFORM`: `LoaderDefaults.for_glibc`), with an ld.so cache of the preset's libraries
        only and no LD_* settings. The policy's other libraries (libGL.so.1, glib) come with
        what they need on a real host (libGLdispatch.so.0, libpcre2-8.so.0): with `needed`
        (a library's DT_NEEDED, by path), those of this machine are in the cache too."""
        cache = host.cache
        if cache is not None:
            allowed = self._with_needs(cache.entries, needed) if needed else set(self.versions)
            cache = replace(cache, entries=tuple(e for e in cache.entries
                                                 if e.soname in allowed))
        return replace(host, ld_library_path=(), ld_preload=(), ld_so_preload=(), conf_dirs=(),
                       cache=cache, defaults=host.defaults.for_glibc(self.glibc_version, cpu))


class PresetObjects:
    """The `ObjectSource` of a preset host: this machine's interpreter (the files under its
    installation prefix) and this machine's copies of the preset's libraries (glibc,
    libstdc++, libgcc_s, zlib and the rest of the policy's list), which define only the versions
    the preset allows. Nothing else exists
    there. What these files need of each other is taken as met, as it is on such a host."""

    def __init__(self, preset: Preset, facts: HostFacts, local: ObjectSource,
                 interpreter_prefixes: tuple[str, ...]) -> None:
        self._preset = preset
        self._local = local
        self._prefixes = tuple(p.rstrip("/") + "/" for p in interpreter_prefixes)
        self._paths = {os.path.normpath(e.path): e.soname
                       for e in (facts.cache.entries if facts.cache else ())}
        self._images: dict[str, ElfImage] = {}

    def _allowed(self, path: str) -> bool:
        normal = os.path.normpath(path)
        return normal in self._paths or normal.startswith(self._prefixes)

    def is_file(self, path: str) -> bool:
        return self._allowed(path) and self._local.is_file(path)

    def identity(self, path: str) -> str:
        return self._local.identity(path)

    def image(self, path: str) -> ElfImage:
        if not self._allowed(path):
            raise FormatError(path, f"not on a {self._preset.name} host")
        if path not in self._images:
            image = self._local.image(path)
            soname = self._paths.get(os.path.normpath(path))
            defs = image.version_defs
            limit = self._preset.versions.get(soname) if soname is not None else None
            if limit is not None:
                allowed = set(limit)
                defs = tuple(d for d in defs if d.is_base or d.name in allowed)
            self._images[path] = replace(image, version_needs=(), version_defs=defs)
        return self._images[path]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@functools.cache
def load_presets() -> dict[str, Preset]:
    """The presets of `data/manylinux.json`, by name and alias."""
    raw = json.loads((DATA / "manylinux.json").read_text("utf-8"))
    nodes: dict[str, list[str]] = raw["nodes"]
    out: dict[str, Preset] = {}
    for name, spec in raw["presets"].items():
        def upto(prefix: str, spec: Mapping[str, object] = spec) -> tuple[str, ...]:
            top = _key(str(spec[prefix]))
            return tuple(f"{prefix}_{v}" for v in nodes[prefix] if _key(v) <= top)

        glibc = upto("GLIBC")
        versions: dict[str, tuple[str, ...] | None] = {
            soname: glibc for soname in raw["glibc_libraries"]}
        versions["libstdc++.so.6"] = (*upto("GLIBCXX"), *upto("CXXABI"),
                                      *(("CXXABI_TM_1",) if spec.get("CXXABI_TM_1", True)
                                        else ()))
        versions["libgcc_s.so.1"] = upto("GCC")
        versions.update({soname: upto("ZLIB") for soname in raw["zlib_libraries"]})
        versions.update({soname: None for soname in raw["other_libraries"]})
        if spec.get("libmvec"):
            versions["libmvec.so.1"] = glibc
        preset = Preset(name, spec["distribution"], spec["GLIBC"], versions)
        for alias in (name, *spec["aliases"]):
            out[alias] = preset
    return out


# ---------------------------------------------------------------------------------------------
# The host of a check


@dataclass(frozen=True, slots=True)
class HostProfile:
    """What the wheels do not contain: this machine's loader configuration, and whether the
    NVIDIA driver may be assumed (`--assume-driver VERSION`)."""

    facts: HostFacts
    assume_driver: str | None = None
    fingerprint: str = ""  # digest of the host's loader state; empty: results are not cached
    snapshot: HostSnapshot | None = None  # another machine, from its profile; None: this one
    preset: Preset | None = None  # a manylinux host known by its policy only

    def objects(self, executable: str) -> ObjectSource:
        """Where the simulation finds the files that are not in the wheels (`executable`: the
        interpreter, whose installation a preset host keeps)."""
        if self.preset is not None:
            prefix = os.path.dirname(os.path.dirname(os.path.realpath(executable)))
            return PresetObjects(self.preset, self.facts, LocalObjects(),
                                 (prefix, os.path.dirname(executable)))
        return ProfileObjects(self.snapshot) if self.snapshot else LocalObjects()

    @property
    def executable(self) -> str | None:
        """The interpreter of the host, when it is not this machine's."""
        return self.snapshot.executable if self.snapshot else None

    def platform_tag(self, arch: str) -> str | None:
        """The manylinux tag of the host's glibc (`manylinux_2_17_x86_64`), for a host that is
        not this machine and whose release is known; the wheels pip would choose there are
        those of that tag and older."""
        if self.preset is not None:
            major, minor = self.preset.glibc.split(".")[:2]
        elif self.snapshot is not None and self.snapshot.facts.defaults.glibc is not None:
            major, minor = map(str, (self.snapshot.facts.defaults.glibc.major,
                                     self.snapshot.facts.defaults.glibc.minor))
        else:
            return None
        return f"manylinux_{major}_{minor}_{arch}"


def _needed_here(path: str) -> tuple[str, ...]:
    """A library's DT_NEEDED on this machine (none when it cannot be read)."""
    try:
        return tuple(LocalObjects().image(path).needed)
    except (OSError, FormatError):
        return ()


def host_fingerprint(facts: HostFacts, ld_so_cache: str = "/etc/ld.so.cache") -> str:
    """A digest of what the simulation reads from this machine beyond the wheels: the loader
    settings and the ld.so.cache file (rebuilt by ldconfig whenever system libraries change)."""
    digest = hashlib.sha256(repr((facts.ld_library_path, facts.ld_preload, facts.ld_so_preload,
                                  facts.conf_dirs, facts.defaults)).encode())
    try:
        with open(ld_so_cache, "rb") as f:
            digest.update(f.read())
    except OSError:
        digest.update(b"no ld.so.cache")
    return digest.hexdigest()


def host_profile(spec: str | None, assume_driver: str | None,
                 environ: Mapping[str, str]) -> HostProfile:
    """The host a check is for, built in this one place: this machine (`spec` None), a
    manylinux preset by name (`manylinux_2_28`), or a profile file saved by
    `abifit doctor --save-host`."""
    from abifit.host.ldconfig import host_cpu, probe_host

    if spec:
        preset = load_presets().get(spec)
        if preset is not None and not os.path.exists(spec):
            facts = preset.facts(probe_host({}), host_cpu(), _needed_here)
            return HostProfile(facts, assume_driver,
                               f"preset:{preset.name}:{host_fingerprint(facts)}", preset=preset)
        snapshot, digest = load(spec)
        return HostProfile(snapshot.facts, assume_driver, digest, snapshot)
    facts = probe_host(environ)
    return HostProfile(facts, assume_driver, host_fingerprint(facts))
