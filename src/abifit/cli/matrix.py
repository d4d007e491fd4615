"""`abifit matrix`: which versions of a host package does an extension fit (several extensions,
on several Pythons: a grid of matrices)?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from abifit.cli.options import (
    Subparsers,
    host_options,
    index_options,
    positive,
    python_list,
    ray_option,
)
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
        "that opens each failing cell to its symbols and the parameter that changed. Several "
        "extensions, or several Pythons (--pythons), make a grid of matrices: one for each "
        "extension on each Python, printed one after another with a summary line, in one "
        "JSON document (schema matrix.grid) or one page that filters by package, host "
        "release, variant and Python.",
        epilog="exit status: 0 when each matrix has a host wheel that fits (one matrix: some "
        "host wheel fits), 1 when a matrix has none, 2 when a matrix could not be checked at "
        "all (no wheel of the extension or the host for its Python, every cell an error) or "
        "the input is bad.",
    )
    m.add_argument("extension", metavar="EXT_REQ", nargs="+",
                   help="the extension, e.g. sgl-kernel==0.3.21 (with --versions, its name: "
                   "sgl-kernel); several: a matrix for each")
    m.add_argument("--against", required=True, metavar="HOST_SPEC",
                   help="the host releases, e.g. 'torch>=2.8'")
    m.add_argument("--versions", metavar="SPEC",
                   help="a row per extension release this specifier selects, newest first, "
                   "e.g. '>=0.3.16,<=0.3.21', for each extension (default: one row, EXT_REQ "
                   "as given)")
    m.add_argument("--pythons", type=python_list, default=(), metavar="X.Y,...",
                   help="the target Pythons, e.g. 3.11,3.12: a matrix for each (in place of "
                   "--python-version)")
    m.add_argument("--gpu", metavar="ARCH",
                   help="also check that the extension's GPU code runs on this GPU (sm_120, "
                   "9.0, 9.0@12.4, auto); members with GPU code are read whole")
    m.add_argument("--jobs", type=positive, metavar="N",
                   help="cells (pairs) checked at once (default: this machine's cores, 2 to 4)")
    ray_option(m, "cell")
    m.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    host_options(m)
    m.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(m)
    m.set_defaults(run=run, verdict_line=True, python_executable=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.matrix import MatrixOptions, run_matrix
    from abifit.engines.matrix import MatrixReport
    from abifit.report.json import dumps
    from abifit.report.matrix import (
        grid_html,
        grid_json,
        grid_text,
        matrix_html,
        matrix_json,
        matrix_text,
    )

    writable(args.html, "--html")
    options = MatrixOptions(tuple(args.extension), args.against, args.versions, args.gpu,
                            args.jobs, args.ray, host_options_of(args), index_options_of(args),
                            args.pythons)
    report, session = run_command(run_matrix, options, args, err)
    transfer = transfer_of(session.opened[0])
    if isinstance(report, MatrixReport):
        if args.html:
            Path(args.html).write_text(matrix_html(report, command_line(args)), "utf-8")
        out.write(dumps(matrix_json(report, transfer)) + "\n" if args.json
                  else matrix_text(report))
        transfer_line(err, transfer, args, session.opened[0])
        if report.cells and all(c.error for c in report.cells):
            return EXIT_ERROR  # no host release could be checked
        return EXIT_OK if report.fits else EXIT_PROBLEMS
    if args.html:
        Path(args.html).write_text(grid_html(report, command_line(args)), "utf-8")
    out.write(dumps(grid_json(report, transfer)) + "\n" if args.json else grid_text(report))
    transfer_line(err, transfer, args, session.opened[0])
    if report.unchecked:
        return EXIT_ERROR  # a matrix of which no cell could be checked
    return EXIT_PROBLEMS if report.without_fit else EXIT_OK
