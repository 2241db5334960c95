"""Benchmark: the answer text metrics in SQL against the Python packages they reproduce, on the same answers.

    python bench/text_metrics.py [--queries 2000] [--repeat 3] [--json]

Generates `queries` English and Chinese answers with two references each (answer and references of 5-40 words,
as RAG answers are), stores them as a run in a scratch database (RAGSQL_DATABASE_URL's server, else the embedded
one), then times in one process: each text metric's run value in SQL (ragsql.summarize_generation, every query)
and the same values from sacrebleu (sentence_bleu, sentence_chrf), rouge-score, rapidfuzz and the SQuAD / CMRC
formulas in Python, reading the texts from the database first. Prints seconds per metric and the ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval_metrics import timed  # noqa: E402
from bench.trees import scratch_database  # noqa: E402
from ragsql import db  # noqa: E402
from ragsql.db import load  # noqa: E402
from tests.sql import test_text_metrics as ref  # noqa: E402  (the Python formulas the tests check against)

WORDS = (
    "the retrieval system ranks passages by score and the reranker reorders the top candidates before the "
    "generator writes an answer with citations 1905 10.4 BM25 k1 relevance precision recall"
).split()
HANZI = "检索系统按分数排序段落重排序模型在生成答案前重新排列候选结果并引用来源长江东海上海一九零五年"
METRICS = ["exact_match", "token_f1", "rouge_l", "bleu", "chrf", "levenshtein_similarity"]


def generate(n: int, seed: int = 7) -> list[tuple[str, str, list[str]]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % 2:
            text = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))  # noqa: E731
            lang = "en"
        else:
            text = lambda: "".join(rng.choice(HANZI) for _ in range(rng.randint(8, 60))) + "。"  # noqa: E731
            lang = "zh"
        rows.append((lang, text(), [text(), text()]))
    return rows


def python_values(metric: str, rows: list[tuple[str, str, list[str]]]) -> float:
    import sacrebleu
    from rapidfuzz.distance import Levenshtein

    total = 0.0
    for lang, answer, refs in rows:
        if metric == "bleu":
            total += sacrebleu.sentence_bleu(answer, refs, tokenize="zh" if lang == "zh" else "13a").score / 100
            continue
        best = 0.0
        for r in refs:
            if metric == "exact_match":
                v = (
                    ref.cmrc_em(answer, r)
                    if lang == "zh"
                    else float(ref.squad_normalize(answer) == ref.squad_normalize(r))
                )
            elif metric == "token_f1":
                v = ref.cmrc_f1(answer, r) if lang == "zh" else ref.squad_f1(answer, r)
            elif metric == "rouge_l":
                v = (ref.ROUGE_ZH if lang == "zh" else ref.ROUGE_EN).score(r, answer)["rougeL"].fmeasure
            elif metric == "chrf":
                v = sacrebleu.sentence_chrf(answer, [r]).score / 100
            else:
                v = 1 - Levenshtein.normalized_distance(r, answer)
            best = max(best, v)
        total += best
    return total / len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    rows = generate(args.queries)
    conn = psycopg.connect(scratch_database())
    db.install(conn)
    with conn.transaction():
        dataset = load.ensure_dataset(conn, "text-bench")
        load.add_queries(conn, dataset, ((f"q{i}", "?", lang, None) for i, (lang, _, _) in enumerate(rows)))
        load.add_reference_answers(conn, dataset, ((f"q{i}", r) for i, (_, _, refs) in enumerate(rows) for r in refs))
        run = load.create_run(conn, "text-bench", dataset)
        load.add_answers(conn, run, ((f"q{i}", a, None) for i, (_, a, _) in enumerate(rows)), [])
    load.analyze(conn)
    conn.commit()

    figures = {}
    for metric in METRICS:
        sql_seconds, sql_value = timed(
            lambda m=metric: conn.execute(
                "select value from ragsql.summarize_generation('text-bench', %s)", ([m],)
            ).fetchone()[0],
            args.repeat,
        )

        def from_python(m=metric):
            texts = conn.execute(  # read what the SQL reads, then compute
                "select q.language, a.text, array_agg(r.text order by r.position) from ragsql.answer as a "
                "join ragsql.query as q on q.id = a.query_id join ragsql.reference_answer as r on r.query_id = q.id "
                "where a.run_id = %s group by q.id, q.language, a.text",
                (run,),
            ).fetchall()
            return python_values(m, [(lang, a, list(refs)) for lang, a, refs in texts])

        py_seconds, py_value = timed(from_python, args.repeat)
        figures[metric] = {
            "sql_seconds": sql_seconds,
            "python_seconds": py_seconds,
            "sql_value": sql_value,
            "python_value": py_value,
        }
    if args.json:
        print(json.dumps({"queries": args.queries, "metrics": figures}, indent=2))
        return 0
    print(f"{args.queries:,} answers (half English, half Chinese), 2 references each; best of {args.repeat}")
    print(f"{'metric':24} {'SQL s':>8} {'Python s':>9} {'SQL / Python':>13}  {'run value (SQL = Python)':>26}")
    for metric, f in figures.items():
        same = "=" if abs(f["sql_value"] - f["python_value"]) < 1e-9 else "!="
        print(
            f"{metric:24} {f['sql_seconds']:8.3f} {f['python_seconds']:9.3f} "
            f"{f['sql_seconds'] / f['python_seconds']:13.2f}  {f['sql_value']:12.6f} {same} {f['python_value']:.6f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
