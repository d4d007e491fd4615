"""`python -m abifit`."""

from abifit.cli import entry

raise SystemExit(entry())
