"""What several commands share: the cache, the index, progress, the target and host."""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from abifit.commands.contexts import index_context, interpreter_facts, open_cache, python_version_of
from abifit.errors import UsageError
from abifit.host.environment import InterpreterFacts
from abifit.remote.cache import Cache
from abifit.report.terminal import Terminal

if TYPE_CHECKING:
    from abifit.formats.pins import Pins
    from abifit.host.profile import HostProfile
    from abifit.remote.wheels import RemoteContext
    from abifit.sim.gpu import GpuTarget


def args_cache(args: argparse.Namespace) -> Cache | None:
    return open_cache(args.cache_dir, os.environ, enabled=not getattr(args, "no_cache", False),
                      refresh=getattr(args, "refresh", False))


def remote_context(args: argparse.Namespace) -> Callable[[], RemoteContext]:
    return index_context(lambda: args_cache(args), os.environ, offline=args.offline,
                         index_url=args.index_url, extra_index_urls=args.extra_index_url,
                         find_links=args.find_links, python_version=args.python_version,
                         platforms=args.platform, implementation=args.implementation,
                         prereleases=args.pre, no_index=getattr(args, "no_index", False),
                         deadline_s=args.deadline, max_download=args.max_download)


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


def facts_of(python: str | None) -> Callable[[], InterpreterFacts]:
    return interpreter_facts(python, os.environ)


def gpu_option_targets(option: str | None) -> tuple[GpuTarget, ...]:
    """The GPUs `--gpu` names: one it spells out, or this machine's with 'auto'."""
    if option is None:
        return ()
    from abifit.commands.gpus import detect_targets
    from abifit.sim.gpu import parse_gpu_option

    if option == "auto":
        found, reason = detect_targets(dict(os.environ))
        if not found:
            raise UsageError(f"--gpu auto: no GPU found on this machine ({reason})")
        return found
    try:
        return (parse_gpu_option(option),)
    except ValueError as e:
        raise UsageError(f"--gpu {option}: {e}") from e


def transfer_of(remote: Callable[[], RemoteContext]) -> dict[str, int] | None:
    info = remote.cache_info()  # type: ignore[attr-defined]
    if info.currsize == 0:
        return None
    ctx = remote()
    wheel_bytes = sum(ctx.state.wheel_sizes.values())
    if ctx.client is None:
        return {"bytes_fetched": 0, "requests": 0, "wheel_bytes": wheel_bytes}
    t = ctx.client.transfer
    return {"bytes_fetched": t.bytes_fetched, "requests": t.requests, "wheel_bytes": wheel_bytes}


def doctor_index(args: argparse.Namespace) -> Callable[[], RemoteContext]:
    """The index doctor asks which wheel ships a missing library: pip's configuration, the
    target environment's Python on this machine's platform."""
    return index_context(lambda: args_cache(args), os.environ,
                         python_version=python_version_of(facts_of(args.python)))


def host_of(args: argparse.Namespace) -> HostProfile:
    from abifit.host.profile import host_profile

    return host_profile(args.host, args.assume_driver, dict(os.environ))


def host_platform(args: argparse.Namespace) -> HostProfile:
    """The host of a check; without --platform, a preset or a saved profile of a known glibc
    sets the target platform to its manylinux tag (the wheels pip would choose there)."""
    host = host_of(args)
    tag = host.platform_tag(platform.machine()) if not args.platform else None
    if tag is not None:
        args.platform = [tag]
    return host


def pin_files(paths: Sequence[str], remote: RemoteContext, err: TextIO,
               done: str) -> list[Pins]:
    """The pins of each `-r` file that the target gets (markers evaluated for it), each entry
    that cannot be `done` (checked, resolved) said on `err`."""
    from abifit.commands.check import target_markers
    from abifit.formats.pins import read_pins

    out = []
    for path in paths:
        pins = read_pins(path, target_markers(remote.target))
        for entry in pins.skipped:
            err.write(f"warning: {path}: not {done}: {entry}\n")
        out.append(pins)
    return out


def command_line(args: argparse.Namespace) -> str:
    """The command as it was given (for the pages: what made them), quoted for a shell."""
    import shlex

    return shlex.join(["abifit", *getattr(args, "argv", [])])


LINUX_PLATFORMS = ("manylinux", "musllinux", "linux_")


def linux_targets(args: argparse.Namespace) -> None:
    """Refuse a target platform abifit does not check (Windows, macOS, ...): its extension
    modules are not ELF files, and saying `fits` for them would be a guess."""
    for tag in getattr(args, "platform", None) or ():
        if not tag.startswith(LINUX_PLATFORMS):
            kind = ("Windows" if tag.startswith("win") else
                    "macOS" if tag.startswith("macosx") else "this platform")
            raise UsageError(f"not checked: --platform {tag}: abifit checks Linux (ELF) "
                             f"extension modules only, so it cannot say whether a {kind} "
                             "stack fits (give a manylinux, musllinux or linux_ tag)")


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
