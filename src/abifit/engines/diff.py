"""`abifit diff A B`: what changed between two stacks, ABI first, then versions.

A side is a snapshot file (`abifit snapshot`'s `pylock.toml`, with `[tool.abifit]`), an
environment (a Python interpreter, or a venv directory with `bin/python`: snapshotted here,
with doctor's simulation), or a lock or requirements file without abifit's facts (`pylock.toml`
of another tool, `uv.lock`, `requirements.txt`): checked as `check -r FILE` checks it (the
wheels it pins read by range requests and simulated on the target host; `LockCheck`, which the
command gives), for the Python of the other side where that side records one, its modules'
records made from the check's simulation as a snapshot's are from doctor's. Asked for versions
only (no `LockCheck`), a lock gives its versions alone.

What is compared (`compare`, pure): every module that loads on side A, by distribution and
module name, against side B's fingerprint of it: one that B has and that does not load there
breaks (with B's loader error and, for an environment or a checked lock, doctor's or check's
explanation: the nearest definition of a missing symbol, whose signature changed); one whose
distribution B has without its file (neither a module nor a library a module loads) is gone;
for one that loads on both, the CUDA major of the sonames it maps, the libraries outside
site-packages it was found at, the version nodes it requires and the libraries its undefined
symbols bound to (the digest, and the count per library). Host facts A's modules depended on
(the glibc and libstdc++ releases, each ld.so.conf and LD_LIBRARY_PATH directory that found one
of A's libraries, the driver's CUDA) are compared where both sides record a host. Then the
versions of the distributions. A side without fingerprints (a lock not checked) says nothing
of loading: only versions are compared, and a note says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from abifit.errors import UsageError
from abifit.formats.pylock import LockedPackage, ModuleRecord, Snapshot, loads
from abifit.host.cudastack import cuda_major_of_soname
from abifit.sim.derivation import Sentence
from abifit.sim.findings import Finding
from abifit.sim.process import Progress
from abifit.sim.verdict import costs

if TYPE_CHECKING:
    from abifit.engines.check import CheckReport


class SideKind(Enum):
    ENVIRONMENT = "environment"
    SNAPSHOT = "snapshot"
    LOCK = "lock"  # a lock or requirements file, read for its versions only
    CHECKED_LOCK = "checked-lock"  # a lock whose pinned wheels were checked (`check -r`)


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a diff: where it came from and the stack it holds."""

    label: str
    kind: SideKind
    snapshot: Snapshot
    findings: tuple[Finding, ...] = ()  # an environment's: doctor's; a checked lock's: check's
    target: str | None = None  # what a checked lock was checked for ("cp311 on ...")
    notes: tuple[str, ...] = ()  # a checked lock's: its check's

    @property
    def fingerprinted(self) -> bool:
        return self.kind is not SideKind.LOCK


# Checks a lock or requirements file as `check -r FILE` does, for a Python ("3.11"; None: the
# check's own), with each module's record (`CheckReport.records`)
LockCheck = Callable[[str, "str | None"], "CheckReport"]


class ChangeKind(Enum):
    STOPS_LOADING = "stops-loading"
    STARTS_LOADING = "starts-loading"
    MODULE_GONE = "module-gone"
    CUDA_MAJOR = "cuda-major"
    RESOLVED_ELSEWHERE = "resolved-elsewhere"
    VERSION_NODES = "version-nodes"
    BINDINGS = "bindings"
    NUMPY_C_API = "numpy-c-api"
    HOST = "host"
    VERSION = "version"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: what it is about, what A and B have, and why it matters: a module that
    stops loading has the derivation of B's finding about it (`derivation`, written by the
    report where other changes have their `detail`)."""

    kind: ChangeKind
    subject: str
    before: str | None
    after: str | None
    detail: str = ""
    breaks: bool = False
    distribution: str | None = None  # of the module a change is about
    derivation: tuple[Sentence, ...] = ()


@dataclass(frozen=True, slots=True)
class Origin:
    """What a side of a diff was: its kind, and the target a checked lock was checked for
    ("cp311 on linux_x86_64")."""

    kind: SideKind
    target: str | None = None


@dataclass(frozen=True, slots=True)
class DiffReport:
    a: str
    b: str
    abi: tuple[Change, ...]
    versions: tuple[Change, ...]
    notes: tuple[str, ...] = ()
    # whether loading was compared: both sides hold abifit's facts (a snapshot, an environment,
    # a lock whose wheels were checked); a lock read for its versions only holds none
    abi_compared: bool = True
    origins: tuple[Origin, ...] = ()  # A's and B's (none: not said)

    @property
    def word(self) -> str:
        """`breaks`, `fits`, or `versions only` where loading was not compared."""
        return "breaks" if self.breaks else "fits" if self.abi_compared else "versions only"

    @property
    def breaks(self) -> tuple[Change, ...]:
        return tuple(c for c in self.abi if c.breaks)

    @property
    def checked_for(self) -> tuple[str, ...]:
        """The targets the sides that are locks were checked for, each once."""
        return tuple(dict.fromkeys(o.target for o in self.origins
                                   if o.kind is SideKind.CHECKED_LOCK and o.target))


# --- comparing -------------------------------------------------------------------------------


def _key(m: ModuleRecord) -> tuple[str, str]:
    return canonicalize_name(m.distribution), m.module


def _derivation(module: str, findings: tuple[Finding, ...]) -> tuple[Sentence, ...]:
    """The derivation of the finding about `module` that costs something (else the first)."""
    mine = [f for f in findings if f.module == module]
    found = next((f for f in mine if costs(f)), mine[0] if mine else None)
    return found.derivation if found is not None else ()


def _cuda_majors(m: ModuleRecord) -> dict[str, int]:
    """The sonames the module maps that belong to a CUDA release, by library: major."""
    out = {}
    for n in m.needed:
        major = cuda_major_of_soname(n.soname)
        if major is not None:
            out[n.soname.split(".so")[0]] = major
    return out


def _numpy(m: ModuleRecord) -> str:
    """"NumPy 2.x headers, NumPy 1.23 or newer" for a module's NumPy C API."""
    return f"NumPy {m.numpy_headers}.x headers" + (f", NumPy {m.numpy_feature} or newer"
                                                    if m.numpy_feature else "")


