"""GPU targets and the GPU code checked against them, as JSON and as one text line."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.report.json import JsonObject

if TYPE_CHECKING:
    from abifit.sim.gpu import GpuCheck, GpuTarget


def target_json(target: GpuTarget | None) -> JsonObject | None:
    if target is None:
        return None
    return {"compute_capability": str(target.capability), "arch": target.arch,
            "driver_cuda": target.driver_release, "source": target.source}


def gpu_check_json(check: GpuCheck) -> JsonObject:
    return {"target": target_json(check.target),
            "objects": [{"name": o.name, "path": o.path, "error": o.error,
                         "coverage": asdict(o.coverage) if o.coverage else None}
                        for o in check.objects]}


def gpu_check_line(check: GpuCheck) -> str:
    verdicts = Counter(o.coverage.verdict if o.coverage else "unreadable" for o in check.objects)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
    return (f"GPU {check.target.capability} ({check.target.arch}, {check.target.source}): "
            f"{len(check.objects)} object(s) with GPU code" + (f": {counts}" if counts else ""))
