"""`abifit cache`: the cache directory, where, how big, clean it."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from abifit.cli.options import Subparsers, byte_size
from abifit.cli.status import EXIT_OK
from abifit.commands.contexts import cache_root
from abifit.errors import UsageError
from abifit.remote.diskcache import Cache

HELP_PLACE = 20  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `cache` command's arguments."""
    c = sub.add_parser(
        "cache",
        help="the cache directory: where, how big, clean it",
        description="Show or clear abifit's cache: parsed views of local ELF files and of "
        "remote wheel members, index pages (kept 10 minutes), check results, parsed Python "
        "modules and the sha256 of local wheels, each in a versioned bucket. `dir` prints the "
        "directory, `info` the entries and bytes of each bucket, `clean` removes every "
        "bucket, `prune` the oldest entries past a size or an age (the symbol store is kept).",
    )
    c.add_argument("action", choices=["dir", "info", "clean", "prune"])
    c.add_argument("--max-size", type=byte_size, metavar="SIZE",
                   help="prune: remove the oldest entries until the cache holds at most SIZE "
                   "(bytes, or with K, M, G: 500M; default 1G)")
    c.add_argument("--older-than", type=float, metavar="DAYS",
                   help="prune: remove the entries written more than DAYS days ago")
    c.add_argument("--cache-dir", metavar="DIR",
                   help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
    c.add_argument("--json", action="store_true", help="with `info`: print one JSON document")
    c.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.remote.diskcache import RootState
    from abifit.report.cache import cache_json, cache_text
    from abifit.report.json import dumps

    if args.json and args.action != "info":
        raise UsageError(f"--json: only `abifit cache info` prints JSON, not `{args.action}`")
    cache = Cache(cache_root(args.cache_dir, os.environ))
    if args.action == "dir":
        out.write(f"{cache.root}\n")
        return EXIT_OK
    info = cache.info()
    if info.state is RootState.MISSING:
        err.write(f"warning: {cache.root}: no such directory; nothing is cached there\n")
    elif info.state is RootState.NOT_A_DIRECTORY:
        err.write(f"warning: {cache.root}: not a directory; nothing is cached there\n")
    if args.action == "info":
        out.write(dumps(cache_json(info)) + "\n" if args.json else cache_text(info))
    elif args.action == "prune":
        limit = args.max_size if args.max_size is not None or args.older_than else 1 << 30
        removed, freed = cache.prune(limit, None if args.older_than is None
                                     else args.older_than * 86400)
        out.write(f"removed {removed:,} entries ({freed:,} bytes) from {cache.root}\n")
    else:
        out.write(f"removed {cache.clean():,} bytes from {cache.root}\n")
    return EXIT_OK
