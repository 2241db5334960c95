"""Benchmark: `ragsql import trec` of a large run, the whole command, this tree against a baseline commit.

    python bench/import_speed.py [--sizes 1000000,500000] [--runs 3] [--baseline-ref 4bf92cf] [--profile] [--json]

For each size N: writes a TREC run of N rows (N/1000 topics × 1000 results, each topic's lines in rank order as
a system writes them, scores with one decimal so that about a third of the results tie and trec_eval's tie-break,
docno descending, decides their ranks) and qrels (25 judgments a topic, 20 of them retrieved) into a temporary
folder. One embedded server is started in a scratch RAGSQL_HOME before anything is timed, and each tree gets a
database of its own on it, installed by its own `ragsql db init` (the baseline is checked out with `git worktree
add --detach` and run with its own PYTHONPATH). Then `ragsql import trec --dataset bench --qrels Q --run R`
runs as a subprocess, as a user would run it, and its wall time is measured: the trees alternate, `runs` times
each, and the median is reported. After each import the dataset is deleted, the tables vacuumed and a checkpoint
taken, so that every import starts from the same state. The first import of each tree is checked: every
(qid, rank, docno, score) the two trees stored must be equal.

With --profile: where this tree's import spends its time (the phases, timed in process, the server's CPU seconds
in each, the backend's and its parallel workers', and the parsing thread's profile), once as it imports (a partition of
the run's own, indexed after the COPY) and once copying straight into run_result, whose indexes are then kept up to date
row by row (as before migration 0160), in the same tree, database and file.

Goal (issue 15): >= 200k rows/s for the whole command, a 1M-row run in <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from trees import PHASE_TIMER, new_database, with_db  # noqa: E402  (bench/ is scripts, not a package)

DOCS_PER_TOPIC = 1000
GOAL_ROWS_PER_SECOND = 200_000


def write_files(folder: Path, rows: int, seed: int = 15) -> tuple[Path, Path]:
    """A run of `rows` results (rows // 1000 topics) and its qrels; ties on one-decimal scores."""
    rng = random.Random(seed)
    run, qrels = folder / f"run_{rows}.txt", folder / f"qrels_{rows}.txt"
    with run.open("w") as out, qrels.open("w") as judged:
        for topic in range(rows // DOCS_PER_TOPIC):
            qid = f"{1000 + topic}"
            docnos = set()
            while len(docnos) < DOCS_PER_TOPIC:
                docnos.add(f"D{rng.randrange(10**8):08d}")
            scored = [(round(rng.gauss(10, 3), 1), docno) for docno in docnos]
            rng.shuffle(scored)
            scored.sort(key=lambda pair: -pair[0])  # stable: ties stay in random order, not trec_eval's
            out.writelines(
                f"{qid} Q0 {docno} {rank} {score} bench\n" for rank, (score, docno) in enumerate(scored, start=1)
            )
            for _, docno in rng.sample(scored, 20):
                judged.write(f"{qid} 0 {docno} {rng.randrange(4)}\n")
            for extra in range(5):
                judged.write(f"{qid} 0 X{topic}-{extra} 1\n")
    return qrels, run


def _ragsql(tree: Path, url: str | None, home: Path, *args: str) -> tuple[float, str, float]:
    """(wall seconds, stdout, peak resident MB) of `ragsql args` run from `tree`."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAGSQL_DATABASE_URL", "PYTHONPATH")}
    env.update(PYTHONPATH=str(tree), RAGSQL_HOME=str(home))
    if url:
        env["RAGSQL_DATABASE_URL"] = url
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "ragsql", *args], env=env, cwd=tree, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)  # the child's own rusage: its peak memory
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            sys.exit(f"ragsql {' '.join(args)} from {tree} failed: {err.read().strip()}")
        return seconds, out.read(), usage.ru_maxrss / 1024


def database(admin_url: str, tree: Path, home: Path, name: str) -> str:
    """A new database `name` on the bench server with the schema of `tree`."""
    url = new_database(admin_url, name)
    _ragsql(tree, url, home, "db", "init")
    return url


def reset(url: str) -> None:
    """Delete what an import stored and vacuum, so the next import starts from the same state."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("delete from ragsql.run where name = 'bench'")  # results go by run id first (an index)
        conn.execute("delete from ragsql.dataset where name = 'bench'")
        for table in ("run_result", "query", "judgment", "run", "dataset"):
            conn.execute(f"vacuum ragsql.{table}")
        conn.execute("checkpoint")


def digest(url: str) -> tuple[int, str]:
    """(rows, md5 of every stored (qid, rank, docno, score) in order) of the bench run."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(
            """
            select count(*), md5(string_agg(concat_ws(' ', q.qid, r.rank, r.docno, r.score::text), E'\\n'
                                            order by q.qid, r.rank))
            from ragsql.run_result as r join ragsql.run as ru on ru.id = r.run_id
            join ragsql.query as q on q.id = r.query_id where ru.name = 'bench'
            """
        ).fetchone()


def import_trec(qrels: Path, run: Path) -> list[str]:
    """The `ragsql` arguments that import the files of `write_files` as dataset and run "bench"."""
    return ["import", "trec", "--dataset", "bench", "--qrels", str(qrels), "--run", str(run), "--run-name", "bench"]


def import_once(tree: Path, url: str, home: Path, qrels: Path, run: Path, rows: int) -> tuple[float, float]:
    """(seconds, peak MB) of one `ragsql import trec` of the run."""
    seconds, out, peak = _ragsql(tree, url, home, *import_trec(qrels, run))
    if f"{rows} results" not in out:
        sys.exit(f"unexpected summary from {tree}: {out.strip()}")
    return seconds, peak


_PROFILE_THIS = (
    r"""
import cProfile, io, os, pstats, sys, time
from ragsql import db, importer
from ragsql.db import load, results
qrels, run = sys.argv[1:3]
phases = {}
"""
    + PHASE_TIMER
    + r"""
for module, names in ((load, ("add_queries", "add_judgments", "create_run", "analyze")),
                      (results, ("copy_ranked", "stage_unranked", "rank_staged", "bare_partition",
                                       "attach_partition"))):
    for name in names:
        setattr(module, name, timed(phases, name, getattr(module, name)))
ranked_texts = importer._ranked_texts
def profiled(path):
    items = ranked_texts(path)
    while True:
        parse.enable()
        try:
            item = next(items, None)
        finally:
            parse.disable()
        if item is None:
            return
        yield item
importer._ranked_texts = profiled
partitioned = results.partitioned
LAYOUTS = ("a partition of its own, indexed once the rows are in", "straight into run_result, indexes kept row by row")
for layout in LAYOUTS:
    phases.clear()
    parse = cProfile.Profile()
    with db.connect() as conn:
        pid = conn.execute("select pg_backend_pid()").fetchone()[0]
        started = time.perf_counter()
        with conn.transaction(force_rollback=True):
            importer.import_trec(conn, "bench", qrels, run, "bench")
        total = time.perf_counter() - started
    print(f"this tree, in process, {layout}: import_trec {total:.2f} s (rolled back)")
    for name, (wall, used) in phases.items():
        print(f"  {name:16} {wall:6.2f} s wall, {used:6.2f} s server CPU")
    out = io.StringIO()
    pstats.Stats(parse, stream=out).sort_stats("tottime").print_stats(8)
    print("  parse, rank and format (a thread of its own, overlapping the copy), top functions by own time:")
    print("\n".join("    " + line for line in out.getvalue().splitlines() if line.strip()[:1].isdigit()))
    # the second time as before migration 0160: the rows go to run_result's default partition, with its indexes
    results.partitioned = lambda conn: False
results.partitioned = partitioned
"""
)


def profile(tree: Path, url: str, home: Path, qrels: Path, run: Path, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tree), RAGSQL_HOME=str(home), RAGSQL_DATABASE_URL=url)
    subprocess.run([sys.executable, "-c", code, str(qrels), str(run)], env=env, cwd=tree, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,500000", help="run sizes in rows, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="imports per tree and size (the median is reported)")
    parser.add_argument("--baseline-ref", default="4bf92cf", help="git ref to compare with")
    parser.add_argument("--profile", action="store_true", help="also show where the time goes (largest size)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    figures: dict[int, dict[str, list[tuple[float, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="ragsql-import-speed-") as tmp:
        scratch = Path(tmp)
        baseline = scratch / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(baseline), args.baseline_ref],
            check=True,
        )
        try:
            home = scratch / "home"
            admin_url = _ragsql(ROOT, None, home, "db", "url")[1].strip()  # starts the server, left running
            admin_url = with_db(admin_url, "postgres")
            trees = {"this tree": ROOT, args.baseline_ref: baseline}
            urls = {
                name: database(admin_url, tree, home, f"ragsql_bench_import_{i}")
                for i, (name, tree) in enumerate(trees.items())
            }
            for rows in sizes:
                qrels, run = write_files(scratch, rows)
                figures[rows] = {name: [] for name in trees}
                stored = {}
                for repeat in range(args.runs):
                    for name, tree in trees.items():
                        figures[rows][name].append(import_once(tree, urls[name], home, qrels, run, rows))
                        if repeat == 0:
                            stored[name] = digest(urls[name])
                        reset(urls[name])
                if len(set(stored.values())) != 1:
                    sys.exit(f"the trees stored different results for {rows} rows: {stored}")
                if args.profile and rows == max(sizes):
                    profile(ROOT, urls["this tree"], home, qrels, run, _PROFILE_THIS)
            _ragsql(ROOT, None, home, "db", "stop")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], check=False)
    medians = {
        rows: {name: statistics.median(s for s, _ in values) for name, values in by_tree.items()}
        for rows, by_tree in figures.items()
    }
    peaks = {
        rows: {name: max(p for _, p in values) for name, values in by_tree.items()} for rows, by_tree in figures.items()
    }
    if args.json:
        print(
            json.dumps(
                {"runs": args.runs, "seconds_and_peak_mb": figures, "median_seconds": medians, "peak_mb": peaks},
                indent=2,
            )
        )
        return 0
    print(f"`ragsql import trec`, whole command, median of {args.runs} (stored results equal in both trees)")
    print(f"| rows | tree | seconds | rows/s | × faster than {args.baseline_ref} | peak memory (MB) |")
    print("|---:|---|---:|---:|---:|---:|")
    for rows, by_tree in medians.items():
        for name, seconds in by_tree.items():
            ratio = by_tree[args.baseline_ref] / seconds
            print(
                f"| {rows:,} | {name} | {seconds:.2f} | {rows / seconds:,.0f} | {ratio:.1f} | {peaks[rows][name]:.0f} |"
            )
    for rows, by_tree in medians.items():
        rate = rows / by_tree["this tree"]
        verdict = "met" if rate >= GOAL_ROWS_PER_SECOND else "not met"
        print(f"goal {GOAL_ROWS_PER_SECOND:,} rows/s at {rows:,} rows: {verdict} ({rate:,.0f} rows/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
