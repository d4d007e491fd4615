"""`abifit diff`: what changed between two stacks, ABI first."""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli import ci
from abifit.cli.options import Subparsers, ci_options, host_options, index_options
from abifit.cli.shared import index_options_of, run_command
from abifit.cli.status import EXIT_OK, EXIT_PROBLEMS

HELP_PLACE = 90  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `diff` command's arguments."""
    f = sub.add_parser(
        "diff",
        help="what changed between two stacks, ABI first",
        description="Compare two stacks: the modules of A that B breaks (and why), the CUDA "
        "majors, libraries, version nodes and symbol bindings that changed, the host facts "
        "A's modules depended on, then the versions. Each side is a snapshot file (abifit "
        "snapshot's pylock.toml), an environment (a Python interpreter, or a venv directory "
        "holding bin/python: snapshotted here), or a lock or requirements file (pylock.toml, "
        "uv.lock, requirements.txt: its wheels checked as `abifit check -r FILE` checks them, "
        "for the other side's Python where that side records one; --versions-only: its "
        "versions alone). Without B, B is the environment of --python. Exit status: 0 when B "
        "breaks nothing A loaded, 1 when it does.")
    f.add_argument("a", metavar="A", help="a snapshot, environment, or lock/requirements file")
    f.add_argument("b", metavar="B", nargs="?",
                   help="the same kinds (default: the environment of --python)")
    f.add_argument("--python", metavar="PATH",
                   help="the environment B is when B is not given (default: $VIRTUAL_ENV, "
                   "$CONDA_PREFIX, python3 on PATH)")
    f.add_argument("--versions-only", action="store_true",
                   help="compare a lock or requirements file by the versions it pins alone: "
                   "its wheels are not checked and no index is asked (whether B loads what A "
                   "loaded is then not compared)")
    host_options(f, interpreter=False)
    f.add_argument("--json", action="store_true", help="print one JSON document")
    ci_options(f)
    index_options(f)
    f.set_defaults(run=run, verdict_line=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.contexts import HostOptions
    from abifit.commands.diff import DiffOptions, run_diff
    from abifit.report.diff import diff_json, diff_text
    from abifit.report.json import dumps

    ci.check_options(args)
    options = DiffOptions(args.a, args.b, args.python, args.versions_only,
                          HostOptions(args.host, args.assume_driver), index_options_of(args))
    report, _session = run_command(run_diff, options, args, err)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    out.write(dumps(diff_json(report)) + "\n" if args.json else diff_text(report))
    if ci.asked(args):
        from abifit.commands.diff import written_pins
        from abifit.report.gate import diff_gate
        from abifit.report.markdown import diff_markdown

        gate = diff_gate(report, ci.root(), written_pins(args.b) if args.b else ())
        ci.write_reports(args, gate, out, diff_markdown(report))
    return EXIT_PROBLEMS if report.breaks else EXIT_OK
