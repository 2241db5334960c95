"""Property-based tests of the metric functions: for generated qrels, runs and judge verdicts, every retrieval measure
and every generation metric is within its documented range (or, for generation, NULL with a reason), and adding the
rows of an unrelated run, dataset or query changes no value. Each example runs in a savepoint rolled back at once."""

from __future__ import annotations

import contextlib
import math

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsql.db import load
from tests.sql.test_generation import call, embed, extract, judge_statements, sample

PROPERTY = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

MEASURES = ["Success@1", "Success@5", "R@3", "R@10", "P@1", "P@5", "RR@10", "RR", "nDCG@3", "nDCG@10", "nDCG",
            "nDCG_burges@5", "AP", "AP@5", "ContextPrecision@5", "ContextPrecision", "Rprec"]
GENERATION = ["faithfulness", "contradiction_rate", "answer_relevancy", "answer_relevancy_rating",
              "answer_relevancy_cosine", "context_precision", "context_relevance", "context_recall",
              "answer_similarity", "answer_correctness_f1", "answer_correctness", "citation_coverage",
              "citation_validity", "aspect:harmfulness"]
VERDICTS = st.sampled_from(["supported", "partial", "unsupported", "contradicted"])


@contextlib.contextmanager
def rolled_back(db: psycopg.Connection):
    """A savepoint undone at the end of one example, whatever happened inside."""
    with contextlib.suppress(psycopg.Rollback), db.transaction():
        yield
        raise psycopg.Rollback()


# ----------------------------------------------------------------------------------------------------------------
# Retrieval measures

qids = st.sampled_from([f"q{i}" for i in range(1, 5)])
docnos = st.sampled_from([f"d{i}" for i in range(1, 13)])
qrels = st.dictionaries(st.tuples(qids, docnos), st.integers(-1, 3), min_size=1, max_size=25)
runs = st.dictionaries(st.tuples(qids, docnos), st.floats(-5, 5, allow_nan=False, width=32), max_size=40)


def _trec(dataset: str, run: str, judged: dict, ranked: dict, db) -> None:
    dataset_id = load.ensure_dataset(db, dataset)
    load.add_queries(db, dataset_id, ((q, None, None, None) for q in sorted({q for q, _ in [*judged, *ranked]})))
    load.add_judgments(db, dataset_id, ((q, d, rel, None) for (q, d), rel in judged.items()))
    run_id = load.create_run(db, run, dataset_id)
    load.add_run_results(db, run_id, ((q, None, d, s, None) for (q, d), s in ranked.items()), rank_by_score=True)


def _evaluate(db, run: str, level: int) -> list[tuple]:
    return db.execute("select qid, measure, value, relevant, retrieved from ragsql.evaluate(%s, %s, %s)",
                      (run, MEASURES, level)).fetchall()


@PROPERTY
@given(judged=qrels, ranked=runs, level=st.integers(1, 2), other_judged=qrels, other_ranked=runs)
def test_retrieval_measures_are_in_0_1_and_ignore_unrelated_rows(db, judged, ranked, level, other_judged,
                                                                  other_ranked):
    """Every measure of every judged query is a number in [0, 1]; one row per judged query and measure; the values
    stay the same after another dataset with its own run, a second run of the same dataset and an unjudged
    query with results are added."""
    with rolled_back(db):
        _trec("ds", "r", judged, ranked, db)
        before = _evaluate(db, "r", level)
        assert len(before) == len({q for q, _ in judged}) * len(MEASURES)
        bad = [row for row in before if row[2] is None or not 0 <= row[2] <= 1 + 1e-12]
        assert not bad, f"values out of [0, 1]: {bad}"
        _trec("other", "u", other_judged, other_ranked, db)                      # an unrelated dataset and run
        dataset_id = load.ensure_dataset(db, "ds")
        second = load.create_run(db, "r2", dataset_id)                         # another run of the same dataset
        load.add_run_results(db, second, ((q, None, d, -s, None) for (q, d), s in other_ranked.items()
                                          if q in {q for q, _ in judged}), rank_by_score=True)
        load.add_queries(db, dataset_id, [("unjudged", None, None, None)])      # a query without judgments
        load.add_run_results(db, load.create_run(db, "r3", dataset_id), [("unjudged", None, "d1", 1.0, None)],
                             rank_by_score=True)
        assert _evaluate(db, "r", level) == before


# ----------------------------------------------------------------------------------------------------------------
# Generation metrics

vectors = st.lists(st.integers(-3, 3), min_size=3, max_size=3)
query_data = st.fixed_dictionaries({
    "answered": st.booleans(),
    "contexts": st.integers(0, 3),
    "references": st.integers(0, 2),
    "faithfulness": st.lists(st.one_of(st.none(), VERDICTS), max_size=4),
    "recall": st.lists(st.one_of(st.none(), VERDICTS), max_size=3),
    "correct_answer": st.lists(VERDICTS, max_size=3),
    "correct_reference": st.lists(VERDICTS, max_size=3),
    "useful": st.lists(st.booleans(), max_size=3),
    "sentences": st.lists(st.lists(st.booleans(), min_size=1, max_size=3), max_size=3),
    "questions": st.lists(st.tuples(vectors, st.booleans()), max_size=3),
    "rating": st.one_of(st.none(), st.integers(1, 5)),
    "citations": st.lists(st.lists(st.booleans(), max_size=3), max_size=3),
    "harmful": st.one_of(st.none(), st.booleans()),
    "vectors": st.lists(vectors, min_size=4, max_size=4),
})


