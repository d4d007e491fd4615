"""Whether a GPU can run an object's kernels: the CUDA rules for SASS, PTX JIT and arch variants.

For each fat binary (container) of an object, the CUDA driver takes, in this order:

1. SASS (a cubin) it can run as is. A GPU of compute capability X.Y runs `sm_XZ` SASS with Z <= Y
   (same major, minor at most the GPU's); `sm_XYa` (arch-specific) only on exactly X.Y; `sm_XZf`
   (family-specific) on the same major with minor >= Z, which for SASS is the plain rule.
   NVIDIA's "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce Family-Specific Architecture
   Features" (https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-
   family-specific-architecture-features/) and the CUDA Programming Guide's "Compute
   Capabilities" appendix: family-specific features are available on devices of the same major
   compute capability and an equal or higher minor one; arch-specific ones only on the exact
   compute capability.
2. Else PTX it can JIT-compile: `compute_XZ` for any GPU of compute capability >= X.Z;
   `compute_XYa` only for X.Y; `compute_XZf` for the same major with minor >= Z. The driver must
   also know the PTX ISA version: a driver of CUDA release R reads ISA versions up to R's
   (`data/ptx_isa.json`, from the PTX ISA document's release history).
3. Else no image fits, and launching a kernel of that container fails with "no kernel image is
   available for execution on the device" (for PTX that is too new for the driver, the runtime's
   words are "the provided PTX was compiled with an unsupported toolchain").

An object's verdict: `no-gpu-code` without any SASS or PTX; `no-kernel-image` when no container
is covered; else `runs-sass`, or `runs-ptx-jit` when some covered container needs the JIT.
`Coverage.partial` says that only some containers are covered (libraries often build some
kernels for one architecture only, and dispatch by architecture at run time).

Against a GPU, for reports and findings: `GpuTarget` is the GPU a check is for (from `--gpu`, or
the GPUs NVML or nvidia-smi list) and the newest CUDA release its driver supports, which bounds
the PTX the driver can JIT-compile. `summarize` turns an object's `GpuCode` into what a report
shows: the SASS and PTX architectures, and the distinct architecture sets of its fat binaries,
so that partial coverage (kernels built for fewer architectures than the rest) is visible.
`gpu_findings` makes the findings of a scan: `no-kernel-image` when no fat binary of an object
covers the GPU, and a warning, `partial-kernel-image`, when only some do (libraries often build
a few kernels for one architecture and choose at run time, so that alone is not a failure).

Pure: the GPU, the driver's CUDA release and the PTX table are inputs; the fat binaries come
from `abifit.formats.fatbin`, the GPUs a probe found from `abifit.host.cudastack`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from abifit.errors import FormatError
from abifit.formats.fatbin import Arch, FatbinContainer, FatbinEntry, GpuCode, Variant
from abifit.sim.derivation import (
    CoverageReason,
    EmbeddedNoneRun,
    EmbeddedSomeRun,
    GpuCodeUnreadable,
    ImageChoice,
    KernelsMiss,
    NoGpuCodeHeld,
    NoImageFits,
    NoKernelsHeld,
    NoneRun,
    PtxCompiles,
    PtxImage,
    SassRuns,
    SomeKernelsMiss,
    SomeRun,
)
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.gputarget import (  # the target of a check, in a module of its own
    _ARCH,
    ComputeCapability,
    GpuTarget,
    Release,
    parse_release,
)

DATA = Path(__file__).parent.parent / "data"
NO_KERNEL_IMAGE = "no kernel image is available for execution on the device"
UNSUPPORTED_PTX = "the provided PTX was compiled with an unsupported toolchain"


class Verdict(Enum):
    RUNS_SASS = "runs-sass"
    RUNS_PTX_JIT = "runs-ptx-jit"
    NO_KERNEL_IMAGE = "no-kernel-image"
    NO_GPU_CODE = "no-gpu-code"


def parse_arch(text: str) -> Arch:
    """'sm_90a', 'compute_80', 'sm_120f' as an Arch; ValueError otherwise."""
    m = _ARCH.fullmatch(text.strip())
    if not m or len(m[1]) < 2:
        raise ValueError(f"invalid GPU architecture: {text!r} (expected e.g. 'sm_90a')")
    return Arch(int(m[1]), Variant(m[2]))


@functools.cache
def ptx_isa_table() -> Mapping[Release, Release]:
    """PTX ISA version -> first CUDA release whose driver JIT-compiles it (data/ptx_isa.json)."""
    raw = json.loads((DATA / "ptx_isa.json").read_text("utf-8"))
    table: dict[str, str] = raw["ptx_isa_to_cuda"]
    return {parse_release(isa): parse_release(cuda) for isa, cuda in table.items()}


# ---------------------------------------------------------------------------------------------
# The rules


def _capability(arch: Arch) -> ComputeCapability:
    return ComputeCapability(arch.major, arch.minor)


def sass_runs_on(arch: Arch, gpu: ComputeCapability) -> bool:
    """Whether SASS built for `arch` runs on `gpu` as it is."""
    if arch.major != gpu.major:
        return False
    if arch.variant is Variant.ARCH_SPECIFIC:
        return arch.minor == gpu.minor
    return arch.minor <= gpu.minor


def ptx_compiles_for(arch: Arch, gpu: ComputeCapability) -> bool:
    """Whether PTX for the virtual `arch` can be JIT-compiled for `gpu` (driver aside)."""
    if arch.variant is Variant.ARCH_SPECIFIC:
        return _capability(arch) == gpu
    if arch.variant is Variant.FAMILY:
        return arch.major == gpu.major and arch.minor <= gpu.minor
    return _capability(arch) <= gpu


def driver_reads_ptx(
    isa: Release, driver_cuda: Release | None, table: Mapping[Release, Release] | None = None
) -> bool:
    """Whether a driver of CUDA release `driver_cuda` knows PTX ISA `isa` (True when unknown).

    An ISA version newer than every row of the table needs a driver newer than every row.
    """
    if driver_cuda is None:
        return True
    table = ptx_isa_table() if table is None else table
    needed = table.get(isa)
    if needed is None:
        newest_isa = max(table)
        return isa < newest_isa or driver_cuda > table[newest_isa]
    return driver_cuda >= needed


# ---------------------------------------------------------------------------------------------
# Coverage


@dataclass(frozen=True, slots=True)
class ContainerCoverage:
    """What the driver takes from one container for the GPU: the entry and why (a record of
    `sim.derivation`, which `report.gpu` words)."""

    container: FatbinContainer
    verdict: Verdict
    entry: FatbinEntry | None
    reason: ImageChoice
    error: str | None = None

    @property
    def covered(self) -> bool:
        return self.verdict in (Verdict.RUNS_SASS, Verdict.RUNS_PTX_JIT)


@dataclass(frozen=True, slots=True)
class Coverage:
    """Whether one object's kernels can run on a GPU, container by container, and why."""

    gpu: ComputeCapability
    driver_cuda: Release | None
    verdict: Verdict
    containers: tuple[ContainerCoverage, ...]
    reason: CoverageReason
    embedded: tuple[ContainerCoverage, ...] = ()

    @property
    def partial(self) -> bool:
        """Some containers are covered and some are not."""
        covered = [c.covered for c in self.containers]
        return any(covered) and not all(covered)

    @property
    def uncovered(self) -> tuple[ContainerCoverage, ...]:
        return tuple(c for c in self.containers if not c.covered)


