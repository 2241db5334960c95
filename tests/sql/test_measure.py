"""Retrieval measures in SQL against the seeds' worked examples and hand-computed cases."""

from __future__ import annotations

import math

import psycopg
import pytest

from tests.loading import load_trec


def values(db, run: str, measure: str, rel_level: int = 1) -> dict[str, float]:
    rows = db.execute("select qid, value from ragsql.measure(%s, %s, %s)", (run, measure, rel_level)).fetchall()
    return dict(rows)


def ranking_run(relevance: list[int], qid: str = "q") -> tuple[str, str]:
    """qrels and run text for one query whose ranked items have the given grades (rank 1 first)."""
    qrels = "\n".join(f"{qid} 0 d{i} {rel}" for i, rel in enumerate(relevance, 1) if rel)
    run = "\n".join(f"{qid} Q0 d{i} {i} {100 - i} r" for i in range(1, len(relevance) + 1))
    return qrels, run


@pytest.mark.parametrize(
    ("relevance", "expected"),
    [([1, 0, 1, 0, 1], (1 + 2 / 3 + 3 / 5) / 3), ([0, 0, 0, 1, 1], 0.325), ([1, 1, 1, 0, 0], 1.0)],
)
def test_context_precision_matches_ragas_seed_examples(db, relevance, expected):
    """ContextPrecision@5 reproduces the seed's worked examples: 0.7556, 0.325 and 1."""
    load_trec(db, *ranking_run(relevance, qid="q1"))
    assert values(db, "r", "ContextPrecision@5")["q1"] == pytest.approx(expected, abs=1e-12)
    assert round(expected, 4) in (0.7556, 0.325, 1.0)


def test_context_precision_accepts_llm_style_verdicts(db):
    """The same SQL formula scores a ranked list of yes/no verdicts, as LLM context precision will."""
    row = db.execute(
        """
        select ragsql.context_precision_at(p.rel_ranks, p.prec_cum, 5)
        from ragsql.relevance_profile(array[true, false, true, false, true]) as p
        """
    ).fetchone()
    assert row[0] == pytest.approx(0.7555555555555555)
    zhang_wei = db.execute(
        "select ragsql.context_precision_at(p.rel_ranks, p.prec_cum, 2) "
        "from ragsql.relevance_profile(array[false, true]) as p"
    ).fetchone()[0]
    assert zhang_wei == pytest.approx(0.5)  # polardb seed, row 3: (0 + 1/2) / 1


def test_retrieval_seed_examples(db):
    """The retrieval seed's minimal example: Recall@k (Success), MRR and graded nDCG at k = 1, 3, 5."""
    load_trec(
        db,
        qrels="s1 0 c2 2\ns1 0 c3 1\ns2 0 c6 2",
        run="s1 Q0 c7 1 4 r\ns1 Q0 c2 2 3 r\ns1 Q0 c9 3 2 r\ns1 Q0 c1 4 1 r\n"
            "s2 Q0 c4 1 3 r\ns2 Q0 c5 2 2 r\ns2 Q0 c6 3 1 r",
    )
    for k, success, mrr in [(1, 0.0, 0.0), (3, 1.0, (0.5 + 1 / 3) / 2), (5, 1.0, (0.5 + 1 / 3) / 2)]:
        mean = db.execute("select value from ragsql.summarize('r', array[%s, %s])", (f"Success@{k}", f"RR@{k}")).fetchall()
        assert [v for (v,) in mean] == pytest.approx([success, mrr])
    # s1: DCG@3 = 2/log2(3); IDCG@3 = 2 + 1/log2(3).  s2: DCG@3 = 2/log2(4) = 1; IDCG = 2.
    ndcg3 = values(db, "r", "nDCG@3")
    assert ndcg3["s1"] == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg3["s2"] == pytest.approx(0.5)


def test_rr_is_reciprocal_rank_of_first_relevant_within_k(db):
    """RR@k is 1/rank of the first relevant item in the top k; 0 if none, or if the query is absent from the run."""
    load_trec(db, qrels="q1 0 d2 1\nq2 0 d7 1\nq3 0 d1 1",
              run="q1 Q0 d1 1 0.9 r\nq1 Q0 d2 2 0.8 r\nq2 Q0 d1 1 0.9 r")
    rows = db.execute("select qid, value from ragsql.measure('r', 'RR@10') order by qid").fetchall()
    assert rows == [("q1", 0.5), ("q2", 0.0), ("q3", 0.0)]
    assert values(db, "r", "RR@1") == {"q1": 0.0, "q2": 0.0, "q3": 0.0}


