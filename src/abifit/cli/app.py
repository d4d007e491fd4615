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
import importlib
import io
import logging
import os
import pkgutil
import shutil
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType, ModuleType
from typing import TextIO

from abifit.cli import completion
from abifit.cli.options import Parser, output_options
from abifit.cli.shared import shows_progress
from abifit.cli.status import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_STATUS
from abifit.commands.contexts import finish_runs
from abifit.errors import AbifitError, UsageError
from abifit.report.terminal import Style, Terminal
from abifit.version import __version__
from abifit.workers import stop_workers


def commands() -> list[ModuleType]:
    """The modules of this package that add a command: those that define `configure` (which
    adds the command's arguments and the function that runs it, `run`), in the order of the
    `HELP_PLACE` each sets, where `abifit --help` lists it (the lowest first). A new command
    is a new module; nothing here names it."""
    found = []
    for info in pkgutil.iter_modules([os.path.dirname(__file__)], prefix="abifit.cli."):
        module = importlib.import_module(info.name)
        if not hasattr(module, "configure"):
            continue
        if not isinstance(getattr(module, "HELP_PLACE", None), int):
            raise TypeError(f"{info.name} adds a command but sets no HELP_PLACE (an int)")
        found.append(module)
    return sorted(found, key=lambda module: (module.HELP_PLACE, module.__name__))


def parser() -> argparse.ArgumentParser:
    """The `abifit` command line: each command's module adds its arguments and the
    function that runs it (`run`)."""
    parser = Parser(prog="abifit", epilog=EXIT_STATUS,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Tell whether the pre-built native parts of a Python stack fit "
                     "together, and why not.")
    output_options(parser, on_command=False)
    parser.add_argument("--version", action="version", version=f"abifit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands():
        command.configure(sub)
    for made in sub.choices.values():  # the output options also after the command's name
        output_options(made, on_command=True)
    return parser


def entry() -> int:
    """The `abifit` command (and `python -m abifit`): `main`, in a process whose allocator is
    set for holding large buffers (`tune_allocator`) and many objects (`tune_collector`); as a
    library, abifit leaves them alone.

    The process then ends without tearing the interpreter down: once the output is flushed,
    freeing the hundreds of megabytes of views a large run holds, object by object, is time
    (0.1-0.2 s of a cold doctor) that nobody waits for a result of. Nothing is left to do at
    exit: files are written and closed before `main` returns, and the worker processes end when
    their pipes close with this process. Those are forks of this process where it can
    (`abifit.workers.fork_workers`)."""
    from abifit import workers
    from abifit.host.allocator import tune_allocator, tune_collector

    tune_allocator()
    tune_collector()
    workers.fork_workers()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone, or a stream closed: end as Python would
        return code
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    made = parser()
    if argv is None and completion.asked(os.environ):
        completion.complete(made)
    args = made.parse_args(argv)
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
    """The command; with --quiet, only the verdict line of a command's text report. What a
    command prints after its report (`after_report`: --github's workflow commands) follows
    it either way, unwrapped and uncoloured."""
    command: Callable[[argparse.Namespace, TextIO, TextIO], int] = args.run
    args.after_report = after = io.StringIO()
    if not (args.quiet and getattr(args, "verdict_line", False)
            and not getattr(args, "json", False)):
        code = command(args, out, err)
    else:
        report = io.StringIO()
        code = command(args, report, err)
        lines = report.getvalue().rstrip("\n").splitlines()
        if lines:
            out.write(lines[-1] + "\n")
    if after.getvalue():
        out.flush()
        _raw(out).write(after.getvalue())
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
    runs it or reads it as the executable of a simulated process (an ELF file, for the
    commands that set `python_executable`: check, matrix, resolve; the other commands only ask
    it for its facts, which a script such as pyenv's shim answers too)."""
    given = getattr(args, "python", None)
    if not given:
        return
    path = given if os.sep in given else shutil.which(given)
    if path is None:
        raise UsageError(f"--python {given}: no such command on PATH")
    from abifit.host.localfs import interpreter_problem  # the ELF reader, when it is asked

    problem = interpreter_problem(path, scripts=not getattr(args, "python_executable", False))
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
        message = "\r\x1b[K" if shows_progress(err) else ""
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
