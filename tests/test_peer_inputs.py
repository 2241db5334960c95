"""RAGAS and DeepEval data drop in: DeepEval-spelled files, RAGAS samples and datasets, DeepEval test cases, and
both projects' metric names and metric objects give the values ragsql's own spellings give."""

from __future__ import annotations

import dataclasses
import json

import psycopg
import pytest
from pydantic import BaseModel

import ragsql
from tests.conftest import EXAMPLE, run_cli

RECORDS = [json.loads(line) for line in EXAMPLE.read_text("utf-8").splitlines()]


# Stand-ins for the real classes, neither library being installed here: the same class names and public fields as
# ragas src/ragas/dataset_schema.py (SingleTurnSample, a pydantic model; EvaluationDataset, a dataclass with
# `samples` and to_list()) and deepeval deepeval/test_case/llm_test_case.py (LLMTestCase, a pydantic model), as read
# in explodinggradients/ragas@3e28e9d and confident-ai/deepeval@a2e0d4c.
class SingleTurnSample(BaseModel):
    user_input: str | None = None
    retrieved_contexts: list[str] | None = None
    reference_contexts: list[str] | None = None
    retrieved_context_ids: list[str | int] | None = None
    reference_context_ids: list[str | int] | None = None
    response: str | None = None
    multi_responses: list[str] | None = None
    reference: str | None = None
    rubrics: dict[str, str] | None = None
    persona_name: str | None = None
    query_style: str | None = None
    query_length: str | None = None


@dataclasses.dataclass
class EvaluationDataset:
    samples: list[SingleTurnSample]

    def to_list(self) -> list[dict]:
        return [s.model_dump(exclude_none=True) for s in self.samples]


class LLMTestCase(BaseModel):
    input: str
    actual_output: str | None = None
    expected_output: str | None = None
    context: list[str] | None = None
    retrieval_context: list[str] | None = None
    metadata: dict | None = None
    tools_called: list | None = None
    comments: str | None = None
    expected_tools: list | None = None
    token_cost: float | None = None
    completion_time: float | None = None
    flaky: bool = False
    multimodal: bool = False
    name: str | None = None
    tags: list[str] | None = None


class Golden(LLMTestCase):
    source_file: str | None = None


class DeepEvalDataset:
    """DeepEval's EvaluationDataset (deepeval/dataset/dataset.py): goldens, and test cases added to it."""

    def __init__(self, goldens: list[Golden] | None = None) -> None:
        self._goldens = list(goldens or [])
        self._llm_test_cases: list[LLMTestCase] = []

    @property
    def goldens(self) -> list[Golden]:
        return self._goldens

    @property
    def test_cases(self) -> list[LLMTestCase]:
        return self._llm_test_cases

    def add_test_case(self, case: LLMTestCase) -> None:
        self._llm_test_cases.append(case)


# Metric classes by their real names (ragas.metrics, deepeval.metrics); resolution reads only the class name and
# the public `mode` / `name` attributes.
@dataclasses.dataclass
class FactualCorrectness:
    mode: str = "f1"


@dataclasses.dataclass
class AspectCritic:
    name: str
    definition: str = ""


class ContextualRecallMetric:
    threshold = 0.5


def _ragas(r: dict) -> dict:
    """An example record as RAGAS spells it, its first context the gold one."""
    return {
        "user_input": r["query"],
        "response": r["response"],
        "retrieved_contexts": r["retrieved_contexts"],
        "reference": r["reference"],
        "reference_contexts": r["retrieved_contexts"][:1],
    }


# DeepEval's LLMTestCase name of each of RAGAS's fields
DEEPEVAL_OF = {
    "user_input": "input",
    "response": "actual_output",
    "retrieved_contexts": "retrieval_context",
    "reference": "expected_output",
    "reference_contexts": "context",
}


def _deepeval(r: dict) -> dict:
    """The same record as DeepEval's LLMTestCase spells it."""
    return {DEEPEVAL_OF[field]: value for field, value in _ragas(r).items()}


METRICS = "faithfulness,answer_relevancy,context_precision,context_recall,answer_correctness,non_llm_context_recall"


