"""`abifit snapshot`: the environment as a PEP 751 lock with ABI fingerprints."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from abifit.cli.options import Subparsers
from abifit.cli.shared import clear_progress, doctor_index, progress_to, writable
from abifit.cli.status import EXIT_OK
from abifit.commands.contexts import cache_root
from abifit.host.environment import default_interpreter


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
    from abifit.commands.snapshot import snapshot
    from abifit.formats.snapshot import is_lock_name
    from abifit.report.json import dumps
    from abifit.report.snapshot import requirements_text, snapshot_json, snapshot_text

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    writable(args.output, "-o")
    if args.output and not is_lock_name(Path(args.output).name):
        err.write(f"warning: {args.output}: installers that read PEP 751 locks look for a file "
                  "named pylock.toml or pylock.NAME.toml\n")
    try:
        report = snapshot(args.python or default_interpreter(os.environ),
                          Path(args.output) if args.output else None, cache_dir=cache,
                          environ=dict(os.environ), progress=progress_to(err),
                          remote=None if args.no_index else doctor_index(args),
                          ld_so_conf=args.ld_so_conf, ld_so_cache=args.ld_so_cache)
    finally:
        clear_progress(err)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    if args.requirements:
        out.write(requirements_text(report.snapshot))
    else:
        out.write(dumps(snapshot_json(report)) + "\n" if args.json else snapshot_text(report))
    return EXIT_OK
