"""RAGAS's later metrics judged end to end: the fake OpenAI endpoint through the real openai client and the
offline judge, on the bundled bilingual example run; every verdict stored, calls counted, shared extractions
reused, and a prose reply giving NULL with a reason for each task kind."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.conftest import RAGAS_LATER, cli_json, judge_cli, run_cli, use_judge
from tests.fake_openai import FakeOpenAI, default_responder

METRICS = [
    "response_groundedness",
    "nv_context_relevance",
    "context_entity_recall",
    "factual_correctness(mode=f1)",
    "factual_correctness(mode=precision)",
    "factual_correctness(mode=recall)",
    "noise_sensitivity(mode=relevant)",
    "noise_sensitivity(mode=irrelevant)",
    "rubrics_score:default",
    "rubrics_score:reference",
]
TASK_OF = {
    "response_groundedness": "groundedness",
    "nv_context_relevance": "context_rating",
    "context_entity_recall": "entities",
    "factual_correctness": "claims",
    "noise_sensitivity": "attribution",
    "rubrics_score": "rubric",
}


def _rows(url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def _values(url: str, metric: str, run: str = "ex") -> dict[str, tuple]:
    return {
        q: (v, r)
        for q, v, r in _rows(url, "select qid, value, reason from ragsql.generation_measure(%s, %s)", run, metric)
    }


def test_endpoint_judges_every_ragas_metric_and_stores_every_verdict(example_run, endpoint, capsys):
    """Through the real openai client: every new metric has a value for each of the 12 queries, in [0, 1], and
    equals the formula recomputed here from the stored verdicts."""
    code, out, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", " ".join(RAGAS_LATER), "--format", "json")
    assert code == 0, err
    for metric in METRICS:
        values = _values(example_run, metric)
        assert len(values) == 12
        top = 5 if metric.startswith("rubrics_score") else 1  # RAGAS's rubric score is 1..5, not scaled
        assert all(
            0 <= v <= top if v is not None else r == "the reference answers name no entity" for v, r in values.values()
        ), (metric, values)
        assert sum(v is not None for v, _ in values.values()) >= 6, (metric, values)
    # response_groundedness = mean of the two passes / 2, from the stored rows
    for qid, mean in _rows(
        example_run,
        "select q.qid, avg(g.score / 2.0)::float8 from ragsql.graded_verdict g "
        "join ragsql.query q on q.id = g.query_id "
        "where g.metric = 'response_groundedness' group by q.qid",
    ):
        assert _values(example_run, "response_groundedness")[qid][0] == pytest.approx(mean, abs=1e-12)
    # context_entity_recall from the stored entity sets
    url = example_run
    for qid, ref, ctx in _rows(
        url,
        """
            with contexts as (  -- joins, no correlated subquery: Citus mode plans none beside reference tables
                select c.query_id, string_agg(c.text, E'\\n' order by c.position) as text
                from ragsql.answer_context c group by c.query_id)
            select q.qid, er.entities, ec.entities
            from ragsql.query q join ragsql.reference_answer r on r.query_id = q.id
            left join contexts on contexts.query_id = q.id
            left join ragsql.entity_extraction er on er.text_hash = ragsql.text_hash(r.text)
            left join ragsql.entity_extraction ec on ec.text_hash = ragsql.text_hash(contexts.text)""",
    ):
        want = len(set(ref) & set(ctx)) / len(set(ref)) if ref else None
        assert _values(url, "context_entity_recall")[qid][0] == pytest.approx(want), qid


def test_shared_extractions_are_reused_and_calls_counted(example_run, endpoint, capsys):
    """faithfulness then noise_sensitivity: the answer's statements are not asked for again; each metric costs
    the calls the README counts (12 answers, one reference each)."""
    assert run_cli(capsys, "judge", "--run", "ex", "--metrics", "faithfulness context_recall")[0] == 0
    before = endpoint.chat_calls
    assert run_cli(capsys, "judge", "--run", "ex", "--metrics", "noise_sensitivity")[0] == 0
    assert endpoint.chat_calls - before == 12 * 3  # attribution of answer and reference, answer vs reference
    counts = {}
    for metric, calls in (
        ("response_groundedness", 2),
        ("nv_context_relevance", 2),
        ("context_entity_recall", 2),
        ("factual_correctness", 4),
    ):
        before = endpoint.chat_calls
        assert run_cli(capsys, "judge", "--run", "ex", "--metrics", metric)[0] == 0
        counts[metric] = endpoint.chat_calls - before
        assert counts[metric] <= 12 * calls, (metric, counts[metric])
    assert counts["response_groundedness"] == 24 and counts["context_entity_recall"] == 24
    # 4 requests each, but the fake's claims are its statements (its sentences): the check of the answer's
    # claims against the reference is then noise_sensitivity's request, answered from the cache
    assert counts["factual_correctness"] == 12 * 3
    assert _rows(example_run, "select count(*) from ragsql.statement_verdict where purpose = 'factual_precision'")


def _prose_for(task: str):
    """A responder that answers `task` with prose (twice: the repair gets prose too), all else as usual."""

    def respond(name, messages, request):
        if name == task:
            return "Sure! I read everything carefully and I think it is mostly fine."
        return default_responder(name, messages, request)

    return respond


@pytest.mark.parametrize("kind", RAGAS_LATER)
def test_prose_reply_gives_null_with_a_reason_not_a_crash(example_run, kind, capsys, monkeypatch):
    """A judge that answers a new task kind's prompt in prose: the task fails, each metric of the kind is NULL for
    every query with the reason naming the invalid reply, and the command exits 3 (some tasks failed)."""
    with FakeOpenAI(responder=_prose_for(TASK_OF[kind])) as fake:
        use_judge(monkeypatch, fake)
        code, _, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", kind)
    assert code == 3, err
    for metric in [m for m in METRICS if m.startswith(kind)]:
        values = _values(example_run, metric)
        assert all(v is None for v, _ in values.values()), (metric, values)
        assert all(r and "invalid reply" in r for _, r in values.values()), (metric, values)


def test_one_failed_pass_leaves_the_other_as_ragas_does(example_run, capsys, monkeypatch):
    """Pass 2 of response groundedness answers prose: the value is pass 1's rating / 2 and the failed pass is a
    stored row with its error."""

    def respond(name, messages, request):
        if name == "groundedness" and messages[1]["content"].startswith("<answer>"):  # pass 2 shows it first
            return "I would say it is grounded."
        return default_responder(name, messages, request)

    with FakeOpenAI(responder=respond) as fake:
        use_judge(monkeypatch, fake)
        assert run_cli(capsys, "judge", "--run", "ex", "--metrics", "response_groundedness")[0] == 0
    rows = _rows(
        example_run,
        "select q.qid, g.judge_pass, g.score, g.reason from ragsql.graded_verdict g "
        "join ragsql.query q on q.id = g.query_id order by 1, 2",
    )
    assert len(rows) == 24
    values = _values(example_run, "response_groundedness")
    for qid, judge_pass, score, reason in rows:
        if judge_pass == 1:
            assert values[qid][0] == score / 2
        else:
            assert score is None and "invalid reply" in reason


def test_offline_judge_gives_every_new_metric_labelled_offline(example_run, capsys):
    """No endpoint: the offline judge's verdicts fill every new metric, and scores labels them OFFLINE."""
    code, _, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", " ".join(RAGAS_LATER))
    assert code == 0, err
    code, out, err = run_cli(capsys, "scores", "--run", "ex", "--format", "json")
    assert code == 0, err
    rows = {r["measure"]: r for r in json.loads(out) if r["kind"] == "generation"}
    for metric in METRICS:
        assert rows[metric]["covered"] >= 6, (metric, rows[metric])
        assert "OFFLINE" in rows[metric]["source"], rows[metric]


