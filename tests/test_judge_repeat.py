"""`ragsql judge --repeat N`: the same answers judged N times with seeds s, s+1, …, each repeat a run of its own,
and ragsql.judge_consistency / judge_flips measuring the spread — against values computed here."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import psycopg
import pytest

from tests.conftest import cli_json, run_cli, use_judge
from tests.fake_openai import FakeOpenAI, default_responder

EXAMPLE = Path(__file__).parents[1] / "ragsql" / "data" / "example_evalset.jsonl"


def seed_sensitive(task: str, messages, request_json) -> str:
    """The fake judge, except that with an odd seed it turns the first statement's verdict around."""
    reply = default_responder(task, messages, request_json)
    if task != "verify" or request_json.get("seed", 0) % 2 == 0:
        return reply
    got = json.loads(reply)
    first = got["verdicts"][0]
    first["verdict"] = "unsupported" if first["verdict"] == "supported" else "supported"
    return json.dumps(got)


@pytest.fixture
def example(example_run, monkeypatch):
    with FakeOpenAI(responder=seed_sensitive) as fake:
        use_judge(monkeypatch, fake)
        yield example_run, fake


def _values(url: str, run: str, metric: str) -> dict[str, float | None]:
    with psycopg.connect(url) as conn:
        return dict(
            conn.execute("select qid, value from ragsql.evaluate_generation(%s, array[%s])", (run, metric)).fetchall()
        )


def test_three_repeats_store_three_verdict_sets_and_the_spread_is_what_they_say(example, capsys):
    url, fake = example
    got = cli_json(
        capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--repeat", "3", "--embedder", "offline"
    )
    assert [r["run"] for r in got["repeats"]] == ["ex", "ex#2", "ex#3"] and got["done"] == 12
    calls = fake.stats()["chat_calls"]
    assert all(r["calls"] == calls // 3 for r in got["repeats"]) and calls % 3 == 0  # N× the calls: seed is hashed
    values = [_values(url, run, "faithfulness") for run in ("ex", "ex#2", "ex#3")]
    assert values[0] == values[2] and values[0] != values[1]  # seeds 0 and 2 agree; seed 1 flips a verdict
    run_values = [statistics.mean(v for v in vs.values() if v is not None) for vs in values]
    (row,) = [r for r in got["consistency"] if r["metric"] == "faithfulness"]
    assert row["repeats"] == 3 and row["mean"] == pytest.approx(statistics.mean(run_values), abs=1e-12)
    assert row["sd"] == pytest.approx(statistics.stdev(run_values), abs=1e-12)
    assert (row["min"], row["max"]) == pytest.approx((min(run_values), max(run_values)), abs=1e-12)
    flipping = {q for q in values[0] if len({v[q] for v in values}) > 1}
    assert row["flipping"] == len(flipping) > 0 and row["queries"] == 12 and row["note"] is None
    assert row["flip_share"] == pytest.approx(len(flipping) / 12)
    with psycopg.connect(url) as conn:
        flips = conn.execute("select qid, \"values\", range from ragsql.judge_flips('ex', 'faithfulness')").fetchall()
        repeats = conn.execute("select * from ragsql.judge_repeats('ex')").fetchall()
        configs = conn.execute(
            "select config ->> 'repeat_of', (config ->> 'repeat')::int from ragsql.run "
            "where name like 'ex#%' order by name"
        ).fetchall()
    assert {q for q, _, _ in flips} == flipping
    assert all(vs == [values[k][q] for k in range(3)] and r == max(vs) - min(vs) for q, vs, r in flips)
    assert repeats == [(1, "ex"), (2, "ex#2"), (3, "ex#3")] and configs == [("ex", 2), ("ex", 3)]

    code, out, err = run_cli(
        capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--repeat", "3", "--embedder", "offline"
    )
    assert code == 0 and fake.stats()["chat_calls"] == calls  # judged again: nothing new is sent
    assert "judge consistency over 3 judgings of ex" in out and "RAGSQL_JUDGE_TEMPERATURE" in err

    code, out, err = run_cli(capsys, "delete", "run", "ex", "--yes")  # its repeats go with it
    assert code == 0 and "2 repeats" in out, err
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from ragsql.run where name like 'ex%'").fetchone() == (0,)


def test_the_dry_run_counts_every_repeat_and_calls_nothing(example, capsys):
    _, fake = example
    one = cli_json(capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--dry-run")
    three = cli_json(capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--dry-run", "--repeat", "3")
    assert three["tasks"] == 3 * one["tasks"] and three["calls"] == 3 * one["calls"] > 0 and three["repeats"] == 3
    assert fake.stats()["chat_calls"] == 0


def test_repeat_refuses_the_offline_judge_and_a_name_another_run_holds(example, capsys, tmp_path):
    url, _ = example
    code, _, err = run_cli(capsys, "judge", "--run", "ex", "--offline", "--repeat", "2")
    assert code == 2 and "--repeat needs an LLM judge" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "other", "--run", "ex#2")
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--repeat", "2", "--embedder", "offline"
    )
    assert code == 1 and 'run "ex#2" exists and is not a repeat of "ex"' in err
    assert len(err.strip().splitlines()) == 1


def test_a_repeat_follows_the_answers_of_its_run(example, capsys):
    url, _ = example
    assert (
        run_cli(capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--repeat", "2", "--embedder", "offline")[
            0
        ]
        == 0
    )
    with psycopg.connect(url) as conn:
        conn.execute(
            "update ragsql.answer set text = text || ' Extra.' where run_id = "
            "(select id from ragsql.run where name = 'ex') and query_id = (select min(query_id) "
            "from ragsql.answer where run_id = (select id from ragsql.run where name = 'ex'))"
        )
        conn.commit()
        assert conn.execute("select ragsql.repeat_run('ex', 2)").fetchone()[0] == "ex#2"
        conn.commit()
        same = conn.execute(
            "select ragsql._answers_digest((select id from ragsql.run where name = 'ex')) = "
            "ragsql._answers_digest((select id from ragsql.run where name = 'ex#2'))"
        ).fetchone()[0]
        verdicts = conn.execute(
            "select count(*) from ragsql.statement_verdict where run_id = "
            "(select id from ragsql.run where name = 'ex#2')"
        ).fetchone()[0]
        untouched = conn.execute(
            "select count(*) from ragsql.statement_verdict where run_id = (select id from ragsql.run where name = 'ex')"
        ).fetchone()[0]
    assert same and verdicts == 0 and untouched > 0  # the copy was refreshed; its old verdicts went with it
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select repeats, sd, note from ragsql.judge_consistency('ex', array['faithfulness'])"
        ).fetchone()
    assert row[0] == 1 and row[1] is None and row[2] == "fewer than two repeats have a value"
