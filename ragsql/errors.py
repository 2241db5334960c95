"""Errors ragsql raises; the CLI prints each as one line and exits non-zero."""

from __future__ import annotations

__all__ = ["RagsqlError", "InputError", "SchemaError", "DatabaseError", "JudgeError"]


class RagsqlError(Exception):
    """Base of every error ragsql reports to the user."""

    exit_code = 1


class InputError(RagsqlError):
    """Bad user input: a malformed file, an unknown run or measure, a duplicate id."""

    exit_code = 2

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}")


class SchemaError(RagsqlError):
    """The database schema is missing or older than this version of ragsql."""


class DatabaseError(RagsqlError):
    """The database cannot be reached or refused an operation."""


class JudgeError(RagsqlError):
    """The LLM judge endpoint is unreachable, rejects the key, or returned unusable output."""