def coverage(
    code: GpuCode,
    gpu: ComputeCapability,
    driver_cuda: Release | None = None,
    table: Mapping[Release, Release] | None = None,
) -> Coverage:
    """Which of `code`'s images a GPU of compute capability `gpu` would run, and the verdict.

    `driver_cuda` is the newest CUDA release the driver supports (None: assume it reads any
    PTX). Containers without SASS or PTX (an empty device-link container) are left out.
    """
    table = ptx_isa_table() if table is None else table
    choices = tuple(choose_image(c, gpu, driver_cuda, table) for c in code.containers
                    if _has_kernels(c))
    if not choices and code.embedded:
        return _embedded_coverage(code, gpu, driver_cuda, table)
    verdict = _object_verdict(choices)
    return Coverage(gpu, driver_cuda, verdict, choices, _object_reason(code, gpu, verdict, choices))


def _count(choices: Iterable[ContainerCoverage]) -> int:
    """How many fat binaries `choices` stand for: a repeated container counts each time."""
    return sum(c.container.count for c in choices)


def _has_kernels(container: FatbinContainer) -> bool:
    """A container with images that may hold kernels (not one known to hold none)."""
    return container.kernels is not False and _has_images(container)


def _has_images(container: FatbinContainer) -> bool:
    return any(e.is_sass or e.is_ptx for e in container.entries)


