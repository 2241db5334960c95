"""The Python API: ragsql.evaluate on dicts and DataFrames, metrics / compare as DataFrames, connect / engine —
values equal to the CLI's for the same run, bad records named by index and qid with nothing stored."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys

import pandas
import psycopg
import pytest

import ragsql
from ragsql.errors import JudgeError
from tests.conftest import EXAMPLE, run_cli, use_judge

RECORDS = [json.loads(line) for line in EXAMPLE.read_text("utf-8").splitlines()]


@pytest.fixture
def offline(fresh_db, monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return fresh_db


def _cli_scores(capsys, run: str) -> dict[str, float | None]:
    code, out, err = run_cli(capsys, "scores", "--run", run, "--format", "json")
    assert code == 0, err
    return {r["measure"]: r["value"] for r in json.loads(out)}


def test_evaluate_dicts_equals_the_cli_and_to_pandas_has_a_row_per_query(offline, capsys):
    result = ragsql.evaluate(
        RECORDS,
        metrics=["faithfulness", "context_recall", "answer_correctness", "nDCG@10", "contradiction_rate"],
        run="api-ex",
        dataset="api",
    )
    assert (result.run, result.dataset, result.judge, result.failed_tasks) == ("api-ex", "api", "offline", 0)
    assert list(result.scores) == [
        "nDCG@10",
        "faithfulness",
        "context_recall",
        "answer_correctness",
        "contradiction_rate",
    ]
    cli = _cli_scores(capsys, "api-ex")
    assert all(result.scores[m] == pytest.approx(cli[m], abs=1e-12) for m in result.scores)
    frame = result.to_pandas()
    assert len(frame) == 12 and list(frame.columns[:3]) == ["qid", "question", "nDCG@10"]
    assert set(frame["qid"]) == {r["qid"] for r in RECORDS}
    assert frame["faithfulness"].mean() == pytest.approx(result.scores["faithfulness"], abs=1e-12)
    assert "faithfulness_reason" in frame.columns
    per_query = {(r["qid"], r["metric"]): r["value"] for r in result.per_query}
    with psycopg.connect(offline) as conn:
        sql = dict(conn.execute("select qid, value from ragsql.generation_measure('api-ex', 'faithfulness')"))
    assert {q: per_query[q, "faithfulness"] for q in sql} == sql


def test_a_dataframe_with_missing_cells_evaluates_as_the_dicts_do(offline):
    records = [dict(r) for r in RECORDS]
    records[0].pop("reference")  # a NaN cell in the frame: no reference for that query
    frame = pandas.DataFrame(records)
    assert math.isnan(frame.loc[0, "reference"])
    result = ragsql.evaluate(frame, metrics=["context_recall", "answer_relevancy"], run="api-df")
    assert result.dataset.startswith("py-") and result.scores["context_recall"] is not None
    out = result.to_pandas().set_index("qid")
    assert math.isnan(out.loc["zh-01", "context_recall"]) and out.loc["zh-01", "context_recall_reason"]
    assert out["answer_relevancy"].notna().all()


def test_default_metrics_are_what_the_data_allows_and_metrics_compare_equal_the_cli(offline, capsys):
    a = ragsql.evaluate(RECORDS, run="api-a", dataset="api2")
    shuffled = [
        {**r, "retrieved_ids": r["retrieved_ids"][::-1], "retrieved_scores": r["retrieved_scores"]} for r in RECORDS
    ]
    ragsql.evaluate(shuffled, run="api-b", dataset="api2")
    assert {"nDCG@10", "faithfulness", "answer_relevancy", "context_precision"} <= set(a.scores)
    values = ragsql.metrics("api-a")
    cli = _cli_scores(capsys, "api-a")
    assert dict(zip(values["measure"], values["value"])) == pytest.approx(cli, abs=1e-12)
    compared = ragsql.compare("api-a", "api-b", ["nDCG@10", "faithfulness"], resamples=500)
    code, out, err = run_cli(
        capsys,
        "compare",
        "api-a",
        "api-b",
        "--measures",
        "nDCG@10 faithfulness",
        "--resamples",
        "500",
        "--format",
        "json",
    )
    assert code == 0, err
    for row, want in zip(compared.to_dict("records"), json.loads(out)):
        assert (row["measure"], row["diff"], row["p_value"]) == (
            want["measure"],
            pytest.approx(want["diff"]),
            pytest.approx(want["p_value"]),
        )


@pytest.mark.parametrize(
    "bad, message",
    [
        # a response alone is kept (qid q3: RAGAS's id-based samples have no question either); nothing at all is not
        ({"language": "en"}, "record 2: record has no query text (user_input, input, question or query), no qid and "),
        ({"qid": "x-1", "query": "q?", "retrieved_contexts": "not a list"}, "record 2 (qid x-1): "),
        ({"qid": "x-2", "query": "q?", "response": ""}, "record 2 (qid x-2): response is empty"),
    ],
)
def test_a_bad_record_is_named_by_index_and_qid_and_nothing_is_stored(offline, bad, message):
    with pytest.raises(ragsql.InputError) as caught:
        ragsql.evaluate([RECORDS[0], RECORDS[1], bad], run="api-bad", dataset="bad")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    with psycopg.connect(offline) as conn:
        assert conn.execute("select count(*) from ragsql.dataset where name = 'bad'").fetchone()[0] == 0


def test_not_records_and_a_judge_without_endpoint_are_clear_errors(offline):
    with pytest.raises(ragsql.InputError, match="records must be a list of dicts"):
        ragsql.evaluate("records.jsonl")
    with pytest.raises(ragsql.InputError, match="record 1: a record must be a dict"):
        ragsql.evaluate([RECORDS[0], 3])
    with pytest.raises(ragsql.InputError, match="no record"):
        ragsql.evaluate([])
    with pytest.raises(Exception, match="judge 'gpt-4o' needs an endpoint"):
        ragsql.evaluate(RECORDS, metrics=["faithfulness"], judge="gpt-4o", run="api-gpt")


def test_connect_and_engine_serve_pandas(offline):
    ragsql.evaluate(RECORDS, metrics=["nDCG@10"], run="api-sql", dataset="api3")
    with ragsql.connect() as conn:
        assert conn.execute("select count(*) from ragsql.run where name = 'api-sql'").fetchone()[0] == 1
    frame = pandas.read_sql("select measure, value from ragsql.run_measure where run = 'api-sql'", ragsql.engine())
    assert "nDCG@10" in set(frame["measure"])


def test_import_ragsql_stays_light():
    code = (
        "import sys, ragsql; print(ragsql.__version__, 'ragsql.api' in sys.modules, 'pandas' in sys.modules); "
        "ragsql.evaluate; print('ragsql.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [ragsql.__version__, "False", "False", "True"]


def test_text_metrics_alone_need_no_judge(offline, capsys):
    """exact_match, token_f1, rouge_l … are computed from the texts: asking only for them judges nothing, and the
    CLI shows the same values right after the import."""
    result = ragsql.evaluate(RECORDS, metrics=["exact_match", "token_f1", "rouge_l"], run="api-text")
    assert result.judge is None and result.failed_tasks == 0
    with psycopg.connect(offline) as conn:
        assert conn.execute("select count(*) from ragsql.judge_task").fetchone()[0] == 0
    assert set(result.scores) == {"exact_match", "token_f1", "rouge_l"}
    assert all(0 <= v <= 1 for v in result.scores.values()) and result.scores["rouge_l"] > 0
    cli = _cli_scores(capsys, "api-text")
    assert all(cli[m] == pytest.approx(v, abs=1e-12) for m, v in result.scores.items())


def test_evaluate_takes_ragas_later_metrics_by_their_names(offline):
    """The Python API judges exactly the tasks RAGAS's later metrics need (by the registry) and returns them under
    RAGAS's names, equal to SQL; the non-LLM context metrics need no judge."""
    records = [{**r, "reference_contexts": r["retrieved_contexts"][:1]} for r in RECORDS]
    names = [
        "factual_correctness(mode=precision)",
        "noise_sensitivity(mode=relevant)",
        "rubrics_score:default",
        "non_llm_context_recall",
    ]
    result = ragsql.evaluate(records, metrics=names, run="api-later", dataset="api-later")
    assert list(result.scores) == names and result.failed_tasks == 0
    with psycopg.connect(offline) as conn:
        for name in names:
            sql = conn.execute("select avg(value) from ragsql.generation_measure('api-later', %s)", (name,))
            assert result.scores[name] == pytest.approx(sql.fetchone()[0], abs=1e-12), name
        kinds = {k for (k,) in conn.execute("select distinct kind from ragsql.judge_task")}
    assert kinds == {"factual_correctness", "noise_sensitivity", "rubrics_score"}
    assert result.scores["non_llm_context_recall"] == 1.0  # each gold text is the first context itself


