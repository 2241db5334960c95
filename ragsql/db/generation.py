"""Queries that read generation metrics; every formula lives in SQL (sql/functions/2*_*.sql)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ragsql import registry
from ragsql.db.rows import dict_rows

__all__ = ["generation_names", "metric_kinds", "no_judge_metrics", "query_generation", "run_generation"]


def run_generation(
    conn: psycopg.Connection, run: str, metrics: list[str] | None = None, judge: str | None = None
) -> list[dict]:
    """Run value of each generation metric with coverage and the judge it comes from (summarize_generation);
    judge: a model name or 'offline' (default: the newest LLM judge's verdicts, else the offline judge's)."""
    return dict_rows(
        conn, "select %s as run, s.* from ragsql.summarize_generation(%s, %s, %s) as s", (run, run, metrics, judge)
    )


def query_generation(
    conn: psycopg.Connection, run: str, metrics: list[str] | None = None, judge: str | None = None
) -> list[dict]:
    """Per-query value (or reason it is null) of each generation metric (evaluate_generation)."""
    return dict_rows(
        conn, "select %s as run, e.* from ragsql.evaluate_generation(%s, %s, %s) as e", (run, run, metrics, judge)
    )


def metric_kinds(conn: psycopg.Connection) -> dict[str, str | None]:
    """Each generation metric's name and the judge task kind whose verdicts it reads (ragsql.generation_metric);
    None for a metric computed with no judge (exact_match, token_f1, id_based_context_precision, …)."""
    return dict(conn.execute("select metric, task_kind from ragsql.generation_metric").fetchall())


def generation_names(conn: psycopg.Connection, names: Sequence[str]) -> list[str]:
    """The names among `names` that are generation metrics (ragsql.generation_metric, or aspect:<name>); the
    others are retrieval measures."""
    kinds = metric_kinds(conn)
    return [m for m in names if (c := m.lower().strip()) in kinds or registry.metric_or_none(c) is not None]


def no_judge_metrics(conn: psycopg.Connection) -> dict[str, str]:
    """The generation metrics computed with no judge, and the function computing each: text_metric (the answer
    against its references), context_id_metric (the answer's context ids against the gold ids) or
    string_context_metric (the texts of the answer's contexts against the gold texts)."""
    return dict(
        conn.execute(
            "select metric, computed_by from ragsql.generation_metric where computed_by is not null"
        ).fetchall()
    )
