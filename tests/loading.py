"""Loading TREC text straight into a test database through ragsql's own parser and COPY loaders; generated runs."""

from __future__ import annotations

import random
from pathlib import Path

from ragsql.db import load
from ragsql.formats import parse_qrels, parse_run


def _lines(source: str | Path) -> list[str]:
    if isinstance(source, Path):
        return source.read_text(encoding="utf-8").splitlines()
    return source.strip("\n").splitlines()


def load_trec(
    conn, qrels: str | Path, run: str | Path | None = None, run_name: str = "r", dataset: str | None = None
) -> int:
    """Load qrels (and a run ranked as trec_eval ranks it) into a dataset named after the run; returns run id."""
    dataset_id = load.ensure_dataset(conn, dataset or f"ds_{run_name}")
    judgments = list(parse_qrels(_lines(qrels)))
    results = list(parse_run(_lines(run))) if run is not None else []
    qids = dict.fromkeys([q for q, *_ in judgments] + [q for q, *_ in results])
    load.add_queries(conn, dataset_id, ((q, None, None, None) for q in qids))
    load.add_judgments(conn, dataset_id, ((q, d, r, None) for q, d, r in judgments))
    run_id = load.create_run(conn, run_name, dataset_id)
    load.add_run_results(conn, run_id, ((q, None, d, s, None) for q, d, s, _ in results), rank_by_score=True)
    load.analyze(conn)  # as the importer does: an earlier rolled-back test's statistics would misplan (50x slower)
    return run_id


def generated_run(path: Path, layout: str, seed: int = 15) -> list[tuple[str, int, str, float]]:
    """Write a run of 30 queries × 40 results with one-decimal scores (many ties) and ids in several scripts, a
    comment first, in a layout: "rank order" (as systems write), "shuffled within queries", "queries come back"
    (300 lines moved to the end) or "all shuffled"; return its (qid, rank, docno, score) rows ranked by trec_eval's
    rule written out: score, then the docno's UTF-8 bytes, both descending."""
    rng = random.Random(seed)
    lines, ranked = [], []
    for topic in range(30):
        docnos = rng.sample([f"D{i}" for i in range(300)] + ["é1", "中文", "Ω", "a\\b", "x#1"], 40)
        rows = [(f"T{topic:02}", docno, round(rng.uniform(0, 2), 1)) for docno in docnos]
        rows.sort(key=lambda row: -row[2])
        ranked += [
            (q, rank, d, s)
            for rank, (q, d, s) in enumerate(
                sorted(rows, key=lambda row: (row[2], row[1].encode()), reverse=True), start=1
            )
        ]
        if layout != "rank order":
            rng.shuffle(rows)
        lines += [f"{q} Q0 {d} {rank} {s} tag" for rank, (q, d, s) in enumerate(rows, start=1)]
    if layout == "queries come back":
        lines = lines[:500] + lines[800:] + lines[500:800]
    elif layout == "all shuffled":
        rng.shuffle(lines)
    path.write_text("# a header\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return sorted(ranked)