def test_metrics_and_scores_reach_the_new_metrics_and_bad_names_are_one_line(example_run, capsys):
    """`ragsql judge --metrics` takes the metrics' own names too; `ragsql metrics --measures` and `ragsql scores
    --per-query` show the new metrics' values (equal to SQL); mixing them with retrieval measures is one line."""
    judged = cli_json(
        capsys, "judge", "--run", "ex", "--metrics", "factual_correctness(mode=f1) noise_sensitivity(mode=irrelevant)"
    )
    assert judged["metrics"] == ["factual_correctness", "noise_sensitivity"]
    measures = "factual_correctness(mode=f1), noise_sensitivity(mode=irrelevant)"
    got = {r["measure"]: r for r in cli_json(capsys, "metrics", "--run", "ex", "--measures", measures)}
    for metric in ("factual_correctness(mode=f1)", "noise_sensitivity(mode=irrelevant)"):
        values = [v for v, _ in _values(example_run, metric).values() if v is not None]
        assert got[metric]["value"] == pytest.approx(sum(values) / len(values))
        assert got[metric]["covered"] == len(values) and got[metric]["queries"] == 12
    assert (
        len(cli_json(capsys, "metrics", "--run", "ex", "--measures", "noise_sensitivity(mode=relevant)", "--per-query"))
        == 12
    )
    code, out, _ = run_cli(capsys, "scores", "--run", "ex", "--per-query", "--format", "json")
    assert {r["measure"] for r in json.loads(out)} >= {
        "factual_correctness(mode=precision)",
        "noise_sensitivity(mode=relevant)",
    }
    code, _, err = run_cli(capsys, "metrics", "--run", "ex", "--measures", "nDCG@10 factual_correctness(mode=f1)")
    assert code == 2 and err.count("\n") == 1 and "mixes generation metrics and retrieval measures" in err