@pytest.fixture
def offline(fresh_db, monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return fresh_db


def test_a_deepeval_jsonl_imports_and_judges_as_its_ragas_twin(fresh_db, endpoint, tmp_path, capsys):
    """`import jsonl` of DeepEval's field names, judged by the fake endpoint, gives every value of the same records
    in RAGAS's names."""
    values = {}
    for spelling, convert in (("ragas", _ragas), ("deepeval", _deepeval)):
        path = tmp_path / f"{spelling}.jsonl"
        path.write_text("".join(json.dumps(convert(r), ensure_ascii=False) + "\n" for r in RECORDS), "utf-8")
        code, _, err = run_cli(capsys, "import", "jsonl", str(path), "--dataset", spelling, "--run", spelling)
        assert code == 0, err
        judged = METRICS.removesuffix(",non_llm_context_recall")  # computed with no judge
        code, _, err = run_cli(capsys, "judge", "--run", spelling, "--metrics", judged)
        assert code == 0, err
        code, out, err = run_cli(capsys, "scores", "--run", spelling, "--format", "json")
        assert code == 0, err
        values[spelling] = {r["measure"]: r["value"] for r in json.loads(out) if r["kind"] == "generation"}
    assert endpoint.chat_calls > 0
    assert set(METRICS.split(",")) <= set(values["ragas"]) and None not in values["ragas"].values()
    assert values["deepeval"] == values["ragas"]


def test_ragas_samples_and_datasets_and_deepeval_test_cases_drop_into_evaluate(offline):
    """A RAGAS EvaluationDataset, a list of SingleTurnSamples or LLMTestCases, a DeepEval EvaluationDataset (its test
    cases, else its goldens) and one sample give the dicts' values."""
    metrics = METRICS.split(",")
    want = ragsql.evaluate([_ragas(r) for r in RECORDS], metrics=metrics, dataset="dicts").scores
    samples = [SingleTurnSample(**_ragas(r), persona_name="newcomer") for r in RECORDS]
    cases = [LLMTestCase(**_deepeval(r), tags=["smoke"]) for r in RECORDS]
    assert None not in want.values()
    assert ragsql.evaluate(EvaluationDataset(samples), metrics=metrics, dataset="ragas-ds").scores == want
    assert ragsql.evaluate(samples, metrics=metrics, dataset="ragas-list").scores == want
    assert ragsql.evaluate(cases, metrics=metrics, dataset="deepeval").scores == want
    with_cases = DeepEvalDataset([Golden(input="not read: the dataset has test cases")])
    for case in cases:
        with_cases.add_test_case(case)
    assert ragsql.evaluate(with_cases, metrics=metrics, dataset="deepeval-ds").scores == want
    goldens = DeepEvalDataset([Golden(**_deepeval(r), source_file="docs/faq.md") for r in RECORDS])
    assert ragsql.evaluate(goldens, metrics=metrics, dataset="deepeval-goldens").scores == want
    with pytest.raises(ragsql.InputError, match="the DeepEval EvaluationDataset has no test cases and no goldens"):
        ragsql.evaluate(DeepEvalDataset(), metrics=metrics, dataset="deepeval-empty")
    one = ragsql.evaluate(samples[0], metrics=metrics, dataset="one")
    assert one.scores == ragsql.evaluate([_ragas(RECORDS[0])], metrics=metrics, dataset="one-dict").scores
    with psycopg.connect(offline) as conn:  # fields no metric reads are kept, not dropped
        kept = conn.execute(
            "select q.metadata from ragsql.query q join ragsql.dataset d on d.id = q.dataset_id "
            "where d.name = 'deepeval' limit 1"
        ).fetchone()[0]
    assert kept == {"tags": ["smoke"], "flaky": False, "multimodal": False}


def test_ragas_id_based_samples_score_by_their_ids(offline):
    """reference_context_ids without reference texts are the gold ids RAGAS's IDBasedContextPrecision / Recall
    read, and the retrieval measures too."""
    samples = [
        SingleTurnSample(
            user_input="q1",
            response="a",
            retrieved_contexts=["one", "two"],
            retrieved_context_ids=["d1", "d2"],
            reference_context_ids=["d2"],
        ),
        SingleTurnSample(
            user_input="q2",
            response="b",
            retrieved_contexts=["seven"],
            retrieved_context_ids=[7],
            reference_context_ids=[7, 8],
        ),
    ]
    result = ragsql.evaluate(samples, metrics=["IDBasedContextPrecision", "IDBasedContextRecall", "P@2"])
    assert result.scores == {
        "P@2": pytest.approx((0.5 + 0.5) / 2),
        "id_based_context_precision": pytest.approx((0.5 + 1) / 2),
        "id_based_context_recall": pytest.approx((1 + 0.5) / 2),
    }


def test_ragas_and_deepeval_metric_names_and_objects_resolve_to_ragsql_metrics(offline, capsys):
    """Class names in any case and metric objects (their mode and name too) ask for ragsql's metrics; `ragsql
    metrics --measures` takes the names; a family named bare and a foreign object are one clear error."""
    ragsql.evaluate(RECORDS, metrics=["aspect:coherence"], run="peer-aspect")  # the aspect exists once judged
    asked = [
        "Faithfulness",
        "contextualrecallmetric",
        "BleuScore",
        FactualCorrectness(mode="precision"),
        ContextualRecallMetric(),
        AspectCritic("coherence"),
    ]
    result = ragsql.evaluate(RECORDS, metrics=asked, run="peer-names")
    assert list(result.scores) == [
        "faithfulness",
        "context_recall",
        "bleu",
        "factual_correctness(mode=precision)",
        "aspect:coherence",
    ]
    plain = ragsql.evaluate(RECORDS, metrics=list(result.scores), run="peer-plain").scores
    assert result.scores == plain and None not in plain.values()
    assert ragsql.evaluate(RECORDS, metrics=FactualCorrectness(), run="peer-f1").scores.keys() == {
        "factual_correctness(mode=f1)"
    }
    code, out, err = run_cli(
        capsys, "metrics", "--run", "peer-names", "--measures", "FAITHFULNESS ContextRecall", "--format", "json"
    )
    assert code == 0, err
    assert {r["measure"]: r["value"] for r in json.loads(out)} == {
        "faithfulness": plain["faithfulness"],
        "context_recall": plain["context_recall"],
    }
    with pytest.raises(ragsql.UsageError, match="^AspectCritic is a family here: name a member, aspect:<name>$"):
        ragsql.evaluate(RECORDS, metrics=["AspectCritic"])
    with pytest.raises(ragsql.UsageError, match="or RAGAS or DeepEval metric objects, found 3"):
        ragsql.evaluate(RECORDS, metrics=["faithfulness", 3])


@pytest.mark.parametrize(
    "record, message",
    [
        ({"user_input": "q", "response": "a", "difficulty": "hard"}, "unknown field 'difficulty' (accepted: qid, "),
        ({"input": "q", "user_input": "q", "response": "a"}, "fields user_input and input are two spellings of one"),
    ],
)
def test_an_unknown_field_or_two_spellings_stop_evaluate_and_import(offline, tmp_path, capsys, record, message):
    """Both are one line naming the record (the API) or the file and line (the CLI), and store nothing."""
    with pytest.raises(ragsql.InputError) as caught:
        ragsql.evaluate([_ragas(RECORDS[0]), {"qid": "x-9", **record}], dataset="peer-bad")
    assert str(caught.value).startswith(f"record 1 (qid x-9): {message}") and "\n" not in str(caught.value)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_ragas(RECORDS[0])) + "\n" + json.dumps(record) + "\n", "utf-8")
    code, _, err = run_cli(capsys, "import", "jsonl", str(path), "--dataset", "peer-bad")
    assert code != 0 and f"bad.jsonl:2: {message}" in err and len(err.strip().splitlines()) == 1
    with psycopg.connect(offline) as conn:
        assert conn.execute("select count(*) from ragsql.dataset").fetchone()[0] == 0


