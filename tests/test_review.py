"""Human review: export a sheet, label it, import it; agreement against scikit-learn and scipy; PPI against numpy."""

from __future__ import annotations

import csv
import io
import json
import random

import numpy as np
import psycopg
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from tests.conftest import compare_rows, function_calls, judged_demo, run_cli

LEVELS = ["contradicted", "unsupported", "partial", "supported"]


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    with judged_demo(server_url, 16) as url:
        yield url


def export(capsys, *args: str, run: str = "demo-bm25") -> list[dict]:
    code, out, err = run_cli(capsys, "review", "export", "--run", run, *args)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def fill(sheet: list[dict], seed: int, reviewer: str | None = None) -> list[dict]:
    """A reviewer who mostly agrees with the judge: scores moved a little, a share of verdicts changed."""
    rng = random.Random(seed)
    for record in sheet:
        record["reviewer"] = reviewer
        for value in record["metrics"].values():
            if value["judge"] is not None:
                value["label"] = min(1.0, max(0.0, round(value["judge"] + rng.choice([-0.3, 0, 0, 0.1, 0.2]), 2)))
        for s in record["statements"]:
            s["label"] = s["judge"] if rng.random() < 0.7 else rng.choice(LEVELS)
    return sheet


def write(tmp_path, name: str, sheet: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sheet), encoding="utf-8")
    return path


