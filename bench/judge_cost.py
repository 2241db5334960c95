"""Benchmark: what judging costs per sample (chat calls, tokens, embedding calls, wall time) vs RAGAS.

    python bench/judge_cost.py [--samples 50] [--latency-ms 200] [--workers 16] [--repeats 3] [--json]

Uses RAGAS's own benchmark dataset (`build_dataset` of ../shared/bench/ragas_baseline/run_ragas.py, seed 42:
question, 3-5 contexts, answer, reference), loads it into a scratch database (RAGSQL_DATABASE_URL's server,
else the embedded one) and judges it through the real openai client against the test fake server
(tests/fake_openai.py) with `latency-ms` per chat and embedding call; tokens are counted by the server with
bpe-openai o200k_base, as in RAGAS's figures. Each metric alone (cache emptied between cells), the five
together, then the five again (every reply from the database cache). RAGAS's figures for the same metrics
come from ../shared/bench/ragas_baseline/results.json and are printed beside ours.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trees import scratch_database  # noqa: E402
from ragsql.embed import make_embedder  # noqa: E402
from ragsql.importer import import_records  # noqa: E402
from ragsql.judge.client import JudgeClient  # noqa: E402
from ragsql.llm.settings import EndpointSettings  # noqa: E402
from ragsql.orchestrator.runner import judge_run  # noqa: E402
from ragsql.orchestrator.service import Judging  # noqa: E402

CONCURRENCY = 50  # at most this many calls in flight: what RAGAS's collections API reached in its run
FIVE = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness"]
RAGAS_DIR = ROOT.parent / "shared" / "bench" / "ragas_baseline"
JUDGE_TABLES = (
    "judge_task, judge_call, statement_extraction, text_statement, statement_verdict, context_verdict, "
    "context_sentence_verdict, generated_question, text_embedding, rating, aspect_verdict, "
    "citation_verdict"
)


class FakeServer:
    """tests/fake_openai.py in its own process (as RAGAS's fake was), its counters read over /admin."""

    def __init__(self, latency: float):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fake_openai", "--latency", str(latency)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit("the fake server did not start")
        self.admin = self.base_url.removesuffix("/v1") + "/admin"

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.admin + "/reset", data=b"", method="POST")).read()

    def stats(self) -> dict[str, int]:
        return json.loads(urllib.request.urlopen(self.admin + "/stats").read())


