"""GPU targets and the GPU code checked against them, as JSON and as one text line; the words
of the GPU check's reasons (`coverage_reason`, `image_choice`: why an object's kernels run on a
GPU, or not, from the records of `sim.derivation`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.report.json import JsonObject
from abifit.sim.derivation import (
    CoverageReason,
    EmbeddedNoneRun,
    EmbeddedSomeRun,
    ImageChoice,
    NoGpuCodeHeld,
    NoImageFits,
    NoKernelsHeld,
    NoneRun,
    PtxCompiles,
    PtxImage,
    SassRuns,
    SomeRun,
)

if TYPE_CHECKING:
    from abifit.sim.gpu import GpuCheck, ObjectCoverage
    from abifit.sim.gputarget import GpuTarget


def target_json(target: GpuTarget | None) -> JsonObject | None:
    if target is None:
        return None
    return {"compute_capability": str(target.capability), "arch": target.arch,
            "driver_cuda": target.driver_release, "source": target.source}


def gpu_check_json(check: GpuCheck) -> JsonObject:
    return {"target": target_json(check.target),
            "objects": [{"name": o.name, "path": o.path, "error": o.error,
                         "coverage": coverage_json(o.coverage) if o.coverage else None}
                        for o in check.objects]}


def coverage_json(coverage: ObjectCoverage) -> JsonObject:
    """An object's verdict on a GPU: its fields, the reasons in words where they stand."""
    doc: JsonObject = asdict(coverage)
    doc["reason"] = coverage_reason(coverage.reason)
    doc["uncovered_reason"] = (image_choice(coverage.uncovered_reason)
                               if coverage.uncovered_reason is not None else None)
    return doc


def gpu_check_line(check: GpuCheck) -> str:
    verdicts = Counter(o.coverage.verdict if o.coverage else "unreadable" for o in check.objects)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
    return (f"GPU {check.target.capability} ({check.target.arch}, {check.target.source}): "
            f"{len(check.objects)} object(s) with GPU code" + (f": {counts}" if counts else ""))


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "none"


def _ptx(image: PtxImage) -> str:
    return f"{image.virtual} (ISA {image.isa})"


def _no_image_fits(c: NoImageFits) -> str:
    ptx = ", ".join(map(_ptx, c.ptx)) or "none"
    if c.driver_cuda is not None:
        return (f"there is no SASS for {c.gpu} (SASS: {_listed(c.sass)}) and the PTX that fits "
                f"it ({ptx}) is newer than a CUDA {c.driver_cuda} driver reads")
    return (f"there is no SASS for {c.gpu} (SASS: {_listed(c.sass)}) and no PTX that can be "
            f"JIT-compiled for it (PTX: {ptx})")


def image_choice(c: ImageChoice) -> str:
    """Why one fat binary's code runs on a GPU, or none does: a clause."""
    match c:
        case SassRuns():
            return f"{c.arch} SASS runs on {c.gpu}"
        case PtxCompiles():
            return f"{_ptx(c.ptx)} PTX is JIT-compiled for {c.gpu}"
        case NoImageFits():
            return _no_image_fits(c)


def _held(sass: tuple[str, ...], ptx: tuple[str, ...]) -> str:
    return f"SASS {_listed(sass)}; PTX {_listed(ptx)}"


def _none_run(r: NoneRun) -> str:
    others = f" (in {r.alike} of {r.total} fat binaries)" if r.total > 1 else ""
    return (f"Because the GPU is {r.gpu} and {image_choice(r.first)}{others}, launching a kernel "
            f"fails: {r.error}")


def _some_run(r: SomeRun) -> str:
    how = "SASS or PTX JIT-compiled by the driver" if r.jit else "SASS"
    part = (f"{r.covered} of {r.total} fat binaries have" if r.covered < r.total
            else "every fat binary has")
    return f"{part} code for {r.gpu} ({how}; the object holds {_held(r.sass, r.ptx)})"


def _embedded(count: int, sections: tuple[str, ...]) -> str:
    return (f"its kernels are in {count} fat binaries embedded in {', '.join(sections)}, which "
            "the library loads itself")


def coverage_reason(r: CoverageReason) -> str:
    """Why an object's kernels run on a GPU, or not: the GPU check's verdict in words."""
    match r:
        case NoKernelsHeld():
            return "its fat binaries hold no kernels (registration code only)"
        case NoGpuCodeHeld():
            return "the object carries no SASS and no PTX"
        case NoneRun():
            return _none_run(r)
        case SomeRun():
            return _some_run(r)
        case EmbeddedNoneRun():
            return (f"Because the GPU is {r.gpu} and none of the fat binaries has code for it "
                    f"({_embedded(r.count, r.sections)}; {_held(r.sass, r.ptx)}), launching a "
                    f"kernel fails: {r.error}")
        case EmbeddedSomeRun():
            return (f"{r.covered} of {r.count} fat binaries have code for {r.gpu} "
                    f"({_embedded(r.count, r.sections)}, choosing by the GPU; "
                    f"{_held(r.sass, r.ptx)})")