def _stored(url: str) -> tuple[int, int]:
    """(runs, datasets) in the database."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "select (select count(*) from ragsql.run), (select count(*) from ragsql.dataset)"
        ).fetchone()


@pytest.mark.parametrize(
    "typo, close", [("faithfullness", "faithfulness"), ("nDGC@10", "nDCG@10"), ("aspect:coherance", "aspect:coherence")]
)
def test_a_typo_in_a_metric_stores_nothing_and_names_the_close_match(offline, typo, close):
    """Every metric name is checked before anything is stored, so the corrected call with the same run name works."""
    with pytest.raises(ragsql.UsageError) as caught:
        ragsql.evaluate(RECORDS, metrics=["answer_relevancy", typo], run="api-typo", dataset="typo")
    message = str(caught.value)
    assert repr(typo) in message and f"did you mean {close!r}" in message and "\n" not in message
    assert _stored(offline) == (0, 0)
    result = ragsql.evaluate(RECORDS, metrics=["answer_relevancy", close], run="api-typo", dataset="typo")
    assert list(result.scores) == (
        ["nDCG@10", "answer_relevancy"] if close == "nDCG@10" else ["answer_relevancy", close]
    )


def test_a_single_metric_name_is_one_metric(offline):
    result = ragsql.evaluate(RECORDS, metrics="faithfulness", run="api-one")
    assert list(result.scores) == ["faithfulness"] and result.scores["faithfulness"] is not None
    with psycopg.connect(offline) as conn:
        assert {k for (k,) in conn.execute("select distinct kind from ragsql.judge_task")} == {"faithfulness"}


def _nested(depth: int, leaf: object) -> object:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("user_input", "what is \ud800?", "lone surrogate"),
        ("response", "an answer \udfff", "lone surrogate"),
        ("retrieved_contexts", ["a context", "b \ud83d context"], "lone surrogate"),
        ("response", "an\x00answer", "NUL"),
        ("reference", "a\x00reference", "NUL"),
        ("retrieved_contexts", [_nested(1000, "deep")], "nested more than 64 levels"),
        ("metadata", _nested(1000, 1), "nested more than 64 levels"),
        (
            "metadata",
            {"tags": ("a", ("b",)), "deep": functools.reduce(lambda inner, _: (inner,), range(1000), 0)},
            "nested more than 64 levels",
        ),
        ("retrieved_scores", [float("nan"), 1.0], "nan"),
        ("response", b"bytes", "not a JSON value"),
    ],
)
def test_hostile_values_raise_input_error_naming_the_record_and_store_nothing(offline, field, value, problem):
    bad = {**RECORDS[1], "qid": "h-1", field: value}
    if field == "retrieved_scores":
        bad["retrieved_scores"] = [float("nan")] + [1.0] * (len(bad["retrieved_ids"]) - 1)
    with pytest.raises(ragsql.InputError) as caught:
        ragsql.evaluate([RECORDS[0], bad], metrics=["faithfulness"], run="api-hostile", dataset="hostile")
    message = str(caught.value)
    assert message.startswith("record 1 (qid h-1): ") and problem in message and "\n" not in message
    message.encode("utf-8")  # printable in a notebook: no lone surrogate in the message itself
    assert _stored(offline) == (0, 0)


def test_the_same_call_again_returns_the_stored_values_and_buys_no_call(offline, monkeypatch):
    """Running a notebook cell twice (default names or the same run name) finds the stored run: equal values, no
    new run and no call to the endpoint."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake, model=None)
        metrics = ["faithfulness", "answer_relevancy", "nDCG@10"]
        first = ragsql.evaluate(RECORDS, metrics=metrics)
        named = ragsql.evaluate(RECORDS, metrics=metrics, run="api-again", dataset="again")
        assert fake.chat_calls > 0 and first.failed_tasks == 0
        fake.reset()
        assert ragsql.evaluate(RECORDS, metrics=metrics) == first
        assert (
            ragsql.evaluate(RECORDS, metrics=list(reversed(metrics)), run="api-again", dataset="again").scores
            == named.scores
        )
        assert (fake.chat_calls, fake.embedding_calls) == (0, 0)
    assert first.judge not in (None, "offline") and first.scores["faithfulness"] is not None
    assert _stored(offline) == (2, 2)


