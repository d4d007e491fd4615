"""The GPUs a command checks against: this machine's, found by the host probes."""

from __future__ import annotations

from collections.abc import Mapping

from abifit.host.cudastack import probe_driver, probe_gpus
from abifit.sim.gputarget import GpuTarget, gpu_targets


def detect_targets(env: Mapping[str, str]) -> tuple[tuple[GpuTarget, ...], str | None]:
    """This machine's GPUs as targets, with the driver's CUDA release; an empty tuple and the
    reason when none is found."""
    gpus = probe_gpus(env)
    if not gpus.gpus:
        return (), gpus.reason or "no GPU found"
    targets = gpu_targets(gpus, probe_driver(env, gpus).cuda_version)
    return targets, None if targets else "the GPUs found report no compute capability"
