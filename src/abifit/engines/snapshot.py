"""`abifit snapshot`: the environment of an interpreter as a PEP 751 lock with ABI fingerprints.

The modules are simulated by `doctor` (its `on_simulation` shows the simulation), and each
module's record made from it by `engines.fingerprints` (as `check` makes those of a lock's
modules): the sonames it mapped and where, the version nodes it requires, and the library each
of its undefined symbols bound to. The lock part comes
from the installation's records: `direct_url.json` (a wheel file with its hash, or the
directory it was built from), else the index, asked for the file whose name, version and tags
are those of the installed wheel (`WHEEL`); a find-links file or a `file://` URL without a hash
is hashed here. What none of them records is locked as the directory it is installed in, and
said so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from abifit.engines.check import CheckReport
from abifit.engines.doctor import DoctorReport, doctor
from abifit.engines.fingerprints import module_records
from abifit.errors import AbifitError
from abifit.formats.ldcache import LD_SO_CACHE
from abifit.formats.pylock import (
    CudaRecord,
    GpuRecord,
    HostRecord,
    LibraryDir,
    LockedPackage,
    ModuleRecord,
    Snapshot,
    Toolkit,
    WheelFile,
    target_of,
)
from abifit.host import observe
from abifit.host.environment import Distribution, InterpreterFacts
from abifit.host.ldconfig import (
    LD_SO_CONF,
    ConfDirectory,
    HostFacts,
    probe_host,
    read_ld_so_conf_entries,
)
from abifit.sim.derivation import FoundThroughLdConf, FoundThroughLdLibraryPath
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.loader import LoadResult, Via
from abifit.sim.process import Environment, Progress, Simulation, Simulator

if TYPE_CHECKING:
    from abifit.formats.pins import Pin
    from abifit.remote.packageindex import IndexFile
    from abifit.remote.runcontext import RemoteContext


@dataclass(frozen=True, slots=True)
class SnapshotReport:
    """What `abifit snapshot` recorded, and where it wrote it."""

    snapshot: Snapshot
    written: str | None
    notes: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[ModuleRecord, ...]:
        return tuple(m for m in self.snapshot.modules if not m.loads)


def take_snapshot(python: str, *, cache_dir: Path | None, environ: Mapping[str, str],
                  progress: Progress, remote: Callable[[], RemoteContext] | None,
                  ld_so_conf: str = LD_SO_CONF, ld_so_cache: str = LD_SO_CACHE,
                  cuda: bool = True) -> Snapshot:
    """The stack of `python`'s environment: its distributions locked, this machine's facts and
    each native module's fingerprint. `remote` is the index asked for the wheels that the
    installation did not record (None: not asked); the loader's configuration is read from
    `ld_so_conf` and `ld_so_cache`."""
    return observe_stack(python, cache_dir=cache_dir, environ=environ, progress=progress,
                         remote=remote, ld_so_conf=ld_so_conf, ld_so_cache=ld_so_cache,
                         cuda=cuda)[0]


def observe_stack(python: str, *, cache_dir: Path | None, environ: Mapping[str, str],
                  progress: Progress, remote: Callable[[], RemoteContext] | None,
                  ld_so_conf: str = LD_SO_CONF, ld_so_cache: str = LD_SO_CACHE,
                  cuda: bool = True) -> tuple[Snapshot, DoctorReport]:
    """`take_snapshot`, with doctor's report of the environment (its findings explain the
    modules that do not load)."""
    from abifit.version import __version__

    host = probe_host(environ, cache_path=ld_so_cache, conf_path=ld_so_conf)
    seen: list[tuple[Simulator, Simulation]] = []
    report = doctor(python, [], verify=False, cache_dir=cache_dir, environ=environ,
                    progress=progress, gpus=(), remote=None, host=host,
                    on_simulation=lambda sim, simulation: seen.append((sim, simulation)))
    sim, simulation = seen[0]
    facts = sim.env.facts
    roots = [p for p in facts.sys_path if observe.isdir(p)]
    progress("fingerprints")
    modules = module_records(sim, simulation, roots)
    used = [r.path for result in simulation.results for r in result.resolutions if r.path]
    progress("locking the distributions")
    packages = tuple(lock_distribution(d, remote) for d in
                     sorted(sim.env.dists.values(), key=lambda d: d.key)
                     if not _installer(d.key, sim.env))
    markers = dict(facts.markers)
    markers.setdefault("python_version", ".".join(facts.version.split(".")[:2]))
    requires_python, environments = target_of(markers)
    return Snapshot(
        created_by=f"abifit {__version__}",
        packages=packages,
        requires_python=requires_python,
        environments=environments,
        python=_portable(report.python, facts), python_version=facts.version,
        host=_host_record(host, simulation.results, sim, read_ld_so_conf_entries(ld_so_conf)),
        cuda=_cuda_record(environ, host, used) if cuda else None,
        modules=modules), report


# the tools that install packages, not part of what is installed: locked only when another
# distribution requires them (torch requires setuptools on Python 3.12)
INSTALLERS = frozenset({"pip", "setuptools", "wheel", "distribute"})


def _installer(key: str, env: Environment) -> bool:
    """Whether a distribution is an installing tool that nothing installed requires."""
    return key in INSTALLERS and not any(key in env.required(other) for other in env.dists
                                         if other != key)


def _portable(python: str, facts: InterpreterFacts) -> str:
    """The interpreter as the snapshot records it: relative to its environment (`bin/python`
    of a venv), not this machine's absolute path; the name alone outside one."""
    prefix = facts.prefix.rstrip("/") + "/" if facts.prefix else ""
    if prefix and python.startswith(prefix):
        return python[len(prefix):]
    return os.path.basename(python)


