"""Quality gates of a run (ragsql.check in sql/functions/55_check.sql)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from ragsql.db.compare import Resampling
from ragsql.db.rows import typed_rows

__all__ = ["GateResult", "check", "check_watch"]


@dataclass(frozen=True)
class GateResult:
    """One gate: its kind (min, max, max_drop), the measure, the values compared and whether it held."""

    gate: str
    measure: str
    value: float | None
    limit_value: float
    baseline_value: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float | None
    passed: bool
    reason: str | None


Gates = Mapping[str, float] | Sequence[tuple[str, float]]


def _pairs(gates: Gates) -> str:
    """Gates as the JSON array [["measure", limit], ...] ragsql.check takes: a measure given twice stays twice."""
    return json.dumps(
        [list(pair) for pair in (gates.items() if isinstance(gates, Mapping) else gates)], allow_nan=False
    )


def check(
    conn: psycopg.Connection,
    run: str,
    baseline: str | None,
    minimums: Gates,
    maximums: Gates,
    max_drops: Gates,
    significant: bool,
    resampling: Resampling = Resampling(),
    rel_level: int = 1,
    judge: str | None = None,
) -> list[GateResult]:
    """Every gate's row of ragsql.check, min and max gates first, then max-drop gates."""
    return typed_rows(
        conn,
        GateResult,
        "select * from ragsql.check(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            run,
            baseline,
            _pairs(minimums),
            _pairs(maximums),
            _pairs(max_drops),
            significant,
            resampling.resamples,
            resampling.seed,
            resampling.alpha,
            rel_level,
            judge,
        ),
    )


def check_watch(
    conn: psycopg.Connection,
    watch: str,
    baseline: timedelta,
    max_drops: Gates,
    significant: bool,
    alpha: float = 0.05,
    judge: str | None = None,
) -> list[GateResult]:
    """The max-drop gates of the watch's latest closed window against its baseline windows (ragsql.check_watch)."""
    return typed_rows(
        conn,
        GateResult,
        "select * from ragsql.check_watch(%s, %s, %s, %s, %s, %s)",
        (watch, baseline, _pairs(max_drops), significant, alpha, judge),
    )
