"""`ragsql aspect add / list / remove`: a user aspect is judged and read as aspect:<name> like a built-in; bad
names, built-ins and unknown aspects are one line and change nothing."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.conftest import run_cli, use_judge


def test_an_added_aspect_is_judged_read_and_removed_with_its_verdicts(example_run, capsys):
    code, out, err = run_cli(
        capsys, "aspect", "add", "cites_sources", "--definition", "Does the answer name a source for its claims?"
    )
    assert code == 0 and out.startswith("added aspect cites_sources"), err
    code, out, _ = run_cli(capsys, "aspect", "list", "--format", "json")
    listed = {r["name"]: r for r in json.loads(out)}
    assert listed["cites_sources"] == {
        "name": "cites_sources",
        "definition": "Does the answer name a source for its claims?",
        "builtin": False,
        "higher_is_better": True,
        "verdicts": 0,
    }
    assert {"harmfulness", "maliciousness", "coherence", "correctness", "conciseness"} <= {
        n for n, r in listed.items() if r["builtin"]
    }
    code, _, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", "aspect_critique")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "scores", "--run", "ex", "--format", "json")
    value = {r["measure"]: r for r in json.loads(out)}["aspect:cites_sources"]
    assert value["covered"] == 12 and value["value"] == 0.0  # the offline judge cannot assess a user aspect: no
    code, out, _ = run_cli(
        capsys, "aspect", "add", "cites_sources", "--definition", "Does it cite?", "--replace", "--lower-is-better"
    )
    assert code == 0 and out.startswith("replaced aspect cites_sources")
    code, out, _ = run_cli(capsys, "aspect", "remove", "cites_sources", "--yes", "--format", "json")
    assert code == 0 and json.loads(out) == {"aspect": "cites_sources", "removed": True, "verdicts": 12, "warnings": []}
    with psycopg.connect(example_run) as conn:
        assert conn.execute("select count(*) from ragsql.aspect_verdict where aspect = 'cites_sources'").fetchone() == (
            0,
        )


@pytest.mark.parametrize(
    "args, status, line",
    [
        (["add", "Cites!", "--definition", "x"], 1, 'ragsql: error: aspect name "Cites!": use lower-case letters'),
        (["add", "polite", "--definition", "  "], 1, 'ragsql: error: aspect "polite": the definition is empty'),
        (["add", "harmfulness", "--definition", "x"], 1, 'ragsql: error: aspect "harmfulness" is built in'),
        (["add", "polite", "--definition", "Is it polite?"], 1, 'ragsql: error: aspect "polite" already exists'),
        (["remove", "polite"], 2, "ragsql: usage: aspect remove polite: add --yes"),
        (["remove", "coherence", "--yes"], 1, 'ragsql: error: aspect "coherence" is built in and stays'),
        (["remove", "nope", "--yes"], 1, 'ragsql: error: unknown aspect "nope" (your aspects: polite)'),
    ],
)
def test_bad_aspect_commands_are_one_line_and_change_nothing(fresh_db, capsys, args, status, line):
    assert run_cli(capsys, "aspect", "add", "polite", "--definition", "Is the answer polite?")[0] == 0
    with psycopg.connect(fresh_db) as conn:
        before = conn.execute("select name, definition, higher_is_better from ragsql.aspect order by 1").fetchall()
    code, out, err = run_cli(capsys, "aspect", *args)
    assert (code, out) == (status, "") and err.startswith(line) and err.count("\n") == 1, err
    with psycopg.connect(fresh_db) as conn:
        assert (
            conn.execute("select name, definition, higher_is_better from ragsql.aspect order by 1").fetchall() == before
        )


def test_an_aspect_or_rubric_added_after_judging_is_judged_without_again(example_run, capsys, monkeypatch):
    """After `aspect add` / `rubric add` on a judged run, `judge` asks only the new (or redefined) aspect and rubric,
    one call per answer each, without --again; judging once more then sends nothing."""
    from tests.fake_openai import FakeOpenAI

    def judge(*args: str) -> dict:
        code, out, err = run_cli(
            capsys, "judge", "--run", "ex", "--metrics", "aspect_critique rubrics_score", "--format", "json", *args
        )
        assert code == 0, err
        return json.loads(out)

    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake)
        judge()
        assert (
            run_cli(
                capsys,
                "aspect",
                "add",
                "cites_sources",
                "--definition",
                "Does the answer name a source for its claims?",
            )[0]
            == 0
        )
        assert run_cli(capsys, "rubric", "add", "plain", *(f"--score{i}=plainness {i}" for i in range(1, 6)))[0] == 0
        fake.reset()
        plan = judge("--dry-run")
        assert (plan["tasks"], plan["calls"], fake.chat_calls) == (24, 24, 0), plan
        judge()
        asked = [e for e in fake.log if e["task"] == "critique"]
        assert fake.chat_calls == 24 and len(asked) == 12, [e["task"] for e in fake.log]
        assert all("cites_sources" in str(e["messages"]) and "coherence" not in str(e["messages"]) for e in asked)
        fake.reset()
        judge()
        assert fake.chat_calls == 0
        assert run_cli(capsys, "aspect", "add", "cites_sources", "--definition", "Does it cite?", "--replace")[0] == 0
        judge()
        assert fake.chat_calls == 12
    code, out, _ = run_cli(capsys, "scores", "--run", "ex", "--format", "json")
    values = {r["measure"]: r for r in json.loads(out)}
    assert values["aspect:cites_sources"]["covered"] == 12 and values["rubrics_score:plain"]["covered"] == 12
    assert values["aspect:coherence"]["covered"] == 12
