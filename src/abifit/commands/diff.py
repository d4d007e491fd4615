"""`abifit diff`: the options the command line and the API give, run by
`abifit.engines.diff`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from abifit.commands.contexts import Session
from abifit.engines.diff import DiffReport, diff


@dataclass(frozen=True)
class DiffOptions:
    """What `abifit diff` is asked: two sides, each a snapshot file, an environment (an
    interpreter or a venv directory) or a lock or requirements file; without `b`, the
    environment of `python` (default: the active one)."""

    a: str
    b: str | None = None
    python: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False


def run_diff(options: DiffOptions, session: Session) -> DiffReport:
    """`abifit diff` as the command line and `abifit.diff` run it."""
    from abifit.commands.contexts import cache_root
    from abifit.host.environment import default_interpreter

    b = options.b or options.python or default_interpreter(session.environ)
    return diff(options.a, b, cache_dir=None if options.no_cache else cache_root(
        options.cache_dir, session.environ), environ=session.environ, progress=session.progress)
