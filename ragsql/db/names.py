"""Resolving a run, dataset or corpus name to its id: one function per kind, one message for an unknown name."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from ragsql.errors import InputError

__all__ = ["LISTED", "corpus_id", "dataset_id", "run_id", "run_id_async", "unknown"]

LISTED = 10  # names an "unknown …" message lists before "and N more"

_KINDS = {  # kind: (table, plural, where names come from)
    "run": ("run", "runs", "ragsql import or ragsql retrieve"),
    "dataset": ("dataset", "datasets", "ragsql import"),
    "corpus": ("corpus", "corpora", "ragsql ingest"),
    "watch": ("watch", "watches", "ragsql watch add"),
}


def unknown(kind: str, name: str, known: Sequence[str], total: int | None = None) -> InputError:
    """`unknown run "x" (runs: a, b, c and 7 more)`: the same message for every kind and command."""
    _, plural, source = _KINDS[kind]
    total = len(known) if total is None else total
    if not total:
        return InputError(f'unknown {kind} "{name}" (there are no {plural} yet: see {source})')
    more = f" and {total - LISTED} more" if total > LISTED else ""
    return InputError(f'unknown {kind} "{name}" ({plural}: {", ".join(known[:LISTED])}{more})')


def _queries(kind: str) -> tuple[sql.Composed, sql.Composed]:
    table = sql.Identifier("ragsql", _KINDS[kind][0])
    return (
        sql.SQL("select id from {} where name = %s").format(table),
        sql.SQL('select name, count(*) over () from {} order by name collate "C" limit %s').format(table),
    )


def _resolve(conn: psycopg.Connection, kind: str, name: str) -> int:
    find, listing = _queries(kind)
    row = conn.execute(find, (name,)).fetchone()
    if row is not None:
        return row[0]
    rows = conn.execute(listing, (LISTED,)).fetchall()
    raise unknown(kind, name, [r[0] for r in rows], rows[0][1] if rows else 0)


def run_id(conn: psycopg.Connection, name: str) -> int:
    """The run's id; InputError listing the known runs when there is none of that name."""
    return _resolve(conn, "run", name)


def dataset_id(conn: psycopg.Connection, name: str) -> int:
    """The dataset's id; InputError listing the known datasets when there is none of that name."""
    return _resolve(conn, "dataset", name)


def corpus_id(conn: psycopg.Connection, name: str) -> int:
    """The corpus's id; InputError listing the known corpora when there is none of that name."""
    return _resolve(conn, "corpus", name)


async def run_id_async(conn: psycopg.AsyncConnection, name: str) -> int:
    """run_id on an async connection (the judge's and generator's workers)."""
    find, listing = _queries("run")
    row = await (await conn.execute(find, (name,))).fetchone()
    if row is not None:
        return row[0]
    rows = await (await conn.execute(listing, (LISTED,))).fetchall()
    raise unknown("run", name, [r[0] for r in rows], rows[0][1] if rows else 0)
