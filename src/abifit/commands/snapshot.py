"""`abifit snapshot`: the options the command line and the API give, run by
`abifit.engines.snapshot`, and the library function `abifit.snapshot`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from abifit.commands.contexts import (
    IndexOptions,
    Progress,
    Session,
    cache_root,
    interpreter_facts,
    path_text,
    python_version_of,
    run_as_library,
)
from abifit.engines import snapshot as engine
from abifit.engines.snapshot import SnapshotReport
from abifit.formats.ldcache import LD_SO_CACHE
from abifit.host.ldconfig import LD_SO_CONF


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
    from abifit.formats.pylock import is_lock_name
    from abifit.host.environment import default_interpreter

    if options.output and not is_lock_name(Path(options.output).name):
        session.warn(f"{options.output}: installers that read PEP 751 locks look for a file "
                     "named pylock.toml or pylock.NAME.toml")
    remote = None if options.no_index else session.index(
        IndexOptions(cache_dir=options.cache_dir, no_cache=options.no_cache),
        python_version_of(interpreter_facts(options.python, session.environ)))
    return engine.snapshot(
        options.python or default_interpreter(session.environ),
        Path(options.output) if options.output else None,
        cache_dir=None if options.no_cache else cache_root(options.cache_dir, session.environ),
        environ=session.environ, progress=session.progress, remote=remote,
        ld_so_conf=options.ld_so_conf, ld_so_cache=options.ld_so_cache)


def snapshot(
    python: str | None = None,
    *,
    output: str | Path | None = None,
    ld_so_conf: str | None = None,
    ld_so_cache: str | None = None,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    no_index: bool = False,
    progress: Progress | None = None,
) -> SnapshotReport:
    """The environment of `python` (default: the active one) as `abifit snapshot` takes it: the
    lock with each module's ABI fingerprint (`report.snapshot`), written to `output` as a PEP
    751 `pylock.toml` when given. `no_index` asks no index where a wheel came from; `ld_so_conf`
    and `ld_so_cache` are the loader's settings to record (default: this machine's)."""
    return run_as_library(run_snapshot, SnapshotOptions(
        python, path_text(output), ld_so_conf or LD_SO_CONF, ld_so_cache or LD_SO_CACHE,
        path_text(cache_dir), no_cache, no_index), progress)