def test_a_changed_record_needs_replace_which_gives_the_new_values(offline):
    metrics = ["faithfulness", "context_recall", "nDCG@10"]
    before = ragsql.evaluate(RECORDS, metrics=metrics, run="api-re", dataset="api-re")
    changed = [dict(r) for r in RECORDS]
    for key in ("retrieved_ids", "retrieved_scores", "retrieved_contexts"):
        changed[0][key] = changed[0][key][1:]  # the relevant item moves up to rank 1
    changed[1]["reference"] = "Something the contexts never say about quantum llamas."
    with pytest.raises(ragsql.UsageError) as caught:
        ragsql.evaluate(changed, metrics=metrics, run="api-re", dataset="api-re")
    message = str(caught.value)
    assert "'api-re' already exists with other inputs" in message and "replace=True" in message
    assert "--" not in message and "ragsql " not in message  # no CLI advice in the API
    with pytest.raises(ragsql.UsageError, match="other inputs"):
        ragsql.evaluate(RECORDS, metrics=metrics[:2], run="api-re", dataset="api-re")  # other metrics
    assert ragsql.evaluate(RECORDS, metrics=metrics, run="api-re", dataset="api-re") == before
    after = ragsql.evaluate(changed, metrics=metrics, run="api-re", dataset="api-re", replace=True)
    fresh = ragsql.evaluate(changed, metrics=metrics, run="api-fresh", dataset="api-fresh")
    assert after.scores == fresh.scores and after.per_query == [{**r} for r in fresh.per_query]
    assert after.scores["nDCG@10"] != before.scores["nDCG@10"]
    assert after.scores["context_recall"] != before.scores["context_recall"]
    with psycopg.connect(offline) as conn:
        assert conn.execute("select count(*) from ragsql.run where name = 'api-re'").fetchone()[0] == 1
        assert conn.execute(
            "select r.text from ragsql.reference_answer as r join ragsql.query as q on q.id = r.query_id "
            "join ragsql.dataset as d on d.id = q.dataset_id where d.name = 'api-re' and q.qid = %s",
            (changed[1]["qid"],),
        ).fetchall() == [(changed[1]["reference"],)]


