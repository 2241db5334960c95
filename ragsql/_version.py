"""The package's version: the single place it is written (pyproject reads it through hatch)."""

__version__ = "0.1.0"
