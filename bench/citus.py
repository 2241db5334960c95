"""Benchmark: ragsql on a Citus cluster against one PostgreSQL server of the same build, on the same machine.

    RAGSQL_DATABASE_URL=$(bash ../shared/citus/cluster.sh start) python bench/citus.py [--rows 1000000] [--runs 3]
        [--tasks 4000] [--workers 8] [--json]

Two databases on the coordinator's server (PostgreSQL 15 built by ../shared/citus/build.sh): `postgres`, where
`ragsql db init --distribute` runs (the cluster: a coordinator and two workers), and `ragsql_bench_one`, made here
without the citus extension (one server). Each gets, as a user would run it:

* `ragsql import trec` of a run of --rows results (bench/import_speed.py's generator: 1000 results a topic,
  a third of the scores tied, 25 judgments a topic), wall time of the command;
* `ragsql metrics` of that run (the 14 default measures, trec_eval -c), median of --runs;
* the judge queue: --tasks tasks of one run (answers imported from JSONL) claimed 4 at a time, renewed once and
  finished by --workers threads, each with its own connection, no judge call: tasks per second, and the longest
  claim;
* `ragsql judge --offline` of 500 answers (faithfulness and context recall), wall time;
* sizes: bytes per ranked row (ragsql.run_result with its indexes), per judgment, per stored verdict
  (statement_verdict, after that judge), per chunk with its embedding and postings
  (chunk, chunk_term, bm25_term, bm25_list after ingesting the demo corpus). On the cluster the sizes
  are the shards' (citus_total_relation_size), on one server pg_total_relation_size.

The per-query values of the 1M-row run are checked equal on the two databases before anything is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from import_speed import import_trec, write_files  # noqa: E402  (bench/ is scripts, not a package)

EXAMPLE = ROOT / "ragsql" / "data" / "example_evalset.jsonl"
DEMO = ROOT / "ragsql" / "data" / "demo"


def _with_db(url: str, dbname: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


def ragsql(url: str, *args: str) -> float:
    """Run the CLI against url as a subprocess; its wall time in seconds."""
    env = dict(os.environ, RAGSQL_DATABASE_URL=url, PYTHONPATH=str(ROOT), RAGSQL_EMBEDDER="offline")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from ragsql.cli import main; sys.exit(main())", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"ragsql {' '.join(args)} on {url}: {done.stderr.strip()}")
    return time.perf_counter() - started


def prepare(cluster_url: str) -> dict[str, str]:
    """Fresh schemas: distributed in the cluster's database, plain in a database without citus."""
    one_url = _with_db(cluster_url, "ragsql_bench_one")
    with psycopg.connect(cluster_url, autocommit=True) as admin:
        admin.execute("set client_min_messages = warning")
        admin.execute("drop database if exists ragsql_bench_one with (force)")
        admin.execute("create database ragsql_bench_one")
        admin.execute("drop schema if exists ragsql_report cascade")
        admin.execute("drop schema if exists ragsql cascade")
    with psycopg.connect(one_url, autocommit=True) as conn:
        conn.execute("create extension vector")
    ragsql(cluster_url, "db", "init", "--distribute")
    ragsql(one_url, "db", "init")
    return {"one server": one_url, "cluster": cluster_url}


def size(conn: psycopg.Connection, tables: list[str]) -> int:
    citus = conn.execute("select exists (select from pg_extension where extname = 'citus')").fetchone()[0]
    total = 0
    for table in tables:
        name = f"ragsql.{table}"
        spread = (
            citus
            and conn.execute(
                "select exists (select from pg_dist_partition where logicalrelid = %s::regclass)", (name,)
            ).fetchone()[0]
        )
        # a partitioned table (bm25_list) is the sum of its partitions
        query = (
            "select citus_total_relation_size(%s)"
            if spread
            else "select greatest(pg_total_relation_size(%(t)s::regclass), (select coalesce(sum(pg_total_relation_size("
            "p.relid)), 0) from pg_partition_tree(%(t)s::regclass) as p))::bigint"
        )
        total += conn.execute(query.replace("%s", "%(t)s"), {"t": name}).fetchone()[0]
    return total


