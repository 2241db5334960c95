"""Benchmark: comparing two runs with significance — ragsql.compare in SQL vs ranx and scipy.

    python bench/compare.py [--queries 5000] [--resamples 10000] [--depth 100] [--json]

Two runs of `queries` queries (the second a noisy re-ranking of the first) over the same graded
qrels, loaded into a scratch database (RAGSQL_DATABASE_URL's server, else the embedded one). Timed
in one process, on the same data:
  (a) ragsql.compare: 14 measures evaluated for both runs, a paired bootstrap interval and a
      randomization test (sign flips) per measure, `resamples` each, plus the t-test and Holm;
  (b) ranx compare(..., stat_test="fisher", n_permutations=resamples) on 14 measures (numba compiled
      beforehand, not counted; ranx runs no bootstrap);
  (c) scipy on ragsql's per-query values: stats.permutation_test (paired, "samples") and
      stats.bootstrap (percentile) per measure, `resamples` each.
Prints a table with ratios to ragsql.compare and how far the p-values and intervals agree.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import retrieval_metrics  # noqa: E402
from bench.retrieval_metrics import generate, timed  # noqa: E402
from bench.trees import scratch_database  # noqa: E402
from ragsql import db  # noqa: E402
from ragsql.db import load  # noqa: E402

# ragsql's 14 default measures and the 14 ranx measures timed beside them (ContextPrecision@10 has no ranx
# peer: map@10 stands in)
RANX = [*retrieval_metrics.RANX[:-1], "map@10", retrieval_metrics.RANX[-1]]
RANX_OF = {"nDCG@10": "ndcg@10", "AP": "map", "RR@10": "mrr@10", "R@10": "recall@10"}


def rerank(results: list[tuple], seed: int = 7) -> list[tuple]:
    """A second system: the same candidates with noisy scores (some queries better, some worse)."""
    rng = random.Random(seed)
    return [(q, d, s + rng.gauss(0, 8)) for q, d, s in results]


def load_runs(conn: psycopg.Connection, n_queries: int, results, judgments) -> None:
    with conn.transaction():
        ds = load.ensure_dataset(conn, "bench")
        load.add_queries(conn, ds, ((f"q{q}", None, None, None) for q in range(n_queries)))
        load.add_judgments(conn, ds, ((q, d, g, None) for q, d, g in judgments))
        for name, rows in (("a", results), ("b", rerank(results))):
            run_id = load.create_run(conn, name, ds)
            load.add_run_results(conn, run_id, ((q, None, d, s, None) for q, d, s in rows), rank_by_score=True)
    conn.autocommit = True
    conn.execute("vacuum analyze ragsql.run_result")
    conn.execute("vacuum analyze ragsql.judgment")
    conn.execute("analyze ragsql.query")
    conn.autocommit = False


def per_query(conn: psycopg.Connection) -> dict[str, np.ndarray]:
    """b - a per query and measure, from ragsql.compare_queries (the values scipy is given)."""
    diffs: dict[str, list[float]] = {}
    for measure, diff in conn.execute("select measure, diff from ragsql.compare_queries('a', 'b')"):
        diffs.setdefault(measure, []).append(diff)
    return {m: np.array(v) for m, v in diffs.items()}


def scipy_tests(diffs: dict[str, np.ndarray], resamples: int) -> dict[str, tuple]:
    from scipy import stats

    out = {}
    for measure, d in diffs.items():
        perm = stats.permutation_test(
            (d, np.zeros_like(d)),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=resamples,
            alternative="two-sided",
            random_state=1,
            batch=1000,
        )
        boot = stats.bootstrap(
            (d,), np.mean, n_resamples=resamples, method="percentile", random_state=1, batch=1000
        ).confidence_interval
        out[measure] = (float(perm.pvalue), float(boot.low), float(boot.high))
    return out


def ranx_runs(conn: psycopg.Connection):
    from ranx import Qrels, Run

    qrels, runs = {}, {"a": {}, "b": {}}
    for qid, docno, rel in conn.execute(
        "select q.qid, j.docno, j.relevance from ragsql.judgment j join ragsql.query q on q.id = j.query_id"
    ):
        qrels.setdefault(qid, {})[docno] = rel
    for run, qid, docno, score in conn.execute(
        "select ru.name, q.qid, r.docno, r.score from ragsql.run_result r join ragsql.query q on q.id = r.query_id "
        "join ragsql.run ru on ru.id = r.run_id"
    ):
        runs[run].setdefault(qid, {})[docno] = score
    return Qrels(qrels), Run(runs["a"], name="a"), Run(runs["b"], name="b")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    results, judgments = generate(args.queries, args.depth)
    conn = psycopg.connect(scratch_database())
    db.install(conn)
    conn.commit()
    load_runs(conn, args.queries, results, judgments)

    evaluate_seconds, _ = timed(
        lambda: conn.execute(
            "select * from ragsql.evaluate('a') union all select * from ragsql.evaluate('b')"
        ).fetchall(),
        1,
    )
    compare_seconds, rows = timed(
        lambda: conn.execute(
            "select measure, diff, ci_low, ci_high, p_value from ragsql.compare('a', 'b', resamples => %s)",
            (args.resamples,),
        ).fetchall(),
        1,
    )
    ours = {m: (p, low, high) for m, _, low, high, p in rows}

    diffs = per_query(conn)
    scipy_seconds, theirs = timed(lambda: scipy_tests(diffs, args.resamples), 1)

    from ranx import compare

    qrels, run_a, run_b = ranx_runs(conn)
    compare(qrels, [run_a, run_b], metrics=["ndcg@10"], stat_test="fisher", n_permutations=10)  # numba compiles
    ranx_seconds, report = timed(
        lambda: compare(
            qrels, [run_a, run_b], metrics=RANX, stat_test="fisher", n_permutations=args.resamples, max_p=0.05
        ),
        1,
    )

    p_gap = max(abs(ours[m][0] - theirs[m][0]) for m in ours)
    ci_gap = max(
        max(abs(ours[m][1] - theirs[m][1]), abs(ours[m][2] - theirs[m][2]))
        / max(np.std(diffs[m], ddof=1) / np.sqrt(len(diffs[m])), 1e-12)
        for m in ours
    )
    ranx_gap = max(abs(ours[m][0] - report.comparisons[("a", "b")][r]["p_value"]) for m, r in RANX_OF.items())
    figures = {
        "queries": args.queries,
        "measures": len(rows),
        "resamples": args.resamples,
        "ragsql_evaluate_both_runs_seconds": evaluate_seconds,
        "ragsql_compare_seconds": compare_seconds,
        "ranx_compare_fisher_seconds": ranx_seconds,
        "scipy_permutation_and_bootstrap_seconds": scipy_seconds,
        "max_p_gap_scipy": p_gap,
        "max_ci_gap_scipy_in_standard_errors": ci_gap,
        "max_p_gap_ranx": ranx_gap,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"two runs of {args.queries:,} queries, {len(rows)} measures, {args.resamples:,} resamples")
    print(f"{'step':62} {'seconds':>9} {'x ragsql':>9}")
    for name, seconds in (
        ("ragsql.compare (evaluate both, bootstrap + randomization, t, Holm)", compare_seconds),
        ("  of which: evaluate both runs (ragsql.evaluate)", evaluate_seconds),
        ("ranx compare, stat_test=fisher (no interval)", ranx_seconds),
        ("scipy permutation_test + bootstrap on the same values", scipy_seconds),
    ):
        print(f"{name:62} {seconds:9.2f} {seconds / compare_seconds:9.2f}")
    print(
        f"agreement: p-values within {p_gap:.4f} of scipy's and {ranx_gap:.4f} of ranx's; interval ends within "
        f"{ci_gap:.3f} standard errors of scipy's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