def test_atomicity_and_coverage_are_stored_with_the_claims(example_run, capsys):
    """Judging with --atomicity high --coverage high stores claims under that setting beside the default ones;
    the SQL function reads either."""
    assert run_cli(capsys, "judge", "--run", "ex", "--metrics", "factual_correctness")[0] == 0
    assert (
        judge_cli(capsys, "ex", "factual_correctness", "--again", "--atomicity", "high", "--coverage", "high")[0] == 0
    )
    versions = {
        v
        for (v,) in _rows(
            example_run,
            "select distinct prompt_version from ragsql.statement_extraction where prompt_version like 'claims.%%'",
        )
    }
    assert versions == {"claims.v1[atomicity=low,coverage=low]", "claims.v1[atomicity=high,coverage=high]"}
    for a in ("low", "high"):
        covered = _rows(
            example_run, "select count(value) from ragsql.factual_correctness('ex', 'f1', 1.0, %s, %s)", a, a
        )[0][0]
        assert covered >= 6, a


def test_rubric_cli_add_judge_score_remove(example_run, endpoint, capsys):
    """`ragsql rubric add` stores five descriptions and a metric; judging rubrics_score asks one call per rubric
    and answer; scores shows rubrics_score:NAME; bad input is one line and stores nothing; remove drops it all."""
    code, out, err = run_cli(
        capsys,
        "rubric",
        "add",
        "cited",
        "--score1",
        "No source.",
        "--score2",
        "Vague.",
        "--score3",
        "Some.",
        "--score4",
        "Most.",
        "--score5",
        "Every claim cited.",
        "--format",
        "json",
    )
    assert code == 0 and json.loads(out)["metric"] == "rubrics_score:cited", err
    code, _, err = run_cli(capsys, "rubric", "add", "Bad-Name", *sum(([f"--score{i}", "x"] for i in range(1, 6)), []))
    assert code != 0 and err.count("\n") == 1 and "lower-case letters" in err
    code, _, err = run_cli(
        capsys, "rubric", "add", "blank", "--score1", " ", *sum(([f"--score{i}", "x"] for i in range(2, 6)), [])
    )
    assert code != 0 and err.count("\n") == 1 and "empty: 1" in err
    before = endpoint.chat_calls
    assert run_cli(capsys, "judge", "--run", "ex", "--metrics", "rubrics_score")[0] == 0
    assert endpoint.chat_calls - before == 12 * 3  # default, reference and cited; every query has a reference
    scores = {q: v for q, (v, _) in _values(example_run, "rubrics_score:cited").items()}
    stored = dict(
        _rows(
            example_run,
            "select q.qid, v.score::float8 from ragsql.rubric_verdict v "
            "join ragsql.query q on q.id = v.query_id where v.rubric = 'cited'",
        )
    )
    assert scores == stored and len(stored) == 12 and set(stored.values()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    code, out, _ = run_cli(capsys, "rubric", "list", "--format", "json")
    listed = {r["name"]: r for r in json.loads(out)}
    assert listed["cited"]["verdicts"] == 12 and listed["default"]["builtin"]
    code, out, err = run_cli(capsys, "rubric", "remove", "cited", "--yes", "--format", "json")
    assert code == 0 and json.loads(out)["verdicts"] == 12, err
    assert _rows(
        example_run, "select count(*) from ragsql.generation_metric where metric like 'rubrics_score:c%%'"
    ) == [(0,)]
    code, _, err = run_cli(capsys, "rubric", "remove", "default", "--yes")
    assert code != 0 and "built in and stays" in err
