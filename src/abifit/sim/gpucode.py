"""The GPU code of objects against a GPU: what to compare with, per-object summaries, findings.

`GpuTarget` is the GPU a check is for (from `--gpu`, or the GPUs NVML or nvidia-smi list) and the
newest CUDA release its driver supports, which bounds the PTX the driver can JIT-compile.
`summarize` turns an object's `GpuCode` into what a report shows: the SASS and PTX architectures,
and the distinct architecture sets of its fat binaries, so that partial coverage (kernels built
for fewer architectures than the rest) is visible. `gpu_findings` makes the findings of a scan:
`no-kernel-image` when no fat binary of an object covers the GPU, and a warning,
`partial-kernel-image`, when only some do (libraries often build a few kernels for one
architecture and choose at run time, so that alone is not a failure).

Pure except `detect_targets` and `read_gpu_code`, the two edges (host probes, file bytes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from abifit.errors import FormatError
from abifit.formats.fatbin import (
    Arch,
    GpuCode,
)
from abifit.host.cudastack import CudaVersion, GpuList
from abifit.sim.findings import Finding, FindingKind
from abifit.sim.gpu import (
    NO_KERNEL_IMAGE,
    ComputeCapability,
    Coverage,
    Release,
    Verdict,
    coverage,
    parse_compute_capability,
    parse_release,
)


@dataclass(frozen=True, slots=True)
class GpuTarget:
    """The GPU to check against, the newest CUDA its driver supports (None: unknown, any PTX is
    assumed readable) and where both came from."""

    capability: ComputeCapability
    driver_cuda: Release | None
    source: str

    @property
    def arch(self) -> str:
        return f"sm_{self.capability.major}{self.capability.minor}"

    @property
    def driver_release(self) -> str | None:
        """The driver's CUDA release as written ('12.4'), when known."""
        return f"{self.driver_cuda[0]}.{self.driver_cuda[1]}" if self.driver_cuda else None


def parse_gpu_option(text: str, driver_cuda: Release | None = None) -> GpuTarget:
    """`--gpu sm_120`, `--gpu 9.0`; `--gpu 9.0@12.4` also sets the driver's CUDA release.
    ValueError for anything else."""
    gpu, _, driver = text.partition("@")
    cuda = parse_release(driver) if driver else driver_cuda
    return GpuTarget(parse_compute_capability(gpu), cuda, "--gpu")


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
    and do not cover it, the derivation, and the first uncovered fat binary's reason."""

    gpu: str
    driver_cuda: str | None
    verdict: str
    covered: int
    containers: int
    reason: str
    uncovered_reason: str | None
    error: str | None
    embedded: bool = False  # the fat binaries counted are embedded ones the library chooses from

    @property
    def partial(self) -> bool:
        return not self.embedded and 0 < self.covered < self.containers


def _arch_names(archs: Iterable[Arch], ptx: bool = False) -> tuple[str, ...]:
    ordered = sorted(archs, key=lambda a: (a.sm, a.variant.value))
    return tuple(a.virtual if ptx else str(a) for a in ordered)


def summarize(code: GpuCode) -> CodeSummary:
    """The architectures of `code`, overall and grouped by fat binary (largest group first)."""
    sets = Counter((_arch_names(c.sass_archs), _arch_names(c.ptx_archs, ptx=True))
                   for c in code.containers
                   if (c.sass_archs or c.ptx_archs) and c.kernels is not False)
    groups = tuple(ContainerGroup(n, sass, ptx) for (sass, ptx), n in
                   sorted(sets.items(), key=lambda item: (-item[1], item[0])))
    embedded = None
    if code.embedded:
        embedded = EmbeddedSummary(
            len(code.embedded), tuple(sorted({c.section for c in code.embedded})),
            _arch_names({a for c in code.embedded for a in c.sass_archs}),
            _arch_names({a for c in code.embedded for a in c.ptx_archs}, ptx=True))
    return CodeSummary(
        containers=len(code.containers),
        entries=sum(1 for e in code.entries if e.is_sass or e.is_ptx),
        sass=_arch_names(code.sass_archs),
        ptx=_arch_names(code.ptx_archs, ptx=True),
        groups=groups,
        notes=code.notes,
        without_kernels=sum(1 for c in code.containers if c.kernels is False),
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
        covered=sum(1 for c in pool if c.covered),
        containers=len(pool), reason=found.reason,
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
            explanation=result.reason,
            hint=f"install a build of it made with code for {target.arch} (SASS for "
                 f"sm_{target.capability.major}x, or PTX it can JIT-compile), or build it from "
                 f"source with TORCH_CUDA_ARCH_LIST / -gencode for {target.capability}",
        )
    if result.partial:
        return Finding(
            kind=FindingKind.PARTIAL_KERNEL_IMAGE, object=path, module=module,
            message=f"{result.containers - result.covered} of {result.containers} fat binaries "
                    f"of {name} carry no code for the GPU {where}",
            explanation=(f"Because {result.uncovered_reason}, a kernel of those fat binaries "
                         f"fails with '{result.error or NO_KERNEL_IMAGE}' if it is launched; "
                         "libraries often build such kernels for one architecture only and "
                         "launch them only there, so this is a warning, not a failure."),
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
    objects: list[CoveredObject] = []
    findings: list[Finding] = []
    warnings: list[Finding] = []
    for name, path, code in codes:
        if isinstance(code, FormatError):
            objects.append(CoveredObject(name, path, None, str(code)))
            warnings.append(Finding(
                kind=FindingKind.UNREADABLE_GPU_CODE, object=path, message=str(code),
                explanation=f"The fat binaries of {name} could not be read, so whether its "
                            "kernels run on the GPU is unknown."))
            continue
        result = object_coverage(code, target)
        objects.append(CoveredObject(name, path, result))
        found = coverage_finding(name, path, result, target, module=name)
        if found is not None:
            (findings if found.kind == FindingKind.NO_KERNEL_IMAGE else warnings).append(found)
    return GpuCheck(target, tuple(objects), tuple(findings), tuple(warnings))


# ---------------------------------------------------------------------------------------------
# The GPUs a probe found, as targets


def gpu_targets(gpus: GpuList, driver_cuda: CudaVersion | None) -> tuple[GpuTarget, ...]:
    """One target per distinct compute capability among `gpus`."""
    cuda = (driver_cuda.major, driver_cuda.minor) if driver_cuda else None
    source = gpus.source.value if gpus.source else "GPU query"
    targets: dict[tuple[int, int], GpuTarget] = {}
    for gpu in gpus.gpus:
        cc = gpu.compute_capability
        if cc is not None and cc not in targets:
            targets[cc] = GpuTarget(ComputeCapability(*cc), cuda, f"{source}: {gpu.name}")
    return tuple(targets.values())
