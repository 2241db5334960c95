"""Queries that compare runs and put intervals on run values; the statistics live in SQL
(sql/functions/50_compare.sql)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

import psycopg

from ragsql.db.rows import typed_rows

__all__ = [
    "Comparison",
    "HistoryValue",
    "QueryPair",
    "IntervalValue",
    "Resampling",
    "compare",
    "compare_queries",
    "config_diff",
    "higher_is_better",
    "history",
    "measure_ci",
]


@dataclass(frozen=True)
class Resampling:
    """How intervals and p-values are resampled: the same settings give the same numbers."""

    resamples: int = 10000
    seed: float = 0.42
    alpha: float = 0.05


@dataclass(frozen=True)
class Comparison:
    """One measure of run against baseline (a row of ragsql.compare)."""

    baseline: str
    run: str
    measure: str
    kind: str
    baseline_value: float | None
    value: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    p_t: float | None
    significant: bool | None
    queries: int
    improved: int
    regressed: int
    tied: int
    left_out: int
    judge_model: str | None
    note: str | None


@dataclass(frozen=True)
class QueryPair:
    """One query's value in both runs (a row of ragsql.compare_queries)."""

    measure: str
    qid: str
    question: str | None
    baseline_value: float
    value: float
    diff: float


@dataclass(frozen=True)
class IntervalValue:
    """A run value with its bootstrap interval (a row of ragsql.measure_ci)."""

    run: str
    measure: str
    kind: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    queries: int
    left_out: int
    judge_model: str | None


def _resampled(measures: list[str] | None, resampling: Resampling, rel_level: int, judge: str | None) -> dict:
    """The parameters every resampling statistic takes: measures, resamples, seed, alpha, level and judge."""
    return {"measures": measures, **asdict(resampling), "level": rel_level, "judge": judge}


def compare(
    conn: psycopg.Connection,
    baseline: str,
    run: str,
    measures: list[str] | None,
    resampling: Resampling = Resampling(),
    rel_level: int = 1,
    judge: str | None = None,
) -> list[Comparison]:
    """Run against baseline, one row per measure in the order asked (ragsql.compare)."""
    return typed_rows(
        conn,
        Comparison,
        """
        select %(baseline)s as baseline, %(run)s as run, c.*
        from ragsql.compare(%(baseline)s, %(run)s, %(measures)s, %(resamples)s, %(seed)s, %(alpha)s, %(level)s,
                            %(judge)s) as c
        """,
        {"baseline": baseline, "run": run, **_resampled(measures, resampling, rel_level, judge)},
    )


def compare_queries(
    conn: psycopg.Connection,
    baseline: str,
    run: str,
    measures: list[str] | None,
    rel_level: int = 1,
    judge: str | None = None,
) -> list[QueryPair]:
    """Every query both runs have a value for, per measure (ragsql.compare_queries)."""
    return typed_rows(
        conn,
        QueryPair,
        "select * from ragsql.compare_queries(%(baseline)s, %(run)s, %(measures)s, %(level)s, %(judge)s)",
        {"baseline": baseline, "run": run, "measures": measures, "level": rel_level, "judge": judge},
    )


def measure_ci(
    conn: psycopg.Connection,
    run: str,
    measures: list[str] | None,
    resampling: Resampling = Resampling(),
    rel_level: int = 1,
    judge: str | None = None,
) -> list[IntervalValue]:
    """Run values with their percentile bootstrap intervals (ragsql.measure_ci)."""
    return typed_rows(
        conn,
        IntervalValue,
        """
        select %(run)s as run, c.*
        from ragsql.measure_ci(%(run)s, %(measures)s, %(resamples)s, %(seed)s, %(alpha)s, %(level)s,
                               %(judge)s) as c
        """,
        {"run": run, **_resampled(measures, resampling, rel_level, judge)},
    )


def config_diff(conn: psycopg.Connection, baseline: str, run: str) -> list[tuple[str, str | None, str | None]]:
    """(key, baseline value, run value) for each configuration key that differs (ragsql.run_config_diff)."""
    return conn.execute("select key, baseline, value from ragsql.run_config_diff(%s, %s)", (baseline, run)).fetchall()


def higher_is_better(conn: psycopg.Connection, measures: list[str]) -> dict[str, bool]:
    """Each measure's direction (ragsql.higher_is_better): false where lower is better."""
    return dict(
        conn.execute("select m, ragsql.higher_is_better(m) from unnest(%s::text[]) as m", (measures,)).fetchall()
    )


@dataclass(frozen=True)
class HistoryValue:
    """A run value of a dataset's history (a row of ragsql.history)."""

    run: str
    created_at: dt.datetime
    measure: str
    kind: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    queries: int
    best: bool
    latest: bool


def history(
    conn: psycopg.Connection,
    dataset: str,
    measures: list[str] | None,
    ci: bool,
    resampling: Resampling = Resampling(2000),
    judge: str | None = None,
) -> list[HistoryValue]:
    """Every run value of a dataset, per measure in the order the runs were made (ragsql.history)."""
    return typed_rows(
        conn,
        HistoryValue,
        """
        select h.run, h.created_at, h.measure, h.kind, h.value, h.ci_low, h.ci_high, h.queries, h.best, h.latest
        from ragsql.history(
            %(dataset)s, %(measures)s, %(ci)s, %(resamples)s, %(seed)s, %(alpha)s, %(level)s, %(judge)s
        ) as h
        """,
        {"dataset": dataset, "ci": ci, **_resampled(measures, resampling, 1, judge)},
    )
