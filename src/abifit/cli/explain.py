"""`abifit explain`: from a pasted error message to what is wrong and the fix."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from abifit.cli.options import Subparsers, index_options, positive
from abifit.cli.shared import index_options_of, run_command
from abifit.cli.status import EXIT_OK, EXIT_PROBLEMS
from abifit.errors import UsageError

if TYPE_CHECKING:
    pass


HELP_PLACE = 50  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `explain` command's arguments."""
    e = sub.add_parser(
        "explain",
        help="from a pasted error message to what is wrong and the fix",
        description="Read a pasted error message or traceback for the loader's and CUDA's "
        "messages (undefined symbol, cannot open shared object file, version not found, no "
        "kernel image, an unsupported GPU architecture, an old driver, torchvision's masks of a "
        "failed load and its CUDA major check), find the object each names in the environment, "
        "simulate it as doctor does, and say who provides what is missing and the fix. Exit "
        "status: 0 when no message is confirmed in the environment (each is explained, or the "
        "object loads there), 1 when one is confirmed, 2 when the text holds none abifit "
        "recognises.",
    )
    e.add_argument("text", nargs="?", metavar="TEXT",
                   help="the error text; '-' or nothing reads it from stdin (when stdin is not "
                   "a terminal)")
    e.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    e.add_argument("--with", dest="standing_in", action="append", default=[],
                   metavar="NAME==VERSION",
                   help="a release that stands in for the installed one, e.g. torch==2.10.0: "
                   "the releases searched for a symbol and the fix are about it")
    e.add_argument("--releases", type=positive, default=6, metavar="N",
                   help="how many releases of the package that defines an undefined symbol are "
                   "searched for it, up to the installed (or --with) one; they are read once "
                   "into the symbol store (default 6)")
    e.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(e)
    e.set_defaults(run=run, verdict_line=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.explain import ExplainOptions, run_explain
    from abifit.report.explain import explain_json, explain_text
    from abifit.report.json import dumps

    if args.text is not None and args.text != "-":
        text = args.text
    elif args.text == "-" or not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        raise UsageError("explain: give the error text as an argument, or '-' and pipe it in",
                         "abifit explain \"$(cat error.log)\"")
    options = ExplainOptions(text, args.python, tuple(args.standing_in), args.releases,
                             index_options_of(args))
    report, _session = run_command(run_explain, options, args, err)
    out.write(dumps(explain_json(report)) + "\n" if args.json else explain_text(report))
    return EXIT_PROBLEMS if report.problems else EXIT_OK
