"""`abifit snapshot`: the options the command line and the API give, run by
`abifit.engines.snapshot`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.formats.ldcache import LD_SO_CACHE
from abifit.host.ldconfig import (
    LD_SO_CONF,
)

if TYPE_CHECKING:
    from abifit.commands.contexts import Session
from abifit.engines.snapshot import SnapshotReport, snapshot


@dataclass(frozen=True)
class SnapshotOptions:
    """What `abifit snapshot` is asked: the environment's interpreter (`python`), the lock file
    to write (`output`), the loader's settings of the machine (`ld_so_conf`, `ld_so_cache`), the
    cache, and whether to ask the index where each wheel came from (not with `no_index`)."""

    python: str | None = None
    output: str | None = None
    ld_so_conf: str = LD_SO_CONF
    ld_so_cache: str = LD_SO_CACHE
    cache_dir: str | None = None
    no_cache: bool = False
    no_index: bool = False


def run_snapshot(options: SnapshotOptions, session: Session) -> SnapshotReport:
    """`abifit snapshot` as the command line and `abifit.snapshot` run it."""
    from abifit.commands.contexts import (
        IndexOptions,
        cache_root,
        interpreter_facts,
        python_version_of,
    )
    from abifit.formats.pylock import is_lock_name
    from abifit.host.environment import default_interpreter

    if options.output and not is_lock_name(Path(options.output).name):
        session.warn(f"{options.output}: installers that read PEP 751 locks look for a file "
                     "named pylock.toml or pylock.NAME.toml")
    remote = None if options.no_index else session.index(
        IndexOptions(cache_dir=options.cache_dir, no_cache=options.no_cache),
        python_version_of(interpreter_facts(options.python, session.environ)))
    return snapshot(options.python or default_interpreter(session.environ),
                    Path(options.output) if options.output else None,
                    cache_dir=None if options.no_cache else cache_root(options.cache_dir,
                                                                       session.environ),
                    environ=session.environ, progress=session.progress, remote=remote,
                    ld_so_conf=options.ld_so_conf, ld_so_cache=options.ld_so_cache)
