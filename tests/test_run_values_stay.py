"""A run's generation values depend only on the run's own inputs and the verdicts chosen for it: judging it again
with another judge, or judging another run with another embedder, moves nothing (issue 26); a run's cost is the
calls sent for it."""

from __future__ import annotations

import psycopg

from ragsql.cli import main
from tests.conftest import EXAMPLE

EMBEDDING_METRICS = ("answer_relevancy", "answer_relevancy_cosine", "answer_similarity", "answer_correctness")
JUDGED = (
    "answer_relevancy",
    "answer_similarity",
    "answer_correctness",
)  # task kinds; the cosine rides on answer_relevancy


def _values(url: str, run: str, judge: str | None = None) -> dict[tuple[str, str], tuple]:
    """(metric, qid) -> (value, reason, judge_model, judge_embedder) of every generation metric of `run`."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select metric, qid, value, reason, judge_model, judge_embedder "
            "from ragsql.evaluate_generation(%s, array(select metric from ragsql.generation_metric), %s)",
            (run, judge),
        ).fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


def _cli(capsys, *args: str) -> str:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, (args, err)
    return out


def test_offline_judge_after_an_llm_judge_moves_no_value(example_run, endpoint, capsys, monkeypatch):
    """judge (LLM) -> judge --offline: every value read by default stays the LLM's, embedding metrics included
    (the newest embedding anywhere used to be the offline one: answer_relevancy NULL for every query); --judge
    offline reads the offline judge's values with the offline embedder."""
    _cli(capsys, "judge", "--run", "ex", "--metrics", " ".join(JUDGED))
    llm = _values(example_run, "ex")
    assert all(llm[(m, q)][0] is not None for m, q in llm if m in EMBEDDING_METRICS), llm
    _cli(capsys, "judge", "--run", "ex", "--offline", "--metrics", " ".join(JUDGED))
    assert _values(example_run, "ex") == llm
    chosen = _values(example_run, "ex", "fake-judge")
    assert {k: v for k, v in chosen.items() if k[0] in EMBEDDING_METRICS} == {
        k: v for k, v in llm.items() if k[0] in EMBEDDING_METRICS
    }
    offline = _values(example_run, "ex", "offline")
    for (metric, qid), (value, reason, _, embedder) in offline.items():
        if metric in EMBEDDING_METRICS:
            assert value is not None, (metric, qid, reason)
            assert embedder.startswith("offline"), (metric, embedder)
    out = _cli(capsys, "scores", "--run", "ex", "--judge", "fake-judge", "--format", "json")
    assert '"answer_relevancy"' in out


def test_judging_another_run_with_another_embedder_moves_nothing(example_run, endpoint, capsys, monkeypatch):
    """Run ex judged offline; run ex2, the same texts, judged by an endpoint whose embeddings are newer: ex's
    values are unchanged, bit for bit (the newest embedding of ex's texts is now the endpoint's)."""
    _cli(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex2")
    _cli(capsys, "judge", "--run", "ex", "--offline", "--metrics", " ".join(JUDGED))
    before = _values(example_run, "ex")
    assert any(v[0] is not None for (m, _), v in before.items() if m == "answer_similarity")
    _cli(capsys, "judge", "--run", "ex2", "--metrics", " ".join(JUDGED))
    assert _values(example_run, "ex") == before
    assert {v[3] for (m, _), v in _values(example_run, "ex2").items() if m in EMBEDDING_METRICS}.isdisjoint(
        {e for (m, _), (_, _, _, e) in before.items() if m in EMBEDDING_METRICS}
    )


def test_a_runs_cost_is_the_calls_sent_for_it(example_run, endpoint, capsys):
    """ragsql.run_usage counts the calls sent for a run; a second run answered from the cache costs nothing, and
    the report's cost table names only the runs it reports."""
    _cli(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex2")
    _cli(capsys, "judge", "--run", "ex", "--metrics", "faithfulness")
    sent = endpoint.chat_calls
    _cli(capsys, "judge", "--run", "ex2", "--metrics", "faithfulness")
    assert endpoint.chat_calls == sent  # every reply came from the cache
    with psycopg.connect(example_run) as conn:
        usage = conn.execute(
            "select run, purpose, kind, sum(calls)::int from ragsql.run_usage group by 1, 2, 3 order by 1, 2, 3"
        ).fetchall()
        total = conn.execute("select count(*) from ragsql.judge_call where kind = 'chat'").fetchone()[0]
    assert usage == [("ex", "judge", "chat", sent)] and total == sent
    assert "cost (the calls sent for these runs)" not in _cli(capsys, "report", "--run", "ex2")
    cost = _cli(capsys, "report", "--run", "ex").split("cost (the calls sent for these runs)")[1]
    assert "judge" in cost and "chat" in cost
