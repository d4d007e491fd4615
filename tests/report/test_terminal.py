"""Text for a terminal: wrapping keeps every word and its indent, colour only marks words that
are there without it, and the golden renderings are what a plain stream gets."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from abifit.report.terminal import Style, Terminal, paint_line, styled, wrap_line
from helpers import GOLDEN

TEXTS = sorted(GOLDEN.glob("*.txt"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("path", TEXTS, ids=[p.name for p in TEXTS])
def test_colour_and_wrapping_keep_the_text(path: Path) -> None:
    """Without colour and width the text is untouched; with colour, removing the escapes gives
    the text back; wrapped at 60 columns, the words are the same words in the same order."""
    text = path.read_text("utf-8")
    assert styled(text, Style()) == text
    assert ANSI.sub("", styled(text, Style(color=True))) == text
    wrapped = styled(text, Style(width=60))
    assert wrapped.split() == text.split()
    assert all(len(line) <= 60 or " " not in line.strip() for line in wrapped.splitlines())


def test_continuation_lines_hang_under_the_indent_or_the_label() -> None:
    """A wrapped line keeps its indent; its continuation lines are indented two more columns,
    or as far as the text after an `error:`/`hint:` label; a long word is never cut."""
    words = " ".join(["word"] * 20)
    lines = wrap_line(f"  {words}", 40)
    assert lines[0].startswith("  word") and all(x.startswith("    word") for x in lines[1:])
    lines = wrap_line(f"hint: {words}", 40)
    assert all(x.startswith("      word") for x in lines[1:])
    path = "/abifit-wheels/site-packages/" + "x" * 60 + ".so"
    assert wrap_line(f"  {path}: undefined symbol", 40) == [f"  {path}:",
                                                             "    undefined symbol"]
    assert wrap_line(f"short {words}", 20) == [f"short {words}"]  # too narrow to help


@pytest.mark.parametrize(("line", "painted"), [
    ("error: bad", "\x1b[1;31merror:\x1b[0m bad"),
    ("  hint: install it", "  \x1b[1;36mhint:\x1b[0m install it"),
    ("note: a note", "\x1b[1mnote:\x1b[0m a note"),
    ("undefined-symbol: torch._C", "\x1b[1;31mundefined-symbol\x1b[0m: torch._C"),
    ("optional, missing-library: x", "optional, \x1b[1;33mmissing-library\x1b[0m: x"),
    ("warning: partial-kernel-image: x",
     "\x1b[1;33mwarning:\x1b[0m \x1b[1;33mpartial-kernel-image\x1b[0m: x"),
    ("fits: 3 extension module(s) checked", "\x1b[1;32mfits\x1b[0m: 3 extension module(s) checked"),
    ("fails: 1 extension module(s) checked",
     "\x1b[1;31mfails\x1b[0m: 1 extension module(s) checked"),
    ("degraded: 1 extension module(s) checked",
     "\x1b[1;33mdegraded\x1b[0m: 1 extension module(s) checked"),
    ("torch 2.5.1  degraded  0        0        x",
     "torch 2.5.1  \x1b[1;33mdegraded\x1b[0m  0        0        x"),
    ("import torch: fails (torch)", "import torch: \x1b[1;31mfails\x1b[0m (torch)"),
    ("torch 2.5.1  fits     0        0        x",
     "torch 2.5.1  \x1b[1;32mfits\x1b[0m     0        0        x"),
    ("  needed     libfits.so", "  needed     libfits.so"),
], ids=["error", "hint", "note", "finding", "optional", "warning", "fits", "fails", "degraded",
        "degraded-cell", "import", "matrix-cell", "data"])
def test_what_is_painted(line: str, painted: str) -> None:
    """Labels, finding kinds, verdicts and matrix cells are painted; data is not."""
    assert paint_line(line) == painted


def test_a_terminal_stream_styles_whole_lines_only() -> None:
    """Whole lines go out styled at once; a partial line (progress) goes out as it is."""
    target = io.StringIO()
    stream = Terminal(target, Style(color=True), progress=True)
    stream.write("\r\x1b[Kchecking x")
    assert target.getvalue() == "\r\x1b[Kchecking x"
    stream.write("\r\x1b[K")
    stream.write("error: bad\nhint: fix\n")
    assert target.getvalue().endswith("\x1b[1;31merror:\x1b[0m bad\n\x1b[1;36mhint:\x1b[0m fix\n")
