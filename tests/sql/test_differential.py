"""Generated qrels and runs: every measure against pytrec_eval (trec_eval's C code) and ranx."""

from __future__ import annotations

import random

import pytest
import pytrec_eval

from tests.loading import load_trec

PYTREC = {  # pytrec_eval measure -> ragsql measure
    "P_1": "P@1", "P_5": "P@5", "P_10": "P@10",
    "recall_5": "R@5", "recall_10": "R@10", "recall_20": "R@20",
    "success_1": "Success@1", "success_5": "Success@5", "success_10": "Success@10",
    "recip_rank": "RR", "ndcg_cut_5": "nDCG@5", "ndcg_cut_10": "nDCG@10", "ndcg": "nDCG",
    "map": "AP", "map_cut_10": "AP@10", "Rprec": "Rprec",
}
RANX = {  # ranx metric -> ragsql measure (relevance level 1, ties removed beforehand)
    "precision@5": "P@5", "recall@10": "R@10", "hit_rate@5": "Success@5", "mrr@10": "RR@10",
    "ndcg@10": "nDCG@10", "ndcg_burges@10": "nDCG_burges@10", "map@10": "AP@10", "map": "AP",
    "r-precision": "Rprec", "f1@5": "F1@5", "f1@10": "F1@10",
}


def generate(seed: int, n_queries: int = 240):
    """Qrels and run with graded (incl. 0 and negative) grades, ties, and tricky docno byte orders."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        pool = [f"d{rng.randint(1, 400)}" for _ in range(rng.randint(5, 120))]
        pool += [f"D{n}" for n in range(rng.randint(0, 3))] + ["d9", "d10", "d100"]
        pool = list(dict.fromkeys(pool))
        judged = rng.sample(pool, rng.randint(1, min(len(pool), 40)))
        kind = rng.random()
        qrels[qid] = {
            d: (0 if kind < 0.08 else rng.choice([-1, 0, 0, 1, 1, 2, 3, 4]))
            for d in judged
        }
        if rng.random() < 0.07:
            continue  # judged query missing from the run
        depth = rng.randint(0, len(pool))
        retrieved = rng.sample(pool, depth)
        run[qid] = {d: float(rng.choice([1, 2, 3, 3, 5])) if rng.random() < 0.3 else round(rng.uniform(0, 10), 3)
                    for d in retrieved}
    for q in range(10):  # run queries without judgments are ignored
        run[f"u{q}"] = {f"d{i}": float(i) for i in range(5)}
    return qrels, run


def to_text(qrels, run) -> tuple[str, str]:
    q = "\n".join(f"{qid} 0 {d} {r}" for qid, docs in qrels.items() for d, r in docs.items())
    r = "\n".join(f"{qid} Q0 {d} 0 {s!r} gen" for qid, docs in run.items() for d, s in docs.items())
    return q, r


def trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: score descending, ties by docno descending in byte order."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (-kv[1], tuple(-b for b in kv[0].encode())))]


def context_precision(ranking: list[str], grades: dict[str, int], k: int, level: int) -> float:
    """DESIGN.md's ContextPrecision@k, written independently of the SQL."""
    hits, total = 0, 0.0
    for i, d in enumerate(ranking[:k], 1):
        if grades.get(d, 0) >= level:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


def ragsql_values(db, run_name: str, measures: list[str], level: int):
    rows = db.execute("select qid, measure, value, retrieved from ragsql.evaluate(%s, %s, %s)",
                      (run_name, measures, level)).fetchall()
    values: dict[str, dict[str, float]] = {}
    for qid, measure, value, _ in rows:
        values.setdefault(qid, {})[measure] = value
    return values


def report(differences: list[tuple]) -> str:
    return f"{len(differences)} values differ (qid, measure, reference, ragsql): {differences[:8]}"


@pytest.mark.parametrize("level", [1, 2])
def test_every_measure_equals_pytrec_eval_per_query_and_complete_mean(db, level):
    """Per-query values equal pytrec_eval to 1e-6; -c means also count judged queries missing from the run as 0."""
    qrels, run = generate(seed=level)
    load_trec(db, *to_text(qrels, run), run_name="gen")
    ours = ragsql_values(db, "gen", list(PYTREC.values()) + ["ContextPrecision@10"], level)
    assert set(ours) == set(qrels)

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC), relevance_level=level)
    reference = evaluator.evaluate(run)  # skips judged queries absent from the run
    differences = [
        (qid, name, want, ours[qid][PYTREC[name]])
        for qid, per_query in reference.items()
        for name, want in per_query.items()
        if abs(want - ours[qid][PYTREC[name]]) > 1e-6
    ]
    assert not differences, report(differences)

    cp = {qid: context_precision(trec_order(run.get(qid, {})), qrels[qid], 10, level) for qid in qrels}
    cp_diff = [(q, "CP@10", v, ours[q]["ContextPrecision@10"]) for q, v in cp.items()
               if abs(v - ours[q]["ContextPrecision@10"]) > 1e-9]
    assert not cp_diff, report(cp_diff)

    absent = set(qrels) - set(reference)
    assert absent and all(v == 0.0 for q in absent for v in ours[q].values())
    summary = dict(db.execute("select measure, value from ragsql.summarize('gen', %s, %s)",
                              (list(PYTREC.values()), level)).fetchall())
    for name, measure in PYTREC.items():
        complete_mean = sum(reference[q][name] for q in reference) / len(qrels)
        assert summary[measure] == pytest.approx(complete_mean, abs=1e-9), measure


def test_measures_equal_ranx_on_a_tie_free_run(db):
    """At level 1, the measures ranx shares equal ranx to 1e-6 (ties removed: ranx orders ties differently)."""
    from ranx import Qrels, Run, evaluate

    qrels, run = generate(seed=7)
    # Canonical scores n..1 in trec_eval order, so ranx and trec_eval rank identically.
    canonical = {q: {d: float(len(docs) - i) for i, d in enumerate(trec_order(docs))} for q, docs in run.items() if docs}
    judged_in_run = {q: canonical[q] for q in qrels if q in canonical}
    load_trec(db, *to_text(qrels, canonical), run_name="tiefree")
    ours = ragsql_values(db, "tiefree", list(RANX.values()), 1)

    positive = {q: {d: r for d, r in docs.items() if r > 0} for q, docs in qrels.items() if q in judged_in_run}
    answerable = {q for q, docs in positive.items() if docs}  # ranx needs a relevant item per query
    scores = evaluate(Qrels({q: positive[q] for q in answerable}), Run({q: judged_in_run[q] for q in answerable}),
                      list(RANX), return_mean=False, make_comparable=True)
    qids = sorted(answerable)
    differences = [
        (qid, metric, float(scores[metric][i]), ours[qid][RANX[metric]])
        for metric in RANX
        for i, qid in enumerate(qids)
        if abs(float(scores[metric][i]) - ours[qid][RANX[metric]]) > 1e-6
    ]
    assert not differences, report(differences)
