"""Named judge settings beside built-ins (ragsql.aspect, ragsql.rubric): the name rule, the add and remove checks."""

from __future__ import annotations

import re
from typing import Literal

import psycopg
from psycopg import sql

from ragsql.db.connect import shard_reads_in_sequence
from ragsql.db.rows import value
from ragsql.errors import InputError

__all__ = ["check_name", "existing", "remove"]

Kind = Literal["aspect", "rubric"]  # the table; its verdicts are <kind>_verdict, keyed by a column <kind>

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def check_name(kind: Kind, name: str, written: str) -> None:
    """An InputError unless `name` is lower-case letters, digits and _, starting with a letter."""
    if not _NAME.match(name):
        raise InputError(
            f'{kind} name "{name}": use lower-case letters, digits and _, starting with a letter '
            f"(it is written {written} wherever a metric is named)"
        )


def existing(conn: psycopg.Connection, kind: Kind, name: str, replace: bool, what: str) -> bool:
    """Whether a user's `kind` of that name exists; an InputError for a built-in's name, or for an existing one
    without `replace` (--replace changes its `what`)."""
    row = conn.execute(sql.SQL("select builtin from ragsql.{} where name = %s").format(sql.Identifier(kind)), (name,))
    found = row.fetchone()
    if found and found[0]:
        raise InputError(f'{kind} "{name}" is built in: pick another name')
    if found and not replace:
        raise InputError(f'{kind} "{name}" already exists (use --replace to change its {what})')
    return found is not None


def remove(conn: psycopg.Connection, kind: Kind, name: str) -> int:
    """Delete a user's `kind` and its verdicts; how many verdicts went. An unknown or built-in one is an
    InputError and nothing changes."""
    table, verdicts = sql.Identifier(kind), sql.Identifier(f"{kind}_verdict")
    found = conn.execute(sql.SQL("select builtin from ragsql.{} where name = %s").format(table), (name,)).fetchone()
    if found is None:
        query = sql.SQL("select name from ragsql.{} where not builtin order by 1").format(table)
        known = [r[0] for r in conn.execute(query)]
        raise InputError(f'unknown {kind} "{name}" (your {kind}s: {", ".join(known) or "none"})')
    if found[0]:
        raise InputError(f'{kind} "{name}" is built in and stays')
    shard_reads_in_sequence(conn)
    query = sql.SQL("select count(*) from ragsql.{} where {} = %s").format(verdicts, sql.Identifier(kind))
    count = value(conn.execute(query, (name,)))
    conn.execute(sql.SQL("delete from ragsql.{} where name = %s").format(table), (name,))
    return count
