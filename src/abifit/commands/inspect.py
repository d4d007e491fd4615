"""`abifit inspect`: the options the command line and the API give, run by
`abifit.engines.inspect`."""

from __future__ import annotations

from dataclasses import dataclass, field

from abifit.commands.contexts import (
    IndexOptions,
    Session,
    interpreter_facts,
    option_gpu,
)
from abifit.engines.inspect import InspectReport, inspect, symbol_filter


@dataclass(frozen=True)
class InspectOptions:
    """What `abifit inspect` is asked: the targets (a .so or executable, a directory, a .whl,
    an installed distribution of `python`'s environment, a requirement), which symbols to list
    (`symbols`: none, defined, undefined, all; `match`: a glob), a GPU to check kernels for,
    and the index."""

    targets: tuple[str, ...] = ()
    symbols: str | None = None
    match: str | None = None
    gpu: str | None = None
    python: str | None = None
    index: IndexOptions = field(default_factory=IndexOptions)


def run_inspect(options: InspectOptions, session: Session) -> InspectReport:
    """`abifit inspect` as the command line and `abifit.inspect` run it."""
    flt = symbol_filter(options.symbols, options.match)
    remote = session.index(options.index)
    gpu = option_gpu(options.gpu, session.environ)
    return inspect(list(options.targets), flt, interpreter_facts(options.python, session.environ),
                   session.progress, remote, gpu)
