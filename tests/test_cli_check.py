"""`ragsql check` and ragsql.check: quality gates, exit 4, JUnit XML, and gates that do not parse."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import psycopg
import pytest

from tests.conftest import judged_demo, run_cli


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    with judged_demo(server_url, 16) as url:
        yield url


def values(url: str, run: str) -> dict[str, float]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select measure, value from ragsql.summarize(%s, array['nDCG@10']) union all "
            "select metric, value from ragsql.summarize_generation(%s, array['faithfulness', "
            "'contradiction_rate'])",
            (run, run),
        ).fetchall()
    return dict(rows)


def check_vector(capsys, report: Path, *options: str) -> tuple[int, str, str]:
    """`ragsql check --run demo-vector OPTIONS --junit REPORT`: as `run_cli`."""
    return run_cli(capsys, "check", "--run", "demo-vector", *options, "--junit", str(report))


def test_gates_that_hold_exit_0_and_json_reports_each(demo, capsys):
    v = values(demo, "demo-vector")
    code, out, err = run_cli(
        capsys,
        "check",
        "--run",
        "demo-vector",
        "--min",
        f"nDCG@10={v['nDCG@10'] - 0.01:.4f}",
        "--min",
        f"faithfulness={v['faithfulness'] - 0.01:.4f}",
        "--max",
        f"contradiction_rate={v['contradiction_rate'] + 0.01:.4f}",
        "--format",
        "json",
    )
    assert code == 0, err
    got = json.loads(out)
    assert got["passed"] is True and got["warnings"] == []
    assert [(g["gate"], g["measure"], g["passed"]) for g in got["gates"]] == [
        ("min", "faithfulness", True),
        ("min", "nDCG@10", True),
        ("max", "contradiction_rate", True),
    ]
    assert got["gates"][1]["value"] == pytest.approx(v["nDCG@10"], abs=1e-12)


def test_a_failed_gate_exits_4_with_one_line_each_and_a_junit_report(demo, capsys, tmp_path):
    """A min gate just above the value and a max-drop gate below the measured drop fail; the JUnit file has one
    test case per gate and a failure element for each failed one."""
    v = values(demo, "demo-vector")
    report = tmp_path / "gates.xml"
    code, out, err = check_vector(
        capsys,
        report,
        "--baseline",
        "demo-bm25",
        "--min",
        f"nDCG@10={v['nDCG@10'] + 0.001:.4f}, faithfulness=0",
        "--max-drop",
        "MAP=0.0001",
        "--resamples",
        "1000",
    )
    assert code == 4
    failed = [line for line in err.splitlines() if line.startswith("ragsql: gate failed:")]
    assert len(failed) == 2
    assert any(f"nDCG@10 = {v['nDCG@10']:.4f} < min" in line for line in failed)
    assert any("AP dropped" in line and "interval of the change" in line and "p = " in line for line in failed)
    assert err.splitlines()[-1] == "ragsql: error: 2 of 3 gates failed for run demo-vector"
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    cases = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    assert set(cases) == {"min nDCG@10", "min faithfulness", "max_drop AP"}
    assert cases["min faithfulness"] is None and "AP dropped" in cases["max_drop AP"].get("message")


def test_significant_lets_a_drop_within_noise_pass(demo):
    """A drop that fails a plain max-drop gate passes with significant when its adjusted p >= alpha."""
    with psycopg.connect(demo) as conn:
        noisy = conn.execute(
            "select c.baseline, c.run, c.measure "
            "from (values ('demo-bm25', 'demo-hybrid'), ('demo-hybrid', 'demo-bm25'), "
            "('demo-vector', 'demo-hybrid'), ('demo-hybrid', 'demo-vector')) as r(a, b), "
            "lateral (select r.a as baseline, r.b as run, x.* from ragsql.compare(r.a, r.b, array['nDCG@10', 'AP', "
            "'RR@10', 'P@5', 'faithfulness', 'answer_relevancy'], 2000) as x) as c "
            "where c.diff < -0.001 and c.measure <> 'contradiction_rate' and c.p_adjusted >= 0.2 limit 1"
        ).fetchone()
        assert noisy is not None, "the demo's runs have a drop within noise"
        baseline, run, measure = noisy
        gate = json.dumps({measure: 0.0001})
        plain = conn.execute(
            "select passed, reason from ragsql.check(%s, %s, max_drops => %s, resamples => 2000)", (run, baseline, gate)
        ).fetchone()
        lenient = conn.execute(
            "select passed, reason from ragsql.check(%s, %s, max_drops => %s, significant => true, resamples => 2000)",
            (run, baseline, gate),
        ).fetchone()
    assert plain[0] is False and "dropped" in plain[1]
    assert lenient[0] is True and "not significant" in lenient[1]


def test_a_metric_without_values_fails_its_gate_and_is_never_zero(demo):
    with psycopg.connect(demo) as conn:
        rows = conn.execute(
            "select gate, value, passed, reason from ragsql.check('demo-bm25', "
            "min_values => '{\"answer_relevancy_rating\": 0}')"
        ).fetchall()
    assert rows == [
        ("min", None, False, "answer_relevancy_rating has no value in run demo-bm25 (null for every query)")
    ]


@pytest.mark.parametrize(
    "args, text",
    [
        (["--min", "nDCG@10=high"], '--min "nDCG@10=high": expected MEASURE=NUMBER'),
        (["--max-drop", "nDCG@10=0.1"], "--max-drop needs --baseline"),
        ([], "no gate given"),
        (["--min", "nDCG@x=0.3"], 'unknown measure "nDCG@x"'),
        (["--min", "nDCG@10=0.3", "--resamples", "0"], "--resamples"),
        (["--min", "nDCG@10=1e400"], "--min \"nDCG@10=1e400\": '1e400' is not a finite number"),
        (["--min", "AP=0", "--rel-level", "99999999999"], "--rel-level': 99999999999 is beyond PostgreSQL's integer"),
        (["--min", "AP=0", "--seed", "nan"], "--seed': 'nan' is not a finite number"),
        (["--min", "AP=0", "--alpha", "nan"], "--alpha': 'nan' is not a finite number"),
        (
            ["--min", "AP=0", "--junit", "/nonexistent/reports/gates.xml"],
            "folder '/nonexistent/reports' does not exist",
        ),
    ],
)
def test_gates_that_do_not_parse_exit_2(demo, capsys, args, text):
    code, out, err = run_cli(capsys, "check", "--run", "demo-bm25", *args)
    assert code == 2 and text in err and len(err.strip().splitlines()) == 1 and out == ""


def test_unknown_runs_exit_1(demo, capsys):
    code, _, err = run_cli(capsys, "check", "--run", "nope", "--min", "AP=0")
    assert code == 1 and 'unknown run "nope"' in err
    code, _, err = run_cli(capsys, "check", "--run", "demo-bm25", "--baseline", "gone", "--max-drop", "AP=0")
    assert code == 1 and 'unknown run "gone"' in err


@pytest.mark.parametrize(
    "gates, limits",
    [
        (["--min", "nDCG@10=1.1", "--min", "nDCG@10=0.1"], [1.1, 0.1]),
        (["--min", "nDCG@10=0.1", "--min", "nDCG@10=1.1"], [0.1, 1.1]),
        (["--min", "nDCG@10=1.1, nDCG@10=0.1"], [1.1, 0.1]),
        (["--min", "ndcg_cut_10=1.1", "--min", "nDCG@10=0.1"], [0.1, 1.1]),
        (["--min", "nDCG@10=0.1", "--min", "NDCG@10=1.1"], [1.1, 0.1]),
        (["--max", "nDCG@10=-1", "--max", "nDCG@10=1"], [-1, 1]),
        (["--baseline", "demo-bm25", "--max-drop", "AP=-1", "--max-drop", "AP=1"], [-1, 1]),
        (["--baseline", "demo-bm25", "--max-drop", "AP=1", "--max-drop", "MAP=-1"], [1, -1]),
    ],
)
def test_every_gate_given_is_checked_so_combined_gates_are_never_weaker(demo, capsys, tmp_path, gates, limits):
    """A measure gated twice (by one option repeated, one option's list, or two spellings of its name) is checked
    twice: the impossible gate fails whichever comes last, exit 4, both in the JSON and the JUnit report (issue 26:
    only the last gate per measure was kept, and `--min nDCG@10=1.1 --min nDCG@10=0.1` exited 0)."""
    report = tmp_path / "gates.xml"
    code, out, err = check_vector(capsys, report, *gates, "--resamples", "200", "--format", "json")
    assert code == 4, err
    got = json.loads(out)
    assert got["passed"] is False
    assert [g["limit_value"] for g in got["gates"]] == limits and len({g["measure"] for g in got["gates"]}) == 1
    assert sorted(g["passed"] for g in got["gates"]) == [False, True]
    assert len([line for line in err.splitlines() if line.startswith("ragsql: gate failed:")]) == 1
    assert ET.parse(report).getroot().find("testsuite").get("tests") == "2"


def test_sql_check_takes_an_array_of_gates_and_checks_each(demo):
    """ragsql.check's gates may be an array of [measure, limit] pairs, a measure given more than once; a pair
    that is no pair or a limit beyond float8 is invalid_parameter_value."""
    with psycopg.connect(demo) as conn:
        rows = conn.execute(
            "select gate, measure, limit_value, passed from ragsql.check('demo-vector', "
            'min_values => \'[["nDCG@10", 1.1], ["AP", 0], ["nDCG@10", 0]]\')'
        ).fetchall()
        assert rows == [("min", "AP", 0.0, True), ("min", "nDCG@10", 1.1, False), ("min", "nDCG@10", 0.0, True)]
        for gates, message in (
            ('[["AP"]]', r'expected a pair \["measure", number\]'),
            ('[["AP", 1e400]]', "beyond the range of float8"),
            ('"AP"', "must be a JSON object"),
        ):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
                conn.execute("select * from ragsql.check('demo-vector', min_values => %s)", (gates,))
            conn.rollback()
