"""`abifit cuda` rendered: the toolkits, nvcc, the driver and the GPUs, the CUDA runtime
libraries of the environment, the problems, then one summary line; `--json` prints the same
report as one versioned document."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum

from abifit.engines.cuda import CudaReport
from abifit.host.cudastack import CudaStack, Toolkit
from abifit.report.findings import finding_json, problem_blocks
from abifit.report.gpu import gpu_check_json
from abifit.report.json import JsonObject, schema_version


def cuda_json(report: CudaReport) -> JsonObject:
    """The `--json` document of `abifit cuda`."""
    stack = report.stack
    return {
        "schema_version": schema_version("cuda"),
        "command": "cuda",
        "verdict": "problems" if report.findings else "ok",
        "python": {"executable": report.python, "version": report.python_version},
        "toolkits": [_toolkit_json(t) for t in stack.toolkits],
        "default_link": stack.default_link,
        "cuda_home": stack.cuda_home,
        "cuda_path": stack.cuda_path,
        "nvcc": None if stack.nvcc is None else {
            "path": stack.nvcc.path, "real_path": stack.nvcc.real_path,
            "version": _value(stack.nvcc.version), "root": stack.nvcc.root},
        "driver": _driver_json(stack),
        "gpus": _gpus_json(stack),
        "runtime_sonames": [{**asdict(u), "needed_by": list(u.needed_by),
                             "provided_by": list(u.provided_by)} for u in report.sonames],
        "cuda_majors": {"needed": list(report.needed_majors),
                        "provided": list(report.provided_majors)},
        "findings": [finding_json(f) for f in report.findings],
        "warnings": [finding_json(f) for f in report.warnings],
        "gpu": {"checked": [gpu_check_json(c) for c in report.gpu], "reason": report.gpu_reason},
    }


def _value(v: object) -> object:
    return v.value if isinstance(v, Enum) else str(v) if v is not None else None


def _toolkit_json(t: Toolkit) -> JsonObject:
    return {
        "root": t.root, "names": list(t.names), "origins": [o.value for o in t.origins],
        "version": _value(t.version), "version_source": _value(t.version_source),
        "lib_dirs": [{"path": d.path, "real_path": d.real_path, "aliases": list(d.aliases),
                      "sonames": list(d.sonames), "searched": d.search.searched,
                      "via": [v.value for v in d.search.via],
                      "in_ld_so_conf": d.search.in_ld_so_conf} for d in t.lib_dirs],
    }


def _driver_json(stack: CudaStack) -> JsonObject:
    driver = stack.driver
    return {"version": driver.version, "version_source": _value(driver.version_source),
            "kernel_module": _value(driver.kernel_module),
            "libcuda_path": driver.libcuda_path,
            "cuda_version": _value(driver.cuda_version),
            "cuda_version_source": _value(driver.cuda_version_source),
            "reason": driver.reason}


def _gpus_json(stack: CudaStack) -> JsonObject:
    return {"source": _value(stack.gpus.source), "reason": stack.gpus.reason,
            "devices": [{"index": g.index, "name": g.name,
                         "compute_capability": f"{g.compute_capability[0]}."
                         f"{g.compute_capability[1]}" if g.compute_capability else None,
                         "arch": g.arch, "driver_version": g.driver_version}
                        for g in stack.gpus.gpus]}


def cuda_text(report: CudaReport) -> str:
    """The text rendering of `abifit cuda`."""
    blocks = ["\n".join(_stack_text(report.stack)), "\n".join(_sonames_text(report))]
    blocks += problem_blocks(report.findings, report.warnings, report.gpu, report.gpu_reason)
    blocks.append(f"{report.python} ({report.python_version}): "
                  + (f"{len(report.findings)} CUDA problem(s)" if report.findings
                     else "no CUDA problems found"))
    return "\n\n".join(blocks) + "\n"


def _stack_text(stack: CudaStack) -> list[str]:
    """The toolkits, nvcc, the driver and the GPUs."""
    head = ["CUDA toolkits" + (f" (/usr/local/cuda -> {stack.default_link})"
                               if stack.default_link else "")]
    head += [line for t in stack.toolkits for line in _toolkit_text(t)]
    if not stack.toolkits:
        head.append("  none found")
    if stack.nvcc is not None:
        head.append(f"nvcc       {stack.nvcc.path} (CUDA {stack.nvcc.version or '?'})")
    return head + _driver_text(stack) + _gpus_text(stack)


def _toolkit_text(t: Toolkit) -> list[str]:
    version = f"{t.version} ({t.version_source.value})" if t.version and t.version_source \
        else "version unknown"
    names = ", ".join(n for n in t.names if n != t.root)
    lines = [f"  {t.root}  CUDA {version}" + (f"  [also {names}]" if names else "")
             + f"  via {', '.join(o.value for o in t.origins)}"]
    for d in t.lib_dirs:
        how = ("searched (" + ", ".join(v.value for v in d.search.via) + ")" if d.search.searched
               else "NOT searched" + (" (in ld.so.conf, but ldconfig has not run)"
                                      if d.search.in_ld_so_conf else ""))
        lines.append(f"    {d.path}: {len(d.sonames)} libraries, {how}")
    return lines


def _driver_text(stack: CudaStack) -> list[str]:
    d = stack.driver
    if d.version is None:
        return [f"driver     none found ({d.reason or 'no NVIDIA driver'})"]
    module = f", {d.kernel_module.value} kernel module" if d.kernel_module else ""
    source = f" ({d.version_source.value}{module})" if d.version_source else ""
    cuda = (f"; supports CUDA up to {d.cuda_version} ({d.cuda_version_source.value})"
            if d.cuda_version and d.cuda_version_source else
            f"; newest CUDA unknown ({d.reason})" if d.reason else "")
    return [f"driver     {d.version}{source}{cuda}"]


def _gpus_text(stack: CudaStack) -> list[str]:
    gpus = stack.gpus
    if not gpus.gpus:
        return [f"GPUs       none found ({gpus.reason or 'no GPU'})"]
    source = gpus.source.value if gpus.source else "?"
    return [f"GPUs       {g.index}: {g.name}, compute capability "
            + (f"{g.compute_capability[0]}.{g.compute_capability[1]} ({g.arch})"
               if g.compute_capability else "unknown") + f"  [{source}]"
            for g in gpus.gpus]


def _sonames_text(report: CudaReport) -> list[str]:
    if not report.sonames:
        return ["CUDA runtime libraries in the environment: none"]
    lines = [f"CUDA runtime libraries in the environment (needed: CUDA "
             f"{'/'.join(map(str, report.needed_majors)) or '-'}; shipped: CUDA "
             f"{'/'.join(map(str, report.provided_majors)) or '-'})"]
    for u in report.sonames:
        needers = ", ".join(u.needed_by[:3]) + (f" and {len(u.needed_by) - 3} more"
                                                if len(u.needed_by) > 3 else "")
        lines.append(f"  CUDA {u.major:<3} {u.soname:<24} shipped by "
                     f"{', '.join(u.provided_by) or '-'}; needed by {needers or '-'}")
    return lines
