"""Benchmark: how well the offline judge discriminates — pairwise accuracy on the labelled pairs, v2 vs v1.

    python bench/judge_pairs.py [--baseline-ref de62085] [--json]

Runs `ragsql judge-check --offline` on tests/data/judge_pairs/dev.jsonl (the pairs the heuristics were tuned
on) and heldout.jsonl (questions, evasive and poor phrasings never looked at while tuning), in a scratch
database (RAGSQL_DATABASE_URL's server, else the embedded one), twice in the same run: with this tree's offline
judge (offline-heuristic-v2) and with the v1 heuristics of `--baseline-ref` (its ragsql/judge/heuristics.py,
lexical.py and offline.py laid over a copy of this tree, so the pipeline and the pairs are the same). Prints
accuracy per metric and language, the v1 figure and the gain; a pair counts 1 when the better side scores
strictly higher, 1/2 on a tie. The RAGAS paper's agreement with humans for gpt-3.5 (faithfulness 0.95, answer
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

from bench.retrieval_metrics import scratch_database  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "judge_pairs"
V1_FILES = ("ragsql/judge/heuristics.py", "ragsql/judge/lexical.py", "ragsql/judge/offline.py")
METRICS = ("faithfulness", "answer_relevancy", "context_relevance", "context_recall", "context_precision",
           "answer_correctness", "answer_similarity")


def judge_check(tree: Path, url: str, pairs: Path) -> tuple[dict[tuple[str, str], float], float]:
    """{(metric, language): accuracy} of `ragsql judge-check --offline` run from `tree`, and its seconds."""
    env = {**os.environ, "RAGSQL_DATABASE_URL": url, "PYTHONPATH": str(tree)}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        env.pop(var, None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ragsql", "judge-check", str(pairs), "--offline", "--format", "json"],
                          env=env, cwd=tree, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"judge-check from {tree} failed: {done.stderr.strip()}")
    return {(g["metric"], g["language"]): g["accuracy"] for g in json.loads(done.stdout)["groups"]}, seconds


def v1_tree(ref: str, into: Path) -> Path:
    """A copy of this tree with the offline judge's three files as they were at `ref`."""
    tree = into / "v1"
    shutil.copytree(ROOT / "ragsql", tree / "ragsql", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "sql", tree / "sql")
    for path in V1_FILES:
        text = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
        (tree / path).write_text(text.stdout, "utf-8")
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", default="de62085", help="git ref of the v1 offline judge")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    url = scratch_database()
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = v1_tree(args.baseline_ref, Path(tmp))
        for split in ("dev", "heldout"):
            pairs = PAIRS / f"{split}.jsonl"
            v2, s2 = judge_check(ROOT, url, pairs)
            v1, s1 = judge_check(old, url, pairs)
            figures[split] = {"v2": v2, "v1": v1, "seconds_v2": s2, "seconds_v1": s1}
    if args.json:
        print(json.dumps({split: {**f, "v2": {" ".join(k): v for k, v in f["v2"].items()},
                                  "v1": {" ".join(k): v for k, v in f["v1"].items()}}
                          for split, f in figures.items()}, indent=2))
        return 0
    print(f"{'metric':20} {'lang':4} | {'dev v2':>7} {'v1':>6} {'gain':>6} | {'heldout v2':>10} {'v1':>6} {'gain':>6}")
    for metric in METRICS:
        for lang in ("en", "zh"):
            cells = []
            for split in ("dev", "heldout"):
                v2, v1 = figures[split]["v2"].get((metric, lang)), figures[split]["v1"].get((metric, lang))
                cells.append(f"{v2:>{10 if split == 'heldout' else 7}.3f} {v1:>6.3f} {v2 - v1:>+6.3f}")
            print(f"{metric:20} {lang:4} | {cells[0]} | {cells[1]}")
    for split in ("dev", "heldout"):
        f = figures[split]
        print(f"{split}: judge-check took {f['seconds_v2']:.1f} s (v2) and {f['seconds_v1']:.1f} s (v1), "
              f"min accuracy v2 {min(f['v2'].values()):.3f}, v1 {min(f['v1'].values()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
