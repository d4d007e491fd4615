"""`abifit completion SHELL`: the shell code that completes abifit's commands and options.

The completion itself is argcomplete's: the shell runs `abifit` with `_ARGCOMPLETE` set, and
`complete` answers from the parser before any command runs (`app.main` calls it first), so the
completions are always those of the installed abifit. argcomplete is imported only then.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TextIO

from abifit.cli.options import Subparsers
from abifit.cli.status import EXIT_OK

SHELLS = ("bash", "zsh", "fish")


HELP_PLACE = 140  # where `abifit --help` lists the command (`app.commands`)


def configure(sub: Subparsers) -> None:
    """The `completion` command's arguments."""
    c = sub.add_parser(
        "completion",
        help="print the shell code that completes abifit's commands and options",
        description="Print the code that makes SHELL complete abifit's commands, options and "
        "file names. bash: `eval \"$(abifit completion bash)\"` in ~/.bashrc; zsh: the same "
        "in ~/.zshrc; fish: `abifit completion fish > ~/.config/fish/completions/abifit.fish`.",
    )
    c.add_argument("shell", choices=SHELLS)
    c.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from argcomplete.shell_integration import shellcode

    out.write(shellcode(["abifit"], shell=args.shell))
    return EXIT_OK


def asked(environ: Mapping[str, str]) -> bool:
    """Whether this process was started by a shell's completion code to complete a line."""
    return "_ARGCOMPLETE" in environ


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and end the process (argcomplete's protocol)."""
    import argcomplete

    argcomplete.autocomplete(parser, exit_method=os._exit)
