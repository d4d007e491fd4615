"""`python -m abifit`."""

from .cli import main

raise SystemExit(main())
