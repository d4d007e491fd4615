"""`abifit history`: which releases of a package define a symbol?"""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers, index_options, positive
from abifit.cli.shared import (
    index_options_of,
    run_command,
    transfer_line,
    transfer_of,
)
from abifit.cli.status import EXIT_OK, EXIT_PROBLEMS

HELP_PLACE = 130  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `history` command's arguments."""
    h = sub.add_parser(
        "history",
        help="which releases of a package define a symbol?",
        description="List the releases of a package that define a symbol (mangled, demangled, "
        "or a glob over either), under each form its name took, and where its signature "
        "changed. Releases not yet in the symbol store of the cache directory are read by "
        "range requests and recorded; after that, history is a query.",
    )
    h.add_argument("symbol", metavar="SYMBOL",
                   help="e.g. _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib, "
                   "'c10::cuda::c10_cuda_check_implementation', or a glob")
    h.add_argument("--in", dest="package", required=True, metavar="PACKAGE",
                   help="the package whose releases are searched, e.g. torch")
    h.add_argument("--versions", metavar="SPEC",
                   help="the releases, e.g. '>=2.6,<2.11' (default: those in the symbol "
                   "store, else the newest few on the index)")
    h.add_argument("--jobs", type=positive, default=4, metavar="N",
                   help="releases read at once (default 4)")
    h.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(h)
    h.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.history import HistoryOptions, run_history
    from abifit.report.history import history_json, history_text
    from abifit.report.json import dumps

    options = HistoryOptions(args.symbol, args.package, args.versions, args.jobs,
                             index_options_of(args))
    report, session = run_command(run_history, options, args, err)
    transfer = transfer_of(session.opened[0])
    out.write(dumps(history_json(report, transfer)) + "\n" if args.json
              else history_text(report))
    transfer_line(err, transfer, args, session.opened[0])
    return EXIT_OK if report.found else EXIT_PROBLEMS
