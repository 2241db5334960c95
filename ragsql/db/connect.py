"""Connections: RAGSQL_DATABASE_URL when set, else the embedded server; a server still starting is waited for."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import time

from tenacity import Retrying, retry_if_exception, stop_before_delay, wait_exponential

from ragsql.db.server import database_url
from ragsql.errors import DatabaseError, UsageError

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECT_TIMEOUT", "connect", "database_url", "engine"]

CONNECT_TIMEOUT = 15.0
"""Seconds `connect` keeps retrying a server that refuses connections or is starting (RAGSQL_CONNECT_TIMEOUT)."""

# Messages of a server that is not up yet (or restarting), as opposed to a wrong password or database name.
_NOT_UP = ("connection refused", "the database system is starting up", "the database system is in recovery mode",
           "the database system is shutting down")


def _timeout() -> float:
    raw = os.environ.get("RAGSQL_CONNECT_TIMEOUT")
    if raw is None:
        return CONNECT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageError(f"RAGSQL_CONNECT_TIMEOUT must be a number of seconds >= 0, got {raw!r}")
    return value


def _not_up(exc: BaseException) -> bool:
    import psycopg

    return isinstance(exc, psycopg.OperationalError) and any(m in str(exc).lower() for m in _NOT_UP)


def connect(url: str | None = None, *, autocommit: bool = False) -> psycopg.Connection:
    """Open a psycopg connection, retrying with backoff while the server refuses connections or starts up
    (RAGSQL_CONNECT_TIMEOUT seconds in all); a server that cannot be reached is one clear DatabaseError."""
    import psycopg

    target = url or database_url()
    started, attempts = time.monotonic(), 0
    try:
        for attempt in Retrying(retry=retry_if_exception(_not_up), stop=stop_before_delay(_timeout()),
                                wait=wait_exponential(multiplier=0.25, max=2.0), reraise=True):
            with attempt:
                attempts += 1
                return psycopg.connect(target, autocommit=autocommit, application_name="ragsql")
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        tried = f" ({attempts} attempts in {time.monotonic() - started:.1f} s)" if attempts > 1 else ""
        raise DatabaseError(f"cannot connect to PostgreSQL: {first}{tried}") from exc


def engine(url: str | None = None):
    """A SQLAlchemy Engine on the same database, for pandas and users who bring SQLAlchemy."""
    import psycopg
    import sqlalchemy

    target = url or database_url()
    # A creator accepts both URLs and key=value conninfo strings, as psycopg does.
    return sqlalchemy.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(target))
