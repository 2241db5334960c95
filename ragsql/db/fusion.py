"""Rank fusion of stored runs (ragsql.fuse / ragsql.fused, sql/functions/32_fusion.sql)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

__all__ = ["fuse"]


def fuse(conn: psycopg.Connection, run: str, runs: Sequence[str], method: str, norm: str,
         weights: Sequence[float] | None, k: int) -> tuple[int, int, int]:
    """Store the fusion of `runs` as run `run`: (run id, queries, results). Raises the database's error (unknown
    run or method, runs of two datasets, a weight count that is not the run count) with nothing stored."""
    with conn.transaction():
        run_id = conn.execute("select ragsql.fuse(%s, %s, %s, %s, %s, %s)",
                              (run, list(runs), method, norm, list(weights) if weights else None, k)).fetchone()[0]
        queries, results = conn.execute("select count(distinct query_id), count(*) from ragsql.run_result "
                                        "where run_id = %s", (run_id,)).fetchone()
    return run_id, queries, results
