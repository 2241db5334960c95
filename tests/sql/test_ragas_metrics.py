"""RAGAS's later metrics in SQL against hand-made verdict rows: RAGAS's documented worked examples, and RAGAS's
formulas (restated here with numpy as RAGAS computes them) on random verdicts."""

from __future__ import annotations

import random

import numpy as np
import psycopg
import pytest

from tests.sql.test_generation import call, extract, judge_statements, measure, sample

LIC_Q = "What is the Life Insurance Corporation of India (LIC) known for?"
LIC_ANSWER = ("The Life Insurance Corporation of India (LIC) is the largest insurance company in India, known for its "
              "vast portfolio of investments. LIC contributes to the financial stability of the country.")
LIC_REFERENCE = ("The Life Insurance Corporation of India (LIC) is the largest insurance company in India, "
                 "established in 1956 through the nationalization of the insurance industry. It is known for "
                 "managing a large portfolio of investments.")
LIC_CONTEXTS = (
    "The Life Insurance Corporation of India (LIC) was established in 1956 following the nationalization of the "
    "insurance industry in India.",
    "LIC is the largest insurance company in India, with a vast network of policyholders and huge investments.",
    "As the largest institutional investor in India, LIC manages substantial funds, contributing to the financial "
    "stability of the country.",
    "The Indian economy is one of the fastest-growing major economies in the world, thanks to sectors like finance, "
    "technology, manufacturing etc.")
NOISE = "attribution.v1+verify.v1"


