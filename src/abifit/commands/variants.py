"""`abifit variants`: the options the command line and the API give, run by
`abifit.engines.variants`."""

from __future__ import annotations

from dataclasses import dataclass, field

from abifit.commands.contexts import IndexOptions, Session
from abifit.engines.variants import VariantsReport, variants


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
    return variants(options.release, remote(), session.progress, every=options.every)
