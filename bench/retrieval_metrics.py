"""Benchmark: retrieval measures in SQL vs pytrec_eval and ranx on the same generated run.

    python bench/retrieval_metrics.py [--queries 10000] [--depth 100] [--repeat 3] [--json]

Generates `queries` x `depth` ranked rows with graded qrels, loads them with ragsql's COPY
loaders into a scratch database (RAGSQL_DATABASE_URL's server, else the embedded one), then
times in one process: (a) the load, (b) every default measure in SQL, (c) pytrec_eval and
(d) ranx on the same data, their conversion (reading rows into dicts, building their objects)
reported apart from compute. Prints a table with ratios to pytrec_eval's bare evaluate.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trees import scratch_database  # noqa: E402
from ragsql import db  # noqa: E402
from ragsql.db import load  # noqa: E402

# ragsql default measure -> pytrec_eval / ranx names (ContextPrecision has no peer)
PYTREC = {
    "Success@1": "success_1",
    "Success@5": "success_5",
    "Success@10": "success_10",
    "R@5": "recall_5",
    "R@10": "recall_10",
    "R@20": "recall_20",
    "P@5": "P_5",
    "P@10": "P_10",
    "nDCG@5": "ndcg_cut_5",
    "nDCG@10": "ndcg_cut_10",
    "AP": "map",
    "Rprec": "Rprec",
}
RANX = [
    "hit_rate@1",
    "hit_rate@5",
    "hit_rate@10",
    "recall@5",
    "recall@10",
    "recall@20",
    "precision@5",
    "precision@10",
    "mrr@10",
    "ndcg@5",
    "ndcg@10",
    "map",
    "r-precision",
]


def generate(n_queries: int, depth: int, seed: int = 42):
    """Rows (qid, docno, score) and judgments (qid, docno, grade): ~15 judged per query, grades 0-3."""
    rng = random.Random(seed)
    results, judgments = [], []
    for q in range(n_queries):
        qid = f"q{q}"
        docs = rng.sample(range(1_000_000), depth + 10)
        for rank, d in enumerate(docs[:depth]):
            results.append((qid, f"doc{d}", float(depth - rank) + rng.random() * 0.5))
        for d in rng.sample(docs, 15):
            judgments.append((qid, f"doc{d}", rng.choice([0, 0, 1, 1, 2, 3])))
    return results, judgments


def timed(fn, repeat: int):
    """Best wall time of `repeat` calls and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    results, judgments = generate(args.queries, args.depth)
    url = scratch_database()
    conn = psycopg.connect(url)
    db.install(conn)
    conn.commit()

    start = time.perf_counter()
    with conn.transaction():
        ds = load.ensure_dataset(conn, "bench")
        load.add_queries(conn, ds, ((f"q{q}", None, None, None) for q in range(args.queries)))
        load.add_judgments(conn, ds, ((q, d, g, None) for q, d, g in judgments))
        run_id = load.create_run(conn, "bench", ds)
        load.add_run_results(conn, run_id, ((q, None, d, s, None) for q, d, s in results), rank_by_score=True)
    load_seconds = time.perf_counter() - start
    conn.autocommit = True
    conn.execute("vacuum analyze ragsql.run_result")
    conn.execute("vacuum analyze ragsql.judgment")
    conn.execute("analyze ragsql.query")
    conn.autocommit = False

    measures = [m for (m,) in conn.execute("select measure from ragsql.default_measure order by position")]
    sql_means, _ = timed(lambda: conn.execute("select * from ragsql.summarize('bench')").fetchall(), args.repeat)
    sql_rows, rows = timed(lambda: conn.execute("select * from ragsql.evaluate('bench')").fetchall(), args.repeat)

    import pytrec_eval

    def read_dicts():
        qrels, run = {}, {}
        for qid, docno, rel in conn.execute(
            "select q.qid, j.docno, j.relevance from ragsql.judgment j join ragsql.query q on q.id = j.query_id"
        ):
            qrels.setdefault(qid, {})[docno] = rel
        for qid, docno, score in conn.execute(
            "select q.qid, r.docno, r.score from ragsql.run_result r join ragsql.query q on q.id = r.query_id"
        ):
            run.setdefault(qid, {})[docno] = score
        return qrels, run

    read_seconds, (qrels, run) = timed(read_dicts, 1)
    build_seconds, evaluator = timed(
        lambda: pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC.values()) | {"recip_rank"}), 1
    )
    pytrec_seconds, _ = timed(lambda: evaluator.evaluate(run), args.repeat)

    extra = ["Bpref", "infAP", "NumRet", "NumRel", "NumRelRet"]  # every judged hit is read, not only relevant ones
    sql_extra, _ = timed(
        lambda: conn.execute("select * from ragsql.summarize('bench', %s)", (extra,)).fetchall(), args.repeat
    )
    extra_evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"bpref", "infAP", "num_ret", "num_rel", "num_rel_ret"})
    pytrec_extra, _ = timed(lambda: extra_evaluator.evaluate(run), args.repeat)

    from ranx import Qrels, Run, evaluate

    ranx_build, (rq, rr) = timed(lambda: (Qrels(qrels), Run(run)), 1)
    evaluate(rq, rr, RANX)  # numba compiles on first use; not counted
    ranx_seconds, _ = timed(lambda: evaluate(rq, rr, RANX, make_comparable=True), args.repeat)

    n_rows = len(results)
    figures = {
        "queries": args.queries,
        "rows": n_rows,
        "measures": len(measures),
        "load_seconds": load_seconds,
        "load_rows_per_second": n_rows / load_seconds,
        "sql_run_means_seconds": sql_means,
        "sql_per_query_rows_seconds": sql_rows,
        "sql_per_query_rows": len(rows),
        "pytrec_read_dicts_seconds": read_seconds,
        "pytrec_build_seconds": build_seconds,
        "pytrec_evaluate_seconds": pytrec_seconds,
        "ranx_build_seconds": ranx_build,
        "ranx_evaluate_seconds": ranx_seconds,
        "sql_bpref_infap_counts_seconds": sql_extra,
        "pytrec_bpref_infap_counts_seconds": pytrec_extra,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    base = pytrec_seconds
    lines = [
        ("load 1 run (COPY + indexes + FKs)", load_seconds, f"{n_rows / load_seconds:,.0f} rows/s"),
        (f"ragsql SQL: {len(measures)} measures, run means", sql_means, ""),
        (f"ragsql SQL: {len(measures)} measures, per-query rows", sql_rows, f"{len(rows):,} rows"),
        ("pytrec_eval: read rows into dicts", read_seconds, ""),
        ("pytrec_eval: build evaluator", build_seconds, ""),
        ("pytrec_eval: evaluate (C)", pytrec_seconds, ""),
        ("pytrec_eval: total incl. reading", read_seconds + build_seconds + pytrec_seconds, ""),
        ("ranx: build Qrels/Run", ranx_build, ""),
        ("ranx: evaluate (numba, warm)", ranx_seconds, ""),
        ("ranx: total", ranx_build + ranx_seconds, ""),
        ("ragsql SQL: Bpref, infAP, 3 counts, run means", sql_extra, ""),
        ("pytrec_eval: the same 5 (C)", pytrec_extra, ""),
    ]
    print(f"{args.queries:,} queries x {args.depth} ranked = {n_rows:,} rows; best of {args.repeat}")
    print(f"{'step':45} {'seconds':>9} {'x pytrec evaluate':>18}  note")
    for name, seconds, note in lines:
        print(f"{name:45} {seconds:9.3f} {seconds / base:18.2f}  {note}")
    print(
        "ragsql means vs pytrec_eval incl. reading: "
        f"{(read_seconds + build_seconds + pytrec_seconds) / sql_means:.2f}x "
        f"faster; vs ranx: {(ranx_seconds) / sql_means:.2f}x (evaluate only)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