def _hostile_calls() -> list[tuple[object, dict]]:
    """(records, keyword arguments) of calls evaluate must refuse."""
    import decimal

    good = RECORDS[:2]
    loop: list = []
    loop.append(loop)
    one = dict(RECORDS[0])
    return [
        (None, {}),
        (5, {}),
        ({"qid": "a"}, {}),
        ([None], {}),
        ([{}], {}),
        (iter([]), {}),
        ([{"qid": "g", "question": "q?", "gold_doc_ids": ["d1"]}], {}),  # no retrieved item, no answer
        ([{**one, "response": None, "answer": None}], {"metrics": ["faithfulness"]}),  # nothing to judge
        ([{k: v for k, v in one.items() if not k.startswith("retrieved")}], {"metrics": ["nDCG@10"]}),
        ([one, one], {}),
        ([{**one, "qid": "a\nb"}], {}),
        ([{**one, "qid": "x" * 5000}], {}),
        ([{**one, "qid": "\ud800"}], {}),
        ([{**one, "\ud800": 1}], {}),
        ([{**one, 1: "a", "1": "b"}], {}),
        ([{**one, "response": ""}], {}),
        ([{**one, "response": 3}], {}),
        ([{**one, "response": {"a": 1}}], {}),
        ([{**one, "retrieved_contexts": "text"}], {}),
        ([{**one, "retrieved_scores": [1e400, 1, 1, 1]}], {}),
        ([{**one, "retrieved_scores": [decimal.Decimal(1)] * 4}], {}),
        ([{**one, "metadata": {1, 2}}], {}),
        ([{**one, "metadata": {"n": 10**5000}}], {}),
        ([{**one, "metadata": loop}], {}),
        ([{**one, "rel_map": {"d": 10**12}}], {}),
        ([{**one, "rel_map": {"d": True}}], {}),
        ([{**one, "gold_evidence": [{"doc_id": "d", "start": 5, "end": 2}]}], {}),
        (pandas.DataFrame([[1, 2]], columns=["qid", "qid"]), {}),
        (good, {"metrics": [1]}),
        (good, {"metrics": {"faithfulness": 1}}),
        (good, {"metrics": b"faithfulness"}),
        (good, {"metrics": []}),
        (good, {"metrics": [""]}),
        (good, {"metrics": ["\x00"]}),
        (good, {"metrics": ["P@0"]}),
        (good, {"metrics": ["RBP(p=2)"]}),
        (good, {"metrics": ["nDCG(rel=2)@10"]}),
        (good, {"metrics": ["aspect:nope"]}),
        (good, {"metrics": ["faithfulness\ud800"]}),
        (good, {"metrics": 5}),
        (good, {"run": ""}),
        (good, {"run": "a\x00b"}),
        (good, {"run": 5}),
        (good, {"dataset": "\ud800"}),
        (good, {"judge": 3}),
        (good, {"judge": "gpt-4o"}),
        (good, {"workers": 0}),
        (good, {"workers": "8"}),
        (good, {"rel_level": 10**12}),
        (good, {"rel_level": True}),
        (good, {"replace": "yes"}),
    ]


