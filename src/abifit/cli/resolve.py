"""`abifit resolve`: the newest set of releases whose binaries load together."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from abifit.cli import ci
from abifit.cli.options import (
    Subparsers,
    ci_options,
    host_options,
    index_options,
    positive,
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
from abifit.cli.status import EXIT_OK, EXIT_PROBLEMS
from abifit.errors import UsageError

HELP_PLACE = 110  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `resolve` command's arguments."""
    r = sub.add_parser(
        "resolve",
        help="the newest set of releases whose binaries load together",
        description="Resolve requirements over the index as pip does, with the loader as one "
        "more constraint: a set is chosen only when every extension module of every package "
        "loads next to the others. Newest releases first; for each package, the newer releases "
        "not chosen and why; no set: the conflict, as a derivation.",
    )
    r.add_argument("requirements", nargs="*", metavar="REQ",
                   help="a requirement, e.g. sgl-kernel==0.3.21 or torch")
    r.add_argument("-r", "--requirement", dest="requirement_files", action="append",
                   default=[], metavar="FILE",
                   help="the requirements of a requirements file, uv.lock or pylock.toml "
                   "(markers evaluated for the target; repeatable)")
    r.add_argument("--with", dest="withs", action="append", default=[], metavar="REQ",
                   help="a package the set must hold, at a version REQ allows (repeatable)")
    r.add_argument("--cuda", type=positive, metavar="MAJOR",
                   help="keep only wheels built for this CUDA major (+cu130, nvidia-*-cu13) "
                   "or for none")
    r.add_argument("--gpu", metavar="ARCH",
                   help="reject releases whose GPU code has no kernel image for this GPU "
                   "(sm_120, 9.0, auto); their members with GPU code are read whole")
    r.add_argument("-o", "--output", metavar="FILE",
                   help="also write the pinned set to FILE: requirements, constraints when the "
                   "name says so, a PEP 751 lock for pylock.toml or pylock.NAME.toml, or what "
                   "--format says")
    r.add_argument("--format", choices=("requirements", "constraints", "pylock"),
                   help="what -o writes (default: by the file name)")
    r.add_argument("--html", metavar="FILE",
                   help="also write a self-contained HTML page of the resolution")
    r.add_argument("--jobs", type=positive, default=4, metavar="N",
                   help="pairs checked at once (default 4; with --ray, at least the "
                   "cluster's CPUs)")
    ray_option(r, "pair check")
    host_options(r)
    r.add_argument("--json", action="store_true", help="print one JSON document")
    ci_options(r)
    index_options(r)
    r.set_defaults(run=run, verdict_line=True, python_executable=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.resolve import ResolveOptions, run_resolve
    from abifit.engines.check import target_markers
    from abifit.report.json import dumps
    from abifit.report.resolve import (
        constraints_txt,
        pylock_text,
        requirements_txt,
        resolve_html,
        resolve_json,
        resolve_text,
    )

    output_format = _lock_format(args.output, args.format)
    writable(args.output, "-o")
    writable(args.html, "--html")
    ci.check_options(args)
    options = ResolveOptions(tuple(args.requirements), tuple(args.withs),
                             tuple(args.requirement_files), args.cuda, args.gpu, args.jobs,
                             args.ray, host_options_of(args), index_options_of(args))
    report, session = run_command(run_resolve, options, args, err)
    remote = session.opened[0]
    transfer = transfer_of(remote)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    if args.output and report.found:
        if output_format == "pylock":
            text = pylock_text(report, target_markers(remote().target))
        else:
            text = (constraints_txt if output_format == "constraints" else requirements_txt)(
                report)
        Path(args.output).write_text(text, "utf-8")
    if args.html:
        Path(args.html).write_text(resolve_html(report, command=command_line(args)), "utf-8")
    out.write(dumps(resolve_json(report, transfer)) + "\n" if args.json else resolve_text(report))
    if ci.asked(args):
        from abifit.report.gate import resolve_gate

        ci.write_reports(args, resolve_gate(report, ci.root()), out)
    transfer_line(err, transfer, args, remote)
    return EXIT_OK if report.found else EXIT_PROBLEMS



def _lock_format(path: str | None, given: str | None) -> str:
    """What `resolve -o` writes: --format, else by the file's name."""
    if path is None:
        if given is not None:
            raise UsageError("--format needs -o FILE")
        return "requirements"
    name = os.path.basename(path).lower()
    if given is None and name.endswith(".toml"):
        from abifit.formats.pylock import is_lock_name

        if not is_lock_name(name):
            raise UsageError(f"-o {path}: a PEP 751 lock is named pylock.toml or "
                             "pylock.NAME.toml (or give --format)")
        return "pylock"
    return given or ("constraints" if "constraint" in name else "requirements")
