"""`abifit cuda`: the host's CUDA stack next to what a Python environment needs from it.

Wiring only: the stack comes from `cudastack.probe_cuda_stack`, the environment's ELF files from
doctor's scan (distributions, their native files, parsed through the ELF cache), the findings
from `sim.cudaproblems.cuda_findings` and, for the GPUs found or given, from `sim.gpu` (doctor's
`check_gpu_codes`, with its verdicts cached by file).
Nothing is imported from the environment: its interpreter is asked for its paths only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.engines.doctor import GpuReads, check_gpu_codes
from abifit.formats.elf import ElfImage
from abifit.host.cudastack import CudaStack, cuda_major_of_soname, probe_cuda_stack
from abifit.host.environment import list_distributions, query_interpreter
from abifit.host.ldconfig import probe_host
from abifit.host.localfs import ElfCache, FileCache, LocalObjects
from abifit.host.natives import NativeFile, image_or_none, scan_native_files, short_name
from abifit.remote.diskcache import GPU_BUCKET
from abifit.sim.cudaproblems import cuda_findings
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.gpu import GpuCheck
from abifit.sim.gputarget import GpuTarget, gpu_targets

if TYPE_CHECKING:
    pass

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SonameUse:
    """A CUDA runtime soname in the environment: its CUDA major, who needs it, who ships it."""

    soname: str
    major: int
    needed_by: tuple[str, ...]
    provided_by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CudaReport:
    """Everything `abifit cuda` found."""

    python: str
    python_version: str
    stack: CudaStack
    sonames: tuple[SonameUse, ...]
    findings: tuple[Finding, ...]
    warnings: tuple[Finding, ...]
    gpu: tuple[GpuCheck, ...]
    gpu_reason: str | None

    @property
    def needed_majors(self) -> tuple[int, ...]:
        return tuple(sorted({u.major for u in self.sonames if u.needed_by}))

    @property
    def provided_majors(self) -> tuple[int, ...]:
        return tuple(sorted({u.major for u in self.sonames if u.provided_by}))


def soname_uses(
    natives: list[NativeFile], image: Callable[[str], ElfImage | None],
    name: Callable[[NativeFile], str],
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(soname -> names of the files that need it, soname -> distributions that ship it)."""
    needed: dict[str, set[str]] = {}
    provided: dict[str, set[str]] = {}
    for native in natives:
        img = image(native.path)
        if img is None:
            continue
        for soname in img.needed:
            needed.setdefault(soname, set()).add(name(native))
        shipped = img.soname or os.path.basename(native.path)
        provided.setdefault(shipped, set()).add(native.distribution)
    return needed, provided


def runtime_sonames(needed: Mapping[str, set[str]],
                    provided: Mapping[str, set[str]]) -> tuple[SonameUse, ...]:
    """The CUDA runtime sonames among them, by CUDA major and name."""
    uses = []
    for soname in sorted({*needed, *provided}):
        major = cuda_major_of_soname(soname)
        if major is not None:
            uses.append(SonameUse(soname, major, tuple(sorted(needed.get(soname, ()))),
                                  tuple(sorted(provided.get(soname, ())))))
    return tuple(sorted(uses, key=lambda u: (u.major, u.soname)))


def cuda_report(
    python: str, *, environ: Mapping[str, str], cache_dir: Path | None, progress: Progress,
    gpus: tuple[GpuTarget, ...] | None = None, stack: CudaStack | None = None,
) -> CudaReport:
    """Probe the host's CUDA stack and compare it with the environment of `python`."""
    progress("probing the CUDA stack")
    host = probe_host(environ)
    stack = probe_cuda_stack(environ, host=host) if stack is None else stack
    facts = query_interpreter(python)
    progress("reading distributions")
    dists = list_distributions(facts)
    source = LocalObjects(ElfCache(cache_dir) if cache_dir else None)
    image = image_or_none(source)
    natives = scan_native_files(facts, dists, image)
    roots = [p for p in facts.sys_path if os.path.isdir(p)]

    def name(native: NativeFile) -> str:
        return short_name(native, roots)

    needed, provided = soname_uses(natives, image, name)
    owners = {name(n): n.distribution for n in natives}
    findings = [f for f in cuda_findings(stack, needed, provided, owners)
                if not (f.kind == FindingKind.TOOLKIT_NOT_SEARCHED and f.library in provided)]
    gpu_reason = None
    if gpus is None:
        gpus = gpu_targets(stack.gpus, stack.driver.cuda_version)
        gpu_reason = None if gpus else stack.gpus.reason or "no GPU found"
    checks: tuple[GpuCheck, ...] = ()
    if gpus:
        reads = GpuReads(gpus, FileCache(cache_dir, GPU_BUCKET) if cache_dir else None)
        checks = check_gpu_codes(natives, image, name, progress, reads)
        findings += [f for c in checks for f in c.findings]
    return CudaReport(facts.executable, facts.version, stack, runtime_sonames(needed, provided),
                      tuple(findings), tuple(w for c in checks for w in c.warnings), checks,
                      gpu_reason)
