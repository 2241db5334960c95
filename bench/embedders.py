"""Benchmark: retrieval quality of each embedder on public English and Chinese QA, BM25 vs vector vs fusion.

    python bench/embedders.py [--embedders offline,e5,minilm] [--sets en-squad,zh-cmrc] [--json]

For each QA set of bench/data/qa (SQuAD 2.0 dev paragraphs, CMRC 2018 dev paragraphs: one document per paragraph,
its questions as queries) and each embedder, runs `ragsql ingest` (one chunk per paragraph: --chunk-size 2000
--overlap 0), then `ragsql retrieve` in modes bm25, vector and hybrid (RRF, equal weights), and `ragsql fuse` of
the bm25 and vector runs (top 100 each) by weighted sum of min-max and z-score normalised scores — all as a user
runs them, in a scratch database (ragsql_bench_embedders on RAGSQL_DATABASE_URL's server, else the embedded one).
Prints Success@5 and RR@10 (ragsql.summarize) per set, embedder and run, the embedder's ingest time, and whether
hybrid reaches the best single path. minilm (English only, needs torch: the local extra) is skipped when missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trees import scratch_database  # noqa: E402

DATA = ROOT / "bench" / "data" / "qa"
DBNAME = "ragsql_bench_embedders"
MEASURES = ("Success@5", "RR@10")
FUSIONS = {
    "wsum-minmax": ["--method", "wsum", "--norm", "min-max", "--weights", "0.5,0.5"],
    "wsum-zmuv": ["--method", "wsum", "--norm", "zmuv", "--weights", "0.5,0.5"],
}


def ragsql(url: str, *args: str) -> str:
    env = {**__import__("os").environ, "RAGSQL_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    for var in (
        "RAGSQL_EMBEDDER",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "RAGSQL_JUDGE_BASE_URL",
        "RAGSQL_JUDGE_API_KEY",
    ):
        env.pop(var, None)
    done = subprocess.run([sys.executable, "-m", "ragsql", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ragsql {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def summary(url: str, run: str) -> dict[str, float]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("select measure, value from ragsql.summarize(%s, %s)", (run, list(MEASURES))).fetchall()
    return dict(rows)


def bench_set(url: str, name: str, embedders: list[str]) -> list[dict]:
    folder = DATA / name
    ragsql(url, "import", "jsonl", str(folder / "evalset.jsonl"), "--dataset", name)
    rows = []
    for embedder in embedders:
        corpus = f"{name}-{embedder}"
        started = time.perf_counter()
        ragsql(
            url,
            "ingest",
            str(folder / "corpus.jsonl"),
            "--corpus",
            corpus,
            "--embedder",
            embedder,
            "--chunk-size",
            "2000",
            "--overlap",
            "0",
        )
        ingest_s = time.perf_counter() - started
        runs = {}
        for mode, k in (("bm25", "100"), ("vector", "100"), ("hybrid", "10")):
            run = f"{corpus}-{mode}"
            ragsql(url, "retrieve", "--dataset", name, "--corpus", corpus, "--run", run, "--mode", mode, "--k", k)
            runs[mode] = run
        for fusion, options in FUSIONS.items():
            run = f"{corpus}-{fusion}"
            ragsql(url, "fuse", "--runs", f"{runs['bm25']},{runs['vector']}", *options, "--run", run)
            runs[fusion] = run
        values = {mode: summary(url, run) for mode, run in runs.items()}
        rows.append({"set": name, "embedder": embedder, "ingest_s": round(ingest_s, 1), "runs": values})
    return rows


def table(rows: list[dict]) -> str:
    modes = list(rows[0]["runs"])
    head = (
        "| set | embedder | ingest s | " + " | ".join(f"{m} S@5 / RR@10" for m in modes) + " | hybrid ≥ best single |"
    )
    lines = [head, "|" + "---|" * (4 + len(modes))]
    for r in rows:
        cells = [f"{r['runs'][m]['Success@5']:.3f} / {r['runs'][m]['RR@10']:.3f}" for m in modes]
        best = {m: max(r["runs"]["bm25"][m], r["runs"]["vector"][m]) for m in MEASURES}
        holds = all(r["runs"]["hybrid"][m] >= best[m] - 1e-12 for m in MEASURES)
        lines.append(
            f"| {r['set']} | {r['embedder']} | {r['ingest_s']} | "
            + " | ".join(cells)
            + f" | {'yes' if holds else 'no'} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", default="offline,e5,minilm")
    parser.add_argument("--sets", default="en-squad,zh-cmrc")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    embedders = [
        e
        for e in args.embedders.split(",")
        if e != "minilm" or importlib.util.find_spec("sentence_transformers") is not None
    ]
    url = scratch_database(DBNAME)
    rows = []
    for name in args.sets.split(","):
        # MiniLM is English-only: its Chinese vectors would be noise, so it is measured on English sets only
        rows += bench_set(url, name, [e for e in embedders if e != "minilm" or name.startswith("en")])
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
