"""The aspects of aspect critique (ragsql.aspect): the five built-ins and the user's own."""

from __future__ import annotations

import psycopg

from ragsql.db import _named
from ragsql.db.rows import dict_rows
from ragsql.errors import InputError

__all__ = ["add", "list_aspects", "remove"]


def list_aspects(conn: psycopg.Connection) -> list[dict]:
    """Every aspect: built-ins first, then the user's, with how many verdicts each has."""
    # the counts grouped and joined, not a correlated subquery: Citus plans none beside the reference table
    return dict_rows(
        conn,
        """
        select a.name, a.definition, a.builtin, a.higher_is_better, coalesce(v.verdicts, 0) as verdicts
        from ragsql.aspect as a
        left join (select aspect, count(*) as verdicts from ragsql.aspect_verdict group by aspect) as v
               on v.aspect = a.name
        order by not a.builtin, a.name collate "C" """,
    )


def add(conn: psycopg.Connection, name: str, definition: str, higher_is_better: bool, replace: bool) -> str:
    """Store an aspect; 'added' or 'replaced'. A bad name, an empty definition, a built-in's name, or an existing
    name without `replace` is an InputError and nothing changes."""
    _named.check_name("aspect", name, "aspect:<name>")
    if not definition.strip():
        raise InputError(f'aspect "{name}": the definition is empty (the yes/no question the judge is asked)')
    existing = _named.existing(conn, "aspect", name, replace, "definition")
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
    return _named.remove(conn, "aspect", name)
