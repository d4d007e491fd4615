"""`abifit snapshot`: the environment as a PEP 751 lock with ABI fingerprints."""

from __future__ import annotations

import argparse
from typing import TextIO

from abifit.cli.options import Subparsers
from abifit.cli.shared import run_command, writable
from abifit.cli.status import EXIT_OK

HELP_PLACE = 80  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `snapshot` command's arguments."""
    s = sub.add_parser(
        "snapshot",
        help="record the environment as a PEP 751 lock with ABI fingerprints",
        description="Write the environment of an interpreter as a PEP 751 pylock.toml (each "
        "distribution with its version and, where the installation or the index recorded "
        "it, its wheel's name, URL and sha256), with abifit's facts under [tool.abifit]: the "
        "host's glibc and libstdc++, the ld.so.conf and LD_LIBRARY_PATH directories that "
        "found a library, the CUDA stack, and per native module the sonames it mapped and "
        "where, the version nodes it requires and a digest of its symbol bindings.")
    s.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    s.add_argument("-o", "--output", metavar="FILE",
                   help="write the lock there (pylock.toml, or pylock.NAME.toml)")
    s.add_argument("--requirements", action="store_true",
                   help="print the pins as a requirements or constraints file (name==version "
                   "--hash=sha256:...) instead of the report")
    s.add_argument("--no-index", action="store_true",
                   help="do not ask the index for the wheels the installation did not record")
    s.add_argument("--ld-so-conf", metavar="FILE", default="/etc/ld.so.conf",
                   help="the loader's configuration to read (default /etc/ld.so.conf)")
    s.add_argument("--ld-so-cache", metavar="FILE", default="/etc/ld.so.cache",
                   help="the loader's cache to read (default /etc/ld.so.cache)")
    s.add_argument("--cache-dir", metavar="DIR", help="cache directory")
    s.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.snapshot import SnapshotOptions, run_snapshot
    from abifit.report.json import dumps
    from abifit.report.snapshot import requirements_text, snapshot_json, snapshot_text

    writable(args.output, "-o")
    options = SnapshotOptions(args.python, args.output, args.ld_so_conf, args.ld_so_cache,
                              args.cache_dir, args.no_cache, args.no_index)
    report, _session = run_command(run_snapshot, options, args, err)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    if args.requirements:
        out.write(requirements_text(report.snapshot))
    else:
        out.write(dumps(snapshot_json(report)) + "\n" if args.json else snapshot_text(report))
    return EXIT_OK
