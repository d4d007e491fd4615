"""Options several commands share, and the argument types."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from abifit.cli.status import EXIT_ERROR


class Parser(argparse.ArgumentParser):
    """argparse with usage errors as one `error:` line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"error: {message}\nhint: run `{self.prog} --help`\n")


# what a command's `configure(sub)` adds its parser to
Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


def output_options(p: argparse.ArgumentParser, *, on_command: bool) -> None:
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


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def python_list(text: str) -> tuple[str, ...]:
    """An argparse type: Pythons separated by commas ("3.11,3.12"), at least one; each is
    checked as the command's run checks a Python."""
    found = tuple(p.strip() for p in text.split(",") if p.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"expected Pythons as X.Y[,X.Y...], not {text!r}")
    return found


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds (0 or more), not {text!r}")
    return value


FAIL_ON = ("fails", "degraded", "prerequisite")


def fail_on_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fail-on", choices=FAIL_ON, default="degraded",
                   help="the least that exits 1: fails (an import raises), degraded (the "
                   "default: also a part of a package lost to the stack or host), prerequisite "
                   "(also a library from outside the stack that a package needs, such as FFmpeg)")


def host_options(p: argparse.ArgumentParser, *, interpreter: bool = True) -> None:
    """--host, --assume-driver and (with `interpreter`) --python, the interpreter that starts
    the simulated process; `diff`, whose --python is an environment, takes the first two."""
    p.add_argument("--host", metavar="FILE|PRESET",
                   help="check for the machine whose profile `abifit doctor --save-host FILE` "
                   "saved (its loader settings and system libraries) instead of this one, or "
                   "for a manylinux host: manylinux2014, manylinux_2_28, manylinux_2_34")
    p.add_argument("--assume-driver", metavar="VERSION",
                   help="check for a machine with this NVIDIA driver (its libcuda.so.1 is assumed "
                   "present)")
    if not interpreter:
        return
    p.add_argument("--python", metavar="PATH",
                   help="interpreter whose executable starts the simulated process (default: the "
                   "one running abifit)")


def index_options(p: argparse.ArgumentParser) -> None:
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
    g.add_argument("--deadline", type=seconds, default=None, metavar="SECONDS",
                   help="every network request ends within this many seconds of the first "
                   "(default: 900; 0: none); each one, with its retries, ends within 60 s of "
                   "waiting")
    g.add_argument("--max-download", type=byte_size, default=None, metavar="SIZE",
                   help="the largest file downloaded whole, from a server that does not answer "
                   "Range requests (bytes, or with K, M, G; default 2G)")


def byte_size(text: str) -> int:
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


def ray_option(p: argparse.ArgumentParser, each: str) -> None:
    """--ray ADDRESS: the work spread over a Ray cluster (`engines.cluster`)."""
    p.add_argument("--ray", metavar="ADDRESS",
                   help=f"run each {each} as a task on the Ray cluster at ADDRESS "
                   "(default: $RAY_ADDRESS when set; needs abifit[ray])")


def ci_options(p: argparse.ArgumentParser) -> None:
    """--github, --sarif, --junit and --markdown: what CI systems read, besides the report,
    from the same run (`cli.ci`)."""
    g = p.add_argument_group("reports for CI systems (any of them, in one run)")
    g.add_argument("--github", action="store_true",
                   help="also print a GitHub Actions workflow command (::error, ::warning, "
                   "::notice) per problem after the report, at the line of the lock or "
                   "requirements file that pins its package where one does")
    g.add_argument("--sarif", metavar="FILE",
                   help="also write the problems as a SARIF 2.1.0 log (code scanning)")
    g.add_argument("--junit", metavar="FILE",
                   help="also write the modules checked as JUnit XML (a suite per package, a "
                   "test case per module)")
    g.add_argument("--markdown", metavar="FILE",
                   help="also write a Markdown summary (a job summary, a pull request comment)")
