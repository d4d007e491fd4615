"""`abifit matrix`: which versions of a host package does an extension fit?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from abifit.cli.options import Subparsers, host_options, index_options, positive, ray_option
from abifit.cli.shared import (
    command_line,
    host_options_of,
    index_options_of,
    run_command,
    transfer_line,
    transfer_of,
    writable,
)
from abifit.cli.status import EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS

HELP_PLACE = 100  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `matrix` command's arguments."""
    m = sub.add_parser(
        "matrix",
        help="which versions of a host package does an extension fit?",
        description="Check an extension (or each of its releases --versions selects) against "
        "every release (and wheel variant) of a host package that a specifier selects: a grid "
        "of pairwise verdicts, each a check whose result the cache keeps. --html writes a page "
        "that opens each failing cell to its symbols and the parameter that changed.",
    )
    m.add_argument("extension", metavar="EXT_REQ", help="the extension, e.g. sgl-kernel==0.3.21 "
                   "(with --versions, its name: sgl-kernel)")
    m.add_argument("--against", required=True, metavar="HOST_SPEC",
                   help="the host releases, e.g. 'torch>=2.8'")
    m.add_argument("--versions", metavar="SPEC",
                   help="a row per extension release this specifier selects, newest first, "
                   "e.g. '>=0.3.16,<=0.3.21' (default: one row, EXT_REQ as given)")
    m.add_argument("--gpu", metavar="ARCH",
                   help="also check that the extension's GPU code runs on this GPU (sm_120, "
                   "9.0, 9.0@12.4, auto); members with GPU code are read whole")
    m.add_argument("--jobs", type=positive, default=4, metavar="N",
                   help="cells (pairs) checked at once (default 4)")
    ray_option(m, "cell")
    m.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    host_options(m)
    m.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(m)
    m.set_defaults(run=run, verdict_line=True, python_executable=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.matrix import MatrixOptions, run_matrix
    from abifit.report.json import dumps
    from abifit.report.matrix import matrix_html, matrix_json, matrix_text

    writable(args.html, "--html")
    options = MatrixOptions(args.extension, args.against, args.versions, args.gpu, args.jobs,
                            args.ray, host_options_of(args), index_options_of(args))
    report, session = run_command(run_matrix, options, args, err)
    transfer = transfer_of(session.opened[0])
    if args.html:
        Path(args.html).write_text(matrix_html(report, command_line(args)), "utf-8")
    out.write(dumps(matrix_json(report, transfer)) + "\n" if args.json else matrix_text(report))
    transfer_line(err, transfer, args, session.opened[0])
    if report.cells and all(c.error for c in report.cells):
        return EXIT_ERROR  # no host release could be checked
    return EXIT_OK if report.fits else EXIT_PROBLEMS