def _module_changes(a: ModuleRecord, b: ModuleRecord) -> list[Change]:
    """What changed in a module that loads on both sides."""
    out = []
    subject = a.module
    dist = b.distribution
    before, after = _cuda_majors(a), _cuda_majors(b)
    for lib in sorted(before.keys() & after.keys()):
        if before[lib] != after[lib]:
            out.append(Change(ChangeKind.CUDA_MAJOR, subject, f"{lib} CUDA {before[lib]}",
                              f"{lib} CUDA {after[lib]}",
                              f"maps {lib} of another CUDA major", distribution=dist))
    paths_a = {n.soname: n.path for n in a.needed if n.path and n.path.startswith("/")}
    paths_b = {n.soname: n.path for n in b.needed if n.path and n.path.startswith("/")}
    for soname in sorted(paths_a.keys() & paths_b.keys()):
        if paths_a[soname] != paths_b[soname]:
            out.append(Change(ChangeKind.RESOLVED_ELSEWHERE, subject, paths_a[soname],
                              paths_b[soname], f"{soname} is found elsewhere",
                              distribution=dist))
    if (a.numpy_headers, a.numpy_feature) != (b.numpy_headers, b.numpy_feature) \
            and None not in (a.numpy_headers, b.numpy_headers):
        out.append(Change(ChangeKind.NUMPY_C_API, subject, _numpy(a), _numpy(b),
                          "it was built against another NumPy C API: which NumPy releases it "
                          "imports beside changed", distribution=dist))
    added = sorted(set(b.versions) - set(a.versions))
    if added:
        out.append(Change(ChangeKind.VERSION_NODES, subject, None, ", ".join(added),
                          "requires version nodes it did not", distribution=dist))
    if a.bindings_sha256 != b.bindings_sha256:
        pa, pb = dict(a.providers), dict(b.providers)
        counts = [f"{s} {pa.get(s, 0)} -> {pb.get(s, 0)}" for s in sorted(pa.keys() | pb.keys())
                  if pa.get(s, 0) != pb.get(s, 0)]
        out.append(Change(ChangeKind.BINDINGS, subject, a.bindings_sha256[:12],
                          b.bindings_sha256[:12],
                          "its undefined symbols bind differently"
                          + (f" (symbols per library: {'; '.join(counts)})" if counts else
                             " (as many per library: other symbols, or other versions)"),
                          distribution=dist))
    return out


def _files(s: Snapshot) -> set[str]:
    """The files of site-packages a stack's modules are, or load: a library that one side
    checks as a module (a library-only wheel's, in a check of a lock) and the other loads
    beside a module that needs it is there on both."""
    return ({m.file for m in s.modules}
            | {n.path for m in s.modules for n in m.needed if n.path and n.path[:1] != "/"})