def test_ties_are_broken_by_docno_descending_in_byte_order(db):
    """Tied scores rank as trec_eval ranks them: docno descending by bytes ('d9' > 'd10'), not numerically."""
    load_trec(db, qrels="q 0 d10 1", run="q Q0 d10 1 5.0 r\nq Q0 d9 2 5.0 r\nq Q0 D99 3 5.0 r")
    ranks = db.execute("select docno, rank from ragsql.run_result order by rank").fetchall()
    assert ranks == [("d9", 1), ("d10", 2), ("D99", 3)]
    assert values(db, "r", "RR") == {"q": 0.5}


def test_precision_divides_by_k_even_when_fewer_were_retrieved(db):
    """P@10 of a run that retrieved 2 items, 1 relevant, is 1/10; R@10 divides by all relevant (3)."""
    load_trec(db, qrels="q 0 a 1\nq 0 b 1\nq 0 c 1", run="q Q0 a 1 2 r\nq Q0 x 2 1 r")
    assert values(db, "r", "P@10") == {"q": 0.1}
    assert values(db, "r", "R@10")["q"] == pytest.approx(1 / 3)
    assert values(db, "r", "AP")["q"] == pytest.approx(1 / 3)
    assert values(db, "r", "Rprec")["q"] == pytest.approx(1 / 3)


def test_query_without_relevant_judgment_scores_zero_and_counts(db):
    """A judged query whose judgments are all 0 or negative scores 0 on every measure and counts in the mean."""
    load_trec(db, qrels="q1 0 a 1\nq2 0 b 0\nq2 0 c -1", run="q1 Q0 a 1 1 r\nq2 Q0 b 1 1 r")
    summary = db.execute(
        "select measure, value, queries, answerable, no_relevant, missing, value_answerable "
        "from ragsql.summarize('r', array['P@1', 'nDCG@10', 'AP', 'Rprec'])"
    ).fetchall()
    for measure, value, queries, answerable, no_relevant, missing, answerable_value in summary:
        assert (value, queries, answerable, no_relevant, missing, answerable_value) == (0.5, 2, 1, 1, 0, 1.0), measure


def test_query_absent_from_run_scores_zero(db):
    """A judged query missing from the run scores 0 and is counted as missing (trec_eval -c)."""
    load_trec(db, qrels="q1 0 a 1\nq2 0 b 1", run="q1 Q0 a 1 1 r\nq9 Q0 z 1 1 r")
    rows = db.execute("select qid, value, retrieved from ragsql.evaluate('r', array['Success@5'])").fetchall()
    assert rows == [("q1", 1.0, True), ("q2", 0.0, False)]  # q9 has no judgments: ignored
    missing = db.execute("select missing, value from ragsql.summarize('r', array['Success@5'])").fetchone()
    assert missing == (1, 0.5)


def test_empty_run_scores_zero_for_every_judged_query(db):
    """A run with no results scores 0 everywhere, all queries missing; nothing is NULL or NaN."""
    load_trec(db, qrels="q1 0 a 1\nq2 0 b 2", run="")
    rows = db.execute("select measure, value, missing from ragsql.summarize('r')").fetchall()
    assert len(rows) == 14
    assert all(value == 0.0 and missing == 2 for _, value, missing in rows)


def test_graded_relevance_and_levels(db):
    """Level 2 makes grade-1 items non-relevant for P/R/AP/RR, while nDCG keeps every positive grade as gain."""
    load_trec(db, qrels="q 0 a 1\nq 0 b 2\nq 0 c 3", run="q Q0 a 1 3 r\nq Q0 b 2 2 r\nq Q0 z 3 1 r")
    assert values(db, "r", "RR", 1) == {"q": 1.0}
    assert values(db, "r", "RR", 2) == {"q": 0.5}
    assert values(db, "r", "R@10", 2)["q"] == pytest.approx(0.5)
    dcg = 1 + 2 / math.log2(3)
    idcg = 3 + 2 / math.log2(3) + 1 / 2
    assert values(db, "r", "nDCG@3", 1)["q"] == pytest.approx(dcg / idcg)
    assert values(db, "r", "nDCG@3", 2)["q"] == pytest.approx(dcg / idcg)
    burges = (1 + 3 / math.log2(3)) / (7 + 3 / math.log2(3) + 1 / 2)
    assert values(db, "r", "nDCG_burges@3")["q"] == pytest.approx(burges)


def test_ap_at_k_divides_by_all_relevant(db):
    """AP@2 sums precision at relevant ranks <= 2 and divides by R, not by min(R, k)."""
    load_trec(db, qrels="q 0 a 1\nq 0 c 1\nq 0 e 1", run="\n".join(f"q Q0 {d} {i} {9 - i} r" for i, d in enumerate("abcde", 1)))
    assert values(db, "r", "AP@2")["q"] == pytest.approx(1 / 3)
    assert values(db, "r", "AP")["q"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)