def ragas_dataset(ragas_dir: Path, n: int) -> list[dict]:
    """RAGAS's benchmark samples, built by its own (stdlib-only) generator."""
    spec = importlib.util.spec_from_file_location("run_ragas", ragas_dir / "run_ragas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_dataset(n, 42)


def ragas_figures(ragas_dir: Path) -> dict[tuple[str, str], dict]:
    """(config, metric or 'all 5') -> RAGAS's per-sample cost at 200 ms, from its results.json."""
    out = {}
    for r in json.loads((ragas_dir / "results.json").read_text()):
        if r.get("latency_ms") != 200 or r.get("error"):
            continue
        n, server = r["n_samples"], r["server"]
        key = "all 5" if len(r["metrics"]) > 1 else r["metrics"][0]
        out[(r["config"], key)] = {
            "calls": server["chat_requests"] / n,
            "prompt": server["chat_prompt_tokens"] / n,
            "completion": server["chat_completion_tokens"] / n,
            "emb": server["embedding_requests"] / n,
            "wall": r["wall_s"],
        }
    return out


def load_samples(url: str, samples: list[dict]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for i, s in enumerate(samples):
            f.write(json.dumps({"qid": f"s{i:03d}", **s}, ensure_ascii=False) + "\n")
    with psycopg.connect(url) as conn:
        import_records(conn, f.name, "jsonl", dataset="bench", run="bench")
        conn.commit()


def cell(url: str, fake: FakeServer, metrics: list[str], workers: int, n: int, empty_cache: bool) -> dict:
    """Judge the run with `metrics` and return the per-sample figures the fake server saw."""
    if empty_cache:
        with psycopg.connect(url) as conn:
            conn.execute(f"truncate {', '.join('ragsql.' + t.strip() for t in JUDGE_TABLES.split(','))}")
            conn.commit()
    else:
        with psycopg.connect(url) as conn:
            conn.execute("update ragsql.judge_task set status = 'pending'")
            conn.commit()
    fake.reset()
    settings = EndpointSettings(
        base_url=fake.base_url,
        api_key="bench",
        model="gpt-4o-mini",
        embed_model="text-embedding-3-small",
        concurrency=CONCURRENCY,
    )
    judging = Judging(JudgeClient(settings), make_embedder("openai", settings))

    async def go():
        try:
            return await judge_run(url, "bench", judging, metrics=metrics, workers=workers)
        finally:
            await judging.judge.aclose()
            await judging.embedder.aclose()

    start = time.perf_counter()
    result = asyncio.run(go())
    wall = time.perf_counter() - start
    with psycopg.connect(url) as conn:
        scores = {
            m: (v, c, q)
            for m, v, c, q in conn.execute(
                "select metric, value, covered, queries from ragsql.summarize_generation('bench')"
            )
        }
    asked = [
        m
        for m in scores
        if any(m.startswith(x) for x in metrics) or m == "answer_similarity" and "answer_correctness" in metrics
    ]
    nulls = {m: scores[m][2] - scores[m][1] for m in asked if scores[m][2] and scores[m][2] > scores[m][1]}
    seen = fake.stats()
    return {
        "calls": seen["chat_calls"] / n,
        "prompt": seen["prompt_tokens"] / n,
        "completion": seen["completion_tokens"] / n,
        "emb": seen["embedding_calls"] / n,
        "wall": wall,
        "failed": result.failed,
        "nulls": nulls,
        "max_in_flight": seen["max_in_flight"],
        "scores": {m: v for m, (v, _, _) in scores.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=200)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell; wall time is their median (as RAGAS's)")
    parser.add_argument("--ragas-dir", type=Path, default=RAGAS_DIR)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    samples = ragas_dataset(args.ragas_dir, args.samples)
    ragas = ragas_figures(args.ragas_dir)
    url = scratch_database("ragsql_bench_judge", installed=True)
    load_samples(url, samples)
    rows = {}
    with FakeServer(latency=args.latency_ms / 1000) as fake:

        def repeated(metrics: list[str], empty_cache: bool) -> dict:
            """`repeats` runs of a cell (the cache emptied before each, if asked); wall time = their median."""
            runs = [cell(url, fake, metrics, args.workers, args.samples, empty_cache) for _ in range(args.repeats)]
            return {**runs[-1], "wall": statistics.median(r["wall"] for r in runs)}

        for metric in FIVE:
            rows[metric] = repeated([metric], empty_cache=True)
        rows["all 5"] = repeated(FIVE, empty_cache=True)
        rows["all 5, again (cache)"] = repeated(FIVE, empty_cache=False)
    if args.json:
        print(json.dumps({"ragsql": rows, "ragas": {f"{k[0]}/{k[1]}": v for k, v in ragas.items()}}, indent=2))
        return 0
    print(
        f"{args.samples} samples, {args.latency_ms:.0f} ms per call, {args.workers} workers, at most {CONCURRENCY} "
        f"chat calls in flight, wall = median of {args.repeats}; "
        "RAGAS 0.4.3 evaluate() (langchain) and collections API at 200 ms from results.json"
    )
    head = (
        "| metric | ragsql calls/sample | RAGAS calls | ragsql prompt tok | RAGAS prompt tok | ragsql compl. tok "
        "| ragsql emb calls | RAGAS emb calls | ragsql wall s | RAGAS wall s (evaluate / collections) "
        "| ragsql max in flight | NULL |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for name, r in rows.items():
        key = "all 5" if name.startswith("all 5") else name
        lc, co = ragas.get(("langchain", key), {}), ragas.get(("collections", key), {})
        print(
            f"| {name} | {r['calls']:.2f} | {lc.get('calls', float('nan')):.2f} | {r['prompt']:.0f} | "
            f"{lc.get('prompt', float('nan')):.0f} | {r['completion']:.0f} | {r['emb']:.2f} | "
            f"{lc.get('emb', float('nan')):.2f} | {r['wall']:.2f} | "
            f"{lc.get('wall', float('nan')):.1f} / {co.get('wall', float('nan')):.1f} | {r['max_in_flight']} | "
            f"{', '.join(f'{m} {k}' for m, k in r['nulls'].items()) or 0} |"
        )
    print("\nmean scores, all 5:", {m: round(v, 3) for m, v in rows["all 5"]["scores"].items() if v is not None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
