"""What a command runs with, built from plain options: the cache, the package index, the facts of
an interpreter, the host. The command line (`abifit.cli`) and the library API (`abifit.check`,
`abifit.doctor`, ...) give each command one options value (`CheckOptions`, ...; the index's part
`IndexOptions`, the host's `HostOptions`) and a `Session`, and the command builds the rest here,
so that the two faces cannot build them differently. Each command's library function, beside
its options, turns its keyword arguments into them (`names`, `path_text`, `index_keywords`)
and runs the command as a library call (`run_as_library`).

Each builder returns a function that builds its value on first call and returns that value
afterwards, so that a command that never needs the index or the interpreter never reads pip's
configuration, opens a connection pool or starts a process.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from abifit.errors import UsageError
from abifit.host.environment import InterpreterFacts, default_interpreter, query_interpreter
from abifit.remote.diskcache import Cache, default_cache_dir

if TYPE_CHECKING:
    from abifit.formats.pins import Pins
    from abifit.host.profile import HostProfile
    from abifit.remote.runcontext import RemoteContext
    from abifit.sim.gputarget import GpuTarget


@dataclass(frozen=True)
class IndexOptions:
    """Where wheels come from, for which interpreter and platform, and what the cache keeps:
    the index options of the commands that read an index (`--python-version` ...
    `--max-download`). Empty values are pip's configuration and this machine's."""

    python_version: str | None = None
    platforms: tuple[str, ...] = ()
    implementation: str = "cp"
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    prereleases: bool = False
    cache_dir: str | None = None
    no_cache: bool = False
    refresh: bool = False
    offline: bool = False
    deadline_s: float | None = None
    max_download: int | None = None


@dataclass(frozen=True)
class HostOptions:
    """The machine a check is for (`--host`, `--assume-driver`) and the interpreter that starts
    the simulated process (`--python`); none given: this machine and this interpreter."""

    host: str | None = None
    assume_driver: str | None = None
    python: str | None = None


def _quiet(_message: str) -> None:
    """Progress that goes nowhere."""


class Session:
    """What a command runs in, given by the face that runs it: the environment variables, where
    progress and warnings go, and the index contexts the command opened (the command line
    reports their transfer; `close` ends their connections)."""

    def __init__(self, environ: Mapping[str, str], progress: Callable[[str], None] = _quiet,
                 warn: Callable[[str], None] | None = None) -> None:
        self.environ = dict(environ)
        self.progress = progress
        self.warn = warn or warn_on_stderr
        self.opened: list[Callable[[], RemoteContext]] = []

    def cache(self, options: IndexOptions) -> Cache | None:
        return open_cache(options.cache_dir, self.environ, enabled=not options.no_cache,
                          refresh=options.refresh)

    def index(self, options: IndexOptions,
              python_version: Callable[[], str] | None = None) -> Callable[[], RemoteContext]:
        """The index `options` say (for `python_version`'s Python when they give none),
        made when first called."""
        made = index_context(lambda: self.cache(options), self.environ,
                             offline=options.offline, index_url=options.index_url,
                             extra_index_urls=options.extra_index_urls,
                             find_links=options.find_links,
                             python_version=options.python_version or python_version,
                             platforms=options.platforms or None,
                             implementation=options.implementation,
                             prereleases=options.prereleases, no_index=options.no_index,
                             deadline_s=options.deadline_s, max_download=options.max_download)
        self.opened.append(made)
        return made

    def close(self) -> None:
        """Note what the runs read in the symbol store, and end the connections opened."""
        finish_runs()
        for remote in self.opened:
            ctx = made(remote)
            if ctx is not None and ctx.client is not None:
                ctx.client.close()


Progress = Callable[[str], None]
_Options = TypeVar("_Options")
_Report = TypeVar("_Report")


def run_as_library(command: Callable[[_Options, Session], _Report], options: _Options,
                   progress: Progress | None) -> _Report:
    """Run a command as a library function does: in a session of this process's environment,
    progress to `progress` (default: nowhere); on leaving, what it read goes into the symbol
    store and its connections close."""
    session = Session(os.environ, progress or _quiet)
    try:
        return command(options, session)
    finally:
        session.close()


def index_keywords(function: str, given: Mapping[str, Any]) -> IndexOptions:
    """The index options of a library function's keyword arguments (sequences as tuples, paths
    as strings); TypeError for one that is not an index option, as for any unknown argument."""
    known = {f.name for f in fields(IndexOptions)}
    for name in given:
        if name not in known:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    plain: dict[str, Any] = {name: names(value) if name in _LISTS else
             path_text(value) if name == "cache_dir" else value for name, value in given.items()}
    return IndexOptions(**plain)


_LISTS = ("platforms", "extra_index_urls", "find_links")


def names(given: str | Sequence[str]) -> tuple[str, ...]:
    """One name, or several, as a tuple (a string is one name, not its characters)."""
    return (given,) if isinstance(given, str) else tuple(given)


def path_text(value: str | Path | None) -> str | None:
    """A path given as a string or a `Path`, as the string the options hold."""
    return None if value is None else str(value)


def made(remote: Callable[[], RemoteContext]) -> RemoteContext | None:
    """The context `remote` (an `index_context`) made; None when nothing asked for one, so
    that nothing is made just to be looked at."""
    return remote() if remote.cache_info().currsize else None  # type: ignore[attr-defined]


def cache_root(cache_dir: str | Path | None, environ: Mapping[str, str]) -> Path:
    """The cache directory: the one given, else $ABIFIT_CACHE_DIR, else the user cache."""
    return Path(cache_dir) if cache_dir else default_cache_dir(dict(environ))


def open_cache(cache_dir: str | Path | None, environ: Mapping[str, str], *,
               enabled: bool = True, refresh: bool = False) -> Cache | None:
    """The cache in `cache_root(cache_dir, environ)`; None when it is not `enabled`."""
    if not enabled:
        return None
    return Cache(cache_root(cache_dir, environ), refresh=refresh)


def interpreter_facts(python: str | None,
                      environ: Mapping[str, str]) -> Callable[[], InterpreterFacts]:
    """The facts of `python`, else of the active environment's interpreter, asked once."""

    @functools.cache
    def facts() -> InterpreterFacts:
        return query_interpreter(python or default_interpreter(environ))

    return facts


