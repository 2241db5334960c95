"""`ragsql compare`: the comparison of the demo's runs in every format, per query, and one-line errors."""

from __future__ import annotations

import csv
import io
import json

import psycopg
import pytest

from ragsql.cli.compare import COLUMNS, PPI_COLUMNS
from tests.conftest import compare_rows, function_calls, judged_demo, run_cli


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    with judged_demo(server_url, 16) as url:
        yield url


def test_json_rows_equal_sql_and_the_mean_of_per_query_differences(demo, capsys):
    """JSON: one object per measure with every ragsql.compare field plus baseline and run; diff equals the mean
    per-query difference computed here from ragsql.measure / generation_measure of each run."""
    code, out, err = run_cli(
        capsys,
        "compare",
        "demo-bm25",
        "demo-vector",
        "--measures",
        "ndcg_cut_10 MAP faithfulness",
        "--resamples",
        "2000",
        "--format",
        "json",
    )
    assert code == 0, err
    rows = json.loads(out)
    assert [set(r) for r in rows] == [set(COLUMNS + PPI_COLUMNS)] * 3
    assert [(r["baseline"], r["run"], r["measure"]) for r in rows] == [
        ("demo-bm25", "demo-vector", "nDCG@10"),
        ("demo-bm25", "demo-vector", "AP"),
        ("demo-bm25", "demo-vector", "faithfulness"),
    ]
    assert "configuration of demo-vector differs from demo-bm25: mode bm25 → vector" in err
    with psycopg.connect(demo) as conn:
        sql = conn.execute(
            "select * from ragsql.compare('demo-bm25', 'demo-vector', array['nDCG@10', 'AP', 'faithfulness'], 2000)"
        ).fetchall()
        per_query = {}
        for run in ("demo-bm25", "demo-vector"):
            per_query[run] = {
                "nDCG@10": dict(
                    conn.execute("select qid, value from ragsql.measure(%s, 'nDCG@10')", (run,)).fetchall()
                ),
                "faithfulness": dict(
                    conn.execute(
                        "select qid, value from ragsql.generation_measure(%s, 'faithfulness')", (run,)
                    ).fetchall()
                ),
            }
    assert [tuple(r[c] for c in COLUMNS[2:]) for r in rows] == [tuple(s) for s in sql]
    for measure, row in (("nDCG@10", rows[0]), ("faithfulness", rows[2])):
        a, b = per_query["demo-bm25"][measure], per_query["demo-vector"][measure]
        both = [q for q in a if a[q] is not None and b.get(q) is not None]
        assert row["queries"] == len(both) and row["left_out"] == len(a) - len(both)
        assert row["diff"] == pytest.approx(sum(b[q] - a[q] for q in both) / len(both), abs=1e-12)
        assert row["ci_low"] <= row["diff"] <= row["ci_high"]


def test_several_runs_table_marks_significance_and_shows_what_changed(demo, capsys):
    code, out, err = run_cli(
        capsys, "compare", "demo-bm25", "demo-hybrid", "demo-vector", "--measures", "nDCG@10 P@5", "--resamples", "1000"
    )
    assert code == 0, err
    assert "demo-hybrid against demo-bm25" in out and "demo-vector against demo-bm25" in out
    assert "each run against demo-bm25" in out and "▲ / ▼" in out
    assert "what changed from demo-bm25 to demo-hybrid: mode bm25 → hybrid" in out


def test_per_query_lists_the_queries_that_moved_most_by_direction(demo, capsys):
    """--per-query JSON adds top_improved / top_regressed; contradiction_rate improves when it falls."""
    rows = compare_rows(capsys, "nDCG@10 contradiction_rate", "--per-query", "--top", "3", "--resamples", "500")
    ndcg = rows["nDCG@10"]
    assert 0 < len(ndcg["top_regressed"]) <= 3 and all(q["diff"] < 0 for q in ndcg["top_regressed"])
    assert all(q["diff"] > 0 for q in ndcg["top_improved"]) and all(q["question"] for q in ndcg["top_regressed"])
    diffs = [q["diff"] for q in ndcg["top_regressed"]]
    assert diffs == sorted(diffs)  # the worst first
    assert all(q["diff"] < 0 for q in rows["contradiction_rate"]["top_improved"])
    assert all(q["diff"] > 0 for q in rows["contradiction_rate"]["top_regressed"])


