"""abifit: do the pre-built native parts of a Python stack fit together, and if not, why not.

As a library, eleven functions do what the commands of the same names do and return the report
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
    report = abifit.matrix("sgl-kernel==0.3.21", "torch>=2.8")
    report = abifit.variants("torchcodec==0.8.1")
    report = abifit.cuda()

Each builds the one options value its command's module defines (`abifit.engines.check.
CheckOptions`, ...), which the command line builds from its arguments, and runs the command's
`run_<command>` with it: the two faces cannot drift apart. The keyword arguments are the
options' fields; those of the index (`python_version`, `platforms`, `index_url`, `cache_dir`,
`offline`, ...: `abifit.commands.contexts.IndexOptions`) are taken by every function that reads
an index, and `host`, `assume_driver` and `python` by those that check for a host.

The verdict of `check` and `doctor` (`report.verdict`; `resolve`'s `report.set_check.verdict`)
is a word of `Verdict` (`fits`, `degraded`, `fails`: the rule of `abifit.sim.verdict`, the
same word every command prints; `check` adds `fits-but-host-lacks-driver`), and each
finding's `effect` an `Effect` (what a file that does not load costs). They raise an
`AbifitError` (`UsageError`, `FormatError`, ...) when something cannot be analysed; the
problems they find are data in the report. Importing abifit is cheap: the commands are
imported by the first call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from abifit.errors import AbifitError, FormatError, UsageError
from abifit.version import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from abifit.commands.contexts import HostOptions, IndexOptions, Session
    from abifit.engines.check import CheckReport
    from abifit.engines.cuda import CudaReport
    from abifit.engines.diff import DiffReport
    from abifit.engines.doctor import DoctorReport
    from abifit.engines.explain import ExplainReport
    from abifit.engines.history import HistoryReport
    from abifit.engines.inspect import InspectReport
    from abifit.engines.matrix import MatrixReport
    from abifit.engines.resolve import ResolveReport
    from abifit.engines.snapshot import SnapshotReport
    from abifit.engines.variants import VariantsReport
    from abifit.formats.demangle import demangle
    from abifit.sim.findings import Effect, Verdict

__all__ = [
    "AbifitError",
    "CheckReport",
    "CudaReport",
    "DiffReport",
    "DoctorReport",
    "Effect",
    "ExplainReport",
    "FormatError",
    "HistoryReport",
    "InspectReport",
    "MatrixReport",
    "ResolveReport",
    "SnapshotReport",
    "UsageError",
    "VariantsReport",
    "Verdict",
    "__version__",
    "check",
    "cuda",
    "demangle",
    "diff",
    "doctor",
    "explain",
    "history",
    "inspect",
    "matrix",
    "resolve",
    "snapshot",
    "variants",
]

# names of __all__ imported on first use, so that `import abifit` imports only abifit.errors
_LAZY = {
    "CheckReport": "abifit.engines.check",
    "CudaReport": "abifit.engines.cuda",
    "DiffReport": "abifit.engines.diff",
    "DoctorReport": "abifit.engines.doctor",
    "ExplainReport": "abifit.engines.explain",
    "HistoryReport": "abifit.engines.history",
    "InspectReport": "abifit.engines.inspect",
    "MatrixReport": "abifit.engines.matrix",
    "SnapshotReport": "abifit.engines.snapshot",
    "ResolveReport": "abifit.engines.resolve",
    "VariantsReport": "abifit.engines.variants",
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


Progress = Callable[[str], None]
_Options = TypeVar("_Options")
_Report = TypeVar("_Report")


def check(
    requirements: str | Sequence[str] = (),
    *,
    with_: str | Sequence[str] = (),
    requirement_files: str | Sequence[str] = (),
    snapshot: str | Path | None = None,
    gpu: str | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> CheckReport:
    """Would these wheels load together? What `abifit check` prints, as a report.

    `requirements` are requirements ("sgl-kernel==0.3.21") or local .whl files, checked against
    the `with_` packages (`--with`) and the pins of `requirement_files` (`-r`: requirements
    files, uv.lock, pylock.toml) or of a `snapshot`, for the index's `python_version` ("3.12",
    default: this interpreter) on its `platforms` (default: this machine's, or the manylinux
    tag of `host`), on `host`: this machine (None), a manylinux preset ("manylinux_2_28") or a
    profile saved by `abifit doctor --save-host`; with `gpu`, also whether the targets' GPU
    code runs on it. The index is pip's (`index_url` replaces it); `offline` reads only the
    cache.
    """
    from abifit.commands.check import CheckOptions, run_check

    return _run(run_check, CheckOptions(
        _names(requirements), _names(with_), _names(requirement_files),
        None if snapshot is None else str(snapshot), gpu, _host(host, assume_driver, python),
        _index("check", index)), progress)


def resolve(
    requirements: str | Sequence[str] = (),
    *,
    with_: str | Sequence[str] = (),
    requirement_files: str | Sequence[str] = (),
    cuda: int | None = None,
    gpu: str | None = None,
    jobs: int = 4,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> ResolveReport:
    """The newest set of releases whose metadata agrees and whose binaries load together:
    what `abifit resolve` prints, as a report (`report.found`, `report.pins`, each pin's
    `newer` releases with why they were not chosen, or `report.conflict`).

    The arguments are `check`'s; `cuda` keeps only wheels built for that CUDA major (or none),
    and the host's driver (`assume_driver`, or the profile's) rejects CUDA builds it cannot
    run.
    """
    from abifit.commands.resolve import ResolveOptions, run_resolve

    return _run(run_resolve, ResolveOptions(
        _names(requirements), _names(with_), _names(requirement_files), cuda, gpu, jobs,
        _host(host, assume_driver, python), _index("resolve", index)), progress)


def matrix(
    extension: str,
    against: str,
    *,
    versions: str | None = None,
    gpu: str | None = None,
    jobs: int = 4,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> MatrixReport:
    """Which releases of the host package `against` ("torch>=2.8") the `extension` (each of its
    releases `versions` selects) loads with: what `abifit matrix` prints, as a report. The other
    arguments are `check`'s."""
    from abifit.commands.matrix import MatrixOptions, run_matrix

    return _run(run_matrix, MatrixOptions(
        extension, against, versions, gpu, jobs, _host(host, assume_driver, python),
        _index("matrix", index)), progress)


