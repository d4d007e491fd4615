"""Command line: arguments, streams and exit codes.

Data goes to stdout, progress and errors to stderr. Exit codes: 0 fits (or everything was read),
1 problems found, 2 usage or analysis error.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from abifit import __version__
from abifit.commands.contexts import (
    cache_root,
    index_context,
    interpreter_facts,
    open_cache,
    python_version_of,
)
from abifit.commands.inspect import SymbolSelection
from abifit.errors import AbifitError, UsageError
from abifit.host.environment import InterpreterFacts, default_interpreter
from abifit.remote.cache import Cache

if TYPE_CHECKING:
    from abifit.host.profile import HostProfile
    from abifit.remote.wheels import RemoteContext
    from abifit.sim.gpu import GpuTarget

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one `error:` line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"error: {message}\nhint: run `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="abifit", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"abifit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser(
        "inspect",
        help="what ELF objects need and provide",
        description="Show what each ELF object of a file, directory, wheel or installed "
        "distribution needs and provides, as the dynamic loader sees it.",
    )
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="a .so or executable, a directory, a .whl file, or an installed "
                   "distribution name")
    p.add_argument("--python", metavar="PATH",
                   help="interpreter whose environment holds the distributions "
                   "(default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH)")
    p.add_argument("--symbols", choices=[s.value for s in SymbolSelection if s.value != "none"],
                   help="list dynamic symbols, with demangled names")
    p.add_argument("--match", metavar="GLOB",
                   help="only symbols whose mangled or demangled name matches (implies "
                   "--symbols all)")
    p.add_argument("--gpu", metavar="ARCH",
                   help="say whether each object's kernels run on this GPU: sm_120, 9.0, "
                   "9.0@12.4 (with the driver's CUDA release), or 'auto' (this machine's GPUs); "
                   "for a requirement, members with GPU code are then read whole")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(p)
    c = sub.add_parser("cache", help="the cache directory: where, how big, clean it")
    c.add_argument("action", choices=["dir", "info", "clean"])
    c.add_argument("--cache-dir", metavar="DIR", help="cache directory")
    d = sub.add_parser(
        "doctor",
        help="will every native module of an environment load?",
        description="Predict, without importing anything, whether every native module of a "
        "Python environment loads, and explain each failure.",
    )
    d.add_argument("packages", nargs="*", metavar="PACKAGE",
                   help="only the modules of these distributions or import packages")
    d.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    d.add_argument("--verify", action="store_true",
                   help="also load each module in a fresh process of that interpreter and "
                   "compare with the prediction")
    d.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    d.add_argument("--cache-dir", metavar="DIR", help="cache directory (default: "
                   "$ABIFIT_CACHE_DIR, else the user cache directory)")
    d.add_argument("--save-host", metavar="FILE",
                   help="also save this machine's host profile (loader settings, system "
                   "libraries), for `check --host FILE` elsewhere")
    d.add_argument("--no-index", action="store_true",
                   help="do not ask the package index which wheel ships a missing library")
    d.add_argument("--gpu", metavar="ARCH",
                   help="check the GPU code of the environment for this GPU (sm_120, 9.0, "
                   "9.0@12.4), instead of this machine's GPUs")
    d.add_argument("--json", action="store_true", help="print one JSON document")
    u = sub.add_parser(
        "cuda",
        help="the CUDA stack: toolkits, driver, GPUs, and what the environment needs of them",
        description="Report the CUDA toolkits installed side by side and which of their library "
        "directories the loader searches, the NVIDIA driver and the newest CUDA it supports, the "
        "GPUs, and the CUDA runtime libraries a Python environment needs and ships; find "
        "disagreements and kernels missing for the GPU.",
    )
    u.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    u.add_argument("--gpu", metavar="ARCH",
                   help="check the environment's GPU code for this GPU instead of this machine's")
    u.add_argument("--cache-dir", metavar="DIR", help="cache directory")
    u.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    u.add_argument("--json", action="store_true", help="print one JSON document")
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
    _host_options(k)
    k.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(k)
    m = sub.add_parser(
        "matrix",
        help="which versions of a host package does an extension fit?",
        description="Check an extension against every release (and wheel variant) of a host "
        "package that a specifier selects.",
    )
    m.add_argument("extension", metavar="EXT_REQ", help="the extension, e.g. sgl-kernel==0.3.21")
    m.add_argument("--against", required=True, metavar="HOST_SPEC",
                   help="the host releases, e.g. 'torch>=2.8'")
    m.add_argument("--jobs", type=int, default=4, metavar="N",
                   help="host releases checked at once (default 4)")
    m.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    _host_options(m)
    m.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(m)
    v = sub.add_parser(
        "variants",
        help="how do the wheels of one release differ?",
        description="List every wheel of one release and compare their binary members.",
    )
    v.add_argument("release", metavar="NAME==VERSION")
    v.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(v)
    return parser


def _host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", metavar="FILE|PRESET",
                   help="check for the machine whose profile `abifit doctor --save-host FILE` "
                   "saved (its loader settings and system libraries) instead of this one, or "
                   "for a manylinux host: manylinux2014, manylinux_2_28, manylinux_2_34")
    p.add_argument("--assume-driver", metavar="VERSION",
                   help="check for a machine with this NVIDIA driver (its libcuda.so.1 is assumed "
                   "present)")
    p.add_argument("--python", metavar="PATH",
                   help="interpreter whose executable starts the simulated process (default: the "
                   "one running abifit)")


def _index_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("wheels from an index (a TARGET such as torch==2.10.0)")
    g.add_argument("--python-version", metavar="X.Y", help="target Python (default: this one)")
    g.add_argument("--platform", action="append", metavar="TAG",
                   help="target platform tag, e.g. manylinux_2_28_x86_64 (repeatable)")
    g.add_argument("--implementation", default="cp", help="cp (default) or pp")
    g.add_argument("--index-url", metavar="URL", help="replaces pip's configured index")
    g.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    g.add_argument("--find-links", action="append", default=[], metavar="DIR")
    g.add_argument("--pre", action="store_true", help="allow pre-releases")
    g.add_argument("--cache-dir", metavar="DIR",
                   help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--refresh", action="store_true", help="fetch again what the cache holds")
    g.add_argument("--offline", action="store_true",
                   help="never touch the network; fail if something is not in the cache")


def _cache(args: argparse.Namespace) -> Cache | None:
    return open_cache(args.cache_dir, os.environ, enabled=not getattr(args, "no_cache", False),
                      refresh=getattr(args, "refresh", False))


def _remote(args: argparse.Namespace) -> Callable[[], RemoteContext]:
    return index_context(lambda: _cache(args), os.environ, offline=args.offline,
                         index_url=args.index_url, extra_index_urls=args.extra_index_url,
                         find_links=args.find_links, python_version=args.python_version,
                         platforms=args.platform, implementation=args.implementation,
                         prereleases=args.pre)


def _progress(stream: TextIO) -> Callable[[str], None]:
    if not stream.isatty():
        return lambda _message: None

    def show(message: str) -> None:
        stream.write(f"\r\x1b[K{message[:150]}")
        stream.flush()

    return show


def _clear_progress(stream: TextIO) -> None:
    if stream.isatty():
        stream.write("\r\x1b[K")
        stream.flush()


def _facts(python: str | None) -> Callable[[], InterpreterFacts]:
    return interpreter_facts(python, os.environ)


def _run_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.contexts import symbol_filter
    from abifit.commands.inspect import inspect
    from abifit.report.inspect import inspect_json, inspect_text
    from abifit.report.json import dumps

    flt = symbol_filter(args.symbols, args.match)
    remote = _remote(args)
    gpus = _gpu_targets(args.gpu)
    try:
        report = inspect(args.targets, flt, _facts(args.python), _progress(err), remote,
                         gpus[0] if gpus else None)
    finally:
        _clear_progress(err)
    transfer = _transfer(remote)
    out.write(dumps(inspect_json(report, transfer)) + "\n" if args.json
              else inspect_text(report))
    if transfer is not None:
        err.write(f"fetched {transfer['bytes_fetched']:,} bytes in {transfer['requests']} "
                  f"requests from wheels of {transfer['wheel_bytes']:,} bytes\n")
    for obj in report.objects:
        if obj.error is not None:
            err.write(f"error: {obj.error}\n")
    if report.failed:
        return EXIT_ERROR
    if any(o.gpu and o.gpu.verdict == "no-kernel-image" for o in report.objects):
        return EXIT_PROBLEMS
    return EXIT_OK


def _gpu_targets(option: str | None) -> tuple[GpuTarget, ...]:
    """The GPUs `--gpu` names: one it spells out, or this machine's with 'auto'."""
    from abifit.commands.gpus import detect_targets
    from abifit.sim.gpu import parse_gpu_option

    if option is None:
        return ()
    if option == "auto":
        found, reason = detect_targets(dict(os.environ))
        if not found:
            raise UsageError(f"--gpu auto: no GPU found on this machine ({reason})")
        return found
    try:
        return (parse_gpu_option(option),)
    except ValueError as e:
        raise UsageError(f"--gpu {option}: {e}") from e


