"""Benchmark: how well the offline judge discriminates — pairwise accuracy on the labelled pairs, this tree
against earlier versions of the offline judge.

    python bench/judge_pairs.py [--baseline-ref 7b29077 --baseline-ref f0a368c] [--split hard] [--json]

Runs `ragsql judge-check --offline` on tests/data/judge_pairs/dev.jsonl (the pairs the heuristics were tuned
on), heldout.jsonl (other questions, with evasive and restating phrasings of their own),
bench/data/qa/pairs.jsonl (pairs from SQuAD and CMRC 2018 dev paragraphs: public data) and hard_pairs.jsonl there
(answer relevancy against another question's answer on the same article, context relevance against a same-article
or BM25-retrieved paragraph), in a scratch database (RAGSQL_DATABASE_URL's server, else the embedded one), in the
same run with this tree's offline judge and with the heuristics of each `--baseline-ref` (its
ragsql/judge/heuristics.py, lexical.py, offline.py, ragsql/orchestrator/setup.py and job.py, and each call's module,
ragsql/judge/kinds/<call>/__init__.py, or before the calls had folders ragas_heuristics.py, laid over a copy of this
tree, so the pipeline and the pairs are the same; default f864e02 = v4, 7b29077 = v3), each
on an empty judge-call cache. Prints accuracy per metric and language; a pair counts 1 when the better side
scores strictly higher, 1/2 on a tie. The RAGAS paper's agreement with humans for gpt-3.5 (faithfulness 0.95, answer
relevance 0.78, context relevance 0.70) is the bar the issue names.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trees import scratch_database  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "judge_pairs"
SPLITS = {
    "dev": PAIRS / "dev.jsonl",
    "heldout": PAIRS / "heldout.jsonl",
    "public": ROOT / "bench" / "data" / "qa" / "pairs.jsonl",
    "hard": ROOT / "bench" / "data" / "qa" / "hard_pairs.jsonl",
}  # SQuAD / CMRC 2018 pairs (make_pairs.py there); hard: answer relevancy and context relevance on same-article cases
JUDGE_FILES = (
    "ragsql/judge/heuristics.py",
    "ragsql/judge/lexical.py",
    "ragsql/judge/offline.py",
    "ragsql/orchestrator/setup.py",
    "ragsql/orchestrator/job.py",
)  # setup.py builds the offline judge (v5: with e5); job.py its requests (v6: answer_analysis reads the contexts)
METRICS = (
    "faithfulness",
    "answer_relevancy",
    "context_relevance",
    "context_recall",
    "context_precision",
    "answer_correctness",
    "answer_similarity",
)


def judge_check(tree: Path, url: str, pairs: Path) -> tuple[dict[tuple[str, str], float], float]:
    """{(metric, language): accuracy} of `ragsql judge-check --offline` run from `tree`, and its seconds."""
    env = {**os.environ, "RAGSQL_DATABASE_URL": url, "PYTHONPATH": str(tree)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        env.pop(var, None)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragsql", "judge-check", str(pairs), "--offline", "--format", "json"],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"judge-check from {tree} failed: {done.stderr.strip()}")
    return {(g["metric"], g["language"]): g["accuracy"] for g in json.loads(done.stdout)["groups"]}, seconds


def baseline_tree(ref: str, into: Path) -> Path:
    """A copy of this tree with the offline judge's files as they were at `ref`."""
    tree = into / ref
    shutil.copytree(ROOT / "ragsql", tree / "ragsql", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "sql", tree / "sql")
    held = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", ref, "--", "ragsql/judge/kinds", "ragsql/judge/ragas_heuristics.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for path in (*JUDGE_FILES, *(p for p in held if p.endswith(".py"))):
        text = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=False)
        if text.returncode == 0:  # a file the ref did not have yet (job.py before the kinds refactor) stays this tree's
            (tree / path).write_text(text.stdout, "utf-8")
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline-ref",
        action="append",
        metavar="REF",
        help="git ref of an earlier offline judge, repeatable (default: f864e02 = v4, 7b29077 = v3)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--split", action="append", choices=list(SPLITS), help="judge only these splits, repeatable")
    args = parser.parse_args()
    refs = args.baseline_ref or ["f864e02", "7b29077"]
    splits = {name: SPLITS[name] for name in args.split or SPLITS}
    url = scratch_database()
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT, **{ref: baseline_tree(ref, Path(tmp)) for ref in refs}}
        for split, path in splits.items():
            # each judge on a fresh judge-call cache: v2's cache key missed the question of an answer-relevancy
            # request, so its figures depended on what had been judged before
            figures[split] = {}
            for name, tree in trees.items():
                reset_cache(url)
                figures[split][name] = judge_check(tree, url, path)
    if args.json:
        print(
            json.dumps(
                {
                    split: {
                        name: {"accuracy": {" ".join(k): v for k, v in acc.items()}, "seconds": sec}
                        for name, (acc, sec) in f.items()
                    }
                    for split, f in figures.items()
                },
                indent=2,
            )
        )
        return 0
    names = list(trees)
    head = " ".join(f"{n[:10]:>10}" for n in names)
    print(f"{'metric':20} {'lang':4} | " + " | ".join(f"{split}: {head}" for split in splits))
    for metric in METRICS:
        for lang in ("en", "zh"):
            cells = [
                " ".join(f"{figures[split][n][0].get((metric, lang), float('nan')):>10.3f}" for n in names)
                for split in splits
            ]
            print(
                f"{metric:20} {lang:4} | "
                + " | ".join(" " * len(f"{split}: ") + cell for split, cell in zip(splits, cells))
            )
    for split in splits:
        print(
            f"{split}: "
            + "; ".join(f"{n} min {min(acc.values()):.3f} in {sec:.1f} s" for n, (acc, sec) in figures[split].items())
        )
    return 0


def reset_cache(url: str) -> None:
    """Forget every judge call, so a judge's figures never depend on what another run judged first."""
    import psycopg

    with psycopg.connect(url) as conn:
        if conn.execute("select to_regclass('ragsql.judge_call')").fetchone()[0]:
            conn.execute("truncate ragsql.judge_call cascade")


if __name__ == "__main__":
    sys.exit(main())
