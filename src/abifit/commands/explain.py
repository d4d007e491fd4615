"""`abifit explain`: the options the command line and the API give, run by
`abifit.engines.explain`, and the library function `abifit.explain`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from abifit.commands.contexts import (
    IndexOptions,
    Progress,
    Session,
    cache_root,
    index_keywords,
    interpreter_facts,
    names,
    python_version_of,
    run_as_library,
    standing_in,
)
from abifit.engines import explain as engine
from abifit.engines.explain import ExplainReport
from abifit.errors import UsageError


@dataclass(frozen=True)
class ExplainOptions:
    """What `abifit explain` is asked: the text of an error, the environment's interpreter
    (`python`), the releases that stand in for the installed ones (`withs`, NAME==VERSION),
    how many releases up to them are searched for a symbol's definitions (`releases`; through
    the symbol store, not with the index options' `no_cache`) and the index."""

    text: str
    python: str | None = None
    withs: tuple[str, ...] = ()
    releases: int = 6
    index: IndexOptions = field(default_factory=IndexOptions)


NO_CLUE = ("explain: no loader or CUDA error message abifit recognises in the text (undefined "
           "symbol, cannot open shared object file, version ... not found, no kernel image, "
           "...)")


def run_explain(options: ExplainOptions, session: Session) -> ExplainReport:
    """`abifit explain` as the command line and `abifit.explain` run it: UsageError when the
    text holds no message abifit recognises."""
    from abifit.engines.history import release_seams
    from abifit.formats.errortext import read_clues
    from abifit.host.environment import default_interpreter

    clues = read_clues(options.text)
    if not clues:
        raise UsageError(NO_CLUE)
    python = options.python or default_interpreter(session.environ)
    cache = session.cache(options.index)
    history, fits = None, None
    if cache is not None:
        remote = session.index(options.index,
                               python_version_of(interpreter_facts(python, session.environ)))
        history, fits = release_seams(remote, cache.root, options.releases, session.progress)
    return engine.explain(clues, python, environ=session.environ,
                          cache_dir=None if options.index.no_cache else cache_root(
                              options.index.cache_dir, session.environ),
                          progress=session.progress, history=history, fits=fits,
                          standing_in=standing_in(options.withs))


def explain(
    text: str,
    python: str | None = None,
    *,
    with_: str | Sequence[str] = (),
    releases: int = 6,
    progress: Progress | None = None,
    **index: Any,
) -> ExplainReport:
    """What a pasted error message means, in the environment of `python`, and the fix. What
    `abifit explain` prints, as a report.

    `with_` pins ("torch==2.10.0") stand in for the installed releases; the `releases` newest
    releases up to them are searched for an undefined symbol's definitions (through the symbol
    store; not with `no_cache`). UsageError when the text holds no message abifit recognises.
    """
    return run_as_library(run_explain, ExplainOptions(
        text, python, names(with_), releases, index_keywords("explain", index)), progress)