def attribute(db, run_id: int, query_id: int, extraction: int, matrix: list[list[bool]],
              model: str = "judge", version: str = NOISE) -> None:
    """Per-context support rows: matrix[statement][context position - 1]."""
    call_id = call(db, model, "attribution", version)
    for number, row in enumerate(matrix, 1):
        for position, supported in enumerate(row, 1):
            db.execute("insert into ragsql.statement_attribution (run_id, query_id, model, prompt_version, "
                       "extraction_id, statement_no, position, supported, call_id) "
                       "values (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                       (run_id, query_id, model, version, extraction, number, position, supported, call_id))


def noise_sample(db, qid: str, answer_matrix, reference_matrix, incorrect, run: str = "r"):
    """A query whose answer statements have the given per-context support and reference check (True: incorrect,
    i.e. the reference does not support it) and whose reference statements have the given per-context support."""
    n_contexts = len((answer_matrix or reference_matrix)[0]) if (answer_matrix or reference_matrix) else 1
    answer, reference = f"answer of {qid}", f"reference of {qid}"
    run_id, q = sample(db, run=run, qid=qid, question="?", answer=answer,
                       contexts=tuple(f"context {i} of {qid}" for i in range(1, n_contexts + 1)),
                       references=(reference,))
    a = extract(db, answer, [f"a{i} of {qid}" for i in range(1, len(answer_matrix) + 1)])
    r = extract(db, reference, [f"g{i} of {qid}" for i in range(1, len(reference_matrix) + 1)])
    attribute(db, run_id, q, a, answer_matrix)
    if reference_matrix:
        attribute(db, run_id, q, r, reference_matrix)
    judge_statements(db, run_id, q, "noise_sensitivity", a,
                     ["unsupported" if wrong else "supported" for wrong in incorrect], version=NOISE)


def ragas_noise(answer_matrix, reference_matrix, incorrect, mode: str) -> float:
    """RAGAS NoiseSensitivity._compute_score, restated: retrieved2answer is answer statements x contexts,
    retrieved2ground_truth reference statements x contexts, ground_truth2answer the reference check."""
    r2a = np.array(answer_matrix, dtype=bool)
    r2g = np.array(reference_matrix, dtype=bool).reshape(-1, r2a.shape[1])
    wrong = np.array([incorrect], dtype=bool)
    relevant = np.max(r2g, axis=0, keepdims=True) if len(r2g) else np.zeros((1, r2a.shape[1]), dtype=bool)
    relevant_faithful = np.max(relevant & r2a, axis=1)
    if mode == "irrelevant":
        irrelevant_faithful = np.max(~relevant & r2a, axis=1) & ~relevant_faithful
        return float(np.mean(irrelevant_faithful & wrong))
    return float(np.mean(relevant_faithful & wrong))


def test_noise_sensitivity_lic_example_is_one_third(db):
    """RAGAS's documented LIC example: 3 answer statements, the third (financial stability) wrong by the reference
    and supported by context 3, which supports a reference statement: relevant 1/3, irrelevant 0."""
    run_id, q = sample(db, qid="lic", question=LIC_Q, answer=LIC_ANSWER, contexts=LIC_CONTEXTS,
                       references=(LIC_REFERENCE,))
    a = extract(db, LIC_ANSWER, ["LIC is the largest insurance company in India.",
                                 "LIC is known for its vast portfolio of investments.",
                                 "LIC contributes to the financial stability of the country."])
    g = extract(db, LIC_REFERENCE, ["LIC is the largest insurance company in India.",
                                    "LIC was established in 1956 through the nationalization of the insurance industry.",
                                    "LIC is known for managing a large portfolio of investments."])
    attribute(db, run_id, q, a, [[False, True, False, False], [False, True, True, False],
                                 [False, False, True, False]])
    attribute(db, run_id, q, g, [[False, True, False, False], [True, False, False, False],
                                 [False, False, True, False]])
    judge_statements(db, run_id, q, "noise_sensitivity", a, ["supported", "supported", "unsupported"], version=NOISE)
    assert measure(db, "r", "noise_sensitivity(mode=relevant)")["lic"] == (pytest.approx(1 / 3), None)
    assert measure(db, "r", "noise_sensitivity(mode=irrelevant)")["lic"] == (0.0, None)
    detail = db.execute("select detail from ragsql.noise_sensitivity('r')").fetchone()[0]
    assert detail == {"statements": 3, "incorrect": 1, "relevant_wrong": 1, "irrelevant_wrong": 0,
                      "relevant_contexts": 3}


def test_noise_sensitivity_from_an_irrelevant_context_only(db):
    """The wrong statement comes from the economy context (4), which supports no reference statement: irrelevant
    1/3, relevant 0."""
    noise_sample(db, "q1", [[False, True, False, False], [False, True, True, False], [False, False, False, True]],
                 [[False, True, False, False], [True, False, False, False], [False, False, True, False]],
                 [False, False, True])
    assert measure(db, "r", "noise_sensitivity(mode=relevant)")["q1"] == (0.0, None)
    assert measure(db, "r", "noise_sensitivity(mode=irrelevant)")["q1"] == (pytest.approx(1 / 3), None)


def test_noise_sensitivity_equals_ragas_formula_on_random_verdicts(db):
    """60 random verdict sets (1-4 answer statements, 0-4 reference statements, 1-4 contexts): both modes equal
    RAGAS's numpy computation."""
    rng = random.Random(16)
    expected = {}
    for i in range(60):
        n_c, n_a, n_g = rng.randint(1, 4), rng.randint(1, 4), rng.randint(0, 4)
        answer = [[rng.random() < 0.4 for _ in range(n_c)] for _ in range(n_a)]
        reference = [[rng.random() < 0.4 for _ in range(n_c)] for _ in range(n_g)]
        wrong = [rng.random() < 0.5 for _ in range(n_a)]
        qid = f"q{i:02d}"
        noise_sample(db, qid, answer, reference, wrong)
        expected[qid] = {m: ragas_noise(answer, reference, wrong, m) for m in ("relevant", "irrelevant")}
    for mode in ("relevant", "irrelevant"):
        got = measure(db, "r", f"noise_sensitivity(mode={mode})")
        bad = {q: (got[q][0], e[mode]) for q, e in expected.items() if got[q][0] != pytest.approx(e[mode], abs=1e-12)}
        assert not bad, (mode, bad)


def test_noise_sensitivity_nulls_and_bad_mode(db):
    """No reference, no statements, a missing per-context verdict: null with the reason; an unknown mode is
    invalid_parameter_value."""
    sample(db, qid="noref", question="?", answer="x", contexts=("c",))
    run_id, q = sample(db, qid="part", question="?", answer="answer part", contexts=("c1", "c2"), references=("ref",))
    a = extract(db, "answer part", ["s1"])
    attribute(db, run_id, q, a, [[True]])  # context 2 not judged
    judge_statements(db, run_id, q, "noise_sensitivity", a, ["unsupported"], version=NOISE)
    run_id, q = sample(db, qid="empty", question="?", answer="hm", contexts=("c1",), references=("ref",))
    extract(db, "hm", [])
    got = measure(db, "r", "noise_sensitivity(mode=relevant)")
    assert got["noref"] == (None, "no reference answer")
    assert got["part"] == (None, "an answer statement has no verdict for every context")
    assert got["empty"] == (None, "the answer has no statements")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="relevant or irrelevant"):
        db.execute("select * from ragsql.noise_sensitivity('r', 'noisy')")


