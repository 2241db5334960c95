"""Judge consistency: the repeats of a run (copies judged with other seeds) and how much their values move
(sql/functions/65_consistency.sql)."""

from __future__ import annotations

import psycopg

from ragsql.db.rows import dict_rows, value

__all__ = ["consistency", "flips", "repeat_run"]


def repeat_run(conn: psycopg.Connection, run: str, repeat: int) -> str:
    """The name of repeat `repeat` (>= 2) of `run`, created or refreshed from the run's answers (committed)."""
    name = value(conn.execute("select ragsql.repeat_run(%s, %s)", (run, repeat)))
    conn.commit()
    return name


def consistency(
    conn: psycopg.Connection, run: str, metrics: list[str] | None = None, judge: str | None = None
) -> list[dict]:
    """Per generation metric: repeats, mean, sd, min, max of the run value, queries, flipping, flip_share,
    mean_query_range, judge_model, note (ragsql.judge_consistency)."""
    return dict_rows(conn, "select * from ragsql.judge_consistency(%s, %s, %s)", (run, metrics, judge))


def flips(conn: psycopg.Connection, run: str, metric: str, judge: str | None = None) -> list[dict]:
    """The queries whose value of `metric` differs between repeats: qid, values (per repeat), range, repeats."""
    return dict_rows(conn, "select * from ragsql.judge_flips(%s, %s, %s)", (run, metric, judge))
