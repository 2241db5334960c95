"""Queries that read retrieval measures; every formula lives in SQL (sql/functions/10_measure.sql)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from ragsql.db.rows import typed_rows

__all__ = ["question_texts", "RunValue", "QueryValue", "default_measures", "run_values", "query_values"]


@dataclass(frozen=True)
class RunValue:
    """A measure's run value with its coverage counts."""

    run: str
    measure: str
    value: float | None
    queries: int
    answerable: int
    no_relevant: int
    missing: int
    value_answerable: float | None


@dataclass(frozen=True)
class QueryValue:
    """A measure's value for one query."""

    run: str
    qid: str
    measure: str
    value: float
    relevant: int
    retrieved: bool


def default_measures(conn: psycopg.Connection) -> list[str]:
    """Names in ragsql.default_measure, in order."""
    return [r[0] for r in conn.execute("select measure from ragsql.default_measure order by position")]


def run_values(conn: psycopg.Connection, run: str, measures: list[str] | None, rel_level: int) -> list[RunValue]:
    """Run value of each measure (ragsql.summarize), in the order asked."""
    return typed_rows(
        conn,
        RunValue,
        """
        select %(run)s as run, s.measure, s.value, s.queries, s.answerable, s.no_relevant, s.missing,
               s.value_answerable
        from ragsql.summarize(%(run)s, %(measures)s, %(level)s) as s
        """,
        {"run": run, "measures": measures, "level": rel_level},
    )


def query_values(conn: psycopg.Connection, run: str, measures: list[str] | None, rel_level: int) -> list[QueryValue]:
    """Per-query values of each measure (ragsql.evaluate), by qid then the order asked."""
    return typed_rows(
        conn,
        QueryValue,
        """
        select %(run)s as run, e.qid, e.measure, e.value, e.relevant, e.retrieved
        from ragsql.evaluate(%(run)s, %(measures)s, %(level)s) as e
        """,
        {"run": run, "measures": measures, "level": rel_level},
    )


def question_texts(conn: psycopg.Connection, run: str) -> dict[str, str | None]:
    """{qid: question text} of every query of the run's dataset."""
    return dict(
        conn.execute(
            "select q.qid, q.text from ragsql.query as q join ragsql.run as r "
            "on r.dataset_id = q.dataset_id where r.name = %s",
            (run,),
        ).fetchall()
    )