FC = "verify.v1+claims.v1[atomicity=low,coverage=low]"


def claims(db, run_id: int, q: int, answer: str, answer_verdicts: list[str], references: dict[str, list[str]],
           version: str = FC) -> None:
    """Claims of the answer judged against the references, and of each reference judged against the answer."""
    claims_version = version.split("+", 1)[1]
    a = extract(db, answer, [f"claim {i}" for i in range(1, len(answer_verdicts) + 1)], version=claims_version)
    if answer_verdicts:
        judge_statements(db, run_id, q, "factual_precision", a, answer_verdicts, version=version)
    for text, verdicts in references.items():
        r = extract(db, text, [f"ref claim {i}" for i in range(1, len(verdicts) + 1)], version=claims_version)
        if verdicts:
            judge_statements(db, run_id, q, "factual_recall", r, verdicts, version=version)


def ragas_fbeta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """RAGAS's fbeta_score, restated."""
    precision = tp / (tp + fp) if tp + fp else 0
    recall = tp / (tp + fn) if tp + fn else 0
    if precision == 0 and recall == 0:
        return 0.0
    return (1 + beta ** 2) * precision * recall / (beta ** 2 * precision + recall)


def test_factual_correctness_eiffel_example(db):
    """RAGAS's documented example: 'The Eiffel Tower is located in Paris.' against a reference that adds its height:
    TP 1, FP 0, FN 1 -> f1 0.67 (RAGAS prints it rounded), precision 1, recall 0.5."""
    ref = "The Eiffel Tower is located in Paris. It has a height of 1000ft."
    run_id, q = sample(db, qid="eiffel", question="Where is the Eiffel Tower?",
                       answer="The Eiffel Tower is located in Paris.", references=(ref,))
    claims(db, run_id, q, "The Eiffel Tower is located in Paris.", ["supported"], {ref: ["supported", "unsupported"]})
    assert measure(db, "r", "factual_correctness(mode=f1)")["eiffel"] == (pytest.approx(2 / 3), None)
    assert round(measure(db, "r", "factual_correctness(mode=f1)")["eiffel"][0], 2) == 0.67
    assert measure(db, "r", "factual_correctness(mode=precision)")["eiffel"] == (1.0, None)
    assert measure(db, "r", "factual_correctness(mode=recall)")["eiffel"] == (0.5, None)


def test_factual_correctness_equals_ragas_on_random_verdicts_and_betas(db):
    """40 random claim verdict sets (partial and contradicted count as not supported, as RAGAS's 0/1 NLI): each
    mode, and f-beta with beta 0.5 and 2, equal RAGAS's formulas."""
    rng = random.Random(7)
    expected = {}
    classes = ["supported", "supported", "partial", "unsupported", "contradicted"]
    for i in range(40):
        answer = [rng.choice(classes) for _ in range(rng.randint(1, 5))]
        reference = [rng.choice(classes) for _ in range(rng.randint(1, 5))]
        qid = f"q{i:02d}"
        run_id, q = sample(db, qid=qid, question="?", answer=f"answer {qid}", references=(f"reference {qid}",))
        claims(db, run_id, q, f"answer {qid}", answer, {f"reference {qid}": reference})
        expected[qid] = (answer.count("supported"), len(answer) - answer.count("supported"),
                         len(reference) - reference.count("supported"))
    for beta in (1.0, 0.5, 2.0):
        rows = {r[0]: r[1] for r in db.execute(
            "select qid, value from ragsql.factual_correctness('r', 'f1', %s)", (beta,)).fetchall()}
        for qid, (tp, fp, fn) in expected.items():
            assert rows[qid] == pytest.approx(ragas_fbeta(tp, fp, fn, beta), abs=1e-12), (qid, beta)
    precision = measure(db, "r", "factual_correctness(mode=precision)")
    recall = measure(db, "r", "factual_correctness(mode=recall)")
    for qid, (tp, fp, fn) in expected.items():
        assert precision[qid][0] == pytest.approx(tp / (tp + fp + 1e-8), abs=1e-7)
        assert recall[qid][0] == pytest.approx(tp / (tp + fn + 1e-8), abs=1e-7)


