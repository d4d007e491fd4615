"""`abifit doctor`: will every native module of an environment load? The options the command
line and the API give (`DoctorOptions`, in `abifit.engines.kept` for the warm path), run by
`abifit.engines.doctor`, and the library function `abifit.doctor`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from abifit.commands.contexts import (
    IndexOptions,
    Progress,
    Session,
    cache_root,
    interpreter_facts,
    names,
    option_gpus,
    path_text,
    python_version_of,
    run_as_library,
)
from abifit.engines import doctor as engine
from abifit.engines.doctor import DoctorReport
from abifit.engines.kept import DoctorAsked, DoctorOptions, DoctorPrinted
from abifit.host.environment import InterpreterQuery, default_interpreter


def run_doctor(options: DoctorOptions, session: Session, *,
               query: InterpreterQuery | None = None, asked: DoctorAsked | None = None,
               printed: Callable[[DoctorReport], DoctorPrinted] | None = None) -> DoctorReport:
    """`abifit doctor` as the command line and `abifit.doctor` run it; `query` is the query of
    the interpreter's facts when one was started, `asked` and `printed` those of `doctor`."""
    python = query or options.python or default_interpreter(session.environ)
    remote = None if options.no_index else session.index(
        IndexOptions(cache_dir=options.cache_dir, no_cache=options.no_cache),
        python_version_of(interpreter_facts(options.python, session.environ)))
    return engine.doctor(
        python, list(options.packages), verify=options.verify,
        cache_dir=None if options.no_cache else cache_root(options.cache_dir, session.environ),
        environ=session.environ, progress=session.progress,
        gpus=option_gpus(options.gpu, session.environ) if options.gpu else None,
        remote=remote, save_host=Path(options.save_host) if options.save_host else None,
        assume_driver=options.assume_driver, asked=asked, printed=printed)


def doctor(
    python: str | None = None,
    packages: str | Sequence[str] = (),
    *,
    verify: bool = False,
    save_host: str | Path | None = None,
    gpu: str | None = None,
    assume_driver: bool = False,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    no_index: bool = False,
    progress: Progress | None = None,
) -> DoctorReport:
    """Will every native module of an environment load? What `abifit doctor` prints, as a report.

    `python` is the environment's interpreter (default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on
    PATH); `packages` limits the check to those distributions or import packages; `verify` also
    loads each module in a fresh process of that interpreter; `save_host` saves this machine's
    profile there; `gpu` checks the GPU code for that GPU instead of this machine's. A missing
    library is looked up on the index unless `no_index`.
    """
    return run_as_library(run_doctor, DoctorOptions(
        python, names(packages), verify, path_text(save_host), gpu, assume_driver,
        path_text(cache_dir), no_cache, no_index), progress)
