"""`abifit history`: the options the command line and the API give, run by
`abifit.engines.history`."""

from __future__ import annotations

from dataclasses import dataclass, field

from abifit.commands.contexts import IndexOptions, Session
from abifit.engines.history import HistoryReport, history, history_store


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
        return history(options.symbol, options.package, options.versions, remote(), store,
                       session.progress, options.jobs)
    finally:
        store.close()