# RAGAS's IDBasedContextPrecision / IDBasedContextRecall (src/ragas/metrics/_context_precision.py and
# _context_recall.py, explodinggradients/ragas@3e28e9d) on ids alone: the ids as strings in sets, precision = |set(R)
# ∩ set(G)| / |set(R)|, recall = |set(R) ∩ set(G)| / |set(G)|. Hand-computed per sample below.
ID_ONLY = [
    SingleTurnSample(
        user_input="q1", response="a", retrieved_context_ids=["d3", "d1", "d2"], reference_context_ids=["d2"]
    ),  # 1/3, 1/1
    SingleTurnSample(
        user_input="q2", response="b", retrieved_context_ids=[7], reference_context_ids=[7, "8"]
    ),  # 1, 1/2
    SingleTurnSample(user_input="q3", response="c", retrieved_context_ids=["x"], reference_context_ids=["y"]),  # 0, 0
]
NO_TEXTS = "no context texts: the record gives only ids"


def _rows(url: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def test_ragas_id_only_samples_store_their_ids_and_score_as_ragas(offline):
    """Samples with retrieved_context_ids and no texts store the ids in order (text null) and give RAGAS's
    IDBasedContextPrecision / Recall; the metrics that read context texts are NULL with the reason, not a crash."""
    asked = ["IDBasedContextPrecision", "IDBasedContextRecall", "P@3", "faithfulness", "non_llm_context_recall"]
    result = ragsql.evaluate(EvaluationDataset(ID_ONLY), metrics=asked, run="ids")
    per_query = {(r["qid"], r["metric"]): (r["value"], r["reason"]) for r in result.per_query}
    assert [per_query[q, "id_based_context_precision"][0] for q in ("q1", "q2", "q3")] == pytest.approx([1 / 3, 1, 0])
    assert [per_query[q, "id_based_context_recall"][0] for q in ("q1", "q2", "q3")] == pytest.approx([1, 1 / 2, 0])
    assert result.scores["P@3"] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)
    for q in ("q1", "q2", "q3"):
        assert per_query[q, "faithfulness"] == (None, NO_TEXTS)
        assert per_query[q, "non_llm_context_recall"] == (None, NO_TEXTS)
    stored = _rows(
        offline,
        "select q.qid, c.position, c.docno, c.text from ragsql.answer_context c "
        "join ragsql.query q on q.id = c.query_id order by q.qid, c.position",
    )
    assert stored == [
        ("q1", 1, "d3", None),
        ("q1", 2, "d1", None),
        ("q1", 3, "d2", None),
        ("q2", 1, "7", None),
        ("q3", 1, "x", None),
    ]


