"""RAGAS's non-LLM context precision and recall in SQL (Levenshtein similarity of context texts, no judge) against
RAGAS's formulas computed with rapidfuzz, as NonLLMStringSimilarity does, on random English and Chinese contexts."""

from __future__ import annotations

import random

import psycopg
import pytest
from rapidfuzz.distance import Levenshtein

from tests.sql.test_generation import measure, sample
from tests.sql.test_levenshtein import EN, ZH, _texts


def gold(db, query_id: int, texts: list[str], relevance: int = 1) -> None:
    for i, text in enumerate(texts, 1):
        db.execute("insert into ragsql.judgment (query_id, docno, relevance, text) values (%s, %s, %s, %s)",
                   (query_id, f"g{relevance}-{i}", relevance, text))


def ragas_precision(retrieved: list[str], reference: list[str], threshold: float = 0.5) -> float:
    """NonLLMContextPrecisionWithReference, restated (its 1e-10 in the denominator aside)."""
    verdicts = [int(max(1 - Levenshtein.normalized_distance(r, ref) for ref in reference) >= threshold)
                for r in retrieved]
    numerator = sum(sum(verdicts[:i + 1]) / (i + 1) * verdicts[i] for i in range(len(verdicts)))
    return numerator / sum(verdicts) if sum(verdicts) else 0.0


def ragas_recall(retrieved: list[str], reference: list[str], threshold: float = 0.5) -> float:
    """NonLLMContextRecall, restated: strictly above the threshold."""
    return sum(max(1 - Levenshtein.normalized_distance(r, ref) for r in retrieved) > threshold
               for ref in reference) / len(reference)


def test_hand_example_precision_and_recall(db):
    """Contexts [copy of gold 1, unrelated, near copy of gold 2]: rel [1, 0, 1] -> (1 + 2/3) / 2; both gold texts
    found -> recall 1. A context at exactly the threshold counts for precision (>=) but not recall (>)."""
    g1, g2 = "The Eiffel Tower is in Paris.", "It was completed in 1889."
    _, q = sample(db, qid="q1", question="?", answer="a",
                  contexts=(g1, "Bananas are yellow fruit grown in warm places.", "It was completed in 1890."))
    gold(db, q, [g1, g2])
    assert measure(db, "r", "non_llm_context_precision_with_reference")["q1"] == (pytest.approx(5 / 6), None)
    assert measure(db, "r", "non_llm_context_recall")["q1"] == (1.0, None)
    _, q = sample(db, qid="q2", question="?", answer="a", contexts=("abcd",))
    gold(db, q, ["abxy"])  # similarity exactly 0.5
    assert measure(db, "r", "non_llm_context_precision_with_reference")["q2"] == (1.0, None)
    assert measure(db, "r", "non_llm_context_recall")["q2"] == (0.0, None)


def test_equal_ragas_formulas_on_random_contexts(db):
    """50 queries of 1-5 contexts and 1-3 gold texts (some near copies, some unrelated, 20-300 characters,
    English and Chinese): both metrics equal RAGAS's formulas with rapidfuzz, at thresholds 0.5 and 0.3."""
    rng = random.Random(16)
    expected = {}
    for i in range(50):
        alphabet = EN if i % 2 else ZH
        reference = [_texts(rng, alphabet, rng.randint(20, 300))[0] for _ in range(rng.randint(1, 3))]
        retrieved = [_texts(rng, alphabet, len(g))[1] if rng.random() < 0.5 else
                     _texts(rng, alphabet, rng.randint(20, 300))[0]
                     for g in (rng.choice(reference) for _ in range(rng.randint(1, 5)))]
        qid = f"q{i:02d}"
        _, q = sample(db, qid=qid, question="?", answer="a", contexts=tuple(retrieved))
        gold(db, q, reference)
        gold(db, q, ["not gold " + reference[0]], relevance=0)  # judged non-relevant: not a reference context
        expected[qid] = (retrieved, reference)
    for threshold in (0.5, 0.3):
        got_p = {r[0]: r[1] for r in db.execute(
            "select qid, value from ragsql.non_llm_context_precision_with_reference('r', %s)", (threshold,))}
        got_r = {r[0]: r[1] for r in db.execute(
            "select qid, value from ragsql.non_llm_context_recall('r', %s)", (threshold,))}
        for qid, (retrieved, reference) in expected.items():
            assert got_p[qid] == pytest.approx(ragas_precision(retrieved, reference, threshold), abs=1e-12), qid
            assert got_r[qid] == pytest.approx(ragas_recall(retrieved, reference, threshold), abs=1e-12), qid


def test_nulls_and_bad_threshold(db):
    """No contexts or no gold text: null with the reason (a gold id without a text is no reference context); a
    threshold outside [0, 1] is invalid_parameter_value."""
    sample(db, qid="noctx", question="?", answer="a")
    _, q = sample(db, qid="notext", question="?", answer="a", contexts=("c",))
    db.execute("insert into ragsql.judgment (query_id, docno, relevance) values (%s, 'd', 1)", (q,))
    got = measure(db, "r", "non_llm_context_recall")
    assert got["noctx"] == (None, "no retrieved contexts")
    assert got["notext"] == (None, "no reference context texts")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="between 0 and 1"):
        db.execute("select * from ragsql.non_llm_context_recall('r', 1.5)")