def _without_credentials(url: str) -> str:
    from abifit.remote.network import split_credentials

    return split_credentials(url)[0]


def index_context(
    cache: Callable[[], Cache | None],
    environ: Mapping[str, str],
    *,
    offline: bool = False,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    python_version: str | Callable[[], str] | None = None,
    platforms: Sequence[str] | None = None,
    implementation: str | None = None,
    prereleases: bool = False,
    warn: Callable[[str], None] | None = None,
    no_index: bool = False,
    deadline_s: float | None = None,
    max_download: int | None = None,
) -> Callable[[], RemoteContext]:
    """The package index as pip is configured in `environ` (the arguments replace or extend
    that), read for a target interpreter: this one, else `python_version` ("3.12", or a function
    that says it) with this machine's platforms unless `platforms` are given. `offline`: only
    what `cache()` holds; `no_index`: no index, only the find-links locations.

    As pip does, a source that cannot be read (an index that does not answer, a missing
    find-links directory) is skipped with a warning when another source has the project, and
    is the error only when none has it. Warnings go to `warn` (default: a `warning:` line on
    stderr) and are kept in the context's `state.warnings`. Every request ends within
    `deadline_s` of the first (default: `http.DEADLINE_S`; 0: no deadline), and no file from a
    host without ranges is downloaded whole past `max_download` bytes (default:
    `http.MAX_DOWNLOAD`)."""

    @functools.cache
    def make() -> RemoteContext:
        from abifit.remote.http import HttpClient
        from abifit.remote.packageindex import (
            PackageIndex,
            Target,
            pip_index_config,
            pip_network_config,
        )
        from abifit.remote.pagefetch import cached_fetch
        from abifit.remote.runcontext import RemoteContext, RunState

        store = cache()
        from abifit.remote.http import DEADLINE_S, MAX_DOWNLOAD

        deadline = DEADLINE_S if deadline_s is None else (deadline_s or None)
        client = None if offline else HttpClient(
            network=pip_network_config(environ), deadline_s=deadline,
            max_download=MAX_DOWNLOAD if max_download is None else max_download)
        config = pip_index_config(environ, index_url=index_url,
                                  extra_index_urls=tuple(extra_index_urls),
                                  find_links=tuple(find_links),
                                  no_index=True if no_index else None)
        # credentials in an index URL go with the client, not in what is shown and cached
        keep = client.add_credentials if client is not None else _without_credentials
        config = replace(config, index_url=keep(config.index_url),
                         extra_index_urls=tuple(map(keep, config.extra_index_urls)),
                         find_links=tuple(map(keep, config.find_links)))
        version = python_version() if callable(python_version) else python_version
        target = Target.for_python(version, platforms, implementation)
        state = RunState()
        tell = warn or warn_on_stderr

        def warned(message: str) -> None:
            state.warnings.append(message)
            tell(message)

        index = PackageIndex(cached_fetch(client, store), config, warn=warned)
        made = RemoteContext(index, client, store, target, prereleases, state)
        _UNFINISHED.append(made)
        return made

    return make