def test_factual_correctness_reads_the_claim_setting_asked_for(db):
    """Claims of two atomicity/coverage settings live side by side; atomicity/coverage pick one, bad ones are
    invalid_parameter_value; no claims in the answer is null with the reason."""
    ref = "ref text"
    run_id, q = sample(db, qid="q1", question="?", answer="answer text", references=(ref,))
    claims(db, run_id, q, "answer text", ["supported"], {ref: ["supported"]})
    claims(db, run_id, q, "answer text", ["supported", "unsupported", "unsupported"], {ref: ["supported"]},
           version="verify.v1+claims.v1[atomicity=high,coverage=high]")
    def value(**kw):
        return db.execute("select value from ragsql.factual_correctness('r', 'precision', 1.0, %(a)s, %(c)s)",
                          {"a": kw.get("a"), "c": kw.get("c")}).fetchone()[0]
    assert value(a="low", c="low") == 1.0
    assert value(a="high", c="high") == pytest.approx(1 / 3)
    assert value(a="high", c="low") is None
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="low or high"), db.transaction():
        value(a="medium")
    run_id, q = sample(db, qid="q2", question="?", answer="no claims here", references=("another ref",))
    claims(db, run_id, q, "no claims here", [], {"another ref": ["unsupported"]})
    def q2(mode):  # the newest setting judged is high/high, which never judged q2: its reason says so
        return db.execute("select value, reason from ragsql.factual_correctness('r', %s, 1.0, %s, 'low') "
                          "where qid = 'q2'", (mode, "low")).fetchone()
    assert q2("precision") == (None, "the answer has no claims")
    assert q2("recall") == (0.0, None)  # TP 0: recall 0, as RAGAS
    assert measure(db, "r", "factual_correctness(mode=precision)")["q2"] == (
        None, "no verdicts of model judge, prompt verify.v1+claims.v1[atomicity=high,coverage=high]")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="precision, recall or f1"):
        db.execute("select * from ragsql.factual_correctness('r', 'accuracy')")


def entities(db, text: str, found: list[str], model: str = "judge", version: str = "entities.v1") -> None:
    db.execute("insert into ragsql.entity_extraction (text_hash, model, prompt_version, entities, call_id) "
               "values (ragsql.text_hash(%s), %s, %s, %s, %s)", (text, model, version, found,
                                                                 call(db, model, "entities", version)))


TAJ = ("The Taj Mahal is an ivory-white marble mausoleum on the right bank of the river Yamuna in the Indian city of "
       "Agra. It was commissioned in 1631 by the Mughal emperor Shah Jahan to house the tomb of his favorite wife, "
       "Mumtaz Mahal.")
TAJ_HIGH = ("The Taj Mahal is a symbol of love and architectural marvel located in Agra, India. It was built by the "
            "Mughal emperor Shah Jahan in memory of his beloved wife, Mumtaz Mahal.")
TAJ_LOW = "The Taj Mahal is an iconic monument in India. It is a UNESCO World Heritage Site."


def test_context_entity_recall_taj_mahal_example(db):
    """RAGAS's documented example: 4/6 for the high-recall context, 1/6 for the low one; the contexts are read
    joined by newlines, as RAGAS extracts them."""
    sample(db, qid="high", question="?", answer="a", contexts=(TAJ_HIGH,), references=(TAJ,))
    sample(db, qid="low", question="?", answer="a", contexts=TAJ_LOW.split(" It "), references=(TAJ,))
    entities(db, TAJ, ["Taj Mahal", "Yamuna", "Agra", "1631", "Shah Jahan", "Mumtaz Mahal"])
    entities(db, TAJ_HIGH, ["Taj Mahal", "Agra", "Shah Jahan", "Mumtaz Mahal", "India"])
    entities(db, "\n".join(TAJ_LOW.split(" It ")), ["Taj Mahal", "UNESCO", "India"])
    got = measure(db, "r", "context_entity_recall")
    assert got["high"] == (pytest.approx(4 / 6), None)
    assert got["low"] == (pytest.approx(1 / 6), None)