# --- host facts ------------------------------------------------------------------------------


def _in_dir(path: str, directory: str) -> bool:
    """Whether `path` is a file of `directory` or of one of its hwcaps subdirectories."""
    rest = path[len(directory.rstrip("/")) + 1:] if path.startswith(directory.rstrip("/") + "/") \
        else None
    return rest is not None and ("/" not in rest or rest.startswith(("glibc-hwcaps/", "tls/",
                                                                     "haswell/", "x86_64/")))


def _host_record(host: HostFacts, results: Iterable[LoadResult], sim: Simulator,
                 conf: Sequence[ConfDirectory]) -> HostRecord:
    by_conf: dict[ConfDirectory, set[str]] = {}
    by_ld: dict[str, set[str]] = {}
    libstdcxx = None
    for result in results:
        for r in result.resolutions:
            if r.path is None:
                continue
            if r.name == "libstdc++.so.6" and libstdcxx is None:
                libstdcxx = _newest_node(sim, r.path, "GLIBCXX_")
            if r.via is Via.CACHE:
                entry = next((c for c in conf if _in_dir(r.path, c.path)), None)
                if entry is not None:
                    by_conf.setdefault(entry, set()).add(r.name)
            elif r.via is Via.LD_LIBRARY_PATH:
                directory = next((d for d in host.ld_library_path if _in_dir(r.path, d)),
                                 os.path.dirname(r.path))
                by_ld.setdefault(directory, set()).add(r.name)
    glibc = host.defaults.glibc
    return HostRecord(
        machine=os.uname().machine, glibc=str(glibc) if glibc else None, libstdcxx=libstdcxx,
        ld_so_conf=tuple(LibraryDir(c.path, tuple(sorted(names)), c.source, c.lineno)
                         for c, names in by_conf.items()),
        ld_library_path=tuple(LibraryDir(d, tuple(sorted(names)))
                              for d, names in by_ld.items()))


def _newest_node(sim: Simulator, path: str, prefix: str) -> str | None:
    image = sim.image(path)
    nodes = [d.name for d in (image.version_defs if image else ()) if d.name.startswith(prefix)]

    def key(name: str) -> tuple[int, ...]:
        return tuple(int(p) for p in name[len(prefix):].split(".") if p.isdigit())

    return max(nodes, key=key) if nodes else None


def _cuda_record(environ: Mapping[str, str], host: HostFacts, used: Sequence[str]) -> CudaRecord:
    from abifit.host.cudastack import probe_cuda_stack

    stack = probe_cuda_stack(environ, host=host)
    real = {os.path.dirname(os.path.realpath(p)) for p in used}
    toolkits = tuple(Toolkit(str(t.version) if t.version else None, t.root)
                     for t in stack.toolkits if any(d.real_path in real for d in t.lib_dirs))
    driver = stack.driver
    return CudaRecord(driver.version, str(driver.cuda_version) if driver.cuda_version else None,
                      toolkits, tuple(GpuRecord(g.name, g.arch) for g in stack.gpus.gpus))