def variants(release: str, *, every: bool = False, progress: Progress | None = None,
             **index: Any) -> VariantsReport:
    """The wheels of one release ("torchcodec==0.8.1") that the target accepts (all of them
    with `every`), grouped by identical binaries and compared: what `abifit variants` prints,
    as a report."""
    from abifit.commands.variants import VariantsOptions, run_variants

    return _run(run_variants, VariantsOptions(release, every, _index("variants", index)),
                progress)


def doctor(
    python: str | None = None,
    packages: str | Sequence[str] = (),
    *,
    verify: bool = False,
    save_host: str | Path | None = None,
    gpu: str | None = None,
    assume_driver: bool = False,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    no_index: bool = False,
    progress: Progress | None = None,
) -> DoctorReport:
    """Will every native module of an environment load? What `abifit doctor` prints, as a report.

    `python` is the environment's interpreter (default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on
    PATH); `packages` limits the check to those distributions or import packages; `verify` also
    loads each module in a fresh process of that interpreter; `save_host` saves this machine's
    profile there; `gpu` checks the GPU code for that GPU instead of this machine's. A missing
    library is looked up on the index unless `no_index`.
    """
    from abifit.commands.doctor import run_doctor
    from abifit.engines.kept import DoctorOptions

    return _run(run_doctor, DoctorOptions(
        python, _names(packages), verify, None if save_host is None else str(save_host), gpu,
        assume_driver, _path(cache_dir), no_cache, no_index), progress)