def labels(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("select count(*) from ragsql.review_label").fetchone()[0]


def _by_two_columns(conn: psycopg.Connection, sql: str) -> dict:
    """The rows of a three-column query as {(first, second): third}."""
    return {(x, y): v for x, y, v in conn.execute(sql).fetchall()}


def test_export_is_a_seeded_sample_with_the_judges_values_and_verdicts(demo, capsys):
    sheet = export(capsys, "--sample", "6", "--seed", "0.3")
    assert len(sheet) == 6 and sheet == export(capsys, "--sample", "6", "--seed", "0.3")
    assert [r["qid"] for r in export(capsys, "--sample", "6", "--seed", "0.9")] != [r["qid"] for r in sheet]
    first = sheet[0]
    assert first["question"] and first["answer"] and first["contexts"] and first["reviewer"] is None
    assert first["metrics"]["faithfulness"]["judge_model"].startswith("offline")
    assert all(v["label"] is None for v in first["metrics"].values())
    statement = next(r for r in sheet if r["statements"])["statements"][0]
    assert statement["judge"] in LEVELS and statement["item"].startswith(
        ("faithfulness:", "context_recall:", "correctness_")
    )
    stratified = export(capsys, "--sample", "10", "--stratify", "faithfulness")
    values = sorted(r["metrics"]["faithfulness"]["judge"] for r in stratified)
    assert values[0] < values[-1]  # taken across the quintiles, not from one end
    code, out, _ = run_cli(capsys, "review", "export", "--run", "demo-bm25", "--sample", "2", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {r["qid"] for r in rows} == {r["qid"] for r in export(capsys, "--sample", "2")}
    assert all(r["label"] == "" for r in rows) and any(r["item"] for r in rows)


def test_export_to_a_file_counts_what_it_wrote(demo, capsys, tmp_path):
    """The line on stderr counts the queries of the sheet, one in the singular."""
    for n, said in ((1, "1 query"), (2, "2 queries")):
        sheet = tmp_path / f"sheet{n}.jsonl"
        code, _, err = run_cli(
            capsys, "review", "export", "--run", "demo-bm25", "--sample", str(n), "--output", str(sheet)
        )
        assert code == 0 and err == f"wrote {said} to review to {sheet}\n"
        assert len(sheet.read_text(encoding="utf-8").splitlines()) == n


def test_import_then_agreement_equals_scikit_learn_and_scipy(demo, capsys, tmp_path):
    path = write(tmp_path, "alice.jsonl", fill(export(capsys, "--sample", "16"), seed=1))
    before = labels(demo)
    code, out, err = run_cli(capsys, "review", "import", str(path), "--reviewer", "alice", "--format", "json")
    assert code == 0, err
    stored = json.loads(out)
    assert stored["reviewers"] == ["alice"] and labels(demo) - before == stored["labels"] > 20
    sheet = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    with psycopg.connect(demo) as conn:
        rows = {(r[1], r[2]): r for r in conn.execute("select * from ragsql.judge_agreement('demo-bm25')").fetchall()}
        confusion = conn.execute(
            "select judge_label, human_label, pairs from ragsql.judge_confusion "
            "where run = 'demo-bm25' and metric = 'faithfulness' and kind = 'verdict'"
        ).fetchall()
    judge = [s["judge"] for r in sheet for s in r["statements"] if s["metric"] == "faithfulness"]
    human = [s["label"] for r in sheet for s in r["statements"] if s["metric"] == "faithfulness"]
    row = rows[("faithfulness", "verdict")]
    assert row[4] == len(judge) >= 10 and row[5] == 1
    assert row[6] == pytest.approx(np.mean([a == b for a, b in zip(judge, human)]))
    assert row[7] == pytest.approx(cohen_kappa_score(judge, human), abs=1e-12)
    assert row[8] == pytest.approx(cohen_kappa_score(judge, human, labels=LEVELS, weights="linear"), abs=1e-12)
    assert sum(n for *_, n in confusion) == len(judge)
    assert dict(((a, b), n) for a, b, n in confusion) == {
        (a, b): sum(1 for x, y in zip(judge, human) if (x, y) == (a, b)) for a, b in set(zip(judge, human))
    }
    scores = [(r["metrics"]["faithfulness"]["judge"], r["metrics"]["faithfulness"]["label"]) for r in sheet]
    score_row = rows[("faithfulness", "score")]
    j, h = np.array([s[0] for s in scores]), np.array([s[1] for s in scores])
    assert score_row[9] == pytest.approx(np.mean(np.abs(j - h)), abs=1e-12)
    assert score_row[10] == pytest.approx(stats.spearmanr(j, h).statistic, abs=1e-12)
    assert score_row[11] == pytest.approx(stats.kendalltau(j, h).statistic, abs=1e-12)


def test_ppi_equals_the_ares_formula_computed_with_numpy(demo):
    """estimate = mean(judge, all) - mean(judge - human, labelled); half-width z * sqrt(var/N + var/n)."""
    with psycopg.connect(demo) as conn:
        judged = dict(
            conn.execute(
                "select qid, value from ragsql.generation_measure('demo-bm25', 'faithfulness') where value is not null"
            ).fetchall()
        )
        human = dict(
            conn.execute(
                "select q.qid, avg(l.score) from ragsql.review_label as l join ragsql.query as q "
                "on q.id = l.query_id join ragsql.run as r on r.id = l.run_id where r.name = "
                "'demo-bm25' and l.metric = 'faithfulness' and l.item = '' group by q.qid"
            ).fetchall()
        )
        got = conn.execute(
            "select estimate, ci_low, ci_high, unlabelled, labelled, note from "
            "ragsql.ppi_mean('demo-bm25', 'faithfulness', 0.1)"
        ).fetchone()
        none = conn.execute("select estimate, note from ragsql.ppi_mean('demo-vector', 'faithfulness')").fetchone()
    assert human, "the previous test stored labels"
    y_hat_all = np.array(list(judged.values()))
    y_hat_lab = np.array([judged[q] for q in human])
    y_lab = np.array([human[q] for q in human])
    estimate = y_hat_all.mean() - (y_hat_lab - y_lab).mean()
    half = stats.norm.ppf(0.95) * np.sqrt(
        y_hat_all.std() ** 2 / len(y_hat_all) + (y_hat_lab - y_lab).std() ** 2 / len(y_lab)
    )
    assert got[:5] == pytest.approx((estimate, estimate - half, estimate + half, len(judged), len(human)), abs=1e-8)
    assert got[5] is None and none[0] is None and "no human label" in none[1]


def test_the_report_asks_for_prediction_powered_estimates_only_of_a_labelled_run(demo):
    """A run nobody labelled has no PPI estimate: its report does not evaluate every metric again to learn so."""
    from ragsql.db.compare import Resampling
    from ragsql.db.report import read_report

    got: dict[str, dict] = {}
    for run in ("demo-bm25", "demo-vector"):
        calls = function_calls(
            demo,
            "_ppi_mean",
            lambda conn, run=run: got.setdefault(run, read_report(conn, run, [], Resampling(200)).ppi),
        )
        assert (calls > 0) == (run == "demo-bm25"), run
    assert got["demo-bm25"]["faithfulness"]["labelled"] > 0, "the tests above stored labels of demo-bm25"
    assert got["demo-vector"] == {}


def test_two_reviewers_agreement_and_too_few_pairs(demo, capsys, tmp_path):
    path = write(tmp_path, "bob.jsonl", fill(export(capsys, "--sample", "16"), seed=2, reviewer="bob"))
    assert run_cli(capsys, "review", "import", str(path))[0] == 0
    few = write(
        tmp_path, "carol.jsonl", fill(export(capsys, "--sample", "2", run="demo-hybrid"), seed=3, reviewer="carol")
    )
    assert run_cli(capsys, "review", "import", str(few))[0] == 0
    with psycopg.connect(demo) as conn:
        pair = conn.execute(
            "select items, agreement, kappa from ragsql.reviewer_agreement where run = 'demo-bm25' "
            "and metric = 'faithfulness' and kind = 'verdict' and reviewer_a = 'alice' "
            "and reviewer_b = 'bob'"
        ).fetchone()
        a = conn.execute(
            "select l.query_id, l.item, l.verdict from ragsql.review_label as l where l.reviewer = "
            "'alice' and l.metric = 'faithfulness' and l.item <> ''"
        ).fetchall()
        b = _by_two_columns(
            conn,
            "select l.query_id, l.item, l.verdict from ragsql.review_label as l where l.reviewer = 'bob' and "
            "l.metric = 'faithfulness' and l.item <> ''",
        )
        thin = conn.execute(
            "select pairs, accuracy, kappa, spearman, note from ragsql.judge_agreement('demo-hybrid') "
            "where metric = 'faithfulness' and kind = 'score'"
        ).fetchall()
    both = [(v, b[(q, i)]) for q, i, v in a if (q, i) in b]
    assert pair[0] == len(both) >= 10
    assert pair[1] == pytest.approx(np.mean([x == y for x, y in both]))
    assert pair[2] == pytest.approx(cohen_kappa_score([x for x, _ in both], [y for _, y in both]), abs=1e-12)
    assert thin and all(
        p < 10 and a is None and k is None and r is None and f"only {p} labelled pairs" in n for p, a, k, r, n in thin
    )


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(qid="no-such-qid"), 'query "no-such-qid" has no answer in run "demo-bm25"'),
        (lambda r: r["metrics"]["faithfulness"].update(label=1.5), "between 0 and 1"),
        (lambda r: r["metrics"]["faithfulness"].update(label="high"), "between 0 and 1"),
        (lambda r: r["statements"][0].update(label="mostly"), "must be one of supported"),
        (lambda r: r["metrics"].update(flatness={"judge": 0.1, "label": 0.5}), 'unknown metric "flatness"'),
        (lambda r: r.update(reviewer=None), "no reviewer"),
        (lambda r: r["metrics"]["faithfulness"].update(label=True), "not the JSON boolean true"),
        (lambda r: r["statements"][0].update(item="faithfulness:999"), "no statement verdict faithfulness:999 by"),
        (lambda r: r["statements"][0].update(judge_model="another-judge"), "by another-judge of query"),
    ],
)
def test_bad_lines_are_named_by_file_and_line_and_nothing_is_stored(demo, capsys, tmp_path, mutate, message):
    sheet = fill([r for r in export(capsys, "--sample", "4") if r["statements"]][:3], seed=4, reviewer="dave")
    mutate(sheet[2])
    path = write(tmp_path, "dave.jsonl", sheet)
    before = labels(demo)
    code, _, err = run_cli(capsys, "review", "import", str(path))
    assert code == 1 and f"{path}:3: " in err and message in err, err
    assert labels(demo) == before


