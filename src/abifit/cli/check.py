"""`abifit check`: would these wheels load together? (nothing is installed)"""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli import ci
from abifit.cli.options import (
    Subparsers,
    ci_options,
    fail_on_option,
    host_options,
    index_options,
)
from abifit.cli.shared import (
    host_options_of,
    index_options_of,
    run_command,
    transfer_line,
    transfer_of,
)
from abifit.cli.status import verdict_status

HELP_PLACE = 70  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `check` command's arguments."""
    k = sub.add_parser(
        "check",
        help="would these wheels load together? (nothing is installed)",
        description="Predict, before installing, whether the extension modules of the targets "
        "load next to the --with packages and the native dependencies the targets require.",
    )
    k.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a requirement (sgl-kernel==0.3.21), a local .whl file, or a requirements "
                   "file, uv.lock or pylock.toml (as with -r)")
    k.add_argument("--with", dest="withs", action="append", default=[], metavar="REQ",
                   help="a package to check against, even at a version the targets' metadata "
                   "forbids (repeatable)")
    k.add_argument("-r", "--requirement", action="append", default=[], metavar="FILE",
                   help="check every native wheel a requirements file, uv.lock or pylock.toml "
                   "pins (repeatable)")
    k.add_argument("--gpu", metavar="ARCH",
                   help="also check that the targets' GPU code runs on this GPU (sm_120, 9.0, "
                   "9.0@12.4, auto); members with GPU code are read whole")
    k.add_argument("--snapshot", metavar="FILE",
                   help="check the stack a snapshot (`abifit snapshot -o FILE`) locked, with the "
                   "loader settings it recorded for the fix of a library not found")
    host_options(k)
    fail_on_option(k)
    k.add_argument("--json", action="store_true", help="print one JSON document")
    ci_options(k)
    index_options(k)
    k.set_defaults(run=run, verdict_line=True, python_executable=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.check import CheckOptions, run_check
    from abifit.report.check import check_json, check_text
    from abifit.report.json import dumps

    ci.check_options(args)
    options = CheckOptions(tuple(args.targets), tuple(args.withs), tuple(args.requirement),
                           args.snapshot, args.gpu, host_options_of(args), index_options_of(args))
    report, session = run_command(run_check, options, args, err)
    transfer = transfer_of(session.opened[0])
    if not args.quiet and not args.json:  # the JSON document holds them
        err.writelines(f"note: {n}\n" for n in report.notes)
    out.write(dumps(check_json(report, transfer)) + "\n" if args.json
              else check_text(report, bool(args.verbose)))
    if ci.asked(args):
        from abifit.report.gate import check_gate

        ci.write_reports(args, check_gate(report, args.fail_on, ci.root()), out)
    transfer_line(err, transfer, args, session.opened[0])
    return verdict_status(report.verdict, report.findings, args.fail_on)
