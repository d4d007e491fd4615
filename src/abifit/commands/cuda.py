"""`abifit cuda`: the options the command line and the API give, run by
`abifit.engines.cuda`, and the library function `abifit.cuda`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from abifit.commands.contexts import (
    Progress,
    Session,
    cache_root,
    option_gpus,
    path_text,
    run_as_library,
)
from abifit.engines.cuda import CudaReport, cuda_report


@dataclass(frozen=True)
class CudaOptions:
    """What `abifit cuda` is asked: the environment's interpreter (`python`), the GPU to
    compare with instead of this machine's (`gpu`), and the cache."""

    python: str | None = None
    gpu: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False


def run_cuda(options: CudaOptions, session: Session) -> CudaReport:
    """`abifit cuda` as the command line and `abifit.cuda` run it."""
    from abifit.host.environment import default_interpreter

    return cuda_report(options.python or default_interpreter(session.environ),
                       environ=session.environ,
                       cache_dir=None if options.no_cache else cache_root(options.cache_dir,
                                                                          session.environ),
                       progress=session.progress,
                       gpus=option_gpus(options.gpu, session.environ) if options.gpu else None)


def cuda(python: str | None = None, *, gpu: str | None = None,
         cache_dir: str | Path | None = None, no_cache: bool = False,
         progress: Progress | None = None) -> CudaReport:
    """The CUDA stack of this machine (toolkits, driver, runtime libraries, GPUs) against the
    environment of `python`: what `abifit cuda` prints, as a report; `gpu` compares with that
    GPU instead of this machine's."""
    return run_as_library(run_cuda, CudaOptions(
        python, gpu, path_text(cache_dir), no_cache), progress)