def test_a_reviewer_labelling_an_item_twice_is_refused(demo, capsys, tmp_path):
    record = fill(export(capsys, "--sample", "1"), seed=5, reviewer="erin")[0]
    twice = write(tmp_path, "twice.jsonl", [record, record])
    before = labels(demo)
    code, _, err = run_cli(capsys, "review", "import", str(twice))
    assert code == 1 and f"{twice}:2: " in err and "twice (first at line 1)" in err
    once = write(tmp_path, "once.jsonl", [record])
    assert run_cli(capsys, "review", "import", str(once))[0] == 0
    code, _, err = run_cli(capsys, "review", "import", str(once))
    assert code == 1 and f"{once}:1: " in err and "erin labelled" in err and "already (from once.jsonl:1)" in err
    assert labels(demo) > before
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "review", "import", str(bad), "--reviewer", "x")
    assert code == 1 and f"{bad}:1: not JSON" in err


def test_scores_ci_adds_the_prediction_powered_interval_where_labels_exist(demo, capsys):
    code, out, err = run_cli(capsys, "scores", "--run", "demo-bm25", "--ci", "--resamples", "300", "--format", "json")
    assert code == 0, err
    rows = {r["measure"]: r for r in json.loads(out)}
    with psycopg.connect(demo) as conn:
        want = conn.execute(
            "select estimate, ci_low, ci_high, labelled from ragsql.ppi_mean('demo-bm25', 'faithfulness')"
        ).fetchone()
    faithfulness = rows["faithfulness"]
    assert want[3] > 0 and (
        faithfulness["ppi"],
        faithfulness["ppi_low"],
        faithfulness["ppi_high"],
        faithfulness["labelled"],
    ) == pytest.approx(want)
    assert rows["nDCG@10"]["ppi"] is None and rows["nDCG@10"]["labelled"] is None
    code, out, _ = run_cli(capsys, "scores", "--run", "demo-bm25", "--ci", "--resamples", "300")
    assert code == 0 and "ppi_low" in out


