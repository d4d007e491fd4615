"""`python -m abifit`."""

from abifit.cli import main

raise SystemExit(main())
