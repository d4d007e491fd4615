"""A module's ABI fingerprint (`formats.pylock.ModuleRecord`), from the simulation that judged it.

One function for both ways a stack is simulated: `snapshot` (doctor's simulation of an
installed environment) and `check` of a lock (the wheels laid out under a site-packages no
machine has), so that `diff` compares the records of either alike. From a module's load
result: the sonames its load mapped and where (relative to site-packages inside it); from its
image: the version nodes it requires; from `Simulator.bindings`: the library each of its
undefined symbols bound to (counted per library, and the digest of the sorted
`symbol@version -> soname` lines); from the environment: its use of NumPy's C API.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from abifit.formats.pylock import ModuleRecord, Needed, bindings_digest
from abifit.host.natives import site_root
from abifit.sim.loader import LoadResult
from abifit.sim.process import ModuleStatus, Simulation, Simulator


def relative(path: str | None, roots: Sequence[str]) -> str | None:
    """A path inside site-packages (one of `roots`) relative to it; any other as it is."""
    if path is None:
        return None
    root = site_root(path, roots)
    return os.path.relpath(path, root) if root else path


def _soname(sim: Simulator, path: str) -> str:
    image = sim.image(path)
    return image.soname if image is not None and image.soname else os.path.basename(path)


def module_record(sim: Simulator, status: ModuleStatus, result: LoadResult,
                  roots: Sequence[str]) -> ModuleRecord:
    """The record of one module the simulation `sim` judged (`status`, `result`), its paths
    relative to the site-packages among `roots`."""
    needed: dict[str, Needed] = {}
    for r in result.resolutions:
        if r.name not in needed:
            needed[r.name] = Needed(r.name, relative(r.path, roots),
                                    r.via.value if r.via else None)
    image = sim.image(status.path)
    versions = tuple(f"{need.file}:{v.name}" for need in (image.version_needs if image else ())
                     for v in need.versions)
    native = next(n for n in sim.env.natives if n.path == status.path)
    lines = [(name, version, _soname(sim, where))
             for name, version, where in (sim.bindings(native) if status.loads else ())]
    counts: dict[str, int] = {}
    for _name, _version, soname in lines:
        counts[soname] = counts.get(soname, 0) + 1
    use = sim.env.numpy_uses.get(status.path)
    return ModuleRecord(status.module, status.distribution, relative(status.path, roots) or "",
                        status.loads, status.error, tuple(needed.values()), versions,
                        tuple(sorted(counts.items())), bindings_digest(lines),
                        use.headers if use else None, use.feature if use else None)


def module_records(sim: Simulator, simulation: Simulation,
                   roots: Sequence[str]) -> tuple[ModuleRecord, ...]:
    """The record of every module of `simulation`, in its order."""
    return tuple(module_record(sim, status, result, roots)
                 for status, result in zip(simulation.statuses, simulation.results,
                                           strict=True))
