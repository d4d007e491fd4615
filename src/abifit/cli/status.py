"""Exit statuses, and the status of a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # every command imports this module: the findings only when it has some
    from abifit.sim.findings import Finding

EXIT_OK = 0


EXIT_PROBLEMS = 1


EXIT_ERROR = 2


EXIT_INTERNAL = 3


EXIT_INTERRUPTED = 130


EXIT_STATUS = """\
exit status:
  0    fits: every import works and nothing a package ships is lost (modules that need a
       prerequisite from outside the stack, such as FFmpeg, are listed; --fail-on
       prerequisite makes them count) (matrix: a host release fits; a grid: one fits each
       extension on each Python; history: a release defines the symbol; resolve: a set was
       found); inspect, variants, cache, index: done;
       explain: no message confirmed in the environment
  1    problems found: fails (an import raises) or degraded (every import works, but a part
       a package ships cannot load because of the stack or the host; --fail-on fails lets
       it pass), a GPU without a kernel image, a CUDA problem (matrix: no host release
       fits, in a grid an extension on a Python; explain: a message confirmed; history: no
       release examined defines the symbol; resolve: no set fits)
  2    usage or analysis error: a bad option or input; a file, interpreter or index that could
       not be read (inspect: an object; matrix: every host release, in a grid of an extension
       on a Python, or its wheel for that Python; index: a wheel, or a file to import;
       explain: no message recognised in the text)
  3    internal error: a bug in abifit (--verbose shows its traceback)
  130  interrupted (Ctrl-C); 143 and 129 for SIGTERM and SIGHUP"""


def verdict_status(verdict: str, findings: Iterable[Finding], fail_on: str) -> int:
    """`exit_status` of a verdict and its findings."""
    from abifit.sim.findings import Effect

    return exit_status(verdict, any(f.effect is Effect.PREREQUISITE for f in findings),
                          fail_on)


def exit_status(verdict: str, prerequisite: bool, fail_on: str) -> int:
    """The exit status of a verdict (`sim.verdict`) under `--fail-on`: 1 for `fails`, for
    `degraded` unless only failures count, for a prerequisite (a finding with that effect)
    when they are asked to count."""
    if verdict == "fails" or (verdict == "degraded" and fail_on != "fails"):
        return EXIT_PROBLEMS
    if fail_on == "prerequisite" and prerequisite:
        return EXIT_PROBLEMS
    return EXIT_OK if verdict == "fits" else EXIT_PROBLEMS
