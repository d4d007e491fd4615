"""`--github`: GitHub Actions workflow commands, one per problem of a `Gate`
(`::error file=F,line=N,title=T::message`, `::warning ...`, `::notice ...`), which the runner
turns into annotations of the run and, for a file of the repository, of that file's line.

GitHub's escaping: in the message, `%`, `\\r` and `\\n` (a message of several lines stays one
command); in the properties, also `:` and `,`, which separate them.
"""

from __future__ import annotations

from abifit.report.gate import Gate, Problem
from abifit.report.terminal import visible


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's runner reads it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (file, title), escaped as GitHub's runner reads
    it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(problem: Problem) -> str:
    """One problem as a workflow command: the file and line when it points at a file of the
    repository, else the title alone (which names the module)."""
    properties = []
    place = problem.place
    if place is not None and place.inside:
        properties.append(f"file={escape_property(place.path)}")
        if place.line is not None:
            properties.append(f"line={place.line}")
    properties.append(f"title={escape_property(problem.title)}")
    return f"::{problem.level.value} {','.join(properties)}::{escape_data(problem.text)}"


def workflow_commands(gate: Gate) -> str:
    """Every problem of the gate, one workflow command a line (any other control character
    written as `\\xNN`: a log shows what was there, never a command to a terminal)."""
    return "".join(visible(annotation(p)) + "\n" for p in gate.problems)