def test_ragas_id_only_repeated_and_empty_lists_score_as_ragas_or_null_with_a_reason(offline):
    """An id repeated in retrieved_context_ids counts once, as in RAGAS's sets (stored at every position, ranked at
    its first); an empty list stores no context: NULL with a reason (RAGAS: precision NaN; its recall 0 cannot be
    told here from a record that gives no contexts at all)."""
    samples = [
        # set(R) = {d1, d2, d3}, G = {d1, d4}: precision 1/3, recall 1/2
        SingleTurnSample(
            user_input="q1",
            response="a",
            retrieved_context_ids=["d1", "d2", "d1", "d3"],
            reference_context_ids=["d1", "d4"],
        ),
        SingleTurnSample(user_input="q2", response="b", retrieved_context_ids=[], reference_context_ids=["d1"]),
    ]
    asked = ["IDBasedContextPrecision", "IDBasedContextRecall", "P@3"]
    result = ragsql.evaluate(samples, metrics=asked, run="ids-edges")
    per_query = {(r["qid"], r["metric"]): (r["value"], r["reason"]) for r in result.per_query}
    assert per_query["q1", "id_based_context_precision"][0] == pytest.approx(1 / 3)
    assert per_query["q1", "id_based_context_recall"][0] == pytest.approx(1 / 2)
    assert per_query["q1", "P@3"][0] == pytest.approx(1 / 3)  # the ranking d1, d2, d3
    assert per_query["q2", "id_based_context_precision"] == (None, "no retrieved contexts")
    assert per_query["q2", "id_based_context_recall"] == (None, "no retrieved contexts")
    assert _rows(offline, "select docno from ragsql.answer_context order by position") == [
        ("d1",),
        ("d2",),
        ("d1",),
        ("d3",),
    ]
    assert _rows(offline, "select docno from ragsql.run_result order by rank") == [("d1",), ("d2",), ("d3",)]
    with_texts = SingleTurnSample(
        user_input="q3", response="c", retrieved_contexts=["one", "two"], retrieved_context_ids=["d1", "d1"]
    )
    with pytest.raises(ragsql.InputError, match=r"retrieved item 'd1' appears twice \(positions 1 and 2\)"):
        ragsql.evaluate([with_texts], metrics=["IDBasedContextPrecision"], run="ids-texts-repeated")


