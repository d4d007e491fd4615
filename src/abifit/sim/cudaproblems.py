"""The CUDA problems of an environment on a host, from the facts `abifit.host.cudastack` probed.

Pure: the stack (toolkits, driver, GPUs) and which sonames are needed and provided arrive as
values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from abifit.host.cudastack import (
    CudaStack,
    CudaVersion,
    Driver,
    LibDir,
    Toolkit,
    cuda_major_of_soname,
    minimum_driver_for,
)
from abifit.sim.derivation import DriverTooOld, ProvidedBy, RuntimeMix, ToolkitNotSearched
from abifit.sim.findings import Finding, FindingKind


def _runtime_majors(sonames: Iterable[str]) -> dict[str, int]:
    majors = {s: cuda_major_of_soname(s) for s in sonames}
    return {s: m for s, m in majors.items() if m is not None}


def _names(items: Collection[str]) -> str:
    return ", ".join(sorted(items)) or "(nothing)"


def _driver_too_old(
    driver: Driver, needed: Mapping[str, Collection[str]], provided: Mapping[str, Collection[str]]
) -> list[Finding]:
    supported = driver.cuda_version
    if supported is None:
        return []
    found = []
    majors = _runtime_majors({*needed, *provided})
    for soname, major in sorted(majors.items()):
        if major <= supported.major:
            continue
        users = sorted({*needed.get(soname, ()), *provided.get(soname, ())})
        how = driver.cuda_version_source.value if driver.cuda_version_source else "?"
        minimum = minimum_driver_for(CudaVersion((major, 0)))
        found.append(Finding(
            kind=FindingKind.DRIVER_TOO_OLD, object=users[0] if users else soname, library=soname,
            version=driver.version,
            message=f"{soname} is CUDA {major}; the driver supports CUDA up to {supported}",
            derivation=(DriverTooOld(tuple(users), soname, major, driver.version,
                                     str(supported), how),),
            hint=(f"install an NVIDIA driver >= {minimum or f'the minimum for CUDA {major}.0'}, "
                  f"or use CUDA {supported.major} builds"),
            candidates=tuple(users)))
    return found


def _major_mix(
    needed: Mapping[str, Collection[str]], provided: Mapping[str, Collection[str]],
    owners: Mapping[str, str],
) -> list[Finding]:
    provided_majors = _runtime_majors(provided)
    if not provided_majors:
        return []
    env_major = stack_major(needed, provided, owners)
    brings = sorted(s for s, m in provided_majors.items() if m == env_major)
    by_needer: dict[str, list[str]] = {}
    for soname, major in sorted(_runtime_majors(needed).items()):
        if major != env_major:
            for needer in needed[soname]:
                by_needer.setdefault(needer, []).append(soname)
    return [_mix_finding(needer, sonames, env_major, brings, provided)
            for needer, sonames in sorted(by_needer.items())]


def stack_major(needed: Mapping[str, Collection[str]], provided: Mapping[str, Collection[str]],
                owners: Mapping[str, str]) -> int:
    """The environment's CUDA major: the one most of its distributions need or ship (torch and
    its nvidia-* wheels outnumber a torchvision built for another CUDA), the newest on a tie.
    `owners` maps a needer to its distribution; a needer it lacks counts as its own."""
    users: dict[int, set[str]] = {}
    for soname, major in _runtime_majors(needed).items():
        users.setdefault(major, set()).update(owners.get(n, n) for n in needed[soname])
    for soname, major in _runtime_majors(provided).items():
        users.setdefault(major, set()).update(provided[soname])
    return max(users, key=lambda m: (len(users[m]), m))


def _mix_finding(
    needer: str, sonames: list[str], env_major: int, brings: list[str],
    provided: Mapping[str, Collection[str]],
) -> Finding:
    majors = sorted({m for m in _runtime_majors(sonames).values()})
    wanted = "/".join(map(str, majors))
    sources = tuple(ProvidedBy(s, tuple(sorted(provided[s]))) for s in brings)
    missing = tuple(s for s in sonames if s not in provided)
    return Finding(
        kind=FindingKind.CUDA_MAJOR_MIX, object=needer, library=sonames[0],
        candidates=tuple(sonames),
        message=f"needs CUDA {wanted} runtime libraries ({_names(sonames)}); the environment "
                f"brings CUDA {env_major}",
        derivation=(RuntimeMix(needer, tuple(majors), tuple(sonames), env_major, sources,
                               missing),),
        hint=f"use a CUDA {env_major} build of it (for wheels, a +cu{env_major}0-style local "
             f"version), or CUDA {wanted} for the whole environment",
    )


def _not_searched(
    toolkits: Sequence[Toolkit], needed: Mapping[str, Collection[str]]
) -> list[Finding]:
    found = []
    for soname in sorted(needed):
        holders = [d for t in toolkits for d in t.holding(soname)]
        if not holders or any(d.search.searched for d in holders):
            continue
        for lib_dir in holders:
            found.append(_not_searched_finding(soname, lib_dir, sorted(needed[soname])))
    return found


def _not_searched_finding(soname: str, lib_dir: LibDir, needers: list[str]) -> Finding:
    if lib_dir.search.in_ld_so_conf:
        hint = "run `ldconfig` as root to rebuild the cache"
    else:
        hint = (f"add {lib_dir.path} to LD_LIBRARY_PATH, or list it in a file under "
                "/etc/ld.so.conf.d/ and run `ldconfig`")
    return Finding(
        kind=FindingKind.TOOLKIT_NOT_SEARCHED, object=lib_dir.path, library=soname,
        candidates=tuple(needers),
        message=f"{soname} is in {lib_dir.path}, which the loader does not search",
        derivation=(ToolkitNotSearched(tuple(needers), soname, lib_dir.path,
                                       lib_dir.search.in_ld_so_conf),),
        hint=hint,
    )


def cuda_findings(
    stack: CudaStack,
    needed: Mapping[str, Collection[str]],
    provided: Mapping[str, Collection[str]],
    owners: Mapping[str, str] | None = None,
) -> tuple[Finding, ...]:
    """The CUDA problems of an environment on this host.

    `needed` maps sonames to what needs them
    (`libcudart.so.12` -> {'sgl_kernel/common_ops.abi3.so'}); `provided` maps sonames to what
    provides them (`libcudart.so.13` -> {'nvidia-cuda-runtime'}).

    - `driver-too-old`: a runtime soname, needed or provided, of a CUDA major newer than the
      driver supports (no finding while that is unknown).
    - `cuda-major-mix`: per needer, its runtime sonames of another CUDA major than the
      environment's (`stack_major`: the one most distributions need or ship, so the findings
      name the odd ones out); `owners` maps needers to their distributions.
    - `toolkit-not-searched`: a needed soname that toolkits hold only in directories ld.so does
      not search; one finding per such directory.
    """
    return (*_driver_too_old(stack.driver, needed, provided),
            *_major_mix(needed, provided, owners or {}), *_not_searched(stack.toolkits, needed))
