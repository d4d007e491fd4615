"""Command line: arguments, streams and exit codes.

Data goes to stdout; progress, notes, warnings and errors to stderr. Every error is one `error:`
line (and a `hint:` line where a fix is known); the traceback of an error is shown only with
`--verbose`. On a terminal, text is wrapped to its width and coloured (`--color`, `NO_COLOR`);
JSON is neither. Ctrl-C ends a command at once, its threads and worker processes included. The
exit codes are `EXIT_STATUS`, which `abifit --help` prints.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import logging
import os
import platform
import shutil
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from abifit import __version__
from abifit.commands.contexts import (
    SymbolSelection,
    cache_root,
    finish_runs,
    index_context,
    interpreter_facts,
    open_cache,
    python_version_of,
    standing_in,
)
from abifit.errors import AbifitError, UsageError
from abifit.host.environment import InterpreterFacts, InterpreterQuery, default_interpreter
from abifit.host.localfs import interpreter_problem
from abifit.remote.cache import Cache
from abifit.remote.cores import stop_workers
from abifit.report.terminal import Style, Terminal
from abifit.sim.findings import Effect, Finding

if TYPE_CHECKING:
    from abifit.commands.doctor import DoctorReport
    from abifit.commands.explain import ExtensionFits, SymbolHistory
    from abifit.commands.kept import DoctorPrinted
    from abifit.formats.pins import Pin, Pins
    from abifit.formats.snapshot import Snapshot
    from abifit.host.profile import HostProfile
    from abifit.remote.index import IndexFile
    from abifit.remote.wheels import RemoteContext
    from abifit.sim.gpu import GpuTarget

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_ERROR = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

EXIT_STATUS = """\
exit status:
  0    fits: every import works and nothing a package ships is lost (modules that need a
       prerequisite from outside the stack, such as FFmpeg, are listed; --fail-on
       prerequisite makes them count) (matrix: a host release fits;
       history: a release defines the symbol; resolve: a set was found); inspect, variants,
       cache, index: done;
       explain: no message confirmed in the environment
  1    problems found: fails (an import raises) or degraded (every import works, but a part
       a package ships cannot load because of the stack or the host; --fail-on fails lets
       it pass), a GPU without a kernel image, a CUDA
       problem (matrix: no host release fits; explain: a message confirmed; history: no
       release examined defines the symbol; resolve: no set fits)
  2    usage or analysis error: a bad option or input; a file, interpreter or index that could
       not be read (inspect: an object; matrix: every host release; index: a wheel, or
       a file to import; explain: no message recognised in the text)
  3    internal error: a bug in abifit (--verbose shows its traceback)
  130  interrupted (Ctrl-C); 143 and 129 for SIGTERM and SIGHUP"""

# Commands whose text report ends with its verdict line: all that --quiet prints of them.
_VERDICT_COMMANDS = frozenset({"check", "doctor", "cuda", "matrix", "explain", "diff",
                              "resolve"})


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one `error:` line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"error: {message}\nhint: run `{self.prog} --help`\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="abifit", epilog=EXIT_STATUS,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Tell whether the pre-built native parts of a Python stack fit "
                     "together, and why not.")
    _output_options(parser, on_command=False)
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
    c.add_argument("--max-size", type=_size, metavar="SIZE",
                   help="prune: remove the oldest entries until the cache holds at most SIZE "
                   "(bytes, or with K, M, G: 500M; default 1G)")
    c.add_argument("--older-than", type=float, metavar="DAYS",
                   help="prune: remove the entries written more than DAYS days ago")
    c.add_argument("--cache-dir", metavar="DIR",
                   help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
    c.add_argument("--json", action="store_true", help="with `info`: print one JSON document")
    x = sub.add_parser(
        "index",
        help="the symbol store: fill it from an index, export, import, show it",
        description="Fill, share and show the symbol store: the defined and required symbols "
        "of wheels' ELF members, kept in one SQLite database in the cache directory. `add` "
        "records the wheel each requirement selects (or every release --versions selects); "
        "`export FILE` writes the store to a file that `import FILE` reads on another machine "
        "(checked whole before anything is recorded); `info` shows what it holds.",
    )
    actions = x.add_subparsers(dest="action", required=True, parser_class=_Parser)
    xa = actions.add_parser("add", help="record the wheels of requirements",
                            description="Record the ELF members of the wheel each requirement "
                            "selects for the target; wheels the store holds are skipped.")
    xa.add_argument("requirements", nargs="+", metavar="REQ",
                    help="a requirement (torch==2.10.0), or with --versions one package name")
    xa.add_argument("--versions", metavar="SPEC",
                    help="every release of the one package named that SPEC selects, e.g. "
                    "'>=2.6,<2.11'")
    xa.add_argument("--jobs", type=_positive, default=4, metavar="N",
                    help="wheels read at once (default 4)")
    xa.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(xa)
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
    d.add_argument("--assume-driver", action="store_true",
                   help="take the NVIDIA driver's libcuda.so.1 as present where this machine "
                   "lacks it, to see what else would fail behind it")
    _fail_on_option(d)
    d.add_argument("--json", action="store_true", help="print one JSON document")
    e = sub.add_parser(
        "explain",
        help="from a pasted error message to what is wrong and the fix",
        description="Read a pasted error message or traceback for the loader's and CUDA's "
        "messages (undefined symbol, cannot open shared object file, version not found, no "
        "kernel image, an unsupported GPU architecture, an old driver, torchvision's masks of a "
        "failed load and its CUDA major check), find the object each names in the environment, "
        "simulate it as doctor does, and say who provides what is missing and the fix. Exit "
        "status: 0 when no message is confirmed in the environment (each is explained, or the "
        "object loads there), 1 when one is confirmed, 2 when the text holds none abifit "
        "recognises.",
    )
    e.add_argument("text", nargs="?", metavar="TEXT",
                   help="the error text; '-' or nothing reads it from stdin (when stdin is not "
                   "a terminal)")
    e.add_argument("--python", metavar="PATH",
                   help="interpreter of the environment (default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                   "python3 on PATH)")
    e.add_argument("--with", dest="standing_in", action="append", default=[],
                   metavar="NAME==VERSION",
                   help="a release that stands in for the installed one, e.g. torch==2.10.0: "
                   "the releases searched for a symbol and the fix are about it")
    e.add_argument("--releases", type=_positive, default=6, metavar="N",
                   help="how many releases of the package that defines an undefined symbol are "
                   "searched for it, up to the installed (or --with) one; they are read once "
                   "into the symbol store (default 6)")
    e.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(e)
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
    k.add_argument("--snapshot", metavar="FILE",
                   help="check the stack a snapshot (`abifit snapshot -o FILE`) locked, with the "
                   "loader settings it recorded for the fix of a library not found")
    _host_options(k)
    _fail_on_option(k)
    k.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(k)
    _snapshot_parsers(sub)
    m = sub.add_parser(
        "matrix",
        help="which versions of a host package does an extension fit?",
        description="Check an extension (or each of its releases --versions selects) against "
        "every release (and wheel variant) of a host package that a specifier selects: a grid "
        "of pairwise verdicts, each a check whose result the cache keeps. --html writes a page "
        "that opens each failing cell to its symbols and the parameter that changed.",
    )
    m.add_argument("extension", metavar="EXT_REQ", help="the extension, e.g. sgl-kernel==0.3.21 "
                   "(with --versions, its name: sgl-kernel)")
    m.add_argument("--against", required=True, metavar="HOST_SPEC",
                   help="the host releases, e.g. 'torch>=2.8'")
    m.add_argument("--versions", metavar="SPEC",
                   help="a row per extension release this specifier selects, newest first, "
                   "e.g. '>=0.3.16,<=0.3.21' (default: one row, EXT_REQ as given)")
    m.add_argument("--gpu", metavar="ARCH",
                   help="also check that the extension's GPU code runs on this GPU (sm_120, "
                   "9.0, 9.0@12.4, auto); members with GPU code are read whole")
    m.add_argument("--jobs", type=_positive, default=4, metavar="N",
                   help="cells (pairs) checked at once (default 4)")
    m.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page")
    _host_options(m)
    m.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(m)
    r = sub.add_parser(
        "resolve",
        help="the newest set of releases whose binaries load together",
        description="Resolve requirements over the index as pip does, with the loader as one "
        "more constraint: a set is chosen only when every extension module of every package "
        "loads next to the others. Newest releases first; for each package, the newer releases "
        "not chosen and why; no set: the conflict, as a derivation.",
    )
    r.add_argument("requirements", nargs="*", metavar="REQ",
                   help="a requirement, e.g. sgl-kernel==0.3.21 or torch")
    r.add_argument("-r", "--requirement", dest="requirement_files", action="append",
                   default=[], metavar="FILE",
                   help="the requirements of a requirements file, uv.lock or pylock.toml "
                   "(markers evaluated for the target; repeatable)")
    r.add_argument("--with", dest="withs", action="append", default=[], metavar="REQ",
                   help="a package the set must hold, at a version REQ allows (repeatable)")
    r.add_argument("--cuda", type=_positive, metavar="MAJOR",
                   help="keep only wheels built for this CUDA major (+cu130, nvidia-*-cu13) "
                   "or for none")
    r.add_argument("--gpu", metavar="ARCH",
                   help="reject releases whose GPU code has no kernel image for this GPU "
                   "(sm_120, 9.0, auto); their members with GPU code are read whole")
    r.add_argument("-o", "--output", metavar="FILE",
                   help="also write the pinned set to FILE: requirements, constraints when the "
                   "name says so, a PEP 751 lock for pylock.toml or pylock.NAME.toml, or what "
                   "--format says")
    r.add_argument("--format", choices=("requirements", "constraints", "pylock"),
                   help="what -o writes (default: by the file name)")
    r.add_argument("--html", metavar="FILE",
                   help="also write a self-contained HTML page of the resolution")
    r.add_argument("--jobs", type=_positive, default=4, metavar="N",
                   help="pairs checked at once (default 4)")
    _host_options(r)
    r.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(r)
    v = sub.add_parser(
        "variants",
        help="how do the wheels of one release differ?",
        description="Group the wheels of one release that the target accepts (every wheel "
        "with --all) by identical binary members, and compare the members that differ by what "
        "they need.",
    )
    v.add_argument("release", metavar="NAME==VERSION")
    v.add_argument("--all", dest="every", action="store_true",
                   help="compare every wheel of the release, not only those the target "
                   "(--python-version, --platform, --implementation; default: this "
                   "interpreter) accepts")
    v.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(v)
    h = sub.add_parser(
        "history",
        help="which releases of a package define a symbol?",
        description="List the releases of a package that define a symbol (mangled, demangled, "
        "or a glob over either), under each form its name took, and where its signature "
        "changed. Releases not yet in the symbol store of the cache directory are read by "
        "range requests and recorded; after that, history is a query.",
    )
    h.add_argument("symbol", metavar="SYMBOL",
                   help="e.g. _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib, "
                   "'c10::cuda::c10_cuda_check_implementation', or a glob")
    h.add_argument("--in", dest="package", required=True, metavar="PACKAGE",
                   help="the package whose releases are searched, e.g. torch")
    h.add_argument("--versions", metavar="SPEC",
                   help="the releases, e.g. '>=2.6,<2.11' (default: those in the symbol "
                   "store, else the newest few on the index)")
    h.add_argument("--jobs", type=_positive, default=4, metavar="N",
                   help="releases read at once (default 4)")
    h.add_argument("--json", action="store_true", help="print one JSON document")
    _index_options(h)
    for command in sub.choices.values():  # the output options also after the command's name
        _output_options(command, on_command=True)
    for action in actions.choices.values():
        _output_options(action, on_command=True)
    return parser


def _snapshot_parsers(sub: argparse._SubParsersAction[_Parser]) -> None:
    """`snapshot` and `diff`."""
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
    f = sub.add_parser(
        "diff",
        help="what changed between two stacks, ABI first",
        description="Compare two stacks: the modules of A that B breaks (and why), the CUDA "
        "majors, libraries, version nodes and symbol bindings that changed, the host facts "
        "A's modules depended on, then the versions. Each side is a snapshot file (abifit "
        "snapshot's pylock.toml), an environment (a Python interpreter, or a venv directory "
        "holding bin/python: snapshotted here), or a lock or requirements file (pylock.toml, "
        "uv.lock, requirements.txt: versions only). Without B, B is the environment of "
        "--python. Exit status: 0 when B breaks nothing A loaded, 1 when it does.")
    f.add_argument("a", metavar="A", help="a snapshot, environment, or lock/requirements file")
    f.add_argument("b", metavar="B", nargs="?",
                   help="the same kinds (default: the environment of --python)")
    f.add_argument("--python", metavar="PATH",
                   help="the environment B is when B is not given (default: $VIRTUAL_ENV, "
                   "$CONDA_PREFIX, python3 on PATH)")
    f.add_argument("--cache-dir", metavar="DIR", help="cache directory")
    f.add_argument("--no-cache", action="store_true", help="do not read or write the ELF cache")
    f.add_argument("--json", action="store_true", help="print one JSON document")


def _output_options(p: argparse.ArgumentParser, *, on_command: bool) -> None:
    """-q, -v and --color, on the top-level parser with their defaults, and on each command's
    without (so that one given before the command's name is not reset by its parser)."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if on_command else value

    g = p.add_argument_group("output")
    g.add_argument("-q", "--quiet", action="store_true", default=default(False),
                   help="print only the verdict (or a command's data), warnings and errors: no "
                   "notes, progress or transfer line")
    g.add_argument("-v", "--verbose", action="count", default=default(0),
                   help="show the traceback of an error and Python's warnings; -vv also each "
                   "HTTP request")
    g.add_argument("--color", choices=("auto", "always", "never"), default=default("auto"),
                   help="colour the text: auto (the default) on a terminal unless NO_COLOR is "
                   "set")


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds (0 or more), not {text!r}")
    return value


FAIL_ON = ("fails", "degraded", "prerequisite")


def _fail_on_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-on", choices=FAIL_ON, default="degraded",
                   help="the least that exits 1: fails (an import raises), degraded (the "
                   "default: also a part of a package lost to the stack or host), prerequisite "
                   "(also a library from outside the stack that a package needs, such as FFmpeg)")