def _modules(a: Side, b: Side) -> list[Change]:
    b_modules = {_key(m): m for m in b.snapshot.modules}
    b_dists = {canonicalize_name(p.name) for p in b.snapshot.packages}
    b_files = _files(b.snapshot)
    out = []
    for m in a.snapshot.modules:
        other = b_modules.get(_key(m))
        if not m.loads:
            if other is not None and other.loads:
                out.append(Change(ChangeKind.STARTS_LOADING, m.module, m.error, "loads",
                                  distribution=m.distribution))
            continue
        if other is None:
            if _key(m)[0] in b_dists and m.file not in b_files:
                out.append(Change(ChangeKind.MODULE_GONE, m.module, m.file, None,
                                  f"{m.distribution} on B has no such module",
                                  distribution=m.distribution))
            continue
        if not other.loads:
            why = _derivation(other.module, b.findings)
            out.append(Change(ChangeKind.STOPS_LOADING, m.module, "loads", other.error,
                              breaks=True, distribution=other.distribution, derivation=why))
            continue
        out += _module_changes(m, other)
    a_keys = {_key(m) for m in a.snapshot.modules}
    out += [Change(ChangeKind.STOPS_LOADING, m.module, None, m.error, breaks=False,
                   distribution=m.distribution, derivation=_derivation(m.module, b.findings))
            for m in b.snapshot.modules if _key(m) not in a_keys and not m.loads]
    return out


def _host(a: Snapshot, b: Snapshot) -> list[Change]:
    if a.host is None or b.host is None:
        return []
    ha, hb = a.host, b.host
    out = []
    for what, x, y in (("glibc", ha.glibc, hb.glibc), ("libstdc++", ha.libstdcxx, hb.libstdcxx)):
        if x and y and x != y:
            out.append(Change(ChangeKind.HOST, what, x, y))
    b_dirs = {d.directory for d in (*hb.ld_so_conf, *hb.ld_library_path)}
    for d in ha.ld_so_conf:
        if d.directory not in b_dirs:
            out.append(Change(ChangeKind.HOST, "ld.so.conf", f"{d.directory} ({d.file}:{d.line})",
                              None, f"found {', '.join(d.libraries)} on A; B's loader found "
                              "nothing there"))
    for d in ha.ld_library_path:
        if d.directory not in b_dirs:
            out.append(Change(ChangeKind.HOST, "LD_LIBRARY_PATH", d.directory, None,
                              f"found {', '.join(d.libraries)} on A; B's loader found nothing "
                              "there"))
    if a.cuda and b.cuda and a.cuda.driver_cuda != b.cuda.driver_cuda:
        out.append(Change(ChangeKind.HOST, "driver CUDA", a.cuda.driver_cuda, b.cuda.driver_cuda))
    return out


def _versions(a: Snapshot, b: Snapshot) -> list[Change]:
    va = {canonicalize_name(p.name): p.version for p in a.packages}
    vb = {canonicalize_name(p.name): p.version for p in b.packages}
    out = []
    for name in sorted(va.keys() | vb.keys()):
        if name not in vb:
            out.append(Change(ChangeKind.REMOVED, name, va[name], None))
        elif name not in va:
            out.append(Change(ChangeKind.ADDED, name, None, vb[name]))
        elif va[name] != vb[name]:
            out.append(Change(ChangeKind.VERSION, name, va[name], vb[name]))
    return out


def compare(a: Side, b: Side) -> DiffReport:
    """The differences from A to B (see the module's docstring)."""
    notes = [f"{side.label}: a lock read for its versions alone: its wheels were not checked"
             for side in (a, b) if not side.fingerprinted]
    checked: dict[str, list[str]] = {}
    for side in (a, b):
        if side.kind is SideKind.CHECKED_LOCK and side.target:
            checked.setdefault(side.target, []).append(side.label)
    notes += [f"{' and '.join(labels)}: the wheels pinned checked for {target}, as `abifit "
              "check -r` checks them (read from the index, not installed)"
              for target, labels in checked.items()]
    notes += [f"{side.label}: {n}" for side in (a, b) for n in side.notes]
    abi = (_modules(a, b) + _host(a.snapshot, b.snapshot)
           if a.fingerprinted and b.fingerprinted else [])
    unrecorded = [f"{side.label}: no wheel or source recorded for "
                  f"{', '.join(side.snapshot.unrecorded)}" for side in (a, b)
                  if side.kind is SideKind.SNAPSHOT and side.snapshot.unrecorded]
    return DiffReport(a.label, b.label, tuple(sorted(abi, key=lambda c: not c.breaks)),
                      tuple(_versions(a.snapshot, b.snapshot)), tuple(notes + unrecorded),
                      abi_compared=a.fingerprinted and b.fingerprinted,
                      origins=(Origin(a.kind, a.target), Origin(b.kind, b.target)))


# --- reading a side --------------------------------------------------------------------------


def _interpreter(spec: str) -> str | None:
    """The interpreter a side names: itself, or a venv's `bin/python`; None for a file."""
    from abifit.host.localfs import interpreter_problem

    if os.path.isdir(spec):
        python = os.path.join(spec, "bin", "python")
        if os.path.isfile(python):
            return python
        raise UsageError(f"{spec}: a directory without bin/python: not an environment")
    if os.path.isfile(spec) and interpreter_problem(spec, scripts=False) is None:
        return spec
    return None