def _embedded_coverage(code: GpuCode, gpu: ComputeCapability, driver_cuda: Release | None,
                       table: Mapping[Release, Release]) -> Coverage:
    """Fat binaries a library keeps in its data and loads itself, choosing by the GPU: it runs
    when any of them has code for the GPU."""
    choices = tuple(choose_image(c, gpu, driver_cuda, table) for c in code.embedded
                    if _has_images(c))
    covered = [c for c in choices if c.covered]
    found = _count(choices)
    sections = tuple(sorted({c.section for c in code.embedded}))
    sass = _names({a for c in code.embedded for a in c.sass_archs})
    ptx = _names({a for c in code.embedded for a in c.ptx_archs}, ptx=True)
    if not covered:
        first = choices[0] if choices else None
        error = first.error if first else NO_KERNEL_IMAGE
        return Coverage(gpu, driver_cuda, Verdict.NO_KERNEL_IMAGE, (), EmbeddedNoneRun(
            str(gpu), found, sections, sass, ptx, error), choices)
    verdict = (Verdict.RUNS_SASS if any(c.verdict is Verdict.RUNS_SASS for c in covered)
               else Verdict.RUNS_PTX_JIT)
    return Coverage(gpu, driver_cuda, verdict, (), EmbeddedSomeRun(
        str(gpu), _count(covered), found, sections, sass, ptx), choices)


def choose_image(
    container: FatbinContainer,
    gpu: ComputeCapability,
    driver_cuda: Release | None = None,
    table: Mapping[Release, Release] | None = None,
) -> ContainerCoverage:
    """The entry the driver takes from `container` for `gpu`: the best SASS, else JIT-able PTX."""
    sass = [e for e in container.entries if e.is_sass and sass_runs_on(e.arch, gpu)]
    if sass:
        best = max(sass, key=_preference)
        return ContainerCoverage(container, Verdict.RUNS_SASS, best,
                                 SassRuns(str(best.arch), str(gpu)))
    ptx = [e for e in container.entries if e.is_ptx and ptx_compiles_for(e.arch, gpu)]
    readable = [e for e in ptx if driver_reads_ptx(e.code_version, driver_cuda, table)]
    if readable:
        best = max(readable, key=_preference)
        return ContainerCoverage(container, Verdict.RUNS_PTX_JIT, best,
                                 PtxCompiles(_ptx_image(best), str(gpu)))
    too_new = bool(ptx) and driver_cuda is not None
    return ContainerCoverage(container, Verdict.NO_KERNEL_IMAGE, None,
                             _missing_reason(container, gpu, too_new, driver_cuda),
                             UNSUPPORTED_PTX if too_new else NO_KERNEL_IMAGE)


def _preference(entry: FatbinEntry) -> tuple[int, int]:
    """Newest SM first; at one SM, the arch-specific image over the family and plain ones."""
    rank = {Variant.ARCH_SPECIFIC: 2, Variant.FAMILY: 1, Variant.PLAIN: 0}
    return entry.arch.sm, rank[entry.arch.variant]


def _ptx_image(entry: FatbinEntry) -> PtxImage:
    return PtxImage(entry.arch.virtual, _dotted(entry.code_version))


def _dotted(version: Release) -> str:
    return f"{version[0]}.{version[1]}"


def _missing_reason(
    container: FatbinContainer, gpu: ComputeCapability, too_new: bool,
    driver_cuda: Release | None,
) -> NoImageFits:
    ptx = tuple(sorted((_ptx_image(e) for e in container.entries if e.is_ptx),
                       key=lambda p: (p.virtual, p.isa)))
    newer = _dotted(driver_cuda) if too_new and driver_cuda is not None else None
    return NoImageFits(str(gpu), _names(container.sass_archs), ptx, newer)


