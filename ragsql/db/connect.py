"""Connections: RAGSQL_DATABASE_URL when set, else the embedded server."""

from __future__ import annotations

import os

import psycopg

from ragsql.db.server import ensure_embedded
from ragsql.errors import DatabaseError

__all__ = ["database_url", "connect", "engine"]


def database_url() -> str:
    """The URL ragsql uses: RAGSQL_DATABASE_URL, or the embedded server's (started on demand)."""
    return os.environ.get("RAGSQL_DATABASE_URL") or ensure_embedded()


def connect(url: str | None = None, *, autocommit: bool = False) -> psycopg.Connection:
    """Open a psycopg connection; a server that cannot be reached is one clear DatabaseError."""
    target = url or database_url()
    try:
        return psycopg.connect(target, autocommit=autocommit, application_name="ragsql")
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"cannot connect to PostgreSQL: {first}") from exc


def engine(url: str | None = None):
    """A SQLAlchemy Engine on the same database, for pandas and users who bring SQLAlchemy."""
    import sqlalchemy

    target = url or database_url()
    # A creator accepts both URLs and key=value conninfo strings, as psycopg does.
    return sqlalchemy.create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(target))
