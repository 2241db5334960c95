"""The rubrics of rubrics_score (ragsql.rubric): RAGAS's two default rubrics and the user's own; each is a metric,
rubrics_score:<name>, of the registry (ragsql.generation_metric)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ragsql.db import _named
from ragsql.db.rows import dict_rows
from ragsql.errors import InputError

__all__ = ["add", "list_rubrics", "remove"]


def list_rubrics(conn: psycopg.Connection) -> list[dict]:
    """Every rubric: built-ins first, then the user's, with its descriptions and how many scores it has."""
    return dict_rows(
        conn,
        """
        select r.name, 'rubrics_score:' || r.name as metric, r.builtin, r.with_reference,
               array_to_string(r.descriptions, ' | ') as descriptions, coalesce(v.verdicts, 0) as verdicts
        from ragsql.rubric as r
        left join (select rubric, count(*) as verdicts from ragsql.rubric_verdict group by rubric) as v
               on v.rubric = r.name  -- a join: Citus plans no correlated subquery beside a reference table
        order by not r.builtin, r.name collate "C" """,
    )


def add(conn: psycopg.Connection, name: str, descriptions: Sequence[str], with_reference: bool, replace: bool) -> str:
    """Store a rubric and its metric rubrics_score:<name>; 'added' or 'replaced'. A bad name, an empty
    description, a built-in's name, or an existing name without `replace` is an InputError and nothing changes."""
    _named.check_name("rubric", name, "rubrics_score:<name>")
    empty = [str(i) for i, d in enumerate(descriptions, 1) if not d.strip()]
    if len(descriptions) != 5 or empty:
        raise InputError(
            f'rubric "{name}": give five non-empty score descriptions (--score1 … --score5); '
            f"empty: {', '.join(empty) or 'none'}"
        )
    existing = _named.existing(conn, "rubric", name, replace, "descriptions")
    conn.execute(
        """
        insert into ragsql.rubric (name, descriptions, with_reference) values (%s, %s, %s)
        on conflict (name) do update set descriptions = excluded.descriptions,
                                         with_reference = excluded.with_reference""",
        (name, [d.strip() for d in descriptions], with_reference),
    )
    conn.execute(
        """
        insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description)
        select 'rubrics_score:' || %(name)s,
               greatest(1000, (select max(position) from ragsql.generation_metric)) + 1,
               'rubrics_score', %(ref)s, 'the judge''s 1-5 score by the rubric ' || %(name)s || ' (RAGAS rubrics_score)'
        on conflict (metric) do update set needs_reference = excluded.needs_reference""",
        {"name": name, "ref": with_reference},
    )
    return "replaced" if existing else "added"


def remove(conn: psycopg.Connection, name: str) -> int:
    """Delete a user rubric, its metric and its scores; how many scores went. An unknown or built-in rubric is an
    InputError and nothing changes."""
    verdicts = _named.remove(conn, "rubric", name)
    conn.execute("delete from ragsql.generation_metric where metric = %s", ("rubrics_score:" + name,))
    return verdicts