def test_csv_has_the_json_columns(demo, capsys):
    code, out, _ = run_cli(
        capsys, "compare", "demo-bm25", "demo-hybrid", "--measures", "RR@10", "--resamples", "200", "--format", "csv"
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == COLUMNS + PPI_COLUMNS and rows[0]["measure"] == "RR@10" and rows[0]["run"] == "demo-hybrid"


@pytest.mark.parametrize(
    "args, code, text",
    [
        (["demo-bm25", "nope"], 1, 'unknown run "nope"'),
        (["demo-bm25"], 2, "at least two runs"),
        (["demo-bm25", "demo-vector", "--resamples", "0"], 2, "--resamples"),
        (["demo-bm25", "demo-vector", "--alpha", "1"], 2, "--alpha"),
        (["demo-bm25", "demo-vector", "--measures", "nDCG@x"], 2, '--measures: unknown measure "nDCG@x"'),
        (["demo-bm25", "demo-vector", "--measures", "flatness"], 2, "generation metrics"),
    ],
)
def test_bad_input_is_one_line_with_the_contract_exit_code(demo, capsys, args, code, text):
    got, out, err = run_cli(capsys, "compare", *args)
    assert got == code and text in err and len(err.strip().splitlines()) == 1 and out == ""


def test_runs_of_two_datasets_or_with_no_query_in_both_are_refused(demo, capsys):
    """Nothing is stored by compare; a run of another dataset and a run with no judged answers are data errors."""
    with psycopg.connect(demo) as conn:
        conn.execute("insert into ragsql.dataset (name) values ('elsewhere')")
        conn.execute(
            "insert into ragsql.run (name, dataset_id) select 'far', id from ragsql.dataset where name = 'elsewhere'"
        )
        conn.execute(
            "insert into ragsql.run (name, dataset_id) select 'unjudged', dataset_id from ragsql.run "
            "where name = 'demo-bm25'"
        )
        before = conn.execute("select count(*) from ragsql.judge_call").fetchone()[0]
    code, _, err = run_cli(capsys, "compare", "demo-bm25", "far")
    assert code == 1 and "different datasets" in err
    code, _, err = run_cli(capsys, "compare", "demo-bm25", "unjudged", "--measures", "faithfulness")
    assert code == 1 and "no query measured in both" in err
    with psycopg.connect(demo) as conn:
        assert conn.execute("select count(*) from ragsql.judge_call").fetchone()[0] == before
        conn.execute("delete from ragsql.run where name in ('far', 'unjudged')")
        conn.execute("delete from ragsql.dataset where name = 'elsewhere'")


def test_ci_adds_bootstrap_intervals_to_metrics_and_scores(demo, capsys):
    """--ci: every run value gets the interval ragsql.measure_ci gives for the same settings, around the value."""
    code, out, err = run_cli(
        capsys, "scores", "--run", "demo-vector", "--ci", "--resamples", "1000", "--format", "json"
    )
    assert code == 0, err
    rows = json.loads(out)
    with psycopg.connect(demo) as conn:
        sql = {
            m: (lo, hi)
            for m, lo, hi in conn.execute(
                "select measure, ci_low, ci_high from ragsql.measure_ci('demo-vector', %s, 1000)",
                ([r["measure"] for r in rows],),
            ).fetchall()
        }
    assert {r["kind"] for r in rows} == {"retrieval", "generation"}
    for r in rows:
        assert (r["ci_low"], r["ci_high"]) == sql[r["measure"]]
        if r["value"] is not None:
            assert r["ci_low"] <= r["value"] <= r["ci_high"], r
        else:
            assert r["ci_low"] is None
    code, out, _ = run_cli(
        capsys,
        "metrics",
        "--run",
        "demo-vector",
        "--ci",
        "--measures",
        "MAP",
        "--resamples",
        "1000",
        "--format",
        "json",
    )
    assert code == 0 and [(r["measure"], r["ci_low"], r["ci_high"]) for r in json.loads(out)] == [("AP", *sql["AP"])]
    code, _, err = run_cli(capsys, "metrics", "--run", "demo-vector", "--ci", "--answerable-only")
    assert code == 2 and "--answerable-only" in err


def test_scores_judge_option_names_the_judge(demo, capsys):
    code, out, _ = run_cli(capsys, "scores", "--run", "demo-bm25", "--judge", "offline", "--format", "json")
    generation = [r for r in json.loads(out) if r["kind"] == "generation" and r["value"] is not None]
    judged = [
        r
        for r in generation  # text and context-id metrics need no judge
        if r["source"] not in ("answer and reference texts", "context ids and gold labels")
    ]
    assert code == 0 and judged and all(r["source"].startswith("OFFLINE") for r in judged)
    code, out, _ = run_cli(capsys, "scores", "--run", "demo-bm25", "--judge", "gpt-none", "--format", "json")
    judged = [r for r in json.loads(out) if "gpt-none" in r["source"]]
    assert code == 0 and judged and all(r["value"] is None for r in judged)


def test_history_marks_the_best_by_direction_and_the_latest_run(demo, capsys):
    code, out, err = run_cli(
        capsys, "history", "--dataset", "demo", "--measures", "nDCG@10 contradiction_rate", "--format", "json"
    )
    assert code == 0, err
    rows = json.loads(out)
    with psycopg.connect(demo) as conn:
        order = [
            r
            for (r,) in conn.execute(
                "select name from ragsql.run where dataset_id = (select id from "
                "ragsql.dataset where name = 'demo') order by created_at, id"
            )
        ]
        ndcg = dict(
            conn.execute(
                "select r.name, s.value from ragsql.run as r, ragsql.summarize(r.name, array['nDCG@10']) as s"
            ).fetchall()
        )
    for measure, pick in (("nDCG@10", max), ("contradiction_rate", min)):
        mine = [r for r in rows if r["measure"] == measure]
        assert [r["run"] for r in mine] == order  # in the order the runs were made
        assert [r["run"] for r in mine if r["best"]] == [pick(mine, key=lambda r: r["value"])["run"]]
        assert [r["run"] for r in mine if r["latest"]] == [order[-1]]
    assert {r["run"]: r["value"] for r in rows if r["measure"] == "nDCG@10"} == pytest.approx(ndcg)
    code, out, _ = run_cli(capsys, "history", "--dataset", "demo", "--measures", "MAP", "--ci", "--resamples", "500")
    assert code == 0 and "★" in out and f"latest run: {order[-1]}" in out and "[" in out
    code, _, err = run_cli(capsys, "history", "--dataset", "nope")
    assert code == 1 and 'unknown dataset "nope"' in err


def test_two_runs_with_the_same_default_measures_are_evaluated_once_each(demo):
    """compare with no measure named: each run's generation metrics are evaluated once (not once more to find
    which the pair has), and the rows are those of the measures named, bit for bit and in order."""
    sql = "select * from ragsql._paired_values('demo-bm25', 'demo-hybrid', {}, 1, null)"
    with psycopg.connect(demo) as conn:
        named = conn.execute(
            "select array_agg(measure order by ord) from ragsql._metric_spec(array['demo-bm25', 'demo-hybrid'], null)"
        ).fetchone()[0]
        assert conn.execute(sql.format("null")).fetchall() == conn.execute(sql.format("%s"), (named,)).fetchall()
    assert function_calls(demo, "_evaluate_generation", sql.format("null")) == 2
