"""What a GPU check is checked for: a GPU's compute capability, the newest CUDA its driver
supports (`GpuTarget`), and their parsing from `--gpu` and from a probe's GPU list.

Apart from `abifit.sim.gpu` (which re-exports them) so that what a warm `doctor` needs to find
its kept run (the GPUs are part of its key) imports neither the fat-binary reader nor the
findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CUDA probes (host.cudastack) are only named in gpu_targets' signature
    from abifit.host.cudastack import CudaVersion, GpuList

__all__ = ["ComputeCapability", "GpuTarget", "Release", "gpu_targets", "parse_compute_capability",
           "parse_gpu_option", "parse_release"]

Release = tuple[int, int]  # a CUDA release or PTX ISA version: (13, 0)


@dataclass(frozen=True, slots=True, order=True)
class ComputeCapability:
    """A GPU's compute capability, such as 9.0 (H100) or 12.0 (RTX 5090)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


_CC = re.compile(r"(\d+)\.(\d)")
_ARCH = re.compile(r"(?:sm|compute|lto)_(\d+)([af]?)")
_RELEASE = re.compile(r"(\d+)\.(\d+)")


def parse_compute_capability(text: str) -> ComputeCapability:
    """'9.0', '12.0', 'sm_90' or 'sm_90a' (a GPU has no variant: 9.0); ValueError otherwise."""
    cleaned = text.strip()
    if m := _CC.fullmatch(cleaned):
        return ComputeCapability(int(m[1]), int(m[2]))
    if (m := _ARCH.fullmatch(cleaned)) and len(m[1]) >= 2:
        sm = int(m[1])
        return ComputeCapability(sm // 10, sm % 10)
    raise ValueError(f"invalid compute capability: {text!r} (expected e.g. '9.0' or 'sm_90')")


def parse_release(text: str) -> Release:
    """A CUDA release or PTX ISA version: '13.0' -> (13, 0); ValueError otherwise."""
    m = _RELEASE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"invalid version: {text!r} (expected e.g. '12.4')")
    return int(m[1]), int(m[2])


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
