"""Real TREC qrels and runs (trec_eval's test collection, TREC RAG 2024, CAsT 2021) against trec_eval's values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsql.formats import files
from ragsql.importer import import_trec
from tests.loading import load_trec

DATA = Path(__file__).resolve().parents[1] / "data" / "trec"
EXPECTED = json.loads((DATA / "expected.json").read_text())["pairs"]

# trec_eval / reference names -> ragsql measure names
MEASURES = {
    "P_1": "P@1", "P_3": "P@3", "P_5": "P@5", "P_10": "P@10",
    "recall_5": "R@5", "recall_10": "R@10", "recall_20": "R@20", "recall_100": "R@100",
    "success_1": "Success@1", "success_3": "Success@3", "success_5": "Success@5", "success_10": "Success@10",
    "recip_rank": "RR", "recip_rank_cut_10": "RR@10",
    "ndcg_cut_5": "nDCG@5", "ndcg_cut_10": "nDCG@10", "ndcg_cut_20": "nDCG@20", "ndcg": "nDCG",
    "ndcg_burges_cut_5": "nDCG_burges@5", "ndcg_burges_cut_10": "nDCG_burges@10",
    "ndcg_burges_cut_20": "nDCG_burges@20",
    "map": "AP", "map_cut_10": "AP@10", "Rprec": "Rprec",
    "context_precision_5": "ContextPrecision@5", "context_precision_10": "ContextPrecision@10",
    "num_ret": "NumRet", "num_rel": "NumRel", "num_rel_ret": "NumRelRet",
}


def _path(relative: str) -> Path:
    return DATA / relative.removeprefix("data/")


@pytest.mark.parametrize("pair", sorted(EXPECTED))
def test_per_query_and_complete_means_equal_trec_eval(db, pair):
    """Every measure per query and its -c mean equals trec_eval's (pytrec_eval) value to 1e-9 on real data (the
    counts' run value is their sum, and NumRel counts a judged query missing from the run: 561 relevant in
    trec_eval.trunc, where trec_eval -c prints 561 too)."""
    expected = EXPECTED[pair]
    load_trec(db, _path(expected["qrels"]), _path(expected["run"]), run_name=pair)
    level = expected["relevance_level"]
    names = list(MEASURES.values())
    rows = db.execute("select qid, measure, value, retrieved from ragsql.evaluate(%s, %s, %s)", (pair, names, level))
    got: dict[str, dict[str, float]] = {}
    retrieved: dict[str, bool] = {}
    for qid, measure, value, in_run in rows:
        got.setdefault(qid, {})[measure] = value
        retrieved[qid] = in_run

    evaluated = expected["per_query"]
    assert sorted(q for q, r in retrieved.items() if r) == sorted(evaluated)
    differences = [
        (qid, ref_name, want, got[qid][ours])
        for qid, per_measure in evaluated.items()
        for ref_name, ours in MEASURES.items()
        if abs((want := per_measure[ref_name]) - got[qid][ours]) > 1e-9
    ]
    assert not differences, f"{len(differences)} per-query values differ, e.g. {differences[:5]}"

    missing = [q for q, r in retrieved.items() if not r]
    assert len(missing) == len(expected["queries"]["in_qrels_not_in_run"])
    assert all(v == 0.0 for q in missing for m, v in got[q].items() if m != "NumRel")  # R is the qrels', not the run's

    summary = dict(db.execute("select measure, value from ragsql.summarize(%s, %s, %s)", (pair, names, level)).fetchall())
    mean_differences = [
        (ref_name, want, summary[ours])
        for ref_name, ours in MEASURES.items()
        if ref_name in expected["mean_complete"]
        and abs((want := expected["mean_complete"][ref_name]) - summary[ours]) > 1e-9
    ]
    assert not mean_differences, mean_differences


_FILES = sorted({(expected["qrels"], expected["run"]) for expected in EXPECTED.values()})


@pytest.mark.parametrize(("qrels", "run"), _FILES, ids=[run.rsplit("/", 1)[1] for _, run in _FILES])
def test_the_importer_stores_the_reference_loaders_rankings(db, monkeypatch, qrels, run):
    """`ragsql import trec` (ranks in Python, COPY straight into the table, 20 kB blocks) stores every real run
    exactly as the loader above does (ranks by the database's window function): same qid, rank, docno, score."""
    monkeypatch.setattr(files, "BLOCK_BYTES", 20_000)
    db.execute("select 1")  # a transaction open, so that the import's is a savepoint and the test's rollback undoes it
    import_trec(db, "imported", _path(qrels), _path(run), run_name="imported")
    load_trec(db, _path(qrels), _path(run), run_name="loaded")
    rows = """
        select q.qid, r.rank, r.docno, r.score from ragsql.run_result as r
        join ragsql.run as ru on ru.id = r.run_id join ragsql.query as q on q.id = r.query_id
        where ru.name = %s order by q.qid, r.rank
        """
    imported, loaded = db.execute(rows, ("imported",)).fetchall(), db.execute(rows, ("loaded",)).fetchall()
    assert imported and imported == loaded
