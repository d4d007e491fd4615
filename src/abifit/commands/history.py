"""`abifit history`: the options the command line and the API give, run by
`abifit.engines.history`, and the library function `abifit.history`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from abifit.commands.contexts import (
    IndexOptions,
    Progress,
    Session,
    index_keywords,
    run_as_library,
)
from abifit.engines import history as engine
from abifit.engines.history import HistoryReport, history_store


@dataclass(frozen=True)
class HistoryOptions:
    """What `abifit history` is asked: a symbol (mangled, demangled or a glob), the package
    whose releases to read (`package`, `--in`), which releases (`versions`, a specifier), and
    the index; `jobs` releases are read at a time."""

    symbol: str
    package: str
    versions: str | None = None
    jobs: int = 4
    index: IndexOptions = field(default_factory=IndexOptions)


def run_history(options: HistoryOptions, session: Session) -> HistoryReport:
    """`abifit history` as the command line and `abifit.history` run it: the releases read are
    kept in the symbol store of the cache directory."""
    store = history_store(session.cache(options.index))
    remote = session.index(options.index)
    try:
        return engine.history(options.symbol, options.package, options.versions, remote(),
                              store, session.progress, options.jobs)
    finally:
        store.close()


def history(
    symbol: str,
    package: str,
    *,
    versions: str | None = None,
    jobs: int = 4,
    progress: Progress | None = None,
    **index: Any,
) -> HistoryReport:
    """Which releases of `package` define `symbol` (mangled, demangled or a glob), and where
    its signature changed. What `abifit history` prints, as a report. The releases read are
    kept in the symbol store of the cache directory."""
    return run_as_library(run_history, HistoryOptions(
        symbol, package, versions, jobs, index_keywords("history", index)), progress)
