"""A run's retrieval and generation run values as one table (`ragsql scores`, `ragsql.metrics`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import psycopg

from ragsql.db import generation, metrics

__all__ = ["run_scores"]


def run_scores(
    conn: psycopg.Connection,
    run: str,
    measures: Sequence[str] | None = None,
    *,
    judge: str | None = None,
    rel_level: int = 1,
) -> list[dict]:
    """Run values of the retrieval measures (those with queries), then of the generation metrics, among `measures`
    (default: all of both): kind, measure, value, queries, covered, missing, judge_model, judge_embedder (None for
    retrieval) and the rest of each row (judge as in generation.run_generation)."""
    gen = None if measures is None else generation.generation_names(conn, measures)
    ret = None if measures is None or gen is None else [m for m in measures if m not in gen]
    rows = [
        {
            **asdict(v),
            "kind": "retrieval",
            "covered": v.queries - v.missing,
            "judge_model": None,
            "judge_embedder": None,
        }
        for v in (metrics.run_values(conn, run, ret, rel_level) if ret != [] else [])
        if v.queries
    ]
    rows += [
        {**r, "kind": "generation", "measure": r["metric"]}
        for r in (generation.run_generation(conn, run, gen, judge=judge) if gen != [] else [])
    ]
    return rows
