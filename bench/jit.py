"""Benchmark: ragsql's table-reading functions with jit = off on each (sql/998_jit.sql) against the server's JIT.

    python bench/jit.py [--url URL] [--queries 16] [--repeat 5]

Builds the demo (`ragsql demo --queries N`: three retrieval runs, answers judged offline) in a database of its
own on the server of --url (an admin URL; default: the embedded server of RAGSQL_HOME), then times each call
below in fresh sessions, median of --repeat, with the functions as installed (jit = off, sql/998_jit.sql) and
with the setting reset on every function (what earlier releases ran: the server's jit and jit_above_cost), the
two alternating. JIT costs time only on a server built with LLVM (`select pg_jit_available()`: Debian's
PostgreSQL and the Citus build are; the embedded server from PyPI is not). The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[1]
CALLS = {
    "summarize": "select * from ragsql.summarize('demo-bm25')",
    "faithfulness": "select * from ragsql.faithfulness('demo-bm25')",
    "summarize_generation": "select * from ragsql.summarize_generation('demo-bm25')",
    "measure_ci": "select * from ragsql.measure_ci('demo-bm25', resamples => 1000)",
    "compare": "select * from ragsql.compare('demo-bm25', 'demo-hybrid', resamples => 1000)",
    "diagnose_queries": "select * from ragsql.diagnose_queries('demo-bm25')",
}
JIT_OFF = (ROOT / "sql" / "998_jit.sql").read_text(encoding="utf-8")
RESET = """
    select format('alter function %s reset jit', p.oid::regprocedure)
    from pg_proc as p join pg_namespace as n on n.oid = p.pronamespace
    where n.nspname in ('ragsql', 'ragsql_report') and 'jit=off' = any (p.proconfig)"""


def timed(url: str, sql: str, repeat: int) -> float:
    """Median wall time of `sql`, each run in a new session (a plan is made, and JIT compiled, per session)."""
    times = []
    for _ in range(repeat):
        with psycopg.connect(url) as conn:
            start = time.perf_counter()
            conn.execute(sql).fetchall()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def server_url(given: str | None) -> str:
    if given:
        return given
    from ragsql.db import server

    return make_conninfo(server.ensure_embedded(), dbname="postgres")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="admin URL of the server (default: the embedded one)")
    parser.add_argument("--queries", type=int, default=16, help="demo queries (default 16)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per call (default 5)")
    args = parser.parse_args()
    admin = server_url(args.url)
    name = f"ragsql_bench_jit_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
        jit = conn.execute(
            "select pg_jit_available(), current_setting('jit'), current_setting('server_version')"
        ).fetchone()
    url = make_conninfo(admin, dbname=name)
    try:
        env = {**os.environ, "RAGSQL_DATABASE_URL": url, "PYTHONPATH": str(ROOT), "RAGSQL_EMBEDDER": "offline"}
        for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
            env.pop(var, None)
        subprocess.run(
            [sys.executable, "-m", "ragsql", "demo", "--queries", str(args.queries)],
            env=env,
            check=True,
            capture_output=True,
        )
        for sql in CALLS.values():  # warm the caches
            timed(url, sql, 1)
        times: dict[str, dict[str, list[float]]] = {"off": {c: [] for c in CALLS}, "server": {c: [] for c in CALLS}}
        for _ in range(args.repeat):  # the two settings alternate, so that the machine's load hits both alike
            for setting in ("off", "server"):
                with psycopg.connect(url, autocommit=True) as conn:
                    if setting == "off":
                        conn.execute(JIT_OFF)
                    else:
                        for (statement,) in conn.execute(RESET).fetchall():
                            conn.execute(statement)
                for call, sql in CALLS.items():
                    times[setting][call].append(timed(url, sql, 1))
        off = {call: statistics.median(values) for call, values in times["off"].items()}
        server = {call: statistics.median(values) for call, values in times["server"].items()}
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
    print(
        f"PostgreSQL {jit[2]}, JIT available: {jit[0]}, jit = {jit[1]}; demo of {args.queries} queries, "
        f"median of {args.repeat} sessions"
    )
    print("| call | jit = off (ms) | server's JIT (ms) | ratio |\n|---|---:|---:|---:|")
    for call in CALLS:
        print(f"| {call} | {off[call] * 1000:,.0f} | {server[call] * 1000:,.0f} | {server[call] / off[call]:.1f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
