"""`abifit diff`: the options the command line and the API give, run by
`abifit.engines.diff`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from abifit.commands.contexts import Session
    from abifit.formats.pins import Pin
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
