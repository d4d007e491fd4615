"""`abifit inspect`: the options the command line and the API give, run by
`abifit.engines.inspect`, and the library function `abifit.inspect`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from abifit.commands.contexts import (
    IndexOptions,
    Progress,
    Session,
    index_keywords,
    interpreter_facts,
    names,
    option_gpu,
    run_as_library,
)
from abifit.engines import inspect as engine
from abifit.engines.inspect import InspectReport, symbol_filter


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
    return engine.inspect(list(options.targets), flt,
                          interpreter_facts(options.python, session.environ), session.progress,
                          remote, gpu)


def inspect(
    targets: str | Sequence[str],
    *,
    symbols: Literal["none", "defined", "undefined", "all"] | None = None,
    match: str | None = None,
    gpu: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> InspectReport:
    """What ELF objects need and provide. What `abifit inspect` prints, as a report.

    A target is a .so or executable, a directory, a .whl file, a distribution installed in the
    environment of `python`, or a requirement read from the index. `symbols` lists dynamic
    symbols (default: none, or all those whose name matches the glob `match`); `gpu` checks the
    kernels of each object for that GPU.
    """
    return run_as_library(run_inspect, InspectOptions(
        names(targets), symbols, match, gpu, python, index_keywords("inspect", index)), progress)
