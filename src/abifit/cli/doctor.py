"""`abifit doctor`: will every native module of an environment load?"""

from __future__ import annotations

import argparse
import functools
import os
from typing import TYPE_CHECKING, TextIO

from abifit.cli import ci
from abifit.cli.options import Subparsers, ci_options, fail_on_option
from abifit.cli.shared import run_command
from abifit.cli.status import exit_status
from abifit.commands.contexts import cache_root, option_gpus
from abifit.host.environment import InterpreterQuery, default_interpreter

if TYPE_CHECKING:
    from abifit.engines.doctor import DoctorReport
    from abifit.engines.kept import DoctorPrinted


HELP_PLACE = 40  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `doctor` command's arguments."""
    d = sub.add_parser(
        "doctor",
        help="will every native module of an environment load?",
        description="Predict, without importing anything, whether every native module of a "
        "Python environment loads, and explain each failure.",
    )
    d.add_argument("packages", nargs="*", metavar="PACKAGE",
                   help="only the modules of these distributions or import packages")
    d.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    d.add_argument("--verify", action="store_true",
                   help="also load each module in a fresh process of that interpreter and "
                   "compare with the prediction")
    d.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    d.add_argument("--cache-dir", metavar="DIR", help="cache directory (default: "
                   "$ABIFIT_CACHE_DIR, else the user cache directory)")
    d.add_argument("--save-host", metavar="FILE",
                   help="also save this machine's host profile (loader settings, system "
                   "libraries), for `check --host FILE` elsewhere")
    d.add_argument("--no-index", action="store_true",
                   help="do not ask the package index which wheel ships a missing library")
    d.add_argument("--gpu", metavar="ARCH",
                   help="check the GPU code of the environment for this GPU (sm_120, 9.0, "
                   "9.0@12.4), instead of this machine's GPUs")
    d.add_argument("--assume-driver", action="store_true",
                   help="take the NVIDIA driver's libcuda.so.1 as present where this machine "
                   "lacks it, to see what else would fail behind it")
    fail_on_option(d)
    d.add_argument("--json", action="store_true", help="print one JSON document")
    ci_options(d)
    d.set_defaults(run=run, verdict_line=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    ci.check_options(args)
    # the interpreter is asked for its facts while the command's modules are imported
    query = InterpreterQuery(args.python or default_interpreter(os.environ))
    from abifit.engines.kept import DoctorOptions, ask, guess_kept, kept_printed
    from abifit.workers import Apart

    options = DoctorOptions(args.python, tuple(args.packages), args.verify, args.save_host,
                            args.gpu, args.assume_driver, args.cache_dir, args.no_cache,
                            args.no_index)
    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    environ = dict(os.environ)
    # a warm run prints what the kept run printed (which keeps no report for CI systems); the
    # run kept last for this interpreter is checked while the interpreter answers, by a fork
    # (its tens of thousands of `stat` calls would wait for the lock of this process)
    keeps = not args.verify and not args.save_host and not ci.asked(args)
    guessing = Apart(guess_kept, cache, query.python, options.packages, environ) \
        if keeps and cache is not None else None
    try:
        asked = ask(query, environ, option_gpus(args.gpu, environ) if args.gpu else None)
    finally:
        guessed = guessing.result() if guessing is not None else None
    if keeps:
        kept = kept_printed(cache, asked, options.packages, offline=args.no_index,
                            assume_driver=args.assume_driver, environ=environ,
                            python=query.python, guessed=guessed)
        if kept is not None:
            return _print_doctor(kept, args, out)
    from abifit.commands.doctor import run_doctor
    from abifit.report.doctor import doctor_printed

    made: list[DoctorPrinted] = []

    def printed(report: DoctorReport) -> DoctorPrinted:
        made.append(doctor_printed(report))
        return made[-1]

    report, _session = run_command(
        functools.partial(run_doctor, query=query, asked=asked, printed=printed), options,
        args, err)
    code = _print_doctor(made[-1] if made else printed(report), args, out)
    if ci.asked(args):
        from abifit.report.gate import doctor_gate

        ci.write_reports(args, doctor_gate(report, args.fail_on, ci.root()), out)
    return code


def _print_doctor(printed: DoctorPrinted, args: argparse.Namespace, out: TextIO) -> int:
    out.write(printed.json if args.json else printed.verbose_text if args.verbose
              else printed.text)
    return exit_status(printed.verdict, printed.prerequisite, args.fail_on)
