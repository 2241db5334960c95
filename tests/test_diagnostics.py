"""Diagnostics: the seed's correctness x recall x precision table per query, and the threshold report per run,
checked against the rules applied here to the same metric values."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from ragsql.cli import main
from tests.conftest import function_calls

EXAMPLE = Path(__file__).parents[1] / "ragsql" / "data" / "example_evalset.jsonl"


@pytest.fixture
def judged(fresh_db, monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex"]) == 0
    assert main(["judge", "--run", "ex"]) == 0
    return fresh_db


def expected_cause(c, r, p, ct=0.7, rt=0.7, pt=0.7) -> str:
    if c is None:
        return "not diagnosed"
    if c >= ct:
        return "ok"
    if r is None or p is None:
        return "answer wrong"
    return {
        (True, True): "generation",
        (True, False): "noise",
        (False, True): "too little recalled",
        (False, False): "the whole pipeline",
    }[(r >= rt, p >= pt)]


@pytest.mark.parametrize("thresholds", [(0.7, 0.7, 0.7), (0.5, 0.9, 0.3)])
def test_query_causes_follow_the_seed_table(judged, thresholds):
    with psycopg.connect(judged) as conn:
        rows = conn.execute("select * from ragsql.diagnose_queries('ex', %s, %s, %s)", thresholds).fetchall()
        corr = dict(conn.execute("select qid, value from ragsql.generation_measure('ex', 'answer_correctness')"))
    assert len(rows) == 12
    assert {qid: c for qid, c, *_ in rows} == corr
    for qid, c, r, p, cause in rows:
        assert cause.startswith(expected_cause(c, r, p, *thresholds)), (qid, c, r, p, cause)
    assert len({cause for *_, cause in rows}) >= 3  # the example set exercises several rows of the table


def test_zhang_wei_seed_row_is_the_whole_pipeline(judged):
    """The seed's first 张伟 row (recall 0, precision 0, wrong answer) is en-01 of the example set."""
    with psycopg.connect(judged) as conn:
        row = conn.execute(
            "select context_recall, context_precision, cause from ragsql.diagnose_queries('ex') where qid = 'en-01'"
        ).fetchone()
    assert row == (0.0, 0.0, "the whole pipeline: parsing, chunking, embedding and recall all need work")


def test_run_report_checks_thresholds_and_counts_causes(judged):
    with psycopg.connect(judged) as conn:
        report = {r[0]: r[1:] for r in conn.execute("select * from ragsql.diagnose_run('ex')")}
        gen = dict(conn.execute("select metric, value from ragsql.summarize_generation('ex')"))
        ret = dict(conn.execute("select measure, value from ragsql.summarize('ex', array['Success@5', 'RR@5'])"))
        causes = conn.execute(
            "select count(*) from ragsql.diagnose_queries('ex') where cause not like 'not diagnosed%%'"
        ).fetchone()[0]
    for name, threshold in (("faithfulness", 0.8), ("answer_relevancy", 0.8), ("answer_correctness", 0.7)):
        value, limit, passed, advice = report[name]
        assert (value, limit, passed) == (gen[name], threshold, gen[name] >= threshold)
        assert (advice == "ok") == passed
    assert report["Success@5"][:3] == (ret["Success@5"], 0.8, ret["Success@5"] >= 0.8)
    assert sum(v[0] for k, v in report.items() if k.startswith("queries: ")) == causes


def test_run_report_computes_only_the_metrics_it_checks(judged):
    """The report checks three generation metrics: the text metrics (BLEU, chrF, ...) are not computed for it."""
    assert function_calls(judged, "text_metric", "select * from ragsql.summarize_generation('ex')") > 0
    assert function_calls(judged, "text_metric", "select * from ragsql.diagnose_run('ex')") == 0


@pytest.mark.parametrize(
    "sql",
    [
        "select * from ragsql.measure_ci('ex', {}, 200)",
        "select * from ragsql.query_values('ex', {})",
        "select run, measure, value, ci_low, ci_high, queries, best from ragsql.history('ex', {})",
    ],
)
def test_default_measures_evaluate_each_metric_once(judged, sql):
    """Finding which generation metrics a run has takes their values: with no measure named, those values are
    the ones returned, bit for bit and in order as when the same measures are named, not a second evaluation."""
    with psycopg.connect(judged) as conn:
        named = conn.execute(
            "select array_agg(measure order by ord) from ragsql._metric_spec(array['ex'], null, null)"
        ).fetchone()[0]
        assert any(":" in m or "_" in m for m in named) and "nDCG@10" in named  # both kinds, aspects among them
        by_default = conn.execute(sql.format("null")).fetchall()
        assert by_default == conn.execute(sql.format("%s"), (named,)).fetchall()
    assert function_calls(judged, "_evaluate_generation", sql.format("null")) == 1
