"""Loading TREC text straight into a test database through ragsql's own parser and COPY loaders."""

from __future__ import annotations

from pathlib import Path

from ragsql.db import load
from ragsql.formats import parse_qrels, parse_run


def _lines(source: str | Path) -> list[str]:
    if isinstance(source, Path):
        return source.read_text(encoding="utf-8").splitlines()
    return source.strip("\n").splitlines()


def load_trec(conn, qrels: str | Path, run: str | Path | None = None, run_name: str = "r",
              dataset: str | None = None) -> int:
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
