"""abifit: do the pre-built native parts of a Python stack fit together, and if not, why not."""

__version__ = "0.1.0"