def _transfer(remote: Callable[[], RemoteContext]) -> dict[str, int] | None:
    info = remote.cache_info()  # type: ignore[attr-defined]
    if info.currsize == 0:
        return None
    ctx = remote()
    wheel_bytes = sum(ctx.state.wheel_sizes.values())
    if ctx.client is None:
        return {"bytes_fetched": 0, "requests": 0, "wheel_bytes": wheel_bytes}
    t = ctx.client.transfer
    return {"bytes_fetched": t.bytes_fetched, "requests": t.requests, "wheel_bytes": wheel_bytes}


def _run_cache(args: argparse.Namespace, out: TextIO) -> int:
    cache = Cache(cache_root(args.cache_dir, os.environ))
    if args.action == "dir":
        out.write(f"{cache.root}\n")
    elif args.action == "info":
        for bucket in cache.info():
            out.write(f"{bucket.name:<10} {bucket.entries:>7} entries {bucket.bytes:>14,} bytes\n")
        out.write(f"{cache.root}\n")
    else:
        out.write(f"removed {cache.clean():,} bytes from {cache.root}\n")
    return EXIT_OK


def _run_doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.doctor import doctor
    from abifit.report.doctor import doctor_json, doctor_text
    from abifit.report.json import dumps

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    try:
        report = doctor(args.python or default_interpreter(os.environ), args.packages,
                        verify=args.verify, cache_dir=cache, environ=dict(os.environ),
                        progress=_progress(err),
                        gpus=_gpu_targets(args.gpu) if args.gpu else None,
                        remote=None if args.no_index else _doctor_index(args),
                        save_host=Path(args.save_host) if args.save_host else None)
    finally:
        _clear_progress(err)
    out.write(dumps(doctor_json(report)) + "\n" if args.json else doctor_text(report))
    return EXIT_PROBLEMS if report.problems else EXIT_OK