def test_report_shows_the_prediction_powered_mean_where_labels_exist(demo, capsys, tmp_path):
    page = tmp_path / "labelled.html"
    code, out, err = run_cli(capsys, "report", "--run", "demo-bm25", "--html", str(page), "--resamples", "200")
    assert code == 0, err
    with psycopg.connect(demo) as conn:
        estimate, labelled = conn.execute(
            "select estimate, labelled from ragsql.ppi_mean('demo-bm25', 'faithfulness')"
        ).fetchone()
    html = page.read_text(encoding="utf-8")
    assert "prediction-powered" in out and "prediction-powered (human labels)" in html
    assert f"{estimate:.4f}" in html and f"{labelled} labelled" in html


def test_compare_adds_the_prediction_powered_difference_where_both_runs_are_labelled(demo, capsys, tmp_path):
    """Paired PPI of run - baseline: mean judge difference minus mean error difference on the queries labelled in
    both runs; half-width z * sqrt(var(judge diff) / N + var(error diff) / n) — checked with numpy."""
    sheet = fill(export(capsys, "--sample", "16", run="demo-vector"), seed=5)
    code, _, err = run_cli(
        capsys, "review", "import", str(write(tmp_path, "vector.jsonl", sheet)), "--reviewer", "carol"
    )
    assert code == 0, err
    with psycopg.connect(demo) as conn:
        judged = {
            run: dict(
                conn.execute(
                    "select qid, value from ragsql.generation_measure(%s, 'faithfulness') where value is not null",
                    (run,),
                ).fetchall()
            )
            for run in ("demo-bm25", "demo-vector")
        }
        human = {
            run: dict(
                conn.execute(
                    "select q.qid, avg(l.score) "
                    "from ragsql.review_label as l join ragsql.query as q on q.id = l.query_id "
                    "join ragsql.run as r on r.id = l.run_id where r.name = %s and l.metric = 'faithfulness' "
                    "and l.item = '' group by q.qid",
                    (run,),
                ).fetchall()
            )
            for run in ("demo-bm25", "demo-vector")
        }
        got = conn.execute(
            "select diff, ci_low, ci_high, queries, labelled_both, method, note from "
            "ragsql.ppi_compare('demo-bm25', 'demo-vector', 'faithfulness', 0.1)"
        ).fetchone()
        conn.execute(
            "delete from ragsql.review_label where run_id = (select id from ragsql.run where name = 'demo-hybrid')"
        )  # rolled back below: the run as if nobody had labelled it
        unlabelled = conn.execute(
            "select method, note from ragsql.ppi_compare('demo-bm25', 'demo-hybrid', 'faithfulness')"
        ).fetchone()
        conn.rollback()
    a, b = judged["demo-bm25"], judged["demo-vector"]
    both = [q for q in a if q in b]
    judge_diff = np.array([b[q] - a[q] for q in both])
    labelled = [q for q in both if q in human["demo-bm25"] and q in human["demo-vector"]]
    error_diff = np.array([(b[q] - human["demo-vector"][q]) - (a[q] - human["demo-bm25"][q]) for q in labelled])
    diff = judge_diff.mean() - error_diff.mean()
    half = stats.norm.ppf(0.95) * np.sqrt(judge_diff.var() / len(both) + error_diff.var() / len(labelled))
    assert len(labelled) >= 2
    assert got[:5] == pytest.approx((diff, diff - half, diff + half, len(both), len(labelled)), abs=1e-8)
    assert got[5] == "paired" and got[6] is None
    assert unlabelled[0] is None and "no human label" in unlabelled[1]

    rows = compare_rows(capsys, "faithfulness nDCG@10", "--alpha", "0.1")
    assert (
        rows["faithfulness"]["ppi_diff"],
        rows["faithfulness"]["ppi_low"],
        rows["faithfulness"]["ppi_labelled"],
        rows["faithfulness"]["ppi_method"],
    ) == (pytest.approx(diff), pytest.approx(diff - half), len(labelled), "paired")
    assert rows["nDCG@10"]["ppi_diff"] is None
    code, out, err = run_cli(capsys, "compare", "demo-bm25", "demo-vector", "--measures", "faithfulness nDCG@10")
    assert code == 0 and "prediction-powered with human labels" in out and "paired" in out


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"run": "demo-bm25", "qid": "\\ud800", "reviewer": "x", "metrics": {"faithfulness": {"label": 1}}}',
            "qid contains a lone surrogate (\\ud800)",
        ),
        ("[" * 100_000 + "]" * 100_000, "not JSON: nested too deeply"),
    ],
)
def test_surrogates_and_deep_nesting_are_one_line_naming_the_line(demo, capsys, tmp_path, line, message):
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n" + line + "\n", encoding="utf-8")
    before = labels(demo)
    code, out, err = run_cli(capsys, "review", "import", str(path), "--reviewer", "x")
    assert (code, out) == (1, "") and err.startswith(f"ragsql: error: {path}:2: {message}") and err.count("\n") == 1, (
        err
    )
    assert labels(demo) == before