def _verdict_status(verdict: str, findings: Iterable[Finding], fail_on: str) -> int:
    """`_exit_status` of a verdict and its findings."""
    return _exit_status(verdict, any(f.effect is Effect.PREREQUISITE for f in findings),
                          fail_on)


def _exit_status(verdict: str, prerequisite: bool, fail_on: str) -> int:
    """The exit status of a verdict (`sim.verdict`) under `--fail-on`: 1 for `fails`, for
    `degraded` unless only failures count, for a prerequisite (a finding with that effect)
    when they are asked to count."""
    if verdict == "fails" or (verdict == "degraded" and fail_on != "fails"):
        return EXIT_PROBLEMS
    if fail_on == "prerequisite" and prerequisite:
        return EXIT_PROBLEMS
    return EXIT_OK if verdict == "fits" else EXIT_PROBLEMS


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
    g.add_argument("--implementation", default="cp", choices=("cp", "pp"),
                   help="cp (default) or pp")
    g.add_argument("-i", "--index-url", metavar="URL", help="replaces pip's configured index")
    g.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    g.add_argument("-f", "--find-links", action="append", default=[], metavar="DIR")
    g.add_argument("--no-index", action="store_true",
                   help="ask no index: only the --find-links locations (as pip's --no-index)")
    g.add_argument("--pre", action="store_true", help="allow pre-releases")
    g.add_argument("--cache-dir", metavar="DIR",
                   help="cache directory (default: $ABIFIT_CACHE_DIR, else the user cache)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    g.add_argument("--refresh", action="store_true", help="fetch again what the cache holds")
    g.add_argument("--offline", action="store_true",
                   help="never touch the network; fail if something is not in the cache")
    g.add_argument("--deadline", type=_seconds, default=None, metavar="SECONDS",
                   help="every network request ends within this many seconds of the first "
                   "(default: 900; 0: none); each one, with its retries, ends within 60 s of "
                   "waiting")
    g.add_argument("--max-download", type=_size, default=None, metavar="SIZE",
                   help="the largest file downloaded whole, from a server that does not answer "
                   "Range requests (bytes, or with K, M, G; default 2G)")


def _cache(args: argparse.Namespace) -> Cache | None:
    return open_cache(args.cache_dir, os.environ, enabled=not getattr(args, "no_cache", False),
                      refresh=getattr(args, "refresh", False))


def _remote(args: argparse.Namespace) -> Callable[[], RemoteContext]:
    return index_context(lambda: _cache(args), os.environ, offline=args.offline,
                         index_url=args.index_url, extra_index_urls=args.extra_index_url,
                         find_links=args.find_links, python_version=args.python_version,
                         platforms=args.platform, implementation=args.implementation,
                         prereleases=args.pre, no_index=getattr(args, "no_index", False),
                         deadline_s=args.deadline, max_download=args.max_download)


def _progress(stream: TextIO) -> Callable[[str], None]:
    """A progress line on `stream`, redrawn in place, when it shows progress."""
    if not _shows_progress(stream):
        return lambda _message: None
    width = (stream.style.width if isinstance(stream, Terminal) else None) or 150

    def show(message: str) -> None:
        stream.write(f"\r\x1b[K{message[:width - 1]}")
        stream.flush()

    return show


def _clear_progress(stream: TextIO) -> None:
    if _shows_progress(stream):
        stream.write("\r\x1b[K")
        stream.flush()


def _shows_progress(stream: TextIO) -> bool:
    """A terminal shows progress, unless --quiet."""
    return stream.progress if isinstance(stream, Terminal) else stream.isatty()


def _transfer_line(err: TextIO, transfer: dict[str, int] | None, args: argparse.Namespace,
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
    _transfer_line(err, transfer, args, remote)
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


def _run_cache(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.remote.cache import RootState
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


def _size(text: str) -> int:
    """A size: bytes, or a number with K, M or G (powers of 1024)."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    unit = text[-1:].upper()
    try:
        number = float(text[:-1] if unit in scale else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 500M, 2G)") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(number * scale.get(unit, 1))


def _run_index(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.index import index_add, index_export, index_import, open_store
    from abifit.report.index import IndexReport, index_json, index_text
    from abifit.report.json import dumps

    root = cache_root(args.cache_dir, os.environ)
    with open_store(root) as store:
        report: IndexReport
        if args.action == "add":
            remote = _remote(args)
            try:
                report = index_add(args.requirements, args.versions, remote(), store,
                                   _progress(err), args.jobs)
            finally:
                _clear_progress(err)
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


def _run_doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # the interpreter is asked for its facts while the command's modules are imported
    query = InterpreterQuery(args.python or default_interpreter(os.environ))
    from abifit.commands.kept import ask, kept_printed

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    environ = dict(os.environ)
    asked = ask(query, environ, _gpu_targets(args.gpu) if args.gpu else None)
    if not args.verify and not args.save_host:  # a warm run prints what the kept run printed
        kept = kept_printed(cache, asked, tuple(args.packages), offline=args.no_index,
                            assume_driver=args.assume_driver, environ=environ)
        if kept is not None:
            return _print_doctor(kept, args, out)
    from abifit.commands.doctor import doctor
    from abifit.report.doctor import doctor_printed

    made: list[DoctorPrinted] = []

    def printed(report: DoctorReport) -> DoctorPrinted:
        made.append(doctor_printed(report))
        return made[-1]

    try:
        report = doctor(query, args.packages,
                        verify=args.verify, cache_dir=cache, environ=environ,
                        progress=_progress(err),
                        remote=None if args.no_index else _doctor_index(args),
                        save_host=Path(args.save_host) if args.save_host else None,
                        assume_driver=args.assume_driver, asked=asked, printed=printed)
    finally:
        _clear_progress(err)
    return _print_doctor(made[-1] if made else printed(report), args, out)


def _print_doctor(printed: DoctorPrinted, args: argparse.Namespace, out: TextIO) -> int:
    out.write(printed.json if args.json else printed.verbose_text if args.verbose
              else printed.text)
    return _exit_status(printed.verdict, printed.prerequisite, args.fail_on)


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


def _run_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.explain import explain
    from abifit.formats.errortext import read_clues
    from abifit.report.explain import explain_json, explain_text
    from abifit.report.json import dumps

    if args.text is not None and args.text != "-":
        text = args.text
    elif args.text == "-" or not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        raise UsageError("explain: give the error text as an argument, or '-' and pipe it in",
                         "abifit explain \"$(cat error.log)\"")
    clues = read_clues(text)
    if not clues:
        raise UsageError("explain: no loader or CUDA error message abifit recognises in the "
                         "text (undefined symbol, cannot open shared object file, version ... "
                         "not found, no kernel image, ...)")
    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    python = args.python or default_interpreter(os.environ)
    progress = _progress(err)
    try:
        history, fits = _release_seams(args, python, progress)
        report = explain(clues, python, environ=dict(os.environ), cache_dir=cache,
                         progress=progress, history=history, fits=fits,
                         standing_in=standing_in(args.standing_in))
    finally:
        _clear_progress(err)
    out.write(dumps(explain_json(report)) + "\n" if args.json else explain_text(report))
    return EXIT_PROBLEMS if report.problems else EXIT_OK


def _release_seams(args: argparse.Namespace, python: str, progress: Callable[[str], None],
                   ) -> tuple[SymbolHistory | None, ExtensionFits | None]:
    """`explain`'s seams to the releases on the index (`history.release_seams`), for the
    environment's Python unless --python-version says otherwise; none with --no-cache."""
    from abifit.commands.history import release_seams

    cache = _cache(args)
    if cache is None:
        return None, None

    @functools.cache
    def remote() -> RemoteContext:
        if not args.python_version:
            args.python_version = python_version_of(_facts(python))
        return _remote(args)()

    return release_seams(remote, cache.root, args.releases, progress)


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


def _replayed(args: argparse.Namespace, err: TextIO) -> tuple[Snapshot, list[Pin]]:
    """`check --snapshot FILE`: the snapshot and its pins (each the wheel it recorded), for its
    Python unless --python-version says otherwise."""
    from abifit.commands.snapshot import read_snapshot, snapshot_pins

    snap = read_snapshot(args.snapshot)
    pins, skipped = snapshot_pins(snap)
    for entry in skipped:
        err.write(f"warning: {args.snapshot}: not checked: {entry}\n")
    if not args.python_version and snap.python_version:
        args.python_version = ".".join(snap.python_version.split(".")[:2])
    return snap, pins


_LINUX_PLATFORMS = ("manylinux", "musllinux", "linux_")


def _pin_files(paths: Sequence[str], remote: RemoteContext, err: TextIO,
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


def _command_line(args: argparse.Namespace) -> str:
    """The command as it was given (for the pages: what made them), quoted for a shell."""
    import shlex

    return shlex.join(["abifit", *getattr(args, "argv", [])])


def _linux_targets(args: argparse.Namespace) -> None:
    """Refuse a target platform abifit does not check (Windows, macOS, ...): its extension
    modules are not ELF files, and saying `fits` for them would be a guess."""
    for tag in getattr(args, "platform", None) or ():
        if not tag.startswith(_LINUX_PLATFORMS):
            kind = ("Windows" if tag.startswith("win") else
                    "macOS" if tag.startswith("macosx") else "this platform")
            raise UsageError(f"not checked: --platform {tag}: abifit checks Linux (ELF) "
                             f"extension modules only, so it cannot say whether a {kind} "
                             "stack fits (give a manylinux, musllinux or linux_ tag)")


def _writable(path: str | None, what: str) -> None:
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


def _run_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.check import check, locked_targets
    from abifit.report.check import check_json, check_text
    from abifit.report.json import dumps

    _linux_targets(args)

    targets: list[str | IndexFile] = list(args.targets)
    snap, recorded = _replayed(args, err) if args.snapshot else (None, [])  # may set the Python
    host = _host_platform(args)
    remote = _remote(args)
    if recorded:  # the wheels the snapshot recorded, not whatever the index serves now
        targets += locked_targets(recorded, remote())
    for pins in _pin_files(args.requirement, remote(), err, "checked"):
        targets += locked_targets(pins.pins, remote())  # each the file the lock names
    gpus = _gpu_targets(args.gpu)
    try:
        report = check(targets, args.withs, remote(), remote().target, host,
                       _progress(err), args.python,
                       skip_pure=bool(args.requirement or args.snapshot),
                       gpu=gpus[0] if gpus else None)
    finally:
        _clear_progress(err)
    if snap is not None:
        from abifit.commands.snapshot import with_recorded_fixes

        report = with_recorded_fixes(report, snap)
    transfer = _transfer(remote)
    if not args.quiet and not args.json:  # the JSON document holds them
        err.writelines(f"note: {n}\n" for n in report.notes)
    out.write(dumps(check_json(report, transfer)) + "\n" if args.json
              else check_text(report, bool(args.verbose)))
    _transfer_line(err, transfer, args, remote)
    return _verdict_status(report.verdict, report.findings, args.fail_on)


def _run_matrix(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.matrix import matrix
    from abifit.report.json import dumps
    from abifit.report.matrix import matrix_html, matrix_json, matrix_text

    _linux_targets(args)
    _writable(args.html, "--html")
    host = _host_platform(args)
    remote = _remote(args)
    try:
        gpus = _gpu_targets(args.gpu)
        report = matrix(args.extension, args.against, remote(), remote().target, host,
                        _progress(err), args.jobs, args.python, versions=args.versions,
                        gpu=gpus[0] if gpus else None)
    finally:
        _clear_progress(err)
    transfer = _transfer(remote)
    if args.html:
        Path(args.html).write_text(matrix_html(report, _command_line(args)), "utf-8")
    out.write(dumps(matrix_json(report, transfer)) + "\n" if args.json else matrix_text(report))
    _transfer_line(err, transfer, args, remote)
    if report.cells and all(c.error for c in report.cells):
        return EXIT_ERROR  # no host release could be checked
    return EXIT_OK if report.fits else EXIT_PROBLEMS


def _run_resolve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.check import target_markers
    from abifit.commands.resolve import resolve
    from abifit.report.json import dumps
    from abifit.report.resolve import (
        constraints_txt,
        pylock_text,
        requirements_txt,
        resolve_html,
        resolve_json,
        resolve_text,
    )

    output_format = _lock_format(args.output, args.format)
    _linux_targets(args)
    _writable(args.output, "-o")
    _writable(args.html, "--html")
    host = _host_platform(args)
    remote = _remote(args)
    gpus = _gpu_targets(args.gpu)
    requirements = [*args.requirements,
                    *(r for pins in _pin_files(args.requirement_files, remote(), err,
                                               "resolved") for r in pins.requirements)]
    try:
        report = resolve(requirements, args.withs, remote(), host, _progress(err),
                         cuda=args.cuda, gpu=gpus[0] if gpus else None, executable=args.python,
                         jobs=args.jobs)
    finally:
        _clear_progress(err)
    transfer = _transfer(remote)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    if args.output and report.found:
        if output_format == "pylock":
            text = pylock_text(report, target_markers(remote().target))
        else:
            text = (constraints_txt if output_format == "constraints" else requirements_txt)(
                report)
        Path(args.output).write_text(text, "utf-8")
    if args.html:
        Path(args.html).write_text(resolve_html(report, command=_command_line(args)), "utf-8")
    out.write(dumps(resolve_json(report, transfer)) + "\n" if args.json else resolve_text(report))
    _transfer_line(err, transfer, args, remote)
    return EXIT_OK if report.found else EXIT_PROBLEMS


def _lock_format(path: str | None, given: str | None) -> str:
    """What `resolve -o` writes: --format, else by the file's name."""
    if path is None:
        if given is not None:
            raise UsageError("--format needs -o FILE")
        return "requirements"
    name = os.path.basename(path).lower()
    if given is None and name.endswith(".toml"):
        from abifit.formats.snapshot import is_lock_name

        if not is_lock_name(name):
            raise UsageError(f"-o {path}: a PEP 751 lock is named pylock.toml or "
                             "pylock.NAME.toml (or give --format)")
        return "pylock"
    return given or ("constraints" if "constraint" in name else "requirements")


def _run_variants(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.variants import variants
    from abifit.report.json import dumps
    from abifit.report.variants import variants_json, variants_text

    remote = _remote(args)
    try:
        report = variants(args.release, remote(), _progress(err), every=args.every)
    finally:
        _clear_progress(err)
    out.write(dumps(variants_json(report, _transfer(remote))) + "\n" if args.json
              else variants_text(report))
    return EXIT_OK


def _run_history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.history import history, history_store
    from abifit.report.history import history_json, history_text
    from abifit.report.json import dumps

    store = history_store(_cache(args))
    remote = _remote(args)
    try:
        report = history(args.symbol, args.package, args.versions, remote(), store,
                         _progress(err), args.jobs)
    finally:
        _clear_progress(err)
        store.close()
    transfer = _transfer(remote)
    out.write(dumps(history_json(report, transfer)) + "\n" if args.json
              else history_text(report))
    _transfer_line(err, transfer, args, remote)
    return EXIT_OK if report.found else EXIT_PROBLEMS


def _run_snapshot(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.snapshot import snapshot
    from abifit.formats.snapshot import is_lock_name
    from abifit.report.json import dumps
    from abifit.report.snapshot import requirements_text, snapshot_json, snapshot_text

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    _writable(args.output, "-o")
    if args.output and not is_lock_name(Path(args.output).name):
        err.write(f"warning: {args.output}: installers that read PEP 751 locks look for a file "
                  "named pylock.toml or pylock.NAME.toml\n")
    try:
        report = snapshot(args.python or default_interpreter(os.environ),
                          Path(args.output) if args.output else None, cache_dir=cache,
                          environ=dict(os.environ), progress=_progress(err),
                          remote=None if args.no_index else _doctor_index(args),
                          ld_so_conf=args.ld_so_conf, ld_so_cache=args.ld_so_cache)
    finally:
        _clear_progress(err)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    if args.requirements:
        out.write(requirements_text(report.snapshot))
    else:
        out.write(dumps(snapshot_json(report)) + "\n" if args.json else snapshot_text(report))
    return EXIT_OK


def _run_diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from abifit.commands.diff import diff
    from abifit.report.diff import diff_json, diff_text
    from abifit.report.json import dumps

    cache = None if args.no_cache else cache_root(args.cache_dir, os.environ)
    b = args.b or args.python or default_interpreter(os.environ)
    try:
        report = diff(args.a, b, cache_dir=cache, environ=dict(os.environ),
                      progress=_progress(err))
    finally:
        _clear_progress(err)
    if not args.quiet and not args.json:
        err.writelines(f"note: {n}\n" for n in report.notes)
    out.write(dumps(diff_json(report)) + "\n" if args.json else diff_text(report))
    return EXIT_PROBLEMS if report.breaks else EXIT_OK


def _dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "snapshot":
        return _run_snapshot(args, out, err)
    if args.command == "diff":
        return _run_diff(args, out, err)
    if args.command == "doctor":
        return _run_doctor(args, out, err)
    if args.command == "cache":
        return _run_cache(args, out, err)
    if args.command == "index":
        return _run_index(args, out, err)
    if args.command == "check":
        return _run_check(args, out, err)
    if args.command == "cuda":
        return _run_cuda(args, out, err)
    if args.command == "explain":
        return _run_explain(args, out, err)
    if args.command == "matrix":
        return _run_matrix(args, out, err)
    if args.command == "variants":
        return _run_variants(args, out, err)
    if args.command == "resolve":
        return _run_resolve(args, out, err)
    if args.command == "history":
        return _run_history(args, out, err)
    return _run_inspect(args, out, err)


def entry() -> int:
    """The `abifit` command (and `python -m abifit`): `main`, in a process whose allocator is
    set for holding large buffers (`tune_allocator`) and many objects (`tune_collector`); as a
    library, abifit leaves them alone.

    The process then ends without tearing the interpreter down: once the output is flushed,
    freeing the hundreds of megabytes of views a large run holds, object by object, is time
    (0.1-0.2 s of a cold doctor) that nobody waits for a result of. Nothing is left to do at
    exit: files are written and closed before `main` returns, and the worker processes end when
    their pipes close with this process. Those are forks of this process where it can
    (`abifit.remote.cores.fork_workers`)."""
    from abifit.host.allocator import tune_allocator, tune_collector
    from abifit.remote import cores

    tune_allocator()
    tune_collector()
    cores.fork_workers()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone, or a stream closed: end as Python would
        return code
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    args = _parser().parse_args(argv)
    args.started = started
    args.argv = list(sys.argv[1:] if argv is None else argv)
    out, err = _streams(args, os.environ)
    restore = _stop_on_interrupt(err)
    try:
        with _diagnostics(args.verbose, err):
            _check_interpreter(args)
            try:
                return _run(args, out, err)
            finally:
                finish_runs()  # what the run read goes into the symbol store
    except AbifitError as e:
        return _error(err, args, str(e), e, out)
    except BrokenPipeError:
        # the reader went away (`abifit ... | head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:  # the system refused a file or a process: nothing wrong in abifit
        where = f"{e.filename}: " if e.filename else ""
        return _error(err, args, f"{where}{e.strerror or e}", e, out)
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug
        return _internal_error(err, args, e, out)
    finally:
        restore()


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The command; with --quiet, only the verdict line of a command's text report."""
    if not (args.quiet and args.command in _VERDICT_COMMANDS and not getattr(args, "json", False)):
        return _dispatch(args, out, err)
    report = io.StringIO()
    code = _dispatch(args, report, err)
    lines = report.getvalue().rstrip("\n").splitlines()
    if lines:
        out.write(lines[-1] + "\n")
    return code


def _error(err: TextIO, args: argparse.Namespace, message: str, e: BaseException,
           out: TextIO | None = None) -> int:
    """An error: its `error:` line (and `hint:` line), after its traceback with --verbose;
    with --json, also the error document on `out` (`schemas/error.schema.json`). A password
    in a URL is never shown."""
    from abifit.remote.network import redact

    message = redact(message)
    if args.verbose:
        traceback.print_exception(e, file=_raw(err))
    err.write(f"error: {message}\n")
    _error_document(out, args, message, "error")
    return EXIT_ERROR


def _error_document(out: TextIO | None, args: argparse.Namespace, message: str,
                    kind: str) -> None:
    if out is None or not getattr(args, "json", False):
        return
    from abifit.report.json import dumps, error_json

    with contextlib.suppress(OSError):  # stdout itself may be what failed
        out.write(dumps(error_json(args.command, message, kind)) + "\n")


def _internal_error(err: TextIO, args: argparse.Namespace, e: Exception,
                    out: TextIO | None = None) -> int:
    """A bug: the exception's type and first line, and a hint; its traceback with --verbose."""
    if args.verbose:
        traceback.print_exception(e, file=_raw(err))
    first = (str(e).splitlines() or [""])[0][:200]
    message = f"internal error: {type(e).__name__}{': ' if first else ''}{first}"
    _error_document(out, args, message, "internal")
    err.write(f"error: {message}\n")
    err.write("hint: this is a bug in abifit; "
              + ("please report it with the traceback above\n" if args.verbose else
                 "run the command again with --verbose for its traceback, and report it\n"))
    return EXIT_INTERNAL


def _check_interpreter(args: argparse.Namespace) -> None:
    """--python must name a Python interpreter (a name is looked up on PATH): before anything
    runs it or reads it as the executable of a simulated process (check, matrix: an ELF file;
    the other commands only ask it for its facts, which a script such as pyenv's shim answers
    too)."""
    given = getattr(args, "python", None)
    if not given:
        return
    path = given if os.sep in given else shutil.which(given)
    if path is None:
        raise UsageError(f"--python {given}: no such command on PATH")
    problem = interpreter_problem(path, scripts=args.command not in ("check", "matrix",
                                                                     "resolve"))
    if problem is not None:
        hint = None
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "bin", "python")):
            hint = f"the environment's interpreter is {os.path.join(path, 'bin', 'python')}"
        elif problem.startswith("a script"):
            hint = (f"give the interpreter it starts: {given} -c 'import sys; "
                    "print(sys.executable)'")
        raise UsageError(f"--python {given} is not a Python interpreter ({problem})", hint)
    args.python = path


def _streams(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[TextIO, TextIO]:
    """stdout and stderr, each styled for what it is (a terminal or not) and the options; JSON
    on stdout is never styled."""
    json = getattr(args, "json", False)
    out_style = Style() if json else _style(sys.stdout, args.color, environ)
    err_style = _style(sys.stderr, args.color, environ)
    progress = sys.stderr.isatty() and not args.quiet
    out: TextIO = sys.stdout if out_style.plain else Terminal(sys.stdout, out_style,
                                                               progress=False)
    return out, Terminal(sys.stderr, err_style, progress=progress)


def _style(stream: TextIO, color: str, environ: Mapping[str, str]) -> Style:
    """Colour: --color always or never; auto: on a terminal, unless NO_COLOR is set (to
    anything but "") or TERM is dumb; FORCE_COLOR (set to anything but "") colours where no
    terminal is, as CI logs show colour, NO_COLOR still winning. Wrapping: on a terminal, to
    $COLUMNS or its width."""
    tty = stream.isatty()
    if color == "auto":
        wanted = (not environ.get("NO_COLOR")
                  and (bool(environ.get("FORCE_COLOR")) or (tty and environ.get("TERM") != "dumb")))
    else:
        wanted = color == "always"
    if not tty:
        return Style(color=wanted)
    columns = environ.get("COLUMNS", "")
    if columns.isdigit():
        return Style(color=wanted, width=int(columns) or None)
    try:
        return Style(color=wanted, width=os.get_terminal_size(stream.fileno()).columns or None)
    except (OSError, ValueError):
        return Style(color=wanted)


def _raw(stream: TextIO) -> TextIO:
    """The stream under a `Terminal`: for text that must not be wrapped (a traceback)."""
    return stream.stream if isinstance(stream, Terminal) else stream


@contextlib.contextmanager
def _diagnostics(verbose: int, err: TextIO) -> Iterator[None]:
    """Python's warnings only with --verbose (they are for abifit's developers); with -vv, each
    HTTP request (urllib3's log) on stderr."""
    handler = logging.StreamHandler(_raw(err))
    handler.setFormatter(logging.Formatter("http: %(message)s"))
    http = logging.getLogger("urllib3")
    level = http.level
    with warnings.catch_warnings():
        if not verbose:
            warnings.simplefilter("ignore")
        if verbose >= 2:
            http.addHandler(handler)
            http.setLevel(logging.DEBUG)
        try:
            yield
        finally:
            http.removeHandler(handler)
            http.setLevel(level)


def _stop_on_interrupt(err: TextIO) -> Callable[[], None]:
    """Make Ctrl-C end the command at once, and SIGTERM and SIGHUP too (with 128 and the
    signal's number, as a process they kill); returns what undoes that.

    KeyboardInterrupt alone does not: it reaches only the main thread, and `with
    ThreadPoolExecutor` then waits for every cell of a matrix and every range read in flight
    (Python cannot stop a thread), 9 to 36 s. So the handler ends the process itself: it kills
    the worker processes, says so, and exits with 130 without unwinding. Every cache entry is
    written to a temporary file and renamed into place, so the cache holds whole entries only;
    a half-written temporary file is never read."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: FrameType | None) -> None:
        stop_workers()
        message = "\r\x1b[K" if _shows_progress(err) else ""
        said = "interrupted" if signum == signal.SIGINT else "terminated"
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.write(_raw(err).fileno(), f"{message}{said}\n".encode())
        os._exit(EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum)

    ending = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {number: signal.signal(number, stop) for number in ending}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore
