"""Benchmark: retrieval measures in SQL vs pytrec_eval and ranx on the same generated run, and vs an earlier tree.

    python bench/retrieval_metrics.py [--queries 10000] [--depth 100] [--repeat 7] [--baseline-ref 59f4950,...] [--json]

Generates `queries` x `depth` ranked rows with graded qrels and loads them with ragsql's COPY loaders into two
scratch databases on one server (RAGSQL_DATABASE_URL's, else the embedded one): one installed and loaded by this
tree, one by the tree of each --baseline-ref (its files from `git archive`, run with its own PYTHONPATH in a child
process; --baseline-ref '' for none). Then times in one process: (a) the load, (b) every default measure in SQL
(run means with ragsql.summarize, per-query rows with ragsql.evaluate) in both databases, the trees alternating
`repeat` times, after checking that both trees give the same per-query values, (c) pytrec_eval and (d) ranx on the
same data, their conversion (reading rows into dicts, building their objects) reported apart from compute. Prints
a table with ratios to pytrec_eval's bare evaluate and to the first baseline tree (best and median of the repeats: the
machine is shared, the median says more than the best when it is busy).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from trees import new_database, tree_of, with_db  # noqa: E402  (bench/ is scripts, not a package)

from ragsql import db  # noqa: E402

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


# run by each tree with its own PYTHONPATH: install its schema and load the pickled data with its own loaders
_LOAD = r"""
import pickle, sys, time
import psycopg
from ragsql import db
from ragsql.db import load
url, data = sys.argv[1:3]
with open(data, "rb") as f:
    n_queries, results, judgments = pickle.load(f)
conn = psycopg.connect(url)
db.install(conn)
conn.commit()
start = time.perf_counter()
with conn.transaction():
    ds = load.ensure_dataset(conn, "bench")
    load.add_queries(conn, ds, ((f"q{q}", None, None, None) for q in range(n_queries)))
    load.add_judgments(conn, ds, ((q, d, g, None) for q, d, g in judgments))
    run_id = load.create_run(conn, "bench", ds)
    load.add_run_results(conn, run_id, ((q, None, d, s, None) for q, d, s in results), rank_by_score=True)
print(time.perf_counter() - start)
conn.autocommit = True
for table in ("run_result", "judgment", "query"):
    conn.execute(f"vacuum analyze ragsql.{table}")
"""


def load_tree(tree: Path, url: str, data: Path) -> float:
    """Seconds `tree`'s loaders took to store the pickled run in the database at `url` (installed by `tree`)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, url, str(data)], env=env, cwd=tree, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"loading with the tree in {tree} failed: {done.stderr.strip()}")
    return float(done.stdout.split()[-1])


def alternating(conns: dict[str, psycopg.Connection], statement: str, repeat: int) -> dict[str, list[float]]:
    """Wall seconds of `statement` on each connection, the connections taking turns, `repeat` times each."""
    seconds: dict[str, list[float]] = {name: [] for name in conns}
    for conn in conns.values():
        conn.execute(statement).fetchall()  # warm: the run's pages in shared buffers, the functions' plans cached
    for _ in range(repeat):
        for name, conn in conns.items():
            start = time.perf_counter()
            conn.execute(statement).fetchall()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--baseline-ref", default="59f4950", help="git refs to compare with, comma-separated ('' for none)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    results, judgments = generate(args.queries, args.depth)
    admin_url = with_db(db.database_url(), "postgres")
    with tempfile.TemporaryDirectory(prefix="ragsql-retrieval-metrics-") as tmp:
        data = Path(tmp) / "data.pickle"
        with data.open("wb") as f:
            pickle.dump((args.queries, results, judgments), f)
        refs = [ref for ref in args.baseline_ref.split(",") if ref]
        trees = {"this tree": ROOT} | {ref: tree_of(ref, Path(tmp) / f"baseline-{ref}") for ref in refs}
        urls = {name: new_database(admin_url, f"ragsql_bench{i or ''}") for i, name in enumerate(trees)}
        loaded = {name: load_tree(tree, urls[name], data) for name, tree in trees.items()}
    load_seconds = loaded["this tree"]
    conns = {name: psycopg.connect(url, autocommit=True) for name, url in urls.items()}
    conn = conns["this tree"]

    measures = [m for (m,) in conn.execute("select measure from ragsql.default_measure order by position")]
    rows = conn.execute("select * from ragsql.evaluate('bench')").fetchall()
    for name, other in conns.items():
        if other.execute("select * from ragsql.evaluate('bench')").fetchall() != rows:
            sys.exit(f"{name} and this tree give different per-query values")
    means = alternating(conns, "select * from ragsql.summarize('bench')", args.repeat)
    per_query = alternating(conns, "select * from ragsql.evaluate('bench')", args.repeat)
    sql_means, sql_rows = min(means["this tree"]), min(per_query["this tree"])

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
        "trees": {
            name: {
                "load_seconds": loaded[name],
                "run_means_seconds": means[name],
                "per_query_rows_seconds": per_query[name],
            }
            for name in trees
        },
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
    if refs:
        first = refs[0]
        print(f"\nthe trees alternating, {args.repeat} times each (same per-query values); seconds best / median")
        print(f"| tree | summarize | evaluate | x pytrec evaluate (median) | x {first} (median) |")
        print("|---|---:|---:|---:|---:|")
        baseline = statistics.median(means[first]), statistics.median(per_query[first])
        for name in trees:
            medians = statistics.median(means[name]), statistics.median(per_query[name])
            best = min(means[name]), min(per_query[name])
            print(
                f"| {name} | {best[0]:.3f} / {medians[0]:.3f} | {best[1]:.3f} / {medians[1]:.3f} "
                f"| {medians[0] / base:.2f} / {medians[1] / base:.2f} "
                f"| {medians[0] / baseline[0]:.2f} / {medians[1] / baseline[1]:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