def queue(url: str, tasks: int, workers: int) -> tuple[float, float]:
    """Tasks per second of `workers` threads draining one run's queue, and the longest claim in seconds."""
    with psycopg.connect(url) as conn:
        rid = conn.execute("select id from ragsql.run where name = 'queue'").fetchone()[0]
        kinds = [
            "k" + str(i)
            for i in range(
                tasks // conn.execute("select count(*) from ragsql.answer where run_id = %s", (rid,)).fetchone()[0]
            )
        ]
        conn.execute("delete from ragsql.judge_task where run_id = %s", (rid,))
        conn.execute("select ragsql._enqueue_judge_tasks(%s, %s)", (rid, kinds))
        conn.commit()
        total = conn.execute("select count(*) from ragsql.judge_task where run_id = %s", (rid,)).fetchone()[0]
    claims: list[float] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                started = time.perf_counter()
                rows = conn.execute("select id from ragsql._claim_judge_tasks(%s, %s, 4)", (rid, name)).fetchall()
                with lock:
                    claims.append(time.perf_counter() - started)
                if not rows:
                    return
                for (task,) in rows:
                    conn.execute("select ragsql._renew_judge_lease(%s, %s, %s)", (rid, task, name))
                    conn.execute("select ragsql._finish_judge_task(%s, %s, %s)", (rid, task, name))

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    with psycopg.connect(url) as conn:
        done = conn.execute(
            "select count(*) from ragsql.judge_task where run_id = %s and status = 'done'", (rid,)
        ).fetchone()[0]
    if done != total:
        raise SystemExit(f"queue on {url}: {done} of {total} tasks done")
    return total / elapsed, max(claims)


def queue_run(folder: Path, answers: int) -> Path:
    """A JSONL of `answers` answered records (the example's, qids renumbered)."""
    records = [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]
    path = folder / "queue.jsonl"
    with path.open("w") as out:
        for i in range(answers):
            record = dict(records[i % len(records)], qid=f"q{i}")
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=4000, help="a multiple of 500")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cluster_url = os.environ.get("RAGSQL_DATABASE_URL")
    if not cluster_url:
        raise SystemExit("set RAGSQL_DATABASE_URL to a Citus coordinator (bash ../shared/citus/cluster.sh start)")
    sides = prepare(cluster_url)
    result: dict[str, dict[str, float]] = {name: {} for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        qrels, run = write_files(folder, args.rows)
        jsonl = queue_run(folder, 500)
        for name, url in sides.items():
            r = result[name]
            r["import trec (s)"] = ragsql(url, *import_trec(qrels, run))
            r["metrics, 14 measures (s)"] = statistics.median(
                ragsql(url, "metrics", "--run", "bench") for _ in range(args.runs)
            )
            ragsql(url, "import", "jsonl", str(jsonl), "--dataset", "queue", "--run", "queue")
            r["judge --offline, 500 answers (s)"] = ragsql(
                url,
                "judge",
                "--run",
                "queue",
                "--offline",
                "--embedder",
                "offline",
                "--metrics",
                "faithfulness context_recall",
            )
            r[f"judge queue, {args.workers} workers (tasks/s)"], r["longest claim (s)"] = queue(
                url, args.tasks, args.workers
            )
            ragsql(url, "ingest", str(DEMO / "corpus.jsonl"), "--corpus", "demo", "--embedder", "offline")
            with psycopg.connect(url) as conn:
                count = lambda table: conn.execute(f"select count(*) from ragsql.{table}").fetchone()[0]  # noqa: E731
                r["bytes per ranked row"] = size(conn, ["run_result"]) / count("run_result")
                r["bytes per judgment"] = size(conn, ["judgment"]) / count("judgment")
                r["bytes per statement verdict"] = size(conn, ["statement_verdict"]) / count("statement_verdict")
                r["bytes per chunk (embedding, postings)"] = size(
                    conn, ["chunk", "chunk_term", "bm25_term", "bm25_list"]
                ) / count("chunk")
                r["_values"] = conn.execute(
                    "select array_agg(e.value order by e.qid, e.measure) from ragsql.evaluate('bench') as e"
                ).fetchone()[0]
    one, cluster = (result[name].pop("_values") for name in sides)
    if one != cluster:
        raise SystemExit("the per-query values of the run differ between one server and the cluster")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"ragsql on one server and on a Citus cluster (coordinator + 2 workers), same machine; run of {args.rows:,} "
        f"rows, per-query values equal"
    )
    print(f"{'':42} {'one server':>12} {'cluster':>12}")
    for key in result["one server"]:
        a, b = result["one server"][key], result["cluster"][key]
        print(f"{key:42} {a:12,.2f} {b:12,.2f}")


if __name__ == "__main__":
    main()