def test_measure_names_are_parsed_case_insensitively(db):
    """'ndcg@10' and 'NDCG@10' are nDCG@10; a measure without @k covers the whole ranking."""
    load_trec(db, qrels="q 0 d30 1", run="\n".join(f"q Q0 d{i} {i} {100 - i} r" for i in range(1, 41)))
    names = db.execute("select measure, value from ragsql.summarize('r', array['ndcg@10', 'rr', 'R', 'success'])").fetchall()
    assert [n for n, _ in names] == ["nDCG@10", "RR", "R", "Success"]
    assert dict(names)["RR"] == pytest.approx(1 / 30)
    assert dict(names)["R"] == 1.0


@pytest.mark.parametrize(
    ("measure", "message"),
    [("P@0", "cutoff k must be at least 1"), ("Rprec@5", "takes no cutoff"), ("P", "needs a cutoff"),
     ("MAP@x", 'unknown measure "MAP@x"')],
)
def test_bad_measure_names_raise_one_clear_error(db, measure, message):
    """An unknown or malformed measure raises invalid_parameter_value naming the measure."""
    load_trec(db, qrels="q 0 a 1", run="q Q0 a 1 1 r")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        db.execute("select * from ragsql.measure('r', %s)", (measure,))


def test_unknown_run_raises_no_data_found(db):
    """An unknown run name raises no_data_found with a hint, never an empty result."""
    with pytest.raises(psycopg.errors.NoDataFound, match='unknown run "nope"'):
        db.execute("select * from ragsql.measure('nope', 'P@5')")


def test_views_list_default_measures_for_every_run(db):
    """run_measure and query_measure give the 14 default measures for each run, with coverage counts."""
    load_trec(db, qrels="q1 0 a 1\nq2 0 b 1", run="q1 Q0 a 1 1 r", run_name="r1", dataset="d")
    run_id = load_trec(db, qrels="q1 0 a 1", run="q1 Q0 b 1 1 r", run_name="r2", dataset="d2")
    assert run_id > 0
    rows = db.execute("select run, count(*), min(queries), max(missing) from ragsql.run_measure group by run order by run").fetchall()
    assert rows == [("r1", 14, 2, 1), ("r2", 14, 1, 0)]
    per_query = db.execute("select count(*) from ragsql.query_measure where run = 'r1'").fetchone()[0]
    assert per_query == 28


ALIASES = {  # as trec_eval and ranx users type them -> ragsql's spelling
    "MRR": "RR", "mrr": "RR", "recip_rank": "RR", "MAP": "AP", "map": "AP", "ndcg": "nDCG",
    "ndcg_cut_10": "nDCG@10", "ndcg_cut.10": "nDCG@10", "recall_10": "R@10", "P_5": "P@5", "P.5": "P@5",
    "success_1": "Success@1", "map_cut_10": "AP@10", "hit_rate@5": "Success@5", "precision@5": "P@5",
    "recall@100": "R@100", "mrr@10": "RR@10", "map@10": "AP@10", "ndcg@10": "nDCG@10",
    "ndcg_burges@10": "nDCG_burges@10", "r-precision": "Rprec", "Rprec": "Rprec", "nDCG@10": "nDCG@10",
}


def test_trec_eval_and_ranx_names_are_aliases_everywhere_a_measure_is_named(db):
    """Each alias parses to ragsql's spelling, and a run summarised under aliases equals the canonical names."""
    spelled = dict(db.execute("select n, s.measure from unnest(%s::text[]) as n, "
                              "lateral ragsql._measure_spec(array[n]) as s", (list(ALIASES),)).fetchall())
    assert spelled == ALIASES
    load_trec(db, "q1 0 d1 2\nq1 0 d3 1\nq2 0 d2 1", "q1 Q0 d1 0 3 r\nq1 Q0 d2 0 2 r\nq1 Q0 d3 0 1 r\nq2 Q0 d9 0 1 r")
    aliased = db.execute("select measure, value from ragsql.summarize('r', array['MAP', 'ndcg_cut_10', 'P_5', "
                         "'hit_rate@1'])").fetchall()
    canonical = db.execute("select measure, value from ragsql.summarize('r', array['AP', 'nDCG@10', 'P@5', "
                           "'Success@1'])").fetchall()
    assert aliased == canonical and [m for m, _ in aliased] == ["AP", "nDCG@10", "P@5", "Success@1"]
