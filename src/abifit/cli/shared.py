"""What several commands' modules share: their options and session from the arguments, progress,
the transfer line, output files."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from abifit.commands.contexts import HostOptions, IndexOptions, Session, made
from abifit.errors import UsageError
from abifit.report.terminal import Terminal

if TYPE_CHECKING:
    from abifit.remote.runcontext import RemoteContext

_Options = TypeVar("_Options")
_Report = TypeVar("_Report")


def index_options_of(args: argparse.Namespace) -> IndexOptions:
    """The index options a command was given (`options.index_options`); those a command does
    not take keep their defaults."""
    return IndexOptions(
        python_version=getattr(args, "python_version", None),
        platforms=tuple(getattr(args, "platform", None) or ()),
        implementation=getattr(args, "implementation", "cp"),
        index_url=getattr(args, "index_url", None),
        extra_index_urls=tuple(getattr(args, "extra_index_url", ())),
        find_links=tuple(getattr(args, "find_links", ())),
        no_index=getattr(args, "no_index", False),
        prereleases=getattr(args, "pre", False),
        cache_dir=args.cache_dir,
        no_cache=getattr(args, "no_cache", False),
        refresh=getattr(args, "refresh", False),
        offline=getattr(args, "offline", False),
        deadline_s=getattr(args, "deadline", None),
        max_download=getattr(args, "max_download", None))


def host_options_of(args: argparse.Namespace) -> HostOptions:
    """`--host`, `--assume-driver` and `--python` (`options.host_options`)."""
    return HostOptions(args.host, args.assume_driver, args.python)


def session_of(args: argparse.Namespace, err: TextIO) -> Session:
    """A command's session: this process's environment, progress on `err` when it shows
    progress, warnings on `err`."""

    def warn(message: str) -> None:
        err.write(f"warning: {message}\n")

    return Session(os.environ, progress_to(err), warn)


def run_command(run: Callable[[_Options, Session], _Report], options: _Options,
                args: argparse.Namespace, err: TextIO) -> tuple[_Report, Session]:
    """`run` a command with its options in this process's session (`session_of`), its progress
    line cleared when it ends; the report, and the session for what it opened."""
    session = session_of(args, err)
    try:
        return run(options, session), session
    finally:
        clear_progress(err)


def progress_to(stream: TextIO) -> Callable[[str], None]:
    """A progress line on `stream`, redrawn in place, when it shows progress."""
    if not shows_progress(stream):
        return lambda _message: None
    width = (stream.style.width if isinstance(stream, Terminal) else None) or 150

    def show(message: str) -> None:
        stream.write(f"\r\x1b[K{message[:width - 1]}")
        stream.flush()

    return show


def clear_progress(stream: TextIO) -> None:
    if shows_progress(stream):
        stream.write("\r\x1b[K")
        stream.flush()


def shows_progress(stream: TextIO) -> bool:
    """A terminal shows progress, unless --quiet."""
    return stream.progress if isinstance(stream, Terminal) else stream.isatty()


def transfer_line(err: TextIO, transfer: dict[str, int] | None, args: argparse.Namespace,
                   remote: Callable[[], RemoteContext]) -> None:
    """What was fetched, and what was read in place from local wheels, on stderr (not for
    --json, nor --quiet)."""
    if transfer is None or getattr(args, "json", False) or args.quiet:
        return
    local = remote().state.local_sizes
    parts = []
    if transfer["requests"] or not local:
        elapsed = time.monotonic() - getattr(args, "started", time.monotonic())
        rate = (f", {transfer['bytes_fetched'] / 1e6 / elapsed:.1f} MB/s"
                if transfer["bytes_fetched"] and elapsed > 0 else "")
        parts.append(f"fetched {transfer['bytes_fetched']:,} bytes in {transfer['requests']} "
                     f"requests from wheels of {transfer['wheel_bytes']:,} bytes "
                     f"({elapsed:.1f} s{rate})")
    if local:
        parts.append(f"read {len(local)} local wheel(s) of {sum(local.values()):,} bytes in "
                     "place")
    err.write("; ".join(parts) + "\n")


def transfer_of(remote: Callable[[], RemoteContext]) -> dict[str, int] | None:
    """What a command's index context fetched; None when it made none."""
    ctx = made(remote)
    if ctx is None:
        return None
    wheel_bytes = sum(ctx.state.wheel_sizes.values())
    if ctx.client is None:
        return {"bytes_fetched": 0, "requests": 0, "wheel_bytes": wheel_bytes}
    t = ctx.client.transfer
    return {"bytes_fetched": t.bytes_fetched, "requests": t.requests, "wheel_bytes": wheel_bytes}


def command_line(args: argparse.Namespace) -> str:
    """The command as it was given (for the pages: what made them), quoted for a shell."""
    import shlex

    return shlex.join(["abifit", *getattr(args, "argv", [])])



def writable(path: str | None, what: str) -> None:
    """Refuse, before any work, an output file that could not be written: its directory
    missing or not writable, or a directory in its place."""
    if path is None or path == "-":
        return
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{what} {path}: a directory, not a file")
    if not parent.is_dir():
        raise UsageError(f"{what} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{what} {path}: not writable")
