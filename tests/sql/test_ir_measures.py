"""The measures beyond the trec_eval core — Bpref, infAP, ERR@k, RBP, Judged@k, F1@k, NumRet / NumRel / NumRelRet
and a relevance level per measure (P(rel=2)@10) — against their reference implementations: pytrec_eval (trec_eval's
C code) for bpref, infAP and the counts, ir_measures' providers for ERR (gdeval), RBP (cwl_eval) and Judged (ranx's f1@k is in
test_differential), on generated runs and the shared TREC data."""

from __future__ import annotations

import json
import random
from pathlib import Path

import ir_measures
import psycopg
import pytest
import pytrec_eval

from tests.loading import load_trec
from tests.sql.test_differential import generate, ragsql_values, report, to_text

TREC = Path(__file__).resolve().parents[1] / "data" / "trec"
EXPECTED = json.loads((TREC / "expected.json").read_text())["pairs"]


def _differences(reference: dict[str, dict[str, float]], ours: dict[str, dict[str, float]], names: dict[str, str],
                 tolerance: float) -> list[tuple]:
    return [(qid, name, want, ours[qid][mine]) for qid, per_query in reference.items()
            for name, mine in names.items() if name in per_query
            if abs((want := per_query[name]) - ours[qid][mine]) > tolerance]


@pytest.mark.parametrize("level", [1, 2])
def test_bpref_infap_and_counts_equal_pytrec_eval(db, level):
    """Graded qrels with 0 and -1 grades (-1: pooled but not judged), ties and judged queries missing from the run."""
    qrels, run = generate(seed=10 + level)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    names = {"bpref": "Bpref", "infAP": "infAP", "num_ret": "NumRet", "num_rel_ret": "NumRelRet"}
    if level == 1:  # pytrec_eval's num_rel ignores the relevance level (ir_measures says so too)
        names["num_rel"] = "NumRel"
    ours = ragsql_values(db, "gen", list(dict.fromkeys([*names.values(), "NumRel"])), level)
    reference = pytrec_eval.RelevanceEvaluator(qrels, set(names), relevance_level=level).evaluate(run)
    assert not (diff := _differences(reference, ours, names, 1e-9)), report(diff)
    absent = set(qrels) - set(reference)
    assert absent and all(ours[q]["Bpref"] == ours[q]["infAP"] == ours[q]["NumRet"] == 0 for q in absent)
    # NumRel describes the judgments, not the run: a query missing from the run still has its R
    assert all(ours[q]["NumRel"] == sum(g >= level for g in qrels[q].values()) for q in qrels)
    summary = dict(db.execute("select measure, value from ragsql.summarize('gen', %s, %s)",
                              (["NumRet", "NumRelRet", "Bpref"], level)).fetchall())
    assert summary["NumRet"] == sum(len(docs) for q, docs in run.items() if q in qrels)  # counts add up
    assert summary["NumRelRet"] == sum(reference[q]["num_rel_ret"] for q in reference)
    assert summary["Bpref"] == pytest.approx(sum(reference[q]["bpref"] for q in reference) / len(qrels), abs=1e-12)


def test_a_relevance_level_per_measure_equals_evaluating_at_that_level(db):
    """P(rel=2)@10 next to P@10 in one call equals pytrec_eval at relevance level 2 and 1."""
    qrels, run = generate(seed=3)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    mixed = ragsql_values(db, "gen", ["P@10", "P(rel=2)@10", "AP", "AP(rel=2)", "Bpref(rel=3)", "Success(rel=2)@5",
                                      "NumRet(rel=2)", "R(rel=2)@20", "nDCG@10"], 1)
    for level, names in ((1, {"P_10": "P@10", "map": "AP", "ndcg_cut_10": "nDCG@10"}),
                         (2, {"P_10": "P(rel=2)@10", "map": "AP(rel=2)", "success_5": "Success(rel=2)@5",
                              "num_rel_ret": "NumRet(rel=2)", "recall_20": "R(rel=2)@20"}),
                         (3, {"bpref": "Bpref(rel=3)"})):
        reference = pytrec_eval.RelevanceEvaluator(qrels, set(names), relevance_level=level).evaluate(run)
        assert not (diff := _differences(reference, mixed, names, 1e-9)), report(diff)
    alone = ragsql_values(db, "gen", ["P@10"], 2)  # the same as asking at level 2 for the whole call
    assert all(alone[q]["P@10"] == mixed[q]["P(rel=2)@10"] for q in qrels)


