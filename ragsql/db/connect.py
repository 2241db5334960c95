"""Connections: RAGSQL_DATABASE_URL when set, else the embedded server; a server still starting is waited for."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tenacity import Retrying, retry_if_exception, stop_before_delay, wait_exponential

from ragsql.db.server import database_url
from ragsql.errors import DatabaseError, InputError, UsageError

if TYPE_CHECKING:
    import psycopg
    from psycopg.types import TypeInfo

__all__ = ["CONNECT_TIMEOUT", "connect", "database_url", "engine", "vector_cursor", "vector_cursor_async"]

CONNECT_TIMEOUT = 15.0
"""Seconds `connect` keeps retrying a server that refuses connections or is starting (RAGSQL_CONNECT_TIMEOUT)."""

# Messages of a server that is not up yet (or restarting), as opposed to a wrong password or database name.
_NOT_UP = (
    "connection refused",
    "the database system is starting up",
    "the database system is in recovery mode",
    "the database system is shutting down",
)


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

    def attempt() -> psycopg.Connection:
        nonlocal attempts
        attempts += 1
        return psycopg.connect(target, autocommit=autocommit, application_name="ragsql")

    try:
        return Retrying(
            retry=retry_if_exception(_not_up),
            stop=stop_before_delay(_timeout()),
            wait=wait_exponential(multiplier=0.25, max=2.0),
            reraise=True,
        )(attempt)
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


def _send_vectors(cursor: psycopg.Cursor | psycopg.AsyncCursor, info: TypeInfo | None) -> None:
    from pgvector.psycopg.vector import register_vector_info

    # pgvector types its context as a connection; a cursor is an adapt context too, and keeps the change to itself
    register_vector_info(cursor, info)  # pyright: ignore[reportArgumentType]


def vector_cursor(conn: psycopg.Connection) -> psycopg.Cursor:
    """A cursor that sends numpy arrays, lists (given a COPY's set_types) and pgvector's Vector as vector, in text
    or binary, as float4 values (numpy's rounding); the connection's own adapters are left as they are."""
    from psycopg.types import TypeInfo

    cursor = conn.cursor()
    _send_vectors(cursor, TypeInfo.fetch(conn, "vector"))
    return cursor


async def vector_cursor_async(conn: psycopg.AsyncConnection) -> psycopg.AsyncCursor:
    """vector_cursor on an async connection."""
    from psycopg.types import TypeInfo

    cursor = conn.cursor()
    _send_vectors(cursor, await TypeInfo.fetch(conn, "vector"))
    return cursor


def shard_reads_in_sequence(conn: psycopg.Connection) -> None:
    """For the rest of the transaction, Citus reads and writes a distributed table's shards one connection at a
    time: a count over every shard read in parallel keeps the delete of a reference row that cascades to the
    shards from running in the same transaction. One server keeps the setting as an unused name."""
    conn.execute("select set_config('citus.multi_shard_modify_mode', 'sequential', true)")


@contextlib.contextmanager
def duplicates_refused(what: str) -> Iterator[None]:
    """A unique violation inside becomes InputError("WHAT (the key's detail)"); Citus's form of one too: a worker's
    violation in a distributed insert ... select or COPY reaches the client as an internal error (XX000) with the
    worker's message and detail."""
    import psycopg

    try:
        yield
    except (psycopg.errors.UniqueViolation, psycopg.errors.InternalError_) as exc:
        if not isinstance(
            exc, psycopg.errors.UniqueViolation
        ) and "duplicate key value violates unique constraint" not in str(exc):
            raise
        detail = (exc.diag.message_detail or exc.diag.message_primary or str(exc)).strip()
        raise InputError(f"{what} ({detail})") from exc
