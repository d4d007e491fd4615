"""The reports CI systems read, from the run that makes the command's own (`--github`,
`--sarif`, `--junit`, `--markdown`, `options.ci_options`): their files checked before the
work starts, written after it, whatever the verdict (a failing run is when CI needs them
most); the exit status stays the verdict's."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from abifit.cli.shared import writable
from abifit.errors import UsageError

if TYPE_CHECKING:  # a warm doctor, which prints a kept run, imports no report
    from abifit.report.gate import Gate

FILES = ("sarif", "junit", "markdown")


def asked(args: argparse.Namespace) -> bool:
    """Whether the command was asked for a report for CI systems."""
    return bool(getattr(args, "github", False)) or any(getattr(args, f, None) for f in FILES)


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any work: --github with --json (both are stdout), a file that could
    not be written."""
    if getattr(args, "github", False) and getattr(args, "json", False):
        raise UsageError("--github prints workflow commands on stdout, where --json prints "
                         "one document: give one of them",
                         "with --json, take the files: --sarif FILE, --junit FILE, "
                         "--markdown FILE")
    for name in FILES:
        writable(getattr(args, name, None), f"--{name}")


def write_reports(args: argparse.Namespace, gate: Gate, out: TextIO,
                     markdown: str | None = None) -> None:
    """Write each report asked for (`markdown`: the command's own summary, else the gate's);
    --github's workflow commands go after the report (`after_report`, which `app` prints
    after the command's output, the verdict line of --quiet included)."""
    from abifit.report.annotations import workflow_commands
    from abifit.report.junit import junit_xml
    from abifit.report.markdown import gate_markdown
    from abifit.report.sarif import sarif_text

    if args.sarif:
        Path(args.sarif).write_text(sarif_text(gate), "utf-8")
    if args.junit:
        Path(args.junit).write_text(junit_xml(gate), "utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown or gate_markdown(gate), "utf-8")
    if args.github:
        after: TextIO = getattr(args, "after_report", None) or out
        after.write(workflow_commands(gate))


def root() -> str:
    """The directory the command runs in, which places are relative to (a checkout)."""
    return os.getcwd()
