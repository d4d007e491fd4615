"""`abifit inspect`: what ELF objects need and provide."""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers, index_options
from abifit.cli.shared import (
    index_options_of,
    run_command,
    transfer_line,
    transfer_of,
)
from abifit.cli.status import EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS

HELP_PLACE = 10  # where `abifit --help` lists the command (`app.commands`)
# the values of engines.inspect.SymbolSelection but "none" (a test holds them equal): every
# command's arguments are made at each start, and importing the engine for them cost 10-35 ms
SYMBOLS = ("defined", "undefined", "all")


def configure(sub: Subparsers) -> None:
    """The `inspect` command's arguments."""
    p = sub.add_parser(
        "inspect",
        help="what ELF objects need and provide",
        description="Show what each ELF object of a file, directory, wheel or installed "
        "distribution needs and provides, as the dynamic loader sees it.",
    )
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a .so or executable, a directory, a .whl file, or an installed "
                   "distribution name")
    p.add_argument("--python", metavar="PATH",
                   help="interpreter whose environment holds the distributions "
                   "(default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH)")
    p.add_argument("--symbols", choices=SYMBOLS,
                   help="list dynamic symbols, with demangled names")
    p.add_argument("--match", metavar="GLOB",
                   help="only symbols whose mangled or demangled name matches (implies "
                   "--symbols all)")
    p.add_argument("--gpu", metavar="ARCH",
                   help="say whether each object's kernels run on this GPU: sm_120, 9.0, "
                   "9.0@12.4 (with the driver's CUDA release), or 'auto' (this machine's GPUs); "
                   "for a requirement, members with GPU code are then read whole")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.inspect import InspectOptions, run_inspect
    from abifit.report.inspect import inspect_json, inspect_text
    from abifit.report.json import dumps

    options = InspectOptions(tuple(args.targets), args.symbols, args.match, args.gpu,
                             args.python, index_options_of(args))
    report, session = run_command(run_inspect, options, args, err)
    transfer = transfer_of(session.opened[0])
    out.write(dumps(inspect_json(report, transfer)) + "\n" if args.json
              else inspect_text(report))
    transfer_line(err, transfer, args, session.opened[0])
    for obj in report.objects:
        if obj.error is not None:
            err.write(f"error: {obj.error}\n")
    if report.failed:
        return EXIT_ERROR
    if any(o.gpu and o.gpu.verdict == "no-kernel-image" for o in report.objects):
        return EXIT_PROBLEMS
    return EXIT_OK
