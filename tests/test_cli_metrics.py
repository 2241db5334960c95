"""`ragsql metrics`: output formats, per-query rows, the answerable-only mean and one-line errors."""

from __future__ import annotations

import csv
import io
import json

import psycopg
import pytest

from tests.conftest import run_cli
from tests.loading import load_trec


@pytest.fixture
def run_db(fresh_db):
    """A committed run 'r': q1 finds its item at rank 2, q2 has no relevant item, q3 is missing from the run."""
    with psycopg.connect(fresh_db) as conn:
        load_trec(conn, qrels="q1 0 a 1\nq2 0 b 0\nq3 0 c 2", run="q1 Q0 x 1 2 r\nq1 Q0 a 2 1 r\nq2 Q0 b 1 1 r")
        conn.commit()
    return fresh_db


def test_json_lists_run_measure_value_queries(run_db, capsys):
    """--format json is a list of {run, measure, value, queries}; means count all 3 judged queries."""
    code, out, _ = run_cli(capsys, "metrics", "--run", "r", "--measures", "RR@10 P@1,Success@5", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [set(r) for r in rows] == [{"run", "measure", "value", "queries"}] * 3
    assert [(r["measure"], r["queries"]) for r in rows] == [("RR@10", 3), ("P@1", 3), ("Success@5", 3)]
    assert rows[0]["value"] == pytest.approx(0.5 / 3)


def test_answerable_only_averages_over_queries_with_a_relevant_item(run_db, capsys):
    """--answerable-only drops q2 (no relevant item) from the mean: RR@10 = (0.5 + 0) / 2."""
    code, out, _ = run_cli(
        capsys, "metrics", "--run", "r", "--measures", "RR@10", "--answerable-only", "--format", "json"
    )
    assert code == 0
    assert json.loads(out) == [{"run": "r", "measure": "RR@10", "value": 0.25, "queries": 2}]


def test_per_query_csv_and_rel_level(run_db, capsys):
    """--per-query --format csv gives one row per judged query; --rel-level 2 makes q1's grade-1 item non-relevant."""
    code, out, _ = run_cli(
        capsys, "metrics", "--run", "r", "--measures", "RR", "--per-query", "--rel-level", "2", "--format", "csv"
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["qid"], float(r["value"])) for r in rows] == [("q1", 0.0), ("q2", 0.0), ("q3", 0.0)]


def test_default_table_names_every_default_measure(run_db, capsys):
    """The default table shows the 14 default measures and the coverage in its title."""
    code, out, _ = run_cli(capsys, "metrics", "--run", "r")
    assert code == 0
    for name in ("Success@1", "R@20", "nDCG@10", "ContextPrecision@10", "Rprec"):
        assert name in out
    assert "3 judged queries" in out and "1 missing from the run" in out


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["--run", "nope"], 1, 'ragsql: error: unknown run "nope" (runs: r)'),
        (["--run", "r", "--measures", "MAP@x"], 2, 'ragsql: usage: --measures: unknown measure "MAP@x"'),
    ],
)
def test_unknown_run_is_an_error_and_unknown_measure_a_usage_error(run_db, capsys, args, code, line):
    """An unknown run is a data error (exit 1), an unknown measure a usage error (exit 2): one line each."""
    got, out, err = run_cli(capsys, "metrics", *args)
    assert got == code and out == ""
    assert err.startswith(line) and err.count("\n") == 1


def test_measures_with_parameters_and_counts_from_the_cli(run_db, capsys):
    """ir_measures' parameters pass through the option (a comma inside parentheses is not a separator); the
    counts' run value is their sum; a measure given a parameter it does not take is a usage error."""
    code, out, _ = run_cli(
        capsys,
        "metrics",
        "--run",
        "r",
        "--measures",
        "P(rel=2)@2, RBP(rel=1,p=0.5) NumRet,NumRel Bpref",
        "--format",
        "json",
    )
    assert code == 0, out
    got = {r["measure"]: r["value"] for r in json.loads(out)}
    # q1: relevant 'a' (grade 1) at rank 2; q3 (grade 2) is missing from the run
    assert got == {
        "P(rel=2)@2": 0.0,
        "RBP(rel=1,p=0.5)": pytest.approx(0.5 * 0.5 / 3),
        "NumRet": 3,
        "NumRel": 2,
        "Bpref": pytest.approx(1 / 3),
    }
    code, out, err = run_cli(capsys, "metrics", "--run", "r", "--measures", "nDCG(rel=2)@10")
    assert code == 2 and err.startswith('ragsql: usage: --measures: measure "nDCG(rel=2)@10": nDCG takes no rel')
