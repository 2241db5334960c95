"""The aspects of aspect critique (ragsql.aspect): the five built-ins and the user's own."""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import dict_row

from ragsql.db.connect import shard_reads_in_sequence
from ragsql.db.rows import value
from ragsql.errors import InputError

__all__ = ["add", "list_aspects", "remove"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def list_aspects(conn: psycopg.Connection) -> list[dict]:
    """Every aspect: built-ins first, then the user's, with how many verdicts each has."""
    with conn.cursor(row_factory=dict_row) as cur:
        # the counts grouped and joined, not a correlated subquery: Citus plans none beside the reference table
        cur.execute("""
            select a.name, a.definition, a.builtin, a.higher_is_better, coalesce(v.verdicts, 0) as verdicts
            from ragsql.aspect as a
            left join (select aspect, count(*) as verdicts from ragsql.aspect_verdict group by aspect) as v
                   on v.aspect = a.name
            order by not a.builtin, a.name collate "C" """)
        return cur.fetchall()


def add(conn: psycopg.Connection, name: str, definition: str, higher_is_better: bool, replace: bool) -> str:
    """Store an aspect; 'added' or 'replaced'. A bad name, an empty definition, a built-in's name, or an existing
    name without `replace` is an InputError and nothing changes."""
    if not _NAME.match(name):
        raise InputError(
            f'aspect name "{name}": use lower-case letters, digits and _, starting with a letter '
            "(it is written aspect:<name> wherever a metric is named)"
        )
    if not definition.strip():
        raise InputError(f'aspect "{name}": the definition is empty (the yes/no question the judge is asked)')
    existing = conn.execute("select builtin from ragsql.aspect where name = %s", (name,)).fetchone()
    if existing and existing[0]:
        raise InputError(f'aspect "{name}" is built in: pick another name')
    if existing and not replace:
        raise InputError(f'aspect "{name}" already exists (use --replace to change its definition)')
    conn.execute(
        """
        insert into ragsql.aspect (name, definition, higher_is_better) values (%s, %s, %s)
        on conflict (name) do update set definition = excluded.definition,
                                         higher_is_better = excluded.higher_is_better""",
        (name, definition.strip(), higher_is_better),
    )
    return "replaced" if existing else "added"


def remove(conn: psycopg.Connection, name: str) -> int:
    """Delete a user aspect and its verdicts; how many verdicts went. An unknown or built-in aspect is an
    InputError and nothing changes."""
    existing = conn.execute("select builtin from ragsql.aspect where name = %s", (name,)).fetchone()
    if existing is None:
        known = [r[0] for r in conn.execute("select name from ragsql.aspect where not builtin order by 1")]
        raise InputError(f'unknown aspect "{name}" (your aspects: {", ".join(known) or "none"})')
    if existing[0]:
        raise InputError(f'aspect "{name}" is built in and stays')
    shard_reads_in_sequence(conn)
    verdicts = value(conn.execute("select count(*) from ragsql.aspect_verdict where aspect = %s", (name,)))
    conn.execute("delete from ragsql.aspect where name = %s", (name,))
    return verdicts
