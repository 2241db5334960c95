"""Benchmark: the offline judge's throughput, `ragsql judge --run R --offline` end to end, this tree against a
baseline commit, with every stored value compared.

    python bench/offline_judge_speed.py [--samples 300] [--runs 1] [--baseline-ref 062342e] [--pairs] [--json]

Builds a run from the public QA sets of bench/data/qa (the first `samples` questions of SQuAD and of CMRC 2018
each: the question, the answer's sentence of its paragraph as the answer, its first ground truth as reference,
the paragraph and the two after it in the corpus as contexts), starts one embedded server in a scratch
RAGSQL_HOME, and gives each tree a database of its own, installed by its own `ragsql db init`, into which the
records are imported. Then `ragsql judge --run R --offline` runs as a subprocess from an empty judge-call cache,
the trees alternating (the machine is shared: both trees see the same load), `runs` times each (the verdicts are
deleted and the cache emptied between runs); the median is reported as samples a second, with the command's
CPU seconds and the server's (on a shared machine CPU seconds move less with the load than wall seconds). After
each tree's first run every generation metric value of every sample (value, reason, judge, embedder) and every
stored reply of the judge (request hash and response) must be equal in both trees, else the bench fails (with
--time-only it only counts those that differ: a judge whose model changed). With --pairs it also times
`ragsql judge-check --offline` on bench/data/qa/pairs.jsonl per tree (what bench/judge_pairs.py runs).

Goal (issue 28): >= 20 samples a second on public QA pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from import_speed import _ragsql, database  # noqa: E402  (bench/ is scripts, not a package)
from trees import tree_of, with_db  # noqa: E402

QA = ROOT / "bench" / "data" / "qa"
GOAL = 20.0
JUDGE_TABLES = (
    "judge_task, judge_call, statement_extraction, text_statement, statement_verdict, context_verdict, "
    "context_sentence_verdict, generated_question, text_embedding, rating, aspect_verdict, citation_verdict, "
    "statement_attribution, graded_verdict, rubric_verdict, yes_no_verdict"
)


def records(samples: int) -> list[dict]:
    """`samples` RAGAS-style records per language from bench/data/qa (see the module docstring)."""
    out = []
    for folder in ("en-squad", "zh-cmrc"):
        corpus = [json.loads(line) for line in (QA / folder / "corpus.jsonl").read_text("utf-8").splitlines()]
        at = {doc["id"]: i for i, doc in enumerate(corpus)}
        lines = (QA / folder / "evalset.jsonl").read_text("utf-8").splitlines()[:samples]
        for line in map(json.loads, lines):
            i = at[line["gold_doc_ids"][0]]
            paragraph, truth = corpus[i]["text"], line["ground_truths"][0]
            sentences = re.split(r"(?<=[。！？])|(?<=[.!?])\s+", paragraph)
            answer = next((s.strip() for s in sentences if truth in s and s.strip()), truth)
            out.append(
                {
                    "qid": line["qid"],
                    "user_input": line["query"],
                    "response": answer,
                    "reference": truth,
                    "retrieved_contexts": [corpus[(i + k) % len(corpus)]["text"] for k in range(3)],
                }
            )
    return out


def values(url: str) -> list[tuple]:
    """Every generation metric value of run 'qa' (metric, qid, value as text, reason, judge, embedder) and every
    stored reply of the judge (request hash, response), sorted: what must not differ between the trees."""
    import psycopg

    with psycopg.connect(url) as conn:
        metrics = [m for (m,) in conn.execute("select metric from ragsql.generation_metric order by metric")]
        rows = conn.execute(
            "select metric, qid, value::text, reason, judge_model, judge_embedder "
            "from ragsql.evaluate_generation('qa', %s) order by 1, 2",
            (metrics,),
        ).fetchall()
        calls = conn.execute(
            "select request_hash, response::text from ragsql.judge_call where kind <> 'embedding' order by 1"
        ).fetchall()
    return rows + [("call", h, r) for h, r in calls]


def forget(url: str) -> None:
    """Delete the run's verdicts and every judge call, so the next run starts from an empty cache."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"truncate {', '.join('ragsql.' + t for t in JUDGE_TABLES.split(', '))} cascade")
        conn.execute("vacuum analyze")