def _names(archs: Iterable[Arch], ptx: bool = False) -> tuple[str, ...]:
    """The architectures' names (`sm_90a`; with `ptx`, of their PTX: `compute_90a`), by SM."""
    ordered = sorted(archs, key=lambda a: (a.sm, a.variant.value))
    return tuple(a.virtual if ptx else str(a) for a in ordered)


def _object_verdict(choices: tuple[ContainerCoverage, ...]) -> Verdict:
    if not choices:
        return Verdict.NO_GPU_CODE
    covered = [c for c in choices if c.covered]
    if not covered:
        return Verdict.NO_KERNEL_IMAGE
    if any(c.verdict is Verdict.RUNS_PTX_JIT for c in covered):
        return Verdict.RUNS_PTX_JIT
    return Verdict.RUNS_SASS


def _object_reason(
    code: GpuCode, gpu: ComputeCapability, verdict: Verdict,
    choices: tuple[ContainerCoverage, ...],
) -> CoverageReason:
    if verdict is Verdict.NO_GPU_CODE:
        if any(_has_images(c) for c in code.containers):
            return NoKernelsHeld()
        return NoGpuCodeHeld()
    if verdict is Verdict.NO_KERNEL_IMAGE:
        first = choices[0]
        alike = _count(c for c in choices if c.reason == first.reason)
        return NoneRun(str(gpu), first.reason, alike, _count(choices), first.error)
    return SomeRun(str(gpu), _count(c for c in choices if c.covered), _count(choices),
                   verdict is not Verdict.RUNS_SASS, _names(code.sass_archs),
                   _names(code.ptx_archs, ptx=True))


# ---------------------------------------------------------------------------------------------
# GPU code against a GPU: targets, summaries, findings


@dataclass(frozen=True, slots=True)
class ContainerGroup:
    """Fat binaries of an object that carry the same architectures: how many, which."""

    count: int
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CodeSummary:
    """An object's GPU code as a report shows it. `groups` leave out the containers known to
    hold no kernel (`without_kernels` counts them); `embedded` summarizes the fat binaries
    found in data sections, when they were looked for."""

    containers: int
    entries: int
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    groups: tuple[ContainerGroup, ...]
    notes: tuple[str, ...] = ()
    without_kernels: int = 0
    embedded: EmbeddedSummary | None = None


@dataclass(frozen=True, slots=True)
class EmbeddedSummary:
    """Fat binaries a library keeps in data sections: how many, where, which architectures."""

    containers: int
    sections: tuple[str, ...]
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ObjectCoverage:
    """Whether an object's kernels run on the target GPU: the verdict, the fat binaries that do
    and do not cover it, the derivation, and the first uncovered fat binary's reason (records
    of `sim.derivation`, which `report.gpu` words)."""

    gpu: str
    driver_cuda: str | None
    verdict: str
    covered: int
    containers: int
    reason: CoverageReason
    uncovered_reason: ImageChoice | None
    error: str | None
    embedded: bool = False  # the fat binaries counted are embedded ones the library chooses from

    @property
    def partial(self) -> bool:
        return not self.embedded and 0 < self.covered < self.containers


def summarize(code: GpuCode) -> CodeSummary:
    """The architectures of `code`, overall and grouped by fat binary (largest group first)."""
    sets: Counter[tuple[tuple[str, ...], tuple[str, ...]]] = Counter()
    for c in code.containers:
        if (c.sass_archs or c.ptx_archs) and c.kernels is not False:
            sets[_names(c.sass_archs), _names(c.ptx_archs, ptx=True)] += c.count
    groups = tuple(ContainerGroup(n, sass, ptx) for (sass, ptx), n in
                   sorted(sets.items(), key=lambda item: (-item[1], item[0])))
    embedded = None
    if code.embedded:
        embedded = EmbeddedSummary(
            sum(c.count for c in code.embedded), tuple(sorted({c.section for c in code.embedded})),
            _names({a for c in code.embedded for a in c.sass_archs}),
            _names({a for c in code.embedded for a in c.ptx_archs}, ptx=True))
    return CodeSummary(
        containers=code.fat_binaries,
        entries=sum(c.count * sum(1 for e in c.entries if e.is_sass or e.is_ptx)
                    for c in code.containers),
        sass=_names(code.sass_archs),
        ptx=_names(code.ptx_archs, ptx=True),
        groups=groups,
        notes=code.notes,
        without_kernels=sum(c.count for c in code.containers if c.kernels is False),
        embedded=embedded,
    )


