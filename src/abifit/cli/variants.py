"""`abifit variants`: how do the wheels of one release differ?"""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers, index_options
from abifit.cli.shared import index_options_of, run_command, transfer_of
from abifit.cli.status import EXIT_OK

HELP_PLACE = 120  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `variants` command's arguments."""
    v = sub.add_parser(
        "variants",
        help="how do the wheels of one release differ?",
        description="Group the wheels of one release that the target accepts (every wheel "
        "with --all) by identical binary members, and compare the members that differ by what "
        "they need.",
    )
    v.add_argument("release", metavar="NAME==VERSION")
    v.add_argument("--all", dest="every", action="store_true",
                   help="compare every wheel of the release, not only those the target "
                   "(--python-version, --platform, --implementation; default: this "
                   "interpreter) accepts")
    v.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(v)
    v.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.variants import VariantsOptions, run_variants
    from abifit.report.json import dumps
    from abifit.report.variants import variants_json, variants_text

    report, session = run_command(run_variants, VariantsOptions(
        args.release, args.every, index_options_of(args)), args, err)
    out.write(dumps(variants_json(report, transfer_of(session.opened[0]))) + "\n" if args.json
              else variants_text(report))
    return EXIT_OK