def test_no_hostile_input_raises_anything_but_input_or_usage_error(offline):
    for records, kwargs in _hostile_calls():
        try:
            ragsql.evaluate(records, **{"run": "api-h", "dataset": "api-h", **kwargs})
        except (ragsql.InputError, ragsql.UsageError) as exc:
            message = str(exc)
            assert "\n" not in message and message.encode("utf-8"), (kwargs, exc)
            assert "--" not in message and " line " not in message, message  # the API's words, not the CLI's
        else:
            pytest.fail(f"accepted: {kwargs or records!r:.200}")
    assert _stored(offline) == (0, 0)


def test_a_judge_endpoint_that_refuses_or_a_bad_setting_stores_nothing(offline, monkeypatch):
    """The judge's settings and endpoint are checked before the records are stored: the retry after fixing them
    is a first run, not a clash with a half-made one."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(required_key="right") as fake:
        use_judge(monkeypatch, fake, key="wrong", model=None)
        with pytest.raises(JudgeError, match="rejected the API key"):
            ragsql.evaluate(RECORDS, metrics=["faithfulness"], run="api-key", dataset="key")
        assert _stored(offline) == (0, 0)
        monkeypatch.setenv("RAGSQL_JUDGE_TEMPERATURE", "9")
        with pytest.raises(ragsql.InputError, match="RAGSQL_JUDGE_TEMPERATURE"):
            ragsql.evaluate(RECORDS, metrics=["faithfulness"], run="api-key", dataset="key")
        assert _stored(offline) == (0, 0)
        monkeypatch.delenv("RAGSQL_JUDGE_TEMPERATURE")
        monkeypatch.setenv("RAGSQL_JUDGE_API_KEY", "right")
        assert ragsql.evaluate(RECORDS, metrics=["faithfulness"], run="api-key", dataset="key").failed_tasks == 0
