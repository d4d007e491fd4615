"""`abifit cuda`: the options the command line and the API give, run by
`abifit.engines.cuda`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from abifit.commands.contexts import Session
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
    from abifit.commands.contexts import cache_root, option_gpus
    from abifit.host.environment import default_interpreter

    return cuda_report(options.python or default_interpreter(session.environ),
                       environ=session.environ,
                       cache_dir=None if options.no_cache else cache_root(options.cache_dir,
                                                                          session.environ),
                       progress=session.progress,
                       gpus=option_gpus(options.gpu, session.environ) if options.gpu else None)
