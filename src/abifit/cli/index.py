"""`abifit index`: the symbol store, filled from an index, exported, imported, shown."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from abifit.cli.options import (
    Parser,
    Subparsers,
    index_options,
    output_options,
    positive,
    ray_option,
)
from abifit.cli.shared import clear_progress, index_options_of, session_of
from abifit.cli.status import EXIT_ERROR, EXIT_OK
from abifit.commands.contexts import IndexOptions, Session, cache_root

if TYPE_CHECKING:
    from abifit.engines.index import IndexAddReport
    from abifit.remote.runcontext import RemoteContext
    from abifit.remote.store import SymbolStore

HELP_PLACE = 30  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `index` command's arguments."""
    x = sub.add_parser(
        "index",
        help="the symbol store: fill it from an index, export, import, show it",
        description="Fill, share and show the symbol store: the defined and required symbols "
        "of wheels' ELF members, kept in one SQLite database in the cache directory. `add` "
        "records the wheel each requirement selects (or every release --versions selects); "
        "`export FILE` writes the store to a file that `import FILE` reads on another machine "
        "(checked whole before anything is recorded); `info` shows what it holds.",
    )
    actions = x.add_subparsers(dest="action", required=True, parser_class=Parser)
    xa = actions.add_parser("add", help="record the wheels of requirements",
                            description="Record the ELF members of the wheel each requirement "
                            "selects for the target; wheels the store holds are skipped.")
    xa.add_argument("requirements", nargs="+", metavar="REQ",
                    help="a requirement (torch==2.10.0), or with --versions one package name")
    xa.add_argument("--versions", metavar="SPEC",
                    help="every release of the one package named that SPEC selects, e.g. "
                    "'>=2.6,<2.11'")
    xa.add_argument("--jobs", type=positive, default=4, metavar="N",
                    help="wheels read at once (default 4)")
    ray_option(xa, "wheel's reading")
    xa.add_argument("--json", action="store_true", help="print one JSON document")
    index_options(xa)
    for name, helptext in (("export", "write the store to FILE"),
                           ("import", "record the wheels of an export FILE")):
        xf = actions.add_parser(name, help=helptext, description=helptext[0].upper()
                                + helptext[1:] + ".")
        xf.add_argument("file", metavar="FILE")
        xf.add_argument("--cache-dir", metavar="DIR",
                        help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
        xf.add_argument("--json", action="store_true", help="print one JSON document")
    xi = actions.add_parser("info", help="what the store holds",
                            description="The store's file, size, packages and releases.")
    xi.add_argument("--cache-dir", metavar="DIR",
                    help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
    xi.add_argument("--json", action="store_true", help="print one JSON document")
    x.set_defaults(run=run)
    for action in actions.choices.values():
        output_options(action, on_command=True)


def _add(args: argparse.Namespace, options: IndexOptions, session: Session,
         remote: Callable[[], RemoteContext], store: SymbolStore) -> IndexAddReport:
    """`index add`, each wheel read by a task on the Ray cluster asked for, if one is."""
    from abifit.engines.cluster import cluster_asked
    from abifit.engines.index import index_add

    with cluster_asked(args.ray, session.environ) as cluster:
        elsewhere = None
        if cluster is not None:
            from abifit.commands.cluster import wheels_on

            elsewhere = wheels_on(cluster, options, session.environ, remote().target)
        return index_add(args.requirements, args.versions, remote(), store, session.progress,
                         args.jobs, elsewhere)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.engines.index import index_export, index_import, open_store
    from abifit.report.index import IndexReport, index_json, index_text
    from abifit.report.json import dumps

    root = cache_root(args.cache_dir, os.environ)
    with open_store(root) as store:
        report: IndexReport
        if args.action == "add":
            session = session_of(args, err)
            options = index_options_of(args)
            remote = session.index(options)
            try:
                report = _add(args, options, session, remote, store)
            finally:
                clear_progress(err)
        elif args.action == "export":
            report = index_export(store, Path(args.file))
        elif args.action == "import":
            report = index_import(store, Path(args.file))
        else:
            report = store.info()
    out.write(dumps(index_json(report)) + "\n" if args.json else index_text(report))
    failed = getattr(report, "failed", ())
    for wheel in failed:
        err.write(f"error: {wheel.wheel}: {wheel.error}\n")
    return EXIT_ERROR if failed else EXIT_OK