def test_context_entity_recall_nulls(db):
    """Reference entities pooled over references; no entity, no extraction, no reference: null with the reason."""
    sample(db, qid="two", question="?", answer="a", contexts=("ctx two",), references=("r1", "r2"))
    entities(db, "r1", ["A", "B"])
    entities(db, "r2", ["B", "C"])
    entities(db, "ctx two", ["C", "D"])
    sample(db, qid="none", question="?", answer="a", contexts=("ctx none",), references=("r none",))
    entities(db, "r none", [])
    entities(db, "ctx none", ["X"])
    sample(db, qid="half", question="?", answer="a", contexts=("ctx half",), references=("r1", "r unseen"))
    entities(db, "ctx half", ["A"])
    sample(db, qid="noref", question="?", answer="a", contexts=("c",))
    got = measure(db, "r", "context_entity_recall")
    assert got["two"] == (pytest.approx(1 / 3), None)
    assert got["none"] == (None, "the reference answers name no entity")
    assert got["half"] == (None, "1 of 2 reference answers have no entity extraction")
    assert got["noref"] == (None, "no reference answer")


def graded(db, run_id: int, q: int, metric: str, scores: list[int | None], model: str = "judge",
           version: str = "groundedness.v1") -> None:
    for n, score in enumerate(scores, 1):
        db.execute("insert into ragsql.graded_verdict (run_id, query_id, metric, judge_pass, model, prompt_version, "
                   "score, reason, call_id) values (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                   (run_id, q, metric, n, model, version, score,
                    None if score is not None else f"judge pass {n} failed: invalid reply",
                    call(db, model, "groundedness", version) if score is not None else None))


@pytest.mark.parametrize("metric", ["response_groundedness", "nv_context_relevance"])
def test_two_pass_ratings_average_or_fall_back_to_one(db, metric):
    """(2, 1) -> 0.75; (2, 2) -> 1 (RAGAS's Einstein example); one pass failed -> the other / 2; both failed ->
    null with both errors; no contexts -> null."""
    for qid, scores in (("both", [2, 1]), ("full", [2, 2]), ("one", [None, 1]), ("none", [None, None])):
        run_id, q = sample(db, qid=qid, question="When was Einstein born?", answer="1879", contexts=("ctx",))
        graded(db, run_id, q, metric, scores)
    sample(db, qid="noctx", question="?", answer="x")
    got = measure(db, "r", metric)
    assert got["both"] == (0.75, None) and got["full"] == (1.0, None) and got["one"] == (0.5, None)
    assert got["none"] == (None, "no judge pass gave a rating: judge pass 1 failed: invalid reply; "
                                  "judge pass 2 failed: invalid reply")
    assert got["noctx"] == (None, "no contexts")
    assert db.execute(f"select detail from ragsql.{metric}('r') where qid = 'both'").fetchone()[0] == {
        "pass1": 2, "pass2": 1}


def test_new_metrics_are_registered_with_direction_and_comments(db):
    """Each new metric is a row of the registry (noise sensitivity lower is better) and each public function has
    a comment stating its formula."""
    rows = dict(db.execute("select metric, higher_is_better from ragsql.generation_metric "
                           "where position > 22 and task_kind is not null"))
    assert rows == {"response_groundedness": True, "nv_context_relevance": True, "context_entity_recall": True,
                    "factual_correctness(mode=f1)": True, "factual_correctness(mode=precision)": True,
                    "factual_correctness(mode=recall)": True, "noise_sensitivity(mode=relevant)": False,
                    "noise_sensitivity(mode=irrelevant)": False, "rubrics_score:default": True,
                    "rubrics_score:reference": True}
    for fn in ("response_groundedness", "nv_context_relevance", "context_entity_recall", "factual_correctness",
               "noise_sensitivity", "rubrics_score"):
        comment = db.execute("select obj_description(p.oid, 'pg_proc') from pg_proc p "
                             "where p.proname = %s and p.pronamespace = 'ragsql'::regnamespace", (fn,)).fetchone()[0]
        assert comment and "RAGAS" in comment, fn


