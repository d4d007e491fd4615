"""The `abifit` command line: `app` (the entrance: arguments, streams, errors, exit statuses),
the options several commands share (`options`, `shared`, `status`), and one module per command
that adds its arguments (`configure`), runs it (`run`) and says where `abifit --help` lists it
(`HELP_PLACE`); `app.commands` finds those modules, so a new command is a new module."""

from __future__ import annotations

from abifit.cli.app import entry, main

__all__ = ["entry", "main"]