def test_agreement_reads_the_judges_stored_verdicts_not_the_sheets(demo, capsys, tmp_path):
    """A sheet whose judge values were rounded by a spreadsheet and whose judge verdicts were edited gives the
    agreement the untouched sheet gives: the statistics join the stored verdicts by item, never the sheet's."""
    sheet = fill(export(capsys, "--sample", "12", run="demo-hybrid"), seed=7, reviewer="frank")
    edited = json.loads(json.dumps(sheet))
    for record in edited:
        for value in record["metrics"].values():
            value["judge"] = None if value["judge"] is None else round(value["judge"], 2) + 0.001
        for statement in record["statements"]:
            statement["judge"] = "contradicted"
    path = write(tmp_path, "edited.jsonl", edited)
    code, _, err = run_cli(capsys, "review", "import", str(path))
    assert code == 0, err
    with psycopg.connect(demo) as conn:
        conn.execute("delete from ragsql.review_label where reviewer <> 'frank'")  # rolled back
        mine = {(r[1], r[2]): r for r in conn.execute("select * from ragsql.judge_agreement('demo-hybrid')").fetchall()}
        confusion = _by_two_columns(
            conn,
            "select judge_label, human_label, pairs from ragsql.judge_confusion where run = 'demo-hybrid' "
            "and metric = 'faithfulness' and kind = 'verdict'",
        )
        conn.rollback()
    judge = [s["judge"] for r in sheet for s in r["statements"] if s["metric"] == "faithfulness"]
    human = [s["label"] for r in sheet for s in r["statements"] if s["metric"] == "faithfulness"]
    row = mine[("faithfulness", "verdict")]
    assert row[4] == len(judge) >= 10
    assert row[6] == pytest.approx(np.mean([a == b for a, b in zip(judge, human)]))
    assert row[7] == pytest.approx(cohen_kappa_score(judge, human), abs=1e-12)
    scores = [
        (r["metrics"]["faithfulness"]["judge"], r["metrics"]["faithfulness"]["label"])
        for r in sheet
        if r["metrics"]["faithfulness"]["judge"] is not None
    ]
    j, h = np.array([x for x, _ in scores]), np.array([y for _, y in scores])
    assert mine[("faithfulness", "score")][9] == pytest.approx(np.mean(np.abs(j - h)), abs=1e-12)
    assert confusion == {
        (a, b): sum(1 for x, y in zip(judge, human) if (x, y) == (a, b)) for a, b in set(zip(judge, human))
    }
