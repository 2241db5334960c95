"""Errors ragsql raises and the exit codes of the CLI contract; the CLI prints each error as one line."""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "DatabaseError",
    "GateFailed",
    "InputError",
    "JudgeError",
    "NothingDone",
    "RagsqlError",
    "SchemaError",
    "UsageError",
]

# The exit codes every command keeps (docs/guides/ci.md "Scheduled jobs", `ragsql --help`).
EXIT_CODES = {
    0: "ok",
    1: "error: bad data, an unknown run/dataset/corpus, a database or endpoint failure, nothing to do",
    2: "usage: a missing or unknown option, an invalid option value",
    3: "some judge tasks, generated answers or synth calls failed; their values are NULL with the reason",
    4: "a quality gate of `ragsql check` failed",
    130: "interrupted (Ctrl-C): a judge run puts its unfinished tasks back to pending",
    143: "stopped by SIGTERM: the same",
}


class RagsqlError(Exception):
    """Base of every error ragsql reports to the user (exit status 1)."""

    exit_code = 1


class InputError(RagsqlError):
    """Bad user data: a malformed file, an unknown run or dataset, a duplicate id (exit status 1)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}")


class UsageError(RagsqlError):
    """The command line is wrong: an option value that cannot be used (exit status 2)."""

    exit_code = 2


class GateFailed(RagsqlError):
    """A quality gate of `ragsql check` failed (exit status 4); each failed gate was reported on its own line."""

    exit_code = 4


class NothingDone(RagsqlError):
    """A step that stored nothing (no document, record or answer), with the reason (exit status 1)."""


class SchemaError(RagsqlError):
    """The database schema is missing or older than this version of ragsql."""


class DatabaseError(RagsqlError):
    """The database cannot be reached or refused an operation."""


class JudgeError(RagsqlError):
    """The LLM judge endpoint is unreachable, rejects the key, or returned unusable output."""