def _run_cuda(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.cuda import cuda_report
    from abifit.report.cuda import cuda_json, cuda_text
    from abifit.report.json import dumps

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    try:
        report = cuda_report(args.python or default_interpreter(os.environ),
                             environ=dict(os.environ), cache_dir=cache, progress=_progress(err),
                             gpus=_gpu_targets(args.gpu) if args.gpu else None)
    finally:
        _clear_progress(err)
    out.write(dumps(cuda_json(report)) + "\n" if args.json else cuda_text(report))
    return EXIT_PROBLEMS if report.findings else EXIT_OK


def _doctor_index(args: argparse.Namespace) -> Callable[[], RemoteContext]:
    """The index doctor asks which wheel ships a missing library: pip's configuration, the
    target environment's Python on this machine's platform."""
    return index_context(lambda: _cache(args), os.environ,
                         python_version=python_version_of(_facts(args.python)))


def _host(args: argparse.Namespace) -> HostProfile:
    from abifit.host.profile import host_profile

    return host_profile(args.host, args.assume_driver, dict(os.environ))


def _host_platform(args: argparse.Namespace) -> HostProfile:
    """The host of a check; without --platform, a preset or a saved profile of a known glibc
    sets the target platform to its manylinux tag (the wheels pip would choose there)."""
    host = _host(args)
    tag = host.platform_tag(platform.machine()) if not args.platform else None
    if tag is not None:
        args.platform = [tag]
    return host


def _run_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.check import check
    from abifit.formats.pins import read_pins
    from abifit.report.check import check_json, check_text
    from abifit.report.json import dumps

    targets = list(args.targets)
    for path in args.requirement:
        pins = read_pins(path)
        targets += pins.requirements
        for entry in pins.skipped:
            err.write(f"warning: {path}: not checked: {entry}\n")
    host = _host_platform(args)
    remote = _remote(args)
    gpus = _gpu_targets(args.gpu)
    try:
        report = check(targets, args.withs, remote(), remote().target, host,
                       _progress(err), args.python, skip_pure=bool(args.requirement),
                       gpu=gpus[0] if gpus else None)
    finally:
        _clear_progress(err)
    transfer = _transfer(remote)
    out.write(dumps(check_json(report, transfer)) + "\n" if args.json else check_text(report))
    if transfer is not None and not args.json:
        err.write(f"fetched {transfer['bytes_fetched']:,} bytes in {transfer['requests']} "
                  f"requests from wheels of {transfer['wheel_bytes']:,} bytes\n")
    return EXIT_OK if report.verdict == "fits" else EXIT_PROBLEMS


def _run_matrix(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.matrix import matrix
    from abifit.report.json import dumps
    from abifit.report.matrix import matrix_html, matrix_json, matrix_text

    host = _host_platform(args)
    remote = _remote(args)
    try:
        report = matrix(args.extension, args.against, remote(), remote().target, host,
                        _progress(err), args.jobs, args.python)
    finally:
        _clear_progress(err)
    transfer = _transfer(remote)
    if args.html:
        Path(args.html).write_text(matrix_html(report), "utf-8")
    out.write(dumps(matrix_json(report, transfer)) + "\n" if args.json else matrix_text(report))
    if transfer is not None and not args.json:
        err.write(f"fetched {transfer['bytes_fetched']:,} bytes in {transfer['requests']} "
                  f"requests from wheels of {transfer['wheel_bytes']:,} bytes\n")
    return EXIT_OK if report.fits else EXIT_PROBLEMS


def _run_variants(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.variants import variants
    from abifit.report.json import dumps
    from abifit.report.variants import variants_json, variants_text

    remote = _remote(args)
    try:
        report = variants(args.release, remote(), _progress(err))
    finally:
        _clear_progress(err)
    out.write(dumps(variants_json(report, _transfer(remote))) + "\n" if args.json
              else variants_text(report))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    try:
        if args.command == "doctor":
            return _run_doctor(args, out, err)
        if args.command == "cache":
            return _run_cache(args, out)
        if args.command == "check":
            return _run_check(args, out, err)
        if args.command == "cuda":
            return _run_cuda(args, out, err)
        if args.command == "matrix":
            return _run_matrix(args, out, err)
        if args.command == "variants":
            return _run_variants(args, out, err)
        return _run_inspect(args, out, err)
    except AbifitError as e:
        err.write(f"error: {e}\n")
        return EXIT_ERROR
    except BrokenPipeError:
        # the reader went away (`abifit ... | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