def object_coverage(code: GpuCode, target: GpuTarget) -> ObjectCoverage:
    """The verdict for one object's code on the target GPU."""
    found: Coverage = coverage(code, target.capability, target.driver_cuda)
    pool = found.containers or found.embedded
    first = next((c for c in pool if not c.covered), None)
    return ObjectCoverage(
        gpu=str(target.capability), driver_cuda=target.driver_release,
        verdict=found.verdict.value,
        covered=_count(c for c in pool if c.covered),
        containers=_count(pool), reason=found.reason,
        uncovered_reason=first.reason if first else None,
        error=first.error if first else None,
        embedded=not found.containers and bool(found.embedded),
    )


def coverage_finding(name: str, path: str, result: ObjectCoverage, target: GpuTarget,
                     module: str | None = None) -> Finding | None:
    """A finding for an object whose kernels miss the GPU (all: `no-kernel-image`; some:
    `partial-kernel-image`), or None."""
    where = f"{target.arch} ({target.source})"
    if result.verdict == Verdict.NO_KERNEL_IMAGE.value:
        return Finding(
            kind=FindingKind.NO_KERNEL_IMAGE, object=path, module=module,
            message=f"no kernel of {name} runs on the GPU {where}: "
                    f"'{result.error or NO_KERNEL_IMAGE}'",
            derivation=(KernelsMiss(result.reason),),
            hint=f"install a build of it made with code for {target.arch} (SASS for "
                 f"sm_{target.capability.major}x, or PTX it can JIT-compile), or build it from "
                 f"source with TORCH_CUDA_ARCH_LIST / -gencode for {target.capability}",
        )
    if result.partial:
        return Finding(
            kind=FindingKind.PARTIAL_KERNEL_IMAGE, object=path, module=module,
            message=f"{result.containers - result.covered} of {result.containers} fat binaries "
                    f"of {name} carry no code for the GPU {where}",
            derivation=(SomeKernelsMiss(result.uncovered_reason,
                                        result.error or NO_KERNEL_IMAGE),),
        )
    return None


@dataclass(frozen=True, slots=True)
class CoveredObject:
    """One object with GPU code in a scan: its verdict, or why its fat binaries are unreadable."""

    name: str
    path: str
    coverage: ObjectCoverage | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class GpuCheck:
    """The objects of a scan that carry GPU code, against one GPU."""

    target: GpuTarget
    objects: tuple[CoveredObject, ...]
    findings: tuple[Finding, ...]
    warnings: tuple[Finding, ...]


def check_gpu_code(
    codes: Iterable[tuple[str, str, GpuCode | FormatError]], target: GpuTarget
) -> GpuCheck:
    """Verdicts and findings for (name, path, code or the error reading it) on `target`:
    `no-kernel-image` findings; `partial-kernel-image` and `unreadable-gpu-code` warnings."""
    return gpu_check(target, ((name, path, code if isinstance(code, FormatError)
                               else object_coverage(code, target)) for name, path, code in codes))


def gpu_check(
    target: GpuTarget, verdicts: Iterable[tuple[str, str, ObjectCoverage | FormatError]]
) -> GpuCheck:
    """`check_gpu_code` from each object's verdict on `target` (`object_coverage`), or the
    error reading its code: what a cache keeps of the objects' code."""
    objects: list[CoveredObject] = []
    findings: list[Finding] = []
    warnings: list[Finding] = []
    for name, path, verdict in verdicts:
        if isinstance(verdict, FormatError):
            objects.append(CoveredObject(name, path, None, str(verdict)))
            warnings.append(Finding(
                kind=FindingKind.UNREADABLE_GPU_CODE, object=path, message=str(verdict),
                derivation=(GpuCodeUnreadable(name),)))
            continue
        objects.append(CoveredObject(name, path, verdict))
        found = coverage_finding(name, path, verdict, target, module=name)
        if found is not None:
            (findings if found.kind == FindingKind.NO_KERNEL_IMAGE else warnings).append(found)
    return GpuCheck(target, tuple(objects), tuple(findings), tuple(warnings))


# ---------------------------------------------------------------------------------------------
# The GPUs a probe found, as targets


