"""The one row, or the one value, of a statement that always returns a row (an aggregate, a function call, an insert
... returning that always inserts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ragsql.errors import DatabaseError

if TYPE_CHECKING:
    import psycopg

__all__ = ["one", "one_async", "value", "value_async"]

Row = TypeVar("Row")


def _none(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> DatabaseError:
    return DatabaseError(f"the database returned no row where one is always expected ({cursor.statusmessage})")


def one(cursor: psycopg.Cursor[Row]) -> Row:
    """The first row of an executed statement that always returns one; DatabaseError when there is none."""
    row = cursor.fetchone()
    if row is None:
        raise _none(cursor)
    return row


def value(cursor: psycopg.Cursor[Any]) -> Any:
    """The first column of `one(cursor)`: "the one value this query returns"."""
    return one(cursor)[0]


async def one_async(cursor: psycopg.AsyncCursor[Row]) -> Row:
    """`one` on an async cursor."""
    row = await cursor.fetchone()
    if row is None:
        raise _none(cursor)
    return row


async def value_async(cursor: psycopg.AsyncCursor[Any]) -> Any:
    """`value` on an async cursor."""
    return (await one_async(cursor))[0]
