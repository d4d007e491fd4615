"""`abifit check`: would these wheels load together? (nothing is installed)"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from abifit.cli.options import Subparsers, fail_on_option, host_options, index_options
from abifit.cli.shared import (
    clear_progress,
    gpu_option_targets,
    host_platform,
    linux_targets,
    pin_files,
    progress_to,
    remote_context,
    transfer_line,
    transfer_of,
)
from abifit.cli.status import verdict_status

if TYPE_CHECKING:
    from abifit.formats.pins import Pin
    from abifit.formats.snapshot import Snapshot
    from abifit.remote.index import IndexFile


def configure(sub: Subparsers) -> None:
    """The `check` command's arguments."""
    k = sub.add_parser(
        "check",
        help="would these wheels load together? (nothing is installed)",
        description="Predict, before installing, whether the extension modules of the targets "
        "load next to the --with packages and the native dependencies the targets require.",
    )
    k.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a requirement (sgl-kernel==0.3.21) or a local .whl file")
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
    index_options(k)
    k.set_defaults(run=run, verdict_line=True)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.check import check, locked_targets
    from abifit.report.check import check_json, check_text
    from abifit.report.json import dumps

    linux_targets(args)

    targets: list[str | IndexFile] = list(args.targets)
    snap, recorded = _replayed(args, err) if args.snapshot else (None, [])  # may set the Python
    host = host_platform(args)
    remote = remote_context(args)
    if recorded:  # the wheels the snapshot recorded, not whatever the index serves now
        targets += locked_targets(recorded, remote())
    for pins in pin_files(args.requirement, remote(), err, "checked"):
        targets += locked_targets(pins.pins, remote())  # each the file the lock names
    gpus = gpu_option_targets(args.gpu)
    try:
        report = check(targets, args.withs, remote(), remote().target, host,
                       progress_to(err), args.python,
                       skip_pure=bool(args.requirement or args.snapshot),
                       gpu=gpus[0] if gpus else None)
    finally:
        clear_progress(err)
    if snap is not None:
        from abifit.commands.snapshot import with_recorded_fixes

        report = with_recorded_fixes(report, snap)
    transfer = transfer_of(remote)
    if not args.quiet and not args.json:  # the JSON document holds them
        err.writelines(f"note: {n}\n" for n in report.notes)
    out.write(dumps(check_json(report, transfer)) + "\n" if args.json
              else check_text(report, bool(args.verbose)))
    transfer_line(err, transfer, args, remote)
    return verdict_status(report.verdict, report.findings, args.fail_on)


def _replayed(args: argparse.Namespace, err: TextIO) -> tuple[Snapshot, list[Pin]]:
    """`check --snapshot FILE`: the snapshot and its pins (each the wheel it recorded), for its
    Python unless --python-version says otherwise."""
    from abifit.commands.snapshot import read_snapshot, snapshot_pins

    snap = read_snapshot(args.snapshot)
    pins, skipped = snapshot_pins(snap)
    for entry in skipped:
        err.write(f"warning: {args.snapshot}: not checked: {entry}\n")
    if not args.python_version and snap.python_version:
        args.python_version = ".".join(snap.python_version.split(".")[:2])
    return snap, pins
