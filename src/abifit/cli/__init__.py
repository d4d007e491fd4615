"""The `abifit` command line: `app` (the entrance: arguments, streams, errors, exit statuses),
the options several commands share (`options`, `shared`, `status`), and one module per command
that adds its arguments (`configure`) and runs it (`run`)."""

from __future__ import annotations

from abifit.cli.app import entry, main

__all__ = ["entry", "main"]