def test_judging_id_only_records_asks_nothing_of_texts_that_do_not_exist(fresh_db, endpoint, tmp_path, capsys):
    """`import jsonl` of id-only RAGAS records then `ragsql judge`: the kinds that read context texts are skipped
    with the reason (no call); in a run mixing them with text records, their tasks end with it, no call either; the
    text records keep their values; an unknown field is still an error naming it."""
    ids_only = [s.model_dump(exclude_none=True) for s in ID_ONLY]
    mixed = [*ids_only, _ragas(RECORDS[0]) | {"user_input": "with texts"}]
    for name, records in (("ids", ids_only), ("mixed", mixed)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
        code, _, err = run_cli(capsys, "import", "jsonl", str(path), "--dataset", name, "--run", name)
        assert code == 0, err
    calls = endpoint.chat_calls
    code, out, err = run_cli(capsys, "judge", "--run", "ids", "--metrics", "faithfulness,context_precision")
    assert "skipped faithfulness: no context texts: the records give only ids" in err
    assert endpoint.chat_calls == calls
    code, out, err = run_cli(capsys, "judge", "--run", "mixed", "--metrics", "faithfulness,context_precision")
    assert code == 0, err  # nothing to judge is not a failure: judging again would not change it
    tasks = _rows(
        fresh_db,
        "select q.qid, t.kind, t.status, t.last_error from ragsql.judge_task t "
        "join ragsql.run r on r.id = t.run_id join ragsql.query q on q.id = t.query_id "
        "where r.name = 'mixed' order by 1, 2",
    )
    values = {
        (run, metric, qid): (value, reason)
        for run in ("ids", "mixed")
        for metric in ("faithfulness", "context_precision", "non_llm_context_recall", "id_based_context_precision")
        for qid, value, reason in _rows(
            fresh_db, "select qid, value, reason from ragsql.generation_measure(%s, %s)", (run, metric)
        )
    }
    assert tasks == [
        (q, kind, "done", None) for q in ("q1", "q2", "q3", "q4") for kind in ("context_precision", "faithfulness")
    ]
    for run in ("ids", "mixed"):
        for q in ("q1", "q2", "q3"):
            for metric in ("faithfulness", "context_precision", "non_llm_context_recall"):
                assert values[run, metric, q] == (None, NO_TEXTS)
        assert values[run, "id_based_context_precision", "q1"][0] == pytest.approx(1 / 3)
    assert None not in [values["mixed", m, "q4"][0] for m in ("faithfulness", "context_precision")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ids_only[0] | {"retrieved_context_idz": ["d1"]}) + "\n", "utf-8")
    code, _, err = run_cli(capsys, "import", "jsonl", str(bad), "--dataset", "bad", "--run", "bad")
    assert code != 0 and "unknown field 'retrieved_context_idz'" in err


# RAGAS's own examples of its id-based metrics (docs/concepts/metrics/available_metrics/context_precision.md,
# "ID Based Context Precision", and context_recall.md, "ID BasedContext Recall", explodinggradients/ragas@3e28e9d):
# samples with the two id lists alone, no user_input and no response; RAGAS prints 0.5 and 0.25.
RAGAS_ID_EXAMPLES = [
    SingleTurnSample(
        retrieved_context_ids=["doc_1", "doc_2", "doc_3", "doc_4"],
        reference_context_ids=["doc_1", "doc_4", "doc_5", "doc_6"],
    ),
    SingleTurnSample(
        retrieved_context_ids=["doc_1", "doc_2", "doc_3"], reference_context_ids=["doc_1", "doc_4", "doc_5", "doc_6"]
    ),
]


def _ragas_id_scores(sample: SingleTurnSample) -> tuple[float, float]:
    """RAGAS's IDBasedContextPrecision and IDBasedContextRecall._single_turn_ascore (src/ragas/metrics/
    _context_precision.py and _context_recall.py at 3e28e9d) by hand: the ids as strings in sets, hits over the
    retrieved set (precision) and over the reference set (recall); NaN for an empty denominator."""
    retrieved = {str(i) for i in sample.retrieved_context_ids or []}
    reference = {str(i) for i in sample.reference_context_ids or []}
    hits = len(retrieved & reference)
    return (hits / len(retrieved) if retrieved else float("nan"), hits / len(reference) if reference else float("nan"))


