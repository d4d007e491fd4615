"""Text for a terminal: each line wrapped to its width, and colour on what a reader scans for.

The renderers of this package write plain lines, the same on every stream, and the golden files
hold them. On a terminal, `styled` wraps every line longer than the width at spaces (a long word,
such as a path, is never cut), with continuation lines indented past the line's own indent, or
past its `error:`, `hint:`, `note:` or `warning:` label; and, with colour, it paints those labels,
the kind of each finding, the verdict line and the verdict column of a matrix. Colour only marks
words that are there without it, so the meaning survives `NO_COLOR`.

`Terminal` is the stream the command line writes through: whole lines go out styled as they are
written; a partial line (progress, which redraws itself with a carriage return) goes out as it is.
"""

from __future__ import annotations

import functools
import io
import re
import textwrap
from dataclasses import dataclass
from typing import TextIO

MIN_WIDTH = 40  # narrower than this, wrapping helps nobody: lines are left whole

_RESET = "\x1b[0m"
_RED, _GREEN, _YELLOW = "\x1b[1;31m", "\x1b[1;32m", "\x1b[1;33m"
_CYAN, _BOLD = "\x1b[1;36m", "\x1b[1m"
_LABEL_COLOURS = {"error": _RED, "warning": _YELLOW, "hint": _CYAN, "note": _BOLD}

_LABEL = re.compile(r"(?P<indent>\s*)(?P<label>(?:error|warning|hint|note): )?")
_LABEL_WORD = re.compile(r"^(\s*)(error|warning|hint|note):")
_VERDICT = re.compile(r"^(fits|degraded|fails|the ABI fits)\b")
_FAILS = re.compile(r"^(import \S+: )(fails)\b")
_CELL = re.compile(r"(?<=  )(fits|degraded|fails|error)(?=  +\d+  +\d+  )")
_VERDICT_COLOURS = {"fits": _GREEN, "the ABI fits": _YELLOW,
                    "degraded": _YELLOW,
                    "fails": _RED, "error": _YELLOW}


@functools.cache
def _finding() -> re.Pattern[str]:
    """A finding's first line, by its kind (made on first use: every start imports this
    module, and the findings' module only a run that has some)."""
    from abifit.sim.findings import FindingKind

    kinds = "|".join(re.escape(k.value) for k in FindingKind)
    return re.compile(
        rf"^(optional, |degraded, |needs a prerequisite, |unused variant, |warning: )?({kinds}):")


@dataclass(frozen=True, slots=True)
class Style:
    """How text is shown: with ANSI colour or not, wrapped to `width` columns or not (None)."""

    color: bool = False
    width: int | None = None

    @property
    def plain(self) -> bool:
        return not self.color and self.width is None


def wrap_line(line: str, width: int) -> list[str]:
    """`line` as lines of at most `width` columns where spaces allow, continuation lines
    indented two columns past the line's indent (past its label, for a labelled line)."""
    if len(line) <= width or width < MIN_WIDTH:
        return [line]
    match = _LABEL.match(line)
    assert match is not None  # both groups are optional
    indent, label = match.group("indent"), match.group("label") or ""
    hanging = " " * (len(indent) + (len(label) if label else 2))
    return textwrap.wrap(line[len(indent):], width, initial_indent=indent,
                         subsequent_indent=hanging, break_long_words=False,
                         break_on_hyphens=False) or [line]


def paint_line(line: str) -> str:
    """`line` with ANSI colour on its label, finding kind, verdict or matrix verdict cell."""
    finding = _finding().match(line)
    if finding is not None:
        prefix = _paint_label(finding[1] or "")
        colour = _YELLOW if finding[1] else _RED
        return f"{prefix}{colour}{finding[2]}{_RESET}{line[finding.end() - 1:]}"
    if _LABEL_WORD.match(line):
        return _paint_label(line)
    verdict = _VERDICT.match(line)
    if verdict is not None:
        word = verdict[1]
        return f"{_VERDICT_COLOURS[word]}{word}{_RESET}{line[len(word):]}"
    fails = _FAILS.match(line)
    if fails is not None:
        return f"{fails[1]}{_RED}{fails[2]}{_RESET}{line[fails.end():]}"
    return _CELL.sub(lambda m: f"{_VERDICT_COLOURS[m[1]]}{m[1]}{_RESET}", line, count=1)


def _paint_label(text: str) -> str:
    return _LABEL_WORD.sub(lambda m: f"{m[1]}{_LABEL_COLOURS[m[2]]}{m[2]}:{_RESET}", text,
                           count=1)


def styled(text: str, style: Style) -> str:
    """`text` (whole lines) wrapped and painted as `style` says."""
    if style.plain:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        pieces = wrap_line(line, style.width) if style.width is not None else [line]
        out += [paint_line(p) for p in pieces] if style.color else pieces
    return "\n".join(out)


PROGRESS_START = "\r\x1b[K"  # how a progress line starts: back to the column 0, cleared
# control characters a name from outside (a symbol, a file name, a package's) may carry:
# escape sequences would set the window's title, move the cursor or hide the verdict
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with every control character but tab and newline written as `\\xNN`, as
    Python writes it: what reaches a terminal is what was there, never a command to it."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class Terminal(io.StringIO):
    """A text stream that writes to `stream` at once: each whole line styled, a partial line as
    it is. `progress` says whether progress lines are shown on it (a terminal, and not
    `--quiet`). It is a StringIO only to be a `TextIO`: it keeps nothing."""

    def __init__(self, stream: TextIO, style: Style, *, progress: bool) -> None:
        super().__init__()
        self.stream = stream
        self.style = style
        self.progress = progress

    def write(self, s: str) -> int:
        lines, newline, partial = s.rpartition("\n")
        if newline:
            self.stream.write(styled(visible(lines), self.style) + newline)
        if partial:  # a progress line keeps its own "\r\x1b[K" and nothing else
            head = PROGRESS_START if partial.startswith(PROGRESS_START) else ""
            self.stream.write(head + visible(partial[len(head):]))
        return len(s)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()
