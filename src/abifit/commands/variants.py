"""`abifit variants`: the options the command line and the API give, run by
`abifit.engines.variants`, and the library function `abifit.variants`."""

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
from abifit.engines import variants as engine
from abifit.engines.variants import VariantsReport


@dataclass(frozen=True)
class VariantsOptions:
    """What `abifit variants` is asked: one release (NAME==VERSION), its wheels for the index's
    target or all of them (`every`, `--all`)."""

    release: str
    every: bool = False
    index: IndexOptions = field(default_factory=IndexOptions)


def run_variants(options: VariantsOptions, session: Session) -> VariantsReport:
    """`abifit variants` as the command line and `abifit.variants` run it."""
    remote = session.index(options.index)
    return engine.variants(options.release, remote(), session.progress, every=options.every)


def variants(release: str, *, every: bool = False, progress: Progress | None = None,
             **index: Any) -> VariantsReport:
    """The wheels of one release ("torchcodec==0.8.1") that the target accepts (all of them
    with `every`), grouped by identical binaries and compared: what `abifit variants` prints,
    as a report."""
    return run_as_library(run_variants, VariantsOptions(
        release, every, index_keywords("variants", index)), progress)