def _numeric_tie_free(seed: int, n_queries: int = 120, max_grade: int = 4):
    """Qrels and a run with numeric query ids (gdeval wants them), grades 0..max_grade and -1, no tied scores."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(1, n_queries + 1):
        pool = [f"d{i}" for i in rng.sample(range(500), rng.randint(3, 60))]
        qrels[str(q)] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3, max_grade]) for d in rng.sample(pool, rng.randint(1, len(pool)))}
        if rng.random() < 0.9:
            ranked = rng.sample(pool, rng.randint(1, len(pool)))
            run[str(q)] = {d: float(len(ranked) - i) + rng.random() / 2 for i, d in enumerate(ranked)}
    return qrels, run


def test_err_equals_gdeval_through_ir_measures(db):
    qrels, run = _numeric_tie_free(seed=7)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    measures = {ir_measures.ERR @ 5: "ERR@5", ir_measures.ERR @ 20: "ERR@20"}
    ours = ragsql_values(db, "gen", list(measures.values()), 1)
    reference: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(list(measures), qrels, run):
        reference.setdefault(metric.query_id, {})[measures[metric.measure]] = metric.value
    assert len(reference) > 80
    names = {m: m for m in measures.values()}
    assert not (diff := _differences(reference, ours, names, 6e-6)), report(diff)  # gdeval prints 5 decimals


def test_rbp_equals_cwl_eval_and_judged_equals_ir_measures(db):
    qrels, run = _numeric_tie_free(seed=8)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    measures = {ir_measures.RBP(rel=1, p=0.8): "RBP", ir_measures.RBP(rel=2, p=0.5): "RBP(rel=2,p=0.5)",
                ir_measures.Judged @ 5: "Judged@5", ir_measures.Judged @ 100: "Judged@100", ir_measures.Judged: "Judged"}
    ours = ragsql_values(db, "gen", list(measures.values()), 1)
    assert "RBP(p=0.8)" in ours["1"] and "RBP(rel=2,p=0.5)" in ours["1"]
    reference: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(list(measures), qrels, run):
        reference.setdefault(metric.query_id, {})[measures[metric.measure]] = float(metric.value)
    names = {"RBP": "RBP(p=0.8)", "RBP(rel=2,p=0.5)": "RBP(rel=2,p=0.5)", "Judged@5": "Judged@5",
             "Judged@100": "Judged@100", "Judged": "Judged"}
    assert len(reference) > 80
    assert not (diff := _differences(reference, ours, names, 1e-9)), report(diff)


def test_f1_is_the_harmonic_mean_of_precision_and_recall(db):
    """(ranx's f1@k is checked in test_differential with the other ranx measures.)"""
    qrels, run = _numeric_tie_free(seed=9)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    ours = ragsql_values(db, "gen", ["F1@5", "P@5", "R@5"], 1)
    for q in qrels:
        p, r = ours[q]["P@5"], ours[q]["R@5"]
        assert ours[q]["F1@5"] == pytest.approx(2 * p * r / (p + r) if p + r else 0.0, abs=1e-12), q


@pytest.mark.parametrize("pair", ["trec_eval.test", "trec_eval.rel_level.l2", "trec_eval.trunc", "cast2021.org_convdr",
                                  "rag24.comment.l2"])
def test_bpref_and_infap_equal_trec_eval_on_real_runs(db, pair):
    expected = EXPECTED[pair]
    qrels_path, run_path = (TREC / expected[key].removeprefix("data/") for key in ("qrels", "run"))
    load_trec(db, qrels_path, run_path, run_name=pair)
    level = expected["relevance_level"]
    ours = ragsql_values(db, pair, ["Bpref", "infAP", "NumRet", "NumRel", "NumRelRet"], level)
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            qid, _, docno, rel = line.split()[:4]
            qrels.setdefault(qid, {})[docno] = int(rel)
    run: dict[str, dict[str, float]] = {}
    for line in run_path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            qid, _, docno, _, score = line.split()[:5]
            run.setdefault(qid, {})[docno] = float(score)
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"bpref", "infAP"}, relevance_level=level).evaluate(run)
    reference = {q: v for q, v in reference.items() if q in ours}
    assert reference
    assert not (diff := _differences(reference, ours, {"bpref": "Bpref", "infAP": "infAP"}, 1e-9)), report(diff)
    for qid, per_query in expected["per_query"].items():  # the counts, as trec_eval printed them
        assert (ours[qid]["NumRet"], ours[qid]["NumRel"], ours[qid]["NumRelRet"]) == (
            per_query["num_ret"], per_query["num_rel"], per_query["num_rel_ret"]), qid


@pytest.mark.parametrize("name, message", [
    ("Bpref@10", "Bpref takes no cutoff"),
    ("nDCG(rel=2)@10", "nDCG takes no rel"),
    ("P(p=0.5)@10", "only RBP takes p"),
    ("RBP(p=1)", "p must be between 0 and 1"),
    ("P(rel=x)@5", 'unknown parameter "rel=x"'),
    ("P(depth=3)@5", 'unknown parameter "depth=3"'),
    ("F1", "F1 needs a cutoff"),
    ("NumRet@5", "NumRet takes no cutoff"),
])
def test_a_bad_measure_is_one_clear_error(db, name, message):
    qrels, run = _numeric_tie_free(seed=1, n_queries=3)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        db.execute("select * from ragsql.evaluate('gen', %s)", ([name],))
