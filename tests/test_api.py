"""The Python API: ragsql.evaluate on dicts and DataFrames, metrics / compare as DataFrames, connect / engine —
values equal to the CLI's for the same run, bad records named by index and qid with nothing stored."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas
import psycopg
import pytest

import ragsql
from tests.conftest import EXAMPLE, run_cli

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
    result = ragsql.evaluate(RECORDS, metrics=["faithfulness", "context_recall", "answer_correctness", "nDCG@10",
                                               "contradiction_rate"], run="api-ex", dataset="api")
    assert (result.run, result.dataset, result.judge, result.failed_tasks) == ("api-ex", "api", "offline", 0)
    assert list(result.scores) == ["nDCG@10", "faithfulness", "context_recall", "answer_correctness",
                                   "contradiction_rate"]
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
    shuffled = [{**r, "retrieved_ids": r["retrieved_ids"][::-1], "retrieved_scores": r["retrieved_scores"]}
                for r in RECORDS]
    ragsql.evaluate(shuffled, run="api-b", dataset="api2")
    assert {"nDCG@10", "faithfulness", "answer_relevancy", "context_precision"} <= set(a.scores)
    values = ragsql.metrics("api-a")
    cli = _cli_scores(capsys, "api-a")
    assert dict(zip(values["measure"], values["value"])) == pytest.approx(cli, abs=1e-12)
    compared = ragsql.compare("api-a", "api-b", ["nDCG@10", "faithfulness"], resamples=500)
    code, out, err = run_cli(capsys, "compare", "api-a", "api-b", "--measures", "nDCG@10 faithfulness",
                             "--resamples", "500", "--format", "json")
    assert code == 0, err
    for row, want in zip(compared.to_dict("records"), json.loads(out)):
        assert (row["measure"], row["diff"], row["p_value"]) == (want["measure"], pytest.approx(want["diff"]),
                                                                 pytest.approx(want["p_value"]))


@pytest.mark.parametrize("bad, message", [
    ({"response": "an answer"}, "record 2: record has no query text"),
    ({"qid": "x-1", "query": "q?", "retrieved_contexts": "not a list"}, "record 2 (qid x-1): "),
    ({"qid": "x-2", "query": "q?", "response": ""}, "record 2 (qid x-2): response is empty"),
])
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
    code = ("import sys, ragsql; print(ragsql.__version__, 'ragsql.api' in sys.modules, 'pandas' in sys.modules); "
            "ragsql.evaluate; print('ragsql.api' in sys.modules)")
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
    names = ["factual_correctness(mode=precision)", "noise_sensitivity(mode=relevant)", "rubrics_score:default",
             "non_llm_context_recall"]
    result = ragsql.evaluate(records, metrics=names, run="api-later", dataset="api-later")
    assert list(result.scores) == names and result.failed_tasks == 0
    with psycopg.connect(offline) as conn:
        for name in names:
            sql = conn.execute("select avg(value) from ragsql.generation_measure('api-later', %s)", (name,))
            assert result.scores[name] == pytest.approx(sql.fetchone()[0], abs=1e-12), name
        kinds = {k for (k,) in conn.execute("select distinct kind from ragsql.judge_task")}
    assert kinds == {"factual_correctness", "noise_sensitivity", "rubrics_score"}
    assert result.scores["non_llm_context_recall"] == 1.0  # each gold text is the first context itself