def inspect(
    targets: str | Sequence[str],
    *,
    symbols: Literal["none", "defined", "undefined", "all"] | None = None,
    match: str | None = None,
    gpu: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> InspectReport:
    """What ELF objects need and provide. What `abifit inspect` prints, as a report.

    A target is a .so or executable, a directory, a .whl file, a distribution installed in the
    environment of `python`, or a requirement read from the index. `symbols` lists dynamic
    symbols (default: none, or all those whose name matches the glob `match`); `gpu` checks the
    kernels of each object for that GPU.
    """
    from abifit.commands.inspect import InspectOptions, run_inspect

    return _run(run_inspect, InspectOptions(
        _names(targets), symbols, match, gpu, python, _index("inspect", index)), progress)


def explain(
    text: str,
    python: str | None = None,
    *,
    with_: str | Sequence[str] = (),
    releases: int = 6,
    progress: Progress | None = None,
    **index: Any,
) -> ExplainReport:
    """What a pasted error message means, in the environment of `python`, and the fix. What
    `abifit explain` prints, as a report.

    `with_` pins ("torch==2.10.0") stand in for the installed releases; the `releases` newest
    releases up to them are searched for an undefined symbol's definitions (through the symbol
    store; not with `no_cache`). UsageError when the text holds no message abifit recognises.
    """
    from abifit.commands.explain import ExplainOptions, run_explain

    return _run(run_explain, ExplainOptions(text, python, _names(with_), releases,
                                            _index("explain", index)), progress)


def history(
    symbol: str,
    package: str,
    *,
    versions: str | None = None,
    jobs: int = 4,
    progress: Progress | None = None,
    **index: Any,
) -> HistoryReport:
    """Which releases of `package` define `symbol` (mangled, demangled or a glob), and where
    its signature changed. What `abifit history` prints, as a report. The releases read are
    kept in the symbol store of the cache directory."""
    from abifit.commands.history import HistoryOptions, run_history

    return _run(run_history, HistoryOptions(symbol, package, versions, jobs,
                                            _index("history", index)), progress)


def snapshot(
    python: str | None = None,
    *,
    output: str | Path | None = None,
    ld_so_conf: str | None = None,
    ld_so_cache: str | None = None,
    cache_dir: str | Path | None = None,
    no_cache: bool = False,
    no_index: bool = False,
    progress: Progress | None = None,
) -> SnapshotReport:
    """The environment of `python` (default: the active one) as `abifit snapshot` takes it: the
    lock with each module's ABI fingerprint (`report.snapshot`), written to `output` as a PEP
    751 `pylock.toml` when given. `no_index` asks no index where a wheel came from; `ld_so_conf`
    and `ld_so_cache` are the loader's settings to record (default: this machine's)."""
    from abifit.commands.snapshot import SnapshotOptions, run_snapshot

    defaults = SnapshotOptions()
    return _run(run_snapshot, SnapshotOptions(
        python, _path(output), ld_so_conf or defaults.ld_so_conf,
        ld_so_cache or defaults.ld_so_cache, _path(cache_dir), no_cache, no_index), progress)


def diff(
    a: str | Path,
    b: str | Path | None = None,
    *,
    python: str | None = None,
    versions_only: bool = False,
    host: str | None = None,
    assume_driver: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> DiffReport:
    """`abifit diff A B`: each side a snapshot file, an environment (an interpreter or a venv
    directory) or a lock/requirements file; `b` defaults to the environment of `python` (the
    active one). A lock is checked as `check` checks `requirement_files` (on `host`, with the
    index options; its Python the other side's where that side records one, unless
    `python_version` is given); `versions_only` compares a lock's versions alone.
    `report.breaks` holds the changes that break a module A loaded."""
    from abifit.commands.diff import DiffOptions, run_diff

    return _run(run_diff, DiffOptions(str(a), _path(b), python, versions_only,
                                      _host(host, assume_driver, None), _index("diff", index)),
                progress)


def cuda(python: str | None = None, *, gpu: str | None = None,
         cache_dir: str | Path | None = None, no_cache: bool = False,
         progress: Progress | None = None) -> CudaReport:
    """The CUDA stack of this machine (toolkits, driver, runtime libraries, GPUs) against the
    environment of `python`: what `abifit cuda` prints, as a report; `gpu` compares with that
    GPU instead of this machine's."""
    from abifit.commands.cuda import CudaOptions, run_cuda

    return _run(run_cuda, CudaOptions(python, gpu, _path(cache_dir), no_cache), progress)


def _run(command: Callable[[_Options, Session], _Report], options: _Options,
         progress: Progress | None) -> _Report:
    """Run a command in a session of this process's environment; on leaving, what it read
    goes into the symbol store and its connections close."""
    from abifit.commands.contexts import Session

    session = Session(os.environ, progress or _quiet)
    try:
        return command(options, session)
    finally:
        session.close()


def _index(function: str, given: dict[str, Any]) -> IndexOptions:
    """The index options of a function's keyword arguments (sequences as tuples, paths as
    strings); TypeError for one that is not an index option, as for any unknown argument."""
    from dataclasses import fields

    from abifit.commands.contexts import IndexOptions

    known = {f.name for f in fields(IndexOptions)}
    for name in given:
        if name not in known:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")
    plain: dict[str, Any] = {name: tuple(_names(value)) if name in _LISTS else
             _path(value) if name == "cache_dir" else value for name, value in given.items()}
    return IndexOptions(**plain)


_LISTS = ("platforms", "extra_index_urls", "find_links")


def _host(host: str | None, assume_driver: str | None, python: str | None) -> HostOptions:
    from abifit.commands.contexts import HostOptions

    return HostOptions(host, assume_driver, python)


def _path(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def _quiet(_message: str) -> None:
    """Progress that goes nowhere."""


def _names(given: str | Sequence[str]) -> tuple[str, ...]:
    """One name, or several, as a tuple (a string is one name, not its characters)."""
    return (given,) if isinstance(given, str) else tuple(given)