_UNFINISHED: list[RemoteContext] = []  # contexts made and not yet finished (`finish_runs`)


def finish_runs() -> None:
    """End the runs of the index contexts made since the last call: the views each read are
    noted in the symbol store (`remote.recording.record_seen`). The command and the library API
    call it once a command is done."""
    while _UNFINISHED:
        from abifit.remote.recording import record_seen  # a command that made none never needs it

        record_seen(_UNFINISHED.pop())


def warn_on_stderr(message: str) -> None:
    """A `warning:` line on stderr (after clearing a progress line on a terminal)."""
    clear = "\r\x1b[K" if sys.stderr.isatty() else ""
    sys.stderr.write(f"{clear}warning: {message}\n")
    sys.stderr.flush()


def python_version_of(facts: Callable[[], InterpreterFacts]) -> Callable[[], str]:
    """The "X.Y" of an interpreter, asked when first needed."""
    return lambda: ".".join(facts().version.split(".")[:2])


def standing_in(requirements: Sequence[str]) -> dict[str, str]:
    """`--with NAME==VERSION` pins (explain's) as canonical name -> version."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: dict[str, str] = {}
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as e:
            raise UsageError(f"--with {text!r}: {str(e).splitlines()[0]}") from e
        pinned = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
        if len(pinned) != 1 or "*" in pinned[0]:
            raise UsageError(f"--with {text!r}: give one release, as NAME==VERSION")
        out[canonicalize_name(requirement.name)] = pinned[0]
    return out


def host_of(options: HostOptions, environ: Mapping[str, str]) -> HostProfile:
    from abifit.host.profile import host_profile

    return host_profile(options.host, options.assume_driver, dict(environ))


def host_and_index(host: HostOptions, index: IndexOptions, session: Session,
                   ) -> tuple[HostProfile, Callable[[], RemoteContext]]:
    """The host a check is for, and the index read for it (`for_host`): what check, matrix
    and resolve run on, built alike."""
    profile = host_of(host, session.environ)
    return profile, session.index(for_host(index, profile))


def for_host(index: IndexOptions, host: HostProfile) -> IndexOptions:
    """The index options of a check on `host`: without platforms of their own, a preset or a
    saved profile of a known glibc sets the target platform to its manylinux tag (the wheels
    pip would choose there)."""
    import platform

    tag = host.platform_tag(platform.machine()) if not index.platforms else None
    return index if tag is None else replace(index, platforms=(tag,))


LINUX_PLATFORMS = ("manylinux", "musllinux", "linux_")


def linux_only(index: IndexOptions) -> None:
    """Refuse a target platform abifit does not check (Windows, macOS, ...): its extension
    modules are not ELF files, and saying `fits` for them would be a guess."""
    for tag in index.platforms:
        if not tag.startswith(LINUX_PLATFORMS):
            kind = ("Windows" if tag.startswith("win") else
                    "macOS" if tag.startswith("macosx") else "this platform")
            raise UsageError(f"not checked: --platform {tag}: abifit checks Linux (ELF) "
                             f"extension modules only, so it cannot say whether a {kind} "
                             "stack fits (give a manylinux, musllinux or linux_ tag)")


def option_gpus(option: str | None, environ: Mapping[str, str]) -> tuple[GpuTarget, ...]:
    """The GPUs `--gpu` names: one it spells out, or this machine's with 'auto'."""
    if option is None:
        return ()
    from abifit.engines.gpus import detect_targets
    from abifit.sim.gputarget import parse_gpu_option

    if option == "auto":
        found, reason = detect_targets(dict(environ))
        if not found:
            raise UsageError(f"--gpu auto: no GPU found on this machine ({reason})")
        return found
    try:
        return (parse_gpu_option(option),)
    except ValueError as e:
        raise UsageError(f"--gpu {option}: {e}") from e


def option_gpu(option: str | None, environ: Mapping[str, str]) -> GpuTarget | None:
    """The GPU a check is for: the one `--gpu` spells out, or this machine's first with
    'auto'; None without the option."""
    gpus = option_gpus(option, environ)
    return gpus[0] if gpus else None


def pin_files(paths: Sequence[str], remote: RemoteContext, warn: Callable[[str], None],
              done: str) -> list[Pins]:
    """The pins of each `-r` file that the target gets (markers evaluated for it), each entry
    that cannot be `done` (checked, resolved) said to `warn`."""
    from abifit.engines.check import target_markers
    from abifit.formats.pins import read_pins

    out = []
    for path in paths:
        pins = read_pins(path, target_markers(remote.target))
        for entry in pins.skipped:
            warn(f"{path}: not {done}: {entry}")
        out.append(pins)
    return out
