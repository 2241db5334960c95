"""Quality gates of a run (ragsql.check in sql/functions/55_check.sql)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg
from psycopg.rows import class_row

from ragsql.db.compare import Resampling

__all__ = ["GateResult", "check"]


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


def check(conn: psycopg.Connection, run: str, baseline: str | None, minimums: dict[str, float],
          maximums: dict[str, float], max_drops: dict[str, float], significant: bool,
          resampling: Resampling = Resampling(), rel_level: int = 1, judge: str | None = None) -> list[GateResult]:
    """Every gate's row of ragsql.check, min and max gates first, then max-drop gates."""
    with conn.cursor(row_factory=class_row(GateResult)) as cur:
        cur.execute(
            "select * from ragsql.check(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (run, baseline, json.dumps(minimums), json.dumps(maximums), json.dumps(max_drops), significant,
             resampling.resamples, resampling.seed, resampling.alpha, rel_level, judge),
        )
        return cur.fetchall()