def _generation_run(db, run: str, queries: list[dict]) -> None:
    """Store a run's answers, contexts, references, embeddings and verdicts as the judge would."""
    for n, data in enumerate(queries, 1):
        qid = f"q{n}"
        question, answer = f"{run} question {n}?", f"{run} answer {n}."
        references = tuple(f"{run} reference {n}.{i}" for i in range(data["references"]))
        contexts = tuple(f"{run} context {n}.{i}" for i in range(data["contexts"]))
        run_id, q = sample(db, run, qid, question, answer if data["answered"] else None, contexts, references)
        for text, vector in zip((question, answer, *references), data["vectors"]):
            embed(db, text, vector)
        if not data["answered"]:
            continue
        # a text's statements are extracted once and judged for each purpose (None: no verdict yet)
        for text, judged in ((answer, {"faithfulness": data["faithfulness"],
                                       "correctness_answer": data["correct_answer"]}),
                             *([(references[0], {"context_recall": data["recall"],
                                                 "correctness_reference": data["correct_reference"]})]
                               if references else [])):
            count = max(len(v) for v in judged.values())
            if count:
                extraction = extract(db, text, [f"{text} s{i}" for i in range(count)])
                for purpose, verdicts in judged.items():
                    if verdicts:
                        judge_statements(db, run_id, q, purpose, extraction,
                                         verdicts + [None] * (count - len(verdicts)))
        call_id = call(db)
        for position, useful in enumerate(data["useful"][:len(contexts)], 1):
            db.execute("insert into ragsql.context_verdict (run_id, query_id, position, model, prompt_version, "
                       "useful, call_id) values (%s, %s, %s, 'judge', 'v1', %s, %s)",
                       (run_id, q, position, useful, call_id))
        for position, flags in enumerate(data["sentences"][:len(contexts)], 1):
            for number, relevant in enumerate(flags, 1):
                db.execute("insert into ragsql.context_sentence_verdict (run_id, query_id, position, sentence_no, "
                           "model, prompt_version, sentence, relevant, call_id) "
                           "values (%s, %s, %s, %s, 'judge', 'v1', %s, %s, %s)",
                           (run_id, q, position, number, f"s{number}", relevant, call_id))
        for number, (vector, noncommittal) in enumerate(data["questions"], 1):
            text = f"{run} generated {n}.{number}?"
            db.execute("insert into ragsql.generated_question (run_id, query_id, n, model, prompt_version, "
                       "question, noncommittal, call_id) values (%s, %s, %s, 'judge', 'v1', %s, %s, %s)",
                       (run_id, q, number, text, noncommittal, call_id))
            embed(db, text, vector)
        if data["rating"] is not None:
            db.execute("insert into ragsql.rating (run_id, query_id, criterion, model, prompt_version, score, call_id) "
                       "values (%s, %s, 'answer_relevancy', 'judge', 'v1', %s, %s)",
                       (run_id, q, data["rating"], call_id))
        for sentence_no, cited in enumerate(data["citations"], 1):
            rows = [(0, None)] if not cited else list(enumerate(cited, 1))
            for citation_no, supports in rows:
                db.execute("insert into ragsql.citation_verdict (run_id, query_id, model, prompt_version, "
                           "sentence_no, citation_no, sentence, docno, supports, call_id) "
                           "values (%s, %s, 'judge', 'v1', %s, %s, %s, %s, %s, %s)",
                           (run_id, q, sentence_no, citation_no, f"s{sentence_no}",
                            None if citation_no == 0 else f"d{citation_no}", supports, call_id))
        if data["harmful"] is not None:
            db.execute("insert into ragsql.aspect_verdict (run_id, query_id, aspect, model, prompt_version, "
                       "definition_hash, verdict, call_id) select %s, %s, a.name, 'judge', 'v1', "
                       "ragsql.text_hash(a.definition), %s, %s from ragsql.aspect as a where a.name = 'harmfulness'",
                       (run_id, q, data["harmful"], call_id))


def _generation(db, run: str) -> list[tuple]:
    return db.execute("select qid, metric, value, reason from ragsql.evaluate_generation(%s, %s) order by 2, 1",
                      (run, GENERATION)).fetchall()


@PROPERTY
@given(queries=st.lists(query_data, min_size=1, max_size=3), other=st.lists(query_data, min_size=1, max_size=2))
def test_generation_metrics_are_in_0_1_or_null_with_a_reason_and_ignore_unrelated_rows(db, queries, other):
    """Every generation metric of every query is a number in [0, 1], or NULL with a reason (never NaN, never
    negative, whatever the embeddings' cosines); another run's answers and verdicts change none of them."""
    with rolled_back(db):
        _generation_run(db, "g", queries)
        before = _generation(db, "g")
        assert len(before) == len(queries) * len(GENERATION)
        bad = [row for row in before
               if (row[2] is None and not row[3]) or (row[2] is not None and (math.isnan(row[2]) or not
                                                                          0 <= row[2] <= 1 + 1e-9))]
        assert not bad, f"out of [0, 1] or null without a reason: {bad}"
        _generation_run(db, "h", other)
        assert _generation(db, "g") == before


def test_rolled_back_leaves_nothing(db):
    """The savepoint helper the properties rely on undoes every row of an example."""
    with rolled_back(db):
        _trec("ds", "r", {("q1", "d1"): 1}, {("q1", "d1"): 1.0}, db)
    assert db.execute("select count(*) from ragsql.run where name = 'r'").fetchone()[0] == 0


@pytest.mark.parametrize("level", [1, 2])
def test_a_query_with_only_non_relevant_judgments_scores_zero(db, level):
    """The boundary the properties cross often: a judged query with no relevant item scores 0 everywhere."""
    with rolled_back(db):
        _trec("ds", "r", {("q1", "d1"): 0, ("q1", "d2"): -1}, {("q1", "d1"): 1.0}, db)
        assert {v for _, _, v, _, _ in _evaluate(db, "r", level)} == {0.0}