def _pinned(requirements: tuple[str, ...]) -> tuple[LockedPackage, ...]:
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
        out.append(LockedPackage(canonicalize_name(req.name), pins[0] if pins else None,
                                 recorded=False))
    return tuple(out)


def read_file_side(path: str, markers: Mapping[str, str] | None = None) -> Side:
    """A side from a file: a `*.toml` other than `uv.lock` as a PEP 751 lock (a snapshot when
    it holds `[tool.abifit]`), anything else through `formats.pins` (with `markers`, the pins
    of the environment they describe: a lock that pins numpy 2.4.6 for Python < 3.12 and
    2.5.5 for later ones pins one of them)."""
    from abifit.formats.pins import read_pins

    name = os.path.basename(path)
    if name.endswith(".toml") and name != "uv.lock":
        try:
            text = Path(path).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e
        snap = loads(text, path)
        kind = SideKind.SNAPSHOT if snap.python is not None else SideKind.LOCK
        return Side(path, kind, snap)
    pins = read_pins(path, markers)
    return Side(path, SideKind.LOCK, Snapshot("", _pinned(pins.requirements)))


def _markers_of(side: Side) -> dict[str, str] | None:
    """The environment markers of a side that records its Python (a snapshot or an
    environment): those of a check for that Python on this machine, with its full version;
    None for a lock."""
    from abifit.engines.check import target_markers
    from abifit.remote.packageindex import Target

    python = _python_of(side)
    full = side.snapshot.python_version
    if python is None or not full:
        return None
    markers = target_markers(Target.for_python(python))
    return {**markers, "python_full_version": full, "implementation_version": full}


def _python_of(side: Side) -> str | None:
    """The "X.Y" of a side that records its Python (a snapshot, an environment); None for a
    lock."""
    full = side.snapshot.python_version
    if side.kind in (SideKind.LOCK, SideKind.CHECKED_LOCK) or not full:
        return None
    return ".".join(full.split(".")[:2])


def checked_side(side: Side, report: CheckReport) -> Side:
    """A lock side with what its check found: the modules' records and findings, and the
    versions of the pins the check's target gets (a pin without one exact version: the
    release the check chose)."""
    chosen: dict[str, str] = {canonicalize_name(w.name): w.version for w in report.wheels}
    packages = tuple(replace(p, version=p.version or chosen.get(p.name))
                     for p in _pinned(tuple(pin.requirement for pin in report.file_pins)))
    return Side(side.label, SideKind.CHECKED_LOCK,
                replace(side.snapshot, packages=packages, modules=report.records),
                report.findings, report.target, report.notes)


def read_side(spec: str, *, cache_dir: Path | None, environ: Mapping[str, str],
              progress: Progress) -> Side:
    """A side from the command line (see the module's docstring); a lock is read, not
    checked (`diff` checks it)."""
    from abifit.engines.snapshot import observe_stack

    python = _interpreter(spec)
    if python is None:
        if not os.path.exists(spec):
            raise UsageError(f"{spec}: no such file, environment or interpreter")
        return read_file_side(spec)
    snap, report = observe_stack(python, cache_dir=cache_dir, environ=environ,
                                 progress=progress, remote=None, cuda=False)
    return Side(spec, SideKind.ENVIRONMENT, snap, report.findings)


def diff(a: str, b: str, *, cache_dir: Path | None, environ: Mapping[str, str],
         progress: Progress, check_lock: LockCheck | None = None) -> DiffReport:
    """`abifit diff A B`: a side that is a lock is checked by `check_lock` for the Python of
    the other side where that side records one (None: versions only, the lock's pins those
    that other side's Python gets)."""
    sides = [read_side(spec, cache_dir=cache_dir, environ=environ, progress=progress)
             for spec in (a, b)]
    for n, spec in enumerate((a, b)):
        if sides[n].kind is not SideKind.LOCK:
            continue
        other = sides[1 - n]
        if check_lock is not None:
            if not sides[n].snapshot.packages:  # an empty lock: nothing to check, nothing loads
                sides[n] = replace(sides[n], kind=SideKind.CHECKED_LOCK)
                continue
            progress(f"checking {spec}")
            sides[n] = checked_side(sides[n], check_lock(spec, _python_of(other)))
            continue
        # a lock beside an environment: the pins it gets
        markers = _markers_of(other)
        if markers is not None and not (spec.endswith(".toml")
                                        and os.path.basename(spec) != "uv.lock"):
            sides[n] = read_file_side(spec, markers)
    return compare(sides[0], sides[1])
