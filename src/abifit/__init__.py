"""abifit: do the pre-built native parts of a Python stack fit together, and if not, why not.

As a library, eight functions do what the commands of the same names do and return the report
the command prints (frozen dataclasses; the text and JSON output are made from them):

    import abifit

    report = abifit.doctor()                        # the active environment
    report = abifit.check(["sgl-kernel==0.3.21"], with_=["torch==2.9.1"])
    report = abifit.inspect("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", symbols="defined")
    report = abifit.explain(error_text, with_=["torch==2.10.0"])
    report = abifit.history("c10::cuda::c10_cuda_check_implementation", "torch",
                            versions=">=2.8,<2.11")
    report = abifit.snapshot(".venv/bin/python", output="pylock.toml")
    report = abifit.diff("pylock.toml", ".venv")
    report = abifit.resolve(["sgl-kernel==0.3.21", "torch"], python_version="3.11")

The verdict of `check` and `doctor` (`report.verdict`; `resolve`'s `report.set_check.verdict`)
is a word of `Verdict` (`fits`, `degraded`, `fails`: the rule of `abifit.sim.verdict`, the
same word every command prints; `check` adds `fits-but-host-lacks-driver`), and each
finding's `effect` an `Effect` (what a file that does not load costs). They raise an
`AbifitError` (`UsageError`, `FormatError`, ...) when something cannot be analysed; the
problems they find are data in the report. Importing abifit is cheap: the commands are
imported by the first call.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from abifit.errors import AbifitError, FormatError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from abifit.commands.check import CheckReport
    from abifit.commands.diff import DiffReport
    from abifit.commands.doctor import DoctorReport
    from abifit.commands.explain import ExplainReport
    from abifit.commands.history import HistoryReport
    from abifit.commands.inspect import InspectReport
    from abifit.commands.resolve import ResolveReport
    from abifit.commands.snapshot import SnapshotReport
    from abifit.formats.demangle import demangle
    from abifit.remote.wheels import RemoteContext
    from abifit.sim.findings import Effect, Verdict

__version__ = "0.1.0"

__all__ = [
    "AbifitError",
    "CheckReport",
    "DiffReport",
    "DoctorReport",
    "Effect",
    "ExplainReport",
    "FormatError",
    "HistoryReport",
    "InspectReport",
    "ResolveReport",
    "SnapshotReport",
    "UsageError",
    "Verdict",
    "__version__",
    "check",
    "demangle",
    "diff",
    "doctor",
    "explain",
    "history",
    "inspect",
    "resolve",
]

# names of __all__ imported on first use, so that `import abifit` imports only abifit.errors
_LAZY = {
    "CheckReport": "abifit.commands.check",
    "DiffReport": "abifit.commands.diff",
    "DoctorReport": "abifit.commands.doctor",
    "ExplainReport": "abifit.commands.explain",
    "HistoryReport": "abifit.commands.history",
    "InspectReport": "abifit.commands.inspect",
    "SnapshotReport": "abifit.commands.snapshot",
    "ResolveReport": "abifit.commands.resolve",
    "demangle": "abifit.formats.demangle",
    "Effect": "abifit.sim.findings",
    "Verdict": "abifit.sim.findings",
}

if not TYPE_CHECKING:  # type checkers see the imports above; unknown names stay errors for them

    def __getattr__(name: str) -> object:
        if name not in _LAZY:
            raise AttributeError(f"module 'abifit' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value


def check(
    requirements: str | Sequence[str],
    *,
    with_: str | Sequence[str] = (),
    python_version: str | None = None,
    platforms: Sequence[str] | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    cache_dir: str | Path | None = None,
    offline: bool = False,
    progress: Callable[[str], None] | None = None,
) -> CheckReport:
    """Would these wheels load together? What `abifit check` prints, as a report.

    `requirements` are requirements ("sgl-kernel==0.3.21") or local .whl files, checked against
    the `with_` packages (`--with`) for `python_version` ("3.12", default: this interpreter) on
    `platforms` (default: this machine's), on `host`: this machine (None), a manylinux preset
    ("manylinux_2_28") or a profile saved by `abifit doctor --save-host`. The index is pip's
    (`index_url` replaces it); `offline` reads only the cache.
    """
    from abifit.commands.check import check as check_wheels
    from abifit.host.profile import host_profile

    make = _wheel_index(cache_dir, offline, index_url, extra_index_urls, find_links,
                        python_version, platforms)
    with _closing(make) as remote:
        ctx = remote()
        return check_wheels(_names(requirements), _names(with_), ctx, ctx.target,
                            host_profile(host, assume_driver, dict(os.environ)),
                            progress or _quiet, python)


def resolve(
    requirements: str | Sequence[str],
    *,
    with_: str | Sequence[str] = (),
    python_version: str | None = None,
    platforms: Sequence[str] | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    cuda: int | None = None,
    python: str | None = None,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    cache_dir: str | Path | None = None,
    offline: bool = False,
    jobs: int = 4,
    progress: Callable[[str], None] | None = None,
) -> ResolveReport:
    """The newest set of releases whose metadata agrees and whose binaries load together:
    what `abifit resolve` prints, as a report (`report.found`, `report.pins`, each pin's
    `newer` releases with why they were not chosen, or `report.conflict`).

    The arguments are `check`'s; `cuda` keeps only wheels built for that CUDA major (or none),
    and the host's driver (`assume_driver`, or the profile's) rejects CUDA builds it cannot
    run.
    """
    from abifit.commands.resolve import resolve as resolve_set
    from abifit.host.profile import host_profile

    make = _wheel_index(cache_dir, offline, index_url, extra_index_urls, find_links,
                        python_version, platforms)
    with _closing(make) as remote:
        return resolve_set(_names(requirements), _names(with_), remote(),
                           host_profile(host, assume_driver, dict(os.environ)),
                           progress or _quiet, cuda=cuda, executable=python, jobs=jobs)


def doctor(
    python: str | None = None,
    packages: str | Sequence[str] = (),
    *,
    verify: bool = False,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    no_index: bool = False,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Will every native module of an environment load? What `abifit doctor` prints, as a report.

    `python` is the environment's interpreter (default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on
    PATH); `packages` limits the check to those distributions or import packages; `verify` also
    loads each module in a fresh process of that interpreter. A missing library is looked up on
    the index unless `no_index`.
    """
    from abifit.commands.contexts import (
        cache_root,
        index_context,
        interpreter_facts,
        open_cache,
        python_version_of,
    )
    from abifit.commands.doctor import doctor as doctor_environment
    from abifit.host.environment import default_interpreter

    make = index_context(lambda: open_cache(cache_dir, os.environ, enabled=not no_cache),
                         os.environ, python_version=python_version_of(
                             interpreter_facts(python, os.environ)))
    with _closing(make) as remote:
        return doctor_environment(
            python or default_interpreter(os.environ), _names(packages), verify=verify,
            cache_dir=None if no_cache else cache_root(cache_dir, os.environ),
            environ=dict(os.environ), progress=progress or _quiet,
            remote=None if no_index else remote)