def server_cpu(home: Path) -> float:
    """CPU seconds of the bench's server so far: the postmaster's and those of its children that exited (a
    judge's sessions end with it)."""
    pid = (home / "pgdata" / "postmaster.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def judge(tree: Path, url: str, home: Path) -> tuple[float, float, float]:
    """(wall seconds, the command's CPU seconds, the server's CPU seconds) of `ragsql judge --run qa --offline` run
    from `tree`."""
    cpu, server = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(home)
    seconds, out, _ = _ragsql(tree, url, home, "judge", "--run", "qa", "--offline", "--format", "json")
    summary = json.loads(out)
    if summary.get("failed"):
        sys.exit(f"judge from {tree}: {summary['failed']} tasks failed")
    time.sleep(1)  # the judge's sessions end a moment after it
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    return seconds, used, server_cpu(home) - server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="questions per language (SQuAD, CMRC)")
    parser.add_argument("--runs", type=int, default=1, help="judge runs per tree (the median is reported)")
    parser.add_argument("--baseline-ref", default="062342e", help="git ref to compare with")
    parser.add_argument("--pairs", action="store_true", help="also time judge-check on bench/data/qa/pairs.jsonl")
    parser.add_argument(
        "--time-only", action="store_true", help="do not require equal values (a judge with another relevance model)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures: dict[str, dict[str, list]] = {}
    with tempfile.TemporaryDirectory(prefix="ragsql-offline-judge-") as tmp:
        scratch = Path(tmp)
        data = scratch / "qa.jsonl"
        rows = records(args.samples)
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
        trees = {args.baseline_ref: tree_of(args.baseline_ref, scratch / "baseline"), "this tree": ROOT}
        home = scratch / "home"
        admin_url = with_db(_ragsql(ROOT, None, home, "db", "url")[1].strip(), "postgres")  # left running
        try:
            urls = {}
            for i, (name, tree) in enumerate(trees.items()):
                urls[name] = database(admin_url, tree, home, f"ragsql_bench_offline_judge_{i}")
                _ragsql(tree, urls[name], home, "import", "jsonl", str(data), "--dataset", "qa", "--run", "qa")
                figures[name] = {"judge": [], "pairs": []}
            stored = {}
            for repeat in range(args.runs):
                for name, tree in trees.items():
                    figures[name]["judge"].append(judge(tree, urls[name], home))
                    if repeat == 0:
                        stored[name] = values(urls[name])
                    forget(urls[name])
            if args.pairs:
                for name, tree in trees.items():
                    seconds, _, _ = _ragsql(
                        tree, urls[name], home, "judge-check", str(QA / "pairs.jsonl"), "--offline", "--format", "json"
                    )
                    figures[name]["pairs"].append(seconds)
        finally:
            _ragsql(ROOT, None, home, "db", "stop")
    first, *others = stored.values()
    for name, got in zip(list(stored)[1:], others):
        if got != first and not args.time_only:
            diff = sorted(set(first) ^ set(got))[:5]
            sys.exit(f"{name} stored other values than {args.baseline_ref}: {len(set(first) ^ set(got))}, e.g. {diff}")
    samples = len(rows)
    if args.json:
        print(json.dumps({"samples": samples, "seconds": figures}, indent=2))
        return 0
    print(
        f"`ragsql judge --offline`, {samples} samples (SQuAD + CMRC), whole command from an empty cache, "
        f"median of {args.runs}; "
        + (
            f"{len(set(first) ^ set(others[0]))} of {len(first)} values and replies differ (--time-only)"
            if args.time_only and others
            else f"{len(first)} values and replies equal in both trees"
        )
    )
    print("| tree | seconds | samples/s | judge CPU s | server CPU s | judge-check pairs.jsonl (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, by in figures.items():
        seconds, cpu, server = (statistics.median(f[i] for f in by["judge"]) for i in range(3))
        pairs = f"{by['pairs'][0]:.1f}" if by["pairs"] else "-"
        print(f"| {name} | {seconds:.1f} | {samples / seconds:.1f} | {cpu:.1f} | {server:.1f} | {pairs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
