"""Rank fusion of stored runs (ragsql.fuse / ragsql.fused, sql/functions/32_fusion.sql)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ragsql.db.rows import one, value

__all__ = ["fuse", "optimize", "weight_trials"]


def fuse(
    conn: psycopg.Connection,
    run: str,
    runs: Sequence[str],
    method: str,
    norm: str,
    weights: Sequence[float] | None,
    k: int,
) -> tuple[int, int, int]:
    """Store the fusion of `runs` as run `run`: (run id, queries, results). Raises the database's error (unknown
    run or method, runs of two datasets, a weight count that is not the run count) with nothing stored."""
    with conn.transaction():
        run_id = value(
            conn.execute(
                "select ragsql.fuse(%s, %s, %s, %s, %s, %s)",
                (run, list(runs), method, norm, list(weights) if weights else None, k),
            )
        )
        queries, results = one(
            conn.execute(
                "select count(distinct query_id), count(*) from ragsql.run_result where run_id = %s", (run_id,)
            )
        )
    return run_id, queries, results


def weight_trials(step: float, n_runs: int) -> list[tuple[float, ...]]:
    """The weight vectors ranx's optimize_fusion tries for wsum: every n-tuple of 0, step, 2·step … 1 (rounded to
    step's digits) whose sum is exactly 1.0 in floating point, in product order."""
    import itertools

    import numpy

    digits = str(step)[::-1].find(".")
    grid = [round(float(x), digits) for x in numpy.arange(0, 1 + step, step)]
    return [seq for seq in itertools.product(grid, repeat=n_runs) if sum(seq) == 1.0]


def optimize(
    conn: psycopg.Connection, runs: Sequence[str], method: str, norm: str, measure: str, step: float = 0.1
) -> tuple[dict, list[dict]]:
    """The parameters ranx's optimize_fusion would pick, and every trial's run value of `measure`: wsum's weights
    over `weight_trials(step)`, rrf's k over 10, 20 … 100; the last of equal best scores wins, as in ranx. Each trial
    is fused and evaluated in SQL inside a transaction that is rolled back, so nothing is stored."""
    trials = (
        [{"weights": list(w), "k": 60} for w in weight_trials(step, len(runs))]
        if method == "wsum"
        else [{"weights": None, "k": k} for k in range(10, 101, 10)]
    )
    best, best_score, report = trials[0], 0.0, []
    for params in trials:
        with conn.transaction(force_rollback=True):
            conn.execute(
                "select ragsql.fuse('__ragsql_fusion_trial__', %s, %s, %s, %s, %s)",
                (list(runs), method, norm, params["weights"], params["k"]),
            )
            score = value(
                conn.execute("select value from ragsql.summarize('__ragsql_fusion_trial__', %s)", ([measure],))
            )
        report.append({**params, "score": score})
        if score is not None and score >= best_score:
            best, best_score = params, score
    return best, report
