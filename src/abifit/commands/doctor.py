"""`abifit doctor`: will every native module of an environment load? The options the command
line and the API give (`DoctorOptions`, in `abifit.engines.kept` for the warm path), run by
`abifit.engines.doctor`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.engines.doctor import DoctorReport, doctor
from abifit.engines.kept import DoctorAsked, DoctorOptions, DoctorPrinted
from abifit.host.environment import InterpreterQuery, default_interpreter

if TYPE_CHECKING:
    from abifit.commands.contexts import Session


def run_doctor(options: DoctorOptions, session: Session, *,
               query: InterpreterQuery | None = None, asked: DoctorAsked | None = None,
               printed: Callable[[DoctorReport], DoctorPrinted] | None = None) -> DoctorReport:
    """`abifit doctor` as the command line and `abifit.doctor` run it; `query` is the query of
    the interpreter's facts when one was started, `asked` and `printed` those of `doctor`."""
    from abifit.commands.contexts import (
        IndexOptions,
        cache_root,
        interpreter_facts,
        option_gpus,
        python_version_of,
    )

    python = query or options.python or default_interpreter(session.environ)
    remote = None if options.no_index else session.index(
        IndexOptions(cache_dir=options.cache_dir, no_cache=options.no_cache),
        python_version_of(interpreter_facts(options.python, session.environ)))
    return doctor(python, list(options.packages), verify=options.verify,
                  cache_dir=None if options.no_cache else cache_root(options.cache_dir,
                                                                     session.environ),
                  environ=session.environ, progress=session.progress,
                  gpus=option_gpus(options.gpu, session.environ) if options.gpu else None,
                  remote=remote, save_host=Path(options.save_host) if options.save_host else None,
                  assume_driver=options.assume_driver, asked=asked, printed=printed)