def test_rubrics_score_reads_scores_by_the_current_descriptions(db):
    """The judge's 1-5 score, not scaled (as RAGAS returns it); scores by earlier descriptions do not count; a
    rubric with reference is null for a query without one; an unknown rubric is invalid_parameter_value."""
    run_id, q = sample(db, qid="q1", question="?", answer="a", references=("ref",))
    sample(db, qid="q2", question="?", answer="b")
    digest = db.execute("select ragsql._rubric_hash('default')").fetchone()[0]
    assert digest == db.execute("select ragsql.text_hash(array_to_string(descriptions, E'\\n')) from ragsql.rubric "
                                "where name = 'default'").fetchone()[0]
    for rubric, score, h in (("default", 4, digest), ("reference", 2, "0" * 64)):
        db.execute("insert into ragsql.rubric_verdict (run_id, query_id, rubric, model, prompt_version, "
                   "definition_hash, score, reason, call_id) values (%s, %s, %s, 'judge', 'rubric.v1', %s, %s, 'r', "
                   "%s)", (run_id, q, rubric, h, score, call(db, "judge", "rubric", "rubric.v1")))
    assert measure(db, "r", "rubrics_score:default") == {
        "q1": (4.0, None), "q2": (None, "no verdicts of model judge, prompt rubric.v1")}
    got = measure(db, "r", "rubrics_score:reference")
    assert got == {"q1": (None, "only scores by an earlier version of rubric reference"),
                   "q2": (None, "no reference answer")}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown generation metric'):
        measure(db, "r", "rubrics_score:nope")


@pytest.mark.parametrize(("statement", "error", "message", "hint"), [
    ("select ragsql._factual_mode('accuracy', 1)", psycopg.errors.InvalidParameterValue,
     "factual_correctness mode must be precision, recall or f1, got accuracy", "RAGAS's default: mode => 'f1'"),
    ("select ragsql._noise_mode(null)", psycopg.errors.InvalidParameterValue,
     "noise_sensitivity mode must be relevant or irrelevant, got null", "RAGAS's default: mode => 'relevant'"),
    ("select * from ragsql.context_id_metric('r', 'bleu')", psycopg.errors.InvalidParameterValue,
     'no context id metric "bleu"',
     "see: select metric from ragsql.generation_metric where computed_by = 'context_id_metric'"),
    ("select * from ragsql.string_context_metric('r', 'id_based_context_recall')", psycopg.errors.InvalidParameterValue,
     'no string context metric "id_based_context_recall"',
     "see: select metric from ragsql.generation_metric where computed_by = 'string_context_metric'"),
    ("select ragsql._rubric_hash('nope')", psycopg.errors.InvalidParameterValue,
     'unknown rubric "nope"', "see: select name, descriptions from ragsql.rubric"),
    ("select ragsql._aspect_definition_hash('nope')", psycopg.errors.NoDataFound,
     'unknown aspect "nope"', "see: select name, definition from ragsql.aspect"),
    *((f"select ragsql._{kind}_id('nope')", psycopg.errors.NoDataFound, f'unknown {kind} "nope"',
       f"see: select name from ragsql.{kind}") for kind in ("run", "dataset", "corpus")),
    ("select * from ragsql._measure_spec('{}')", psycopg.errors.InvalidParameterValue,
     "no measure named", "e.g. array['P@5', 'nDCG@10']"),
    ("select * from ragsql._generation_metric_spec(null)", psycopg.errors.InvalidParameterValue,
     "no generation metric named", "e.g. array['faithfulness', 'answer_relevancy']"),
])  # fmt: skip
def test_a_bad_argument_raises_its_one_message_and_hint(db, statement, error, message, hint):
    """The checks shared by several functions (a name looked up, a mode, a metric of a function) keep each one's
    message, hint and error code."""
    sample(db, qid="q1", question="?", answer="a")
    with pytest.raises(error) as raised:
        db.execute(statement)
    assert (raised.value.diag.message_primary, raised.value.diag.message_hint) == (message, hint)
