"""abifit's version, in the one module every layer may import (`abifit.__version__` is this;
pyproject.toml reads it from here)."""

__version__ = "0.1.0"