# --- the lock --------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        doc = json.loads(observe.read_text(str(path)))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _local(url: str) -> str | None:
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def file_sha256(path: str) -> str | None:
    """The sha256 of a file on this machine; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _direct(dist: Distribution) -> LockedPackage | None:
    """The source `direct_url.json` (PEP 610) records: a wheel or a directory."""
    doc = _read_json(dist.metadata_dir / "direct_url.json")
    url = doc.get("url") if doc else None
    if doc is None or not isinstance(url, str):
        return None
    info = doc.get("archive_info")
    if isinstance(info, dict) and url.endswith(".whl"):
        hashes = info.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        legacy = info.get("hash")
        if sha is None and isinstance(legacy, str) and legacy.startswith("sha256="):
            sha = legacy.removeprefix("sha256=")
        local = _local(url)
        if not isinstance(sha, str) and local is not None:
            sha = file_sha256(local)
        if isinstance(sha, str):
            name = url.rsplit("/", 1)[-1]
            return LockedPackage(canonicalize_name(dist.name), dist.version,
                                 WheelFile(unquote(name), sha, url))
    directory = _local(url)
    if isinstance(doc.get("dir_info"), dict) and directory is not None:
        return LockedPackage(canonicalize_name(dist.name), dist.version, directory=directory)
    return None


def wheel_tags(dist: Distribution) -> frozenset[str]:
    """The tags its `WHEEL` file lists (empty when it was not installed from a wheel)."""
    try:
        text = observe.read_text(str(dist.metadata_dir / "WHEEL"))
    except OSError:
        return frozenset()
    return frozenset(line.split(":", 1)[1].strip() for line in text.splitlines()
                     if line.lower().startswith("tag:"))


def _matches(file: IndexFile, dist: Distribution, tags: frozenset[str],
             loosely: bool = False) -> bool:
    """Whether an index file is the installed wheel: its version, and its tags (`loosely`:
    the same interpreters, ABIs, C library and architecture, whatever glibc release the
    platform tags name, for a wheel renamed after its WHEEL file was written: sgl-kernel's
    WHEEL says linux_x86_64, its file on PyPI manylinux2014_x86_64)."""
    try:
        _name, version, _build, file_tags = parse_wheel_filename(file.filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    if version != Version(dist.version):
        return False
    named = {str(t) for t in file_tags}
    if not loosely:
        return named == tags
    return {_loose(t) for t in named} == {_loose(t) for t in tags}


def _loose(tag: str) -> tuple[str, ...]:
    """A tag with its platform reduced to C library and architecture (`cp310-abi3-glibc-x86_64`)."""
    parts = tag.split("-")
    if len(parts) != 3:
        return tuple(parts)
    interpreter, abi, platform = parts
    match = re.match(r"(manylinux\d*|manylinux_\d+_\d+|linux|musllinux_\d+_\d+)_(.+)$",
                     platform)
    if match is None:
        return interpreter, abi, platform
    libc = "musl" if match[1].startswith("musllinux") else "glibc"
    return interpreter, abi, libc, match[2]


def _from_index(dist: Distribution, remote: Callable[[], RemoteContext]) -> LockedPackage | None:
    from abifit.remote.packageindex import local_file

    tags = wheel_tags(dist)
    if not tags:
        return None
    try:
        files = remote().index.project_files(dist.name)
    except AbifitError:
        return None
    exact = [f for f in files if f.is_wheel and _matches(f, dist, tags)]
    loose = [f for f in files if f.is_wheel and _matches(f, dist, tags, loosely=True)]
    # a file renamed after its WHEEL was written, when it is the only one it can be
    for file in exact or (loose if len(loose) == 1 else []):
        sha = file.sha256
        local = local_file(file.url)
        if sha is None and local is not None:
            sha = file_sha256(str(local))
        if sha is not None:
            return LockedPackage(canonicalize_name(dist.name), dist.version,
                                 WheelFile(file.filename, sha, file.url, size=file.size))
    return None


def lock_distribution(dist: Distribution,
                      remote: Callable[[], RemoteContext] | None) -> LockedPackage:
    """The `[[packages]]` entry of an installed distribution (see the module's docstring)."""
    found = _direct(dist)
    if found is None and remote is not None:
        found = _from_index(dist, remote)
    if found is None:
        found = LockedPackage(canonicalize_name(dist.name), dist.version,
                              directory=str(dist.metadata_dir.parent), recorded=False)
    return found


def snapshot(python: str, output: Path | None, *, cache_dir: Path | None,
             environ: Mapping[str, str], progress: Progress,
             remote: Callable[[], RemoteContext] | None, ld_so_conf: str = LD_SO_CONF,
             ld_so_cache: str = LD_SO_CACHE) -> SnapshotReport:
    """`abifit snapshot`: take the snapshot and write it to `output` (None: not written)."""
    from abifit.errors import UsageError
    from abifit.formats.pylock import dumps

    taken = take_snapshot(python, cache_dir=cache_dir, environ=environ, progress=progress,
                          remote=remote, ld_so_conf=ld_so_conf, ld_so_cache=ld_so_cache)
    notes = []
    if taken.unrecorded:
        notes.append(f"{len(taken.unrecorded)} distribution(s) with no recorded wheel or "
                     f"source, locked as the directory they are installed in (an installer "
                     f"cannot fetch them again): {', '.join(taken.unrecorded)}")
    if output is not None:
        try:
            output.write_text(dumps(taken), "utf-8")
        except OSError as e:
            raise UsageError(f"-o {output}: {e.strerror or e}") from e
    return SnapshotReport(taken, str(output) if output is not None else None, tuple(notes))


# --- replaying a snapshot --------------------------------------------------------------------


def read_snapshot(path: str) -> Snapshot:
    """A snapshot (or any PEP 751 lock) read from a file; `UsageError` when it cannot be read,
    `FormatError` when it is not a lock."""
    from abifit.errors import UsageError
    from abifit.formats.pylock import loads

    try:
        text = Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e
    return loads(text, path)


def snapshot_pins(snap: Snapshot) -> tuple[list[Pin], list[str]]:
    """What a check of the snapshot's stack checks: the wheel each distribution was installed
    from (its URL and sha256, or its sha256 to find it on the index), and the distributions
    that cannot be had from an index."""
    from abifit.formats.pins import LockedFile, Pin

    pins, skipped = [], []
    for p in snap.packages:
        if p.wheel is not None and p.version is not None:
            w = p.wheel
            files = (LockedFile(w.name, w.url, w.sha256, w.size),) if w.url else ()
            pins.append(Pin(f"{p.name}=={p.version}", (w.sha256,), files))
        else:
            skipped.append(f"{p.name} (locked as a directory: {p.directory})")
    return pins, skipped


def _recorded_fix(finding: Finding, snap: Snapshot) -> Finding:
    """A library not found, with how the snapshot's machine found it: the ld.so.conf file and
    directory, or the LD_LIBRARY_PATH directory, and the fix that makes this host do the same."""
    host = snap.host
    if host is None or finding.kind is not FindingKind.MISSING_LIBRARY or not finding.library:
        return finding
    lib = finding.library
    conf = next((d for d in host.ld_so_conf if lib in d.libraries), None)
    if conf is not None:
        return replace(
            finding,
            derivation=(*finding.derivation,
                        FoundThroughLdConf(lib, conf.directory, conf.file, conf.line)),
            hint=f"add {conf.directory} to {conf.file or '/etc/ld.so.conf'} (a file under "
            f"/etc/ld.so.conf.d/ on this host) and run ldconfig, as on the snapshot's machine; "
            f"{lib} must be in that directory")
    env = next((d for d in host.ld_library_path if lib in d.libraries), None)
    if env is not None:
        return replace(
            finding,
            derivation=(*finding.derivation, FoundThroughLdLibraryPath(lib, env.directory)),
            hint=f"put {env.directory} (holding {lib}) on LD_LIBRARY_PATH, as on the "
            "snapshot's machine")
    return finding


def with_recorded_fixes(report: CheckReport, snap: Snapshot) -> CheckReport:
    """`check`'s report with the snapshot's loader settings in the fix of each library not
    found that the snapshot's machine found through them."""
    return replace(report, findings=tuple(_recorded_fix(f, snap) for f in report.findings))