def inspect(
    targets: str | Sequence[str],
    *,
    symbols: Literal["none", "defined", "undefined", "all"] | None = None,
    match: str | None = None,
    python: str | None = None,
    index_url: str | None = None,
    cache_dir: str | Path | None = None,
    offline: bool = False,
    progress: Callable[[str], None] | None = None,
) -> InspectReport:
    """What ELF objects need and provide. What `abifit inspect` prints, as a report.

    A target is a .so or executable, a directory, a .whl file, a distribution installed in the
    environment of `python`, or a requirement read from the index. `symbols` lists dynamic
    symbols (default: none, or all those whose name matches the glob `match`).
    """
    from abifit.commands.contexts import (
        index_context,
        interpreter_facts,
        open_cache,
        symbol_filter,
    )
    from abifit.commands.inspect import inspect as inspect_targets

    flt = symbol_filter(symbols, match)
    make = index_context(lambda: open_cache(cache_dir, os.environ), os.environ, offline=offline,
                         index_url=index_url)
    with _closing(make) as remote:
        return inspect_targets(_names(targets), flt, interpreter_facts(python, os.environ),
                               progress or _quiet, remote)


def explain(
    text: str,
    python: str | None = None,
    *,
    with_: str | Sequence[str] = (),
    releases: int = 6,
    python_version: str | None = None,
    index_url: str | None = None,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    offline: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExplainReport:
    """What a pasted error message means, in the environment of `python`, and the fix. What
    `abifit explain` prints, as a report.

    `with_` pins ("torch==2.10.0") stand in for the installed releases; the `releases` newest
    releases up to them are searched for an undefined symbol's definitions (through the symbol
    store; not with `no_cache`). UsageError when the text holds no message abifit recognises.
    """
    from abifit.commands.contexts import (
        cache_root,
        index_context,
        interpreter_facts,
        open_cache,
        python_version_of,
        standing_in,
    )
    from abifit.commands.explain import explain as explain_text
    from abifit.commands.history import release_seams
    from abifit.formats.errortext import read_clues
    from abifit.host.environment import default_interpreter

    clues = read_clues(text)
    if not clues:
        raise UsageError("explain: no loader or CUDA error message abifit recognises in the text")
    python = python or default_interpreter(os.environ)
    cache = None if no_cache else open_cache(cache_dir, os.environ)
    make = index_context(
        lambda: cache, os.environ, offline=offline, index_url=index_url,
        python_version=python_version or python_version_of(interpreter_facts(python,
                                                                              os.environ)))
    with _closing(make) as remote:
        seams = (release_seams(remote, cache.root, releases, progress or _quiet)
                 if cache is not None else (None, None))
        return explain_text(clues, python, environ=dict(os.environ),
                            cache_dir=None if no_cache else cache_root(cache_dir, os.environ),
                            progress=progress or _quiet, history=seams[0], fits=seams[1],
                            standing_in=standing_in(_names(with_)))


def history(
    symbol: str,
    package: str,
    *,
    versions: str | None = None,
    python_version: str | None = None,
    platforms: Sequence[str] | None = None,
    index_url: str | None = None,
    cache_dir: str | Path | None = None,
    offline: bool = False,
    progress: Callable[[str], None] | None = None,
) -> HistoryReport:
    """Which releases of `package` define `symbol` (mangled, demangled or a glob), and where
    its signature changed. What `abifit history` prints, as a report. The releases read are
    kept in the symbol store of the cache directory."""
    from abifit.commands.contexts import index_context, open_cache
    from abifit.commands.history import history as symbol_history
    from abifit.commands.history import history_store

    cache = open_cache(cache_dir, os.environ)
    store = history_store(cache)
    make = index_context(lambda: cache, os.environ, offline=offline, index_url=index_url,
                         python_version=python_version, platforms=platforms)
    with _closing(make) as remote, contextlib.closing(store):
        return symbol_history(symbol, package, versions, remote(), store, progress or _quiet)


def snapshot(
    python: str | None = None,
    *,
    output: str | Path | None = None,
    index: bool = True,
    cache_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SnapshotReport:
    """The environment of `python` (default: the active one) as `abifit snapshot` takes it: the
    lock with each module's ABI fingerprint (`report.snapshot`), written to `output` as a PEP
    751 `pylock.toml` when given. `index=False` asks no index where a wheel came from."""
    from pathlib import Path

    from abifit.commands.contexts import cache_root, index_context, open_cache
    from abifit.commands.snapshot import snapshot as take
    from abifit.host.environment import default_interpreter

    remote = index_context(lambda: open_cache(cache_dir, os.environ), os.environ) if index \
        else None
    with contextlib.ExitStack() as stack:
        if remote is not None:
            remote = stack.enter_context(_closing(remote))
        return take(python or default_interpreter(os.environ),
                    Path(output) if output is not None else None,
                    cache_dir=cache_root(cache_dir, os.environ), environ=dict(os.environ),
                    progress=progress or _quiet, remote=remote)


def diff(
    a: str | Path,
    b: str | Path | None = None,
    *,
    cache_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> DiffReport:
    """`abifit diff A B`: each side a snapshot file, an environment (an interpreter or a venv
    directory) or a lock/requirements file; `b` defaults to the active environment.
    `report.breaks` holds the changes that break a module A loaded."""
    from abifit.commands.contexts import cache_root
    from abifit.commands.diff import diff as compare_sides
    from abifit.host.environment import default_interpreter

    return compare_sides(str(a), str(b) if b is not None else default_interpreter(os.environ),
                         cache_dir=cache_root(cache_dir, os.environ), environ=dict(os.environ),
                         progress=progress or _quiet)


def _wheel_index(cache_dir: str | Path | None, offline: bool, index_url: str | None,
                 extra_index_urls: Sequence[str], find_links: Sequence[str],
                 python_version: str | None, platforms: Sequence[str] | None,
                 ) -> Callable[[], RemoteContext]:
    """The index context of `check` and `resolve`: pip's configuration with these options."""
    from abifit.commands.contexts import index_context, open_cache

    return index_context(lambda: open_cache(cache_dir, os.environ), os.environ, offline=offline,
                         index_url=index_url, extra_index_urls=extra_index_urls,
                         find_links=find_links, python_version=python_version,
                         platforms=platforms)


def _quiet(_message: str) -> None:
    """Progress that goes nowhere."""


def _names(given: str | Sequence[str]) -> list[str]:
    """One name, or several, as a list (a string is one name, not its characters)."""
    return [given] if isinstance(given, str) else list(given)


@contextlib.contextmanager
def _closing(make: Callable[[], RemoteContext]) -> Iterator[Callable[[], RemoteContext]]:
    """`make`, and on leaving, the connections of the index context it made (if it made one)."""
    from abifit.commands.contexts import finish_runs

    made: list[RemoteContext] = []

    def remote() -> RemoteContext:
        if not made:
            made.append(make())
        return made[0]

    try:
        yield remote
    finally:
        finish_runs()  # what the run read goes into the symbol store
        for ctx in made:
            if ctx.client is not None:
                ctx.client.close()
