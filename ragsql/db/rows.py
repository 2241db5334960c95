"""The one row, or the one value, of a statement that always returns a row (an aggregate, a function call, an insert
... returning that always inserts), and every row of a query as dataclasses or dicts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from psycopg.rows import class_row, dict_row

from ragsql.errors import DatabaseError

if TYPE_CHECKING:
    import psycopg
    from psycopg.abc import Params, QueryNoTemplate

__all__ = ["dict_rows", "one", "one_async", "typed_rows", "value", "value_async"]

Row = TypeVar("Row")


def _none(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> DatabaseError:
    return DatabaseError(f"the database returned no row where one is always expected ({cursor.statusmessage})")


def one(cursor: psycopg.Cursor[Row]) -> Row:
    """The first row of an executed statement that always returns one; DatabaseError when there is none."""
    row = cursor.fetchone()
    if row is None:
        raise _none(cursor)
    return row


def typed_rows(conn: psycopg.Connection[Any], row_type: type[Row], query: QueryNoTemplate, params: Params) -> list[Row]:
    """Every row of a query, each made a row_type (a dataclass whose fields are the query's columns)."""
    with conn.cursor(row_factory=class_row(row_type)) as cur:
        cur.execute(query, params)
        return cur.fetchall()


def dict_rows(conn: psycopg.Connection[Any], query: QueryNoTemplate, params: Params = ()) -> list[dict[str, Any]]:
    """Every row of a query as a dict by column name."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return cur.fetchall()


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