NO_ANSWER = "no answer in the run"


def test_ragas_own_id_examples_drop_into_evaluate_with_no_question_and_no_response(offline):
    """RAGAS's documented samples (ids alone) give its values, each under the qid q<position>; the metrics that read
    the response or the question are NULL with the reason, and nothing is judged (no task)."""
    assert [_ragas_id_scores(s) for s in RAGAS_ID_EXAMPLES] == [(0.5, 0.5), (1 / 3, 0.25)]  # RAGAS prints 0.5, 0.25
    asked = ["IDBasedContextPrecision", "IDBasedContextRecall", "faithfulness", "answer_relevancy", "bleu", "P@4"]
    result = ragsql.evaluate(RAGAS_ID_EXAMPLES, metrics=asked, run="ragas-docs")
    per_query = {(r["qid"], r["metric"]): (r["value"], r["reason"]) for r in result.per_query}
    for qid, sample in zip(("q1", "q2"), RAGAS_ID_EXAMPLES):
        precision, recall = _ragas_id_scores(sample)
        assert per_query[qid, "id_based_context_precision"] == (pytest.approx(precision), None)
        assert per_query[qid, "id_based_context_recall"] == (pytest.approx(recall), None)
        for metric in ("faithfulness", "answer_relevancy"):
            assert per_query[qid, metric] == (None, NO_ANSWER)
        assert per_query[qid, "bleu"] == (None, "no answer")
    assert result.scores["id_based_context_precision"] == pytest.approx((0.5 + 1 / 3) / 2)
    assert result.scores["id_based_context_recall"] == pytest.approx((0.5 + 0.25) / 2)
    assert result.scores["faithfulness"] is None and result.judge is None
    assert result.scores["P@4"] == pytest.approx((2 / 4 + 1 / 4) / 2)  # the ids are the run's ranking too
    assert _rows(
        offline, "select q.qid, q.text, a.text from ragsql.answer a join ragsql.query q on q.id = a.query_id order by 1"
    ) == [("q1", None, None), ("q2", None, None)]
    assert _rows(offline, "select count(*) from ragsql.judge_task") == [(0,)]


def test_ragas_own_id_examples_import_as_jsonl_and_the_judge_makes_no_call_for_them(
    fresh_db, endpoint, tmp_path, capsys
):
    """`import jsonl` of the same samples beside one with a response: the id records are stored (qid from their
    line), the id metrics equal RAGAS's, and `ragsql judge` makes tasks and calls for the text record alone."""
    lines = [s.model_dump(exclude_none=True) for s in RAGAS_ID_EXAMPLES] + [_ragas(RECORDS[0]) | {"qid": "text"}]
    path = tmp_path / "ragas-ids.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")
    code, _, err = run_cli(capsys, "import", "jsonl", str(path), "--dataset", "ids", "--run", "ids")
    assert code == 0, err
    code, _, err = run_cli(capsys, "judge", "--run", "ids", "--metrics", "faithfulness")
    assert code == 0, err
    assert endpoint.chat_calls > 0
    assert _rows(
        fresh_db, "select q.qid, t.kind from ragsql.judge_task t join ragsql.query q on q.id = t.query_id"
    ) == [("text", "faithfulness")]
    for metric, column in (("id_based_context_precision", 0), ("id_based_context_recall", 1)):
        got = dict(
            (qid, (value, reason))
            for qid, value, reason in _rows(
                fresh_db, "select qid, value, reason from ragsql.generation_measure('ids', %s)", (metric,)
            )
        )
        for qid, sample in zip(("q1", "q2"), RAGAS_ID_EXAMPLES):
            assert got[qid] == (pytest.approx(_ragas_id_scores(sample)[column]), None)
    faithfulness = dict(
        (qid, (value, reason))
        for qid, value, reason in _rows(
            fresh_db, "select qid, value, reason from ragsql.generation_measure('ids', 'faithfulness')"
        )
    )
    assert faithfulness["q1"] == faithfulness["q2"] == (None, NO_ANSWER)
    assert faithfulness["text"][0] is not None
