"""`abifit diff`: the options the command line and the API give, run by
`abifit.engines.diff`, and the library function `abifit.diff`; a side that is a lock is checked by
`run_check`, as `check -r FILE`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Progress,
    Session,
    cache_root,
    index_keywords,
    path_text,
    run_as_library,
)
from abifit.engines import diff as engine
from abifit.engines.diff import DiffReport

if TYPE_CHECKING:
    from abifit.engines.check import CheckReport
    from abifit.engines.diff import LockCheck
    from abifit.formats.pins import Pin

VERSIONS_ONLY_HINT = "--versions-only compares the versions the locks pin, without their wheels"


@dataclass(frozen=True)
class DiffOptions:
    """What `abifit diff` is asked: two sides, each a snapshot file, an environment (an
    interpreter or a venv directory) or a lock or requirements file; without `b`, the
    environment of `python` (default: the active one). A lock is checked as `check -r FILE`
    checks it, on the `host` for the `index`'s target (its Python: the other side's, where
    that side records one, unless the index options name one); `versions_only` reads the
    versions of a lock alone (no index asked). The index's `cache_dir` and `no_cache` are
    those of the environments' simulations too."""

    a: str
    b: str | None = None
    python: str | None = None
    versions_only: bool = False
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


def run_diff(options: DiffOptions, session: Session) -> DiffReport:
    """`abifit diff` as the command line and `abifit.diff` run it."""
    from abifit.host.environment import default_interpreter

    b = options.b or options.python or default_interpreter(session.environ)
    index = options.index
    return engine.diff(options.a, b, cache_dir=None if index.no_cache else cache_root(
        index.cache_dir, session.environ), environ=session.environ, progress=session.progress,
        check_lock=None if options.versions_only else lock_check(options, session))


def lock_check(options: DiffOptions, session: Session) -> LockCheck:
    """How `diff` checks a lock: `run_check` of `-r FILE` with the host and index options,
    for the Python the diff names (the other side's) unless the index options name one, with
    each module's record. An error says how to compare the versions alone."""
    from abifit.commands.check import CheckOptions, run_check
    from abifit.errors import AbifitError, UsageError

    def check_lock(path: str, python: str | None) -> CheckReport:
        index = options.index
        if python is not None and not index.python_version:
            index = replace(index, python_version=python)
        try:
            return run_check(CheckOptions(requirement_files=(path,), host=options.host,
                                          index=index), session, records=True)
        except AbifitError as e:
            if "\nhint: " in str(e):  # its own fix first
                raise
            raise UsageError(f"{path}: its wheels could not be checked: {e}",
                             VERSIONS_ONLY_HINT) from e

    return check_lock


def written_pins(spec: str) -> tuple[Pin, ...]:
    """Where a side given as a file (a lock, a requirements file, a snapshot) pins each
    package: the line of its entry; nothing for an environment, or a file that cannot be
    read so."""
    from abifit.errors import UsageError
    from abifit.formats.pins import Pin, package_lines, read_pins

    if not os.path.isfile(spec) or os.access(spec, os.X_OK):  # an interpreter is no lock
        return ()
    try:
        if spec.endswith(".toml") and os.path.basename(spec) != "uv.lock":
            lines = package_lines(Path(spec).read_text("utf-8"), "packages")
            return tuple(Pin(name, file=spec, line=line)
                         for (name, version), line in lines.items() if version is None)
        return read_pins(spec).pins
    except (UsageError, OSError, UnicodeDecodeError):
        return ()


def diff(
    a: str | Path,
    b: str | Path | None = None,
    *,
    python: str | None = None,
    versions_only: bool = False,
    host: str | None = None,
    assume_driver: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> DiffReport:
    """`abifit diff A B`: each side a snapshot file, an environment (an interpreter or a venv
    directory) or a lock/requirements file; `b` defaults to the environment of `python` (the
    active one). A lock is checked as `check` checks `requirement_files` (on `host`, with the
    index options; its Python the other side's where that side records one, unless
    `python_version` is given); `versions_only` compares a lock's versions alone.
    `report.breaks` holds the changes that break a module A loaded."""
    return run_as_library(run_diff, DiffOptions(
        str(a), path_text(b), python, versions_only, HostOptions(host, assume_driver, None),
        index_keywords("diff", index)), progress)
