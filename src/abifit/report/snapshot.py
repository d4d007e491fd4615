"""`abifit snapshot` rendered: what was locked and fingerprinted, the machine's facts that
mattered, where the lock went; `--requirements` prints the pins instead; `--json` prints the
same report as one versioned document."""

from __future__ import annotations

from abifit.engines.snapshot import SnapshotReport
from abifit.formats.pylock import LibraryDir, LockedPackage, ModuleRecord, Snapshot
from abifit.report.json import JsonObject, schema_version


def requirements_text(snapshot: Snapshot) -> str:
    """The pins as a requirements (or constraints) file: `name==version`, with
    `--hash=sha256:` where the wheel's is known; an unrecorded distribution as a comment. pip's
    hash-checking mode refuses a file that hashes some lines only, so when some wheels are
    known and others not, the others are comments, under a line that says why."""
    lines = [f"# {snapshot.created_by}: the stack of {snapshot.python or 'a lock file'}"]
    hashed = any(p.wheel is not None and p.version is not None for p in snapshot.packages)
    unhashed: list[str] = []
    for p in snapshot.packages:
        if p.version is None:
            lines.append(f"# {p.name}: no version recorded")
        elif p.wheel is not None:
            lines.append(f"{p.name}=={p.version} --hash=sha256:{p.wheel.sha256}")
        else:
            why = (f"built from {p.directory}" if p.recorded and p.directory
                   else "no wheel or source recorded")
            (unhashed if hashed else lines).append(f"{p.name}=={p.version}  # {why}")
    if unhashed:
        lines += ["# no wheel sha256 recorded for these, and pip's hash-checking mode refuses "
                  "a file that mixes", "# hashed and unhashed lines: install them apart",
                  *(f"# {line}" for line in unhashed)]
    return "\n".join(lines) + "\n"


def _dirs(label: str, dirs: tuple[LibraryDir, ...]) -> list[str]:
    return [f"  {label}: {d.directory}" + (f" ({d.file}:{d.line})" if d.file else "")
            + f" found {', '.join(d.libraries)}" for d in dirs]


def _source(p: LockedPackage) -> str:
    if p.wheel is not None:
        return "wheel"
    return "directory" if p.recorded else "unrecorded"


def snapshot_text(report: SnapshotReport) -> str:
    """The text rendering of `abifit snapshot`."""
    s = report.snapshot
    wheels = sum(1 for p in s.packages if p.wheel is not None)
    loading = sum(1 for m in s.modules if m.loads)
    lines = [f"{s.python} ({s.python_version}): {len(s.packages)} distributions locked "
             f"({wheels} with a wheel and its sha256, {len(s.unrecorded)} unrecorded), "
             f"{len(s.modules)} native modules fingerprinted, {loading} load"]
    if s.host is not None:
        h = s.host
        lines.append(f"host: {h.machine}, glibc {h.glibc or 'unknown'}, libstdc++ "
                     f"{h.libstdcxx or 'not loaded'}")
        lines += _dirs("ld.so.conf", h.ld_so_conf) + _dirs("LD_LIBRARY_PATH", h.ld_library_path)
    if s.cuda is not None:
        c = s.cuda
        toolkits = ", ".join(f"{t.version or '?'} at {t.root}" for t in c.toolkits) or "none used"
        gpus = ", ".join(f"{g.name} ({g.arch or '?'})" for g in c.gpus) or "none"
        driver = f"{c.driver} (CUDA {c.driver_cuda or '?'})" if c.driver else "none"
        lines.append(f"cuda: driver {driver}; toolkits: {toolkits}; GPUs: {gpus}")
    for m in report.failing:
        lines.append(f"  does not load: {m.module}: {m.error}")
    lines.append(f"lock written to {report.written}" if report.written
                 else "lock not written (give -o FILE)")
    return "\n".join(lines) + "\n"


def _module_json(m: ModuleRecord) -> JsonObject:
    return {"module": m.module, "distribution": m.distribution, "file": m.file,
            "loads": m.loads, "error": m.error,
            "needed": [{"soname": n.soname, "path": n.path, "via": n.via} for n in m.needed],
            "versions": list(m.versions),
            "providers": [{"soname": s, "symbols": n} for s, n in m.providers],
            "bindings_sha256": m.bindings_sha256, "numpy_headers": m.numpy_headers,
            "numpy_feature": m.numpy_feature}


def _dirs_json(dirs: tuple[LibraryDir, ...]) -> list[JsonObject]:
    return [{"directory": d.directory, "file": d.file, "line": d.line,
             "libraries": list(d.libraries)} for d in dirs]


def snapshot_json(report: SnapshotReport) -> JsonObject:
    """The `--json` document of `abifit snapshot`."""
    s = report.snapshot
    h, c = s.host, s.cuda
    return {
        "schema_version": schema_version("snapshot"),
        "command": "snapshot",
        "python": s.python,
        "python_version": s.python_version,
        "written": report.written,
        "notes": list(report.notes),
        "packages": [{"name": p.name, "version": p.version, "source": _source(p),
                      "wheel": p.wheel.name if p.wheel else None,
                      "url": (p.wheel.url or p.wheel.path) if p.wheel else None,
                      "sha256": p.wheel.sha256 if p.wheel else None,
                      "directory": p.directory} for p in s.packages],
        "host": None if h is None else {
            "machine": h.machine, "glibc": h.glibc, "libstdcxx": h.libstdcxx,
            "ld_so_conf": _dirs_json(h.ld_so_conf),
            "ld_library_path": _dirs_json(h.ld_library_path)},
        "cuda": None if c is None else {
            "driver": c.driver, "driver_cuda": c.driver_cuda,
            "toolkits": [{"version": t.version, "root": t.root} for t in c.toolkits],
            "gpus": [{"name": g.name, "arch": g.arch} for g in c.gpus]},
        "modules": [_module_json(m) for m in s.modules],
    }
