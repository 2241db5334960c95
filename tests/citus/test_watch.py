"""`ragsql watch` on the distributed layout: a log table on the coordinator captured exactly once, judged through
the fake OpenAI endpoint; its windows' values, lag, drift gate and retention the same as on one server, and its
trigger and budget on the cluster."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from tests.citus.conftest import Side
from tests.conftest import run_cli

LOG = """
drop schema if exists {0} cascade;
create schema {0};
create table {0}.log (
    id bigint generated always as identity primary key,
    logged_at timestamptz not null default now(),
    question text,
    answer text,
    contexts jsonb
);
"""
COLUMNS = ("--key", "id", "--time", "logged_at", "--question", "question", "--answer",
           "answer", "--contexts", "contexts", "--metrics", "faithfulness")  # fmt: skip
ROW = "insert into {}.log (logged_at, question, answer, contexts) values (%s, %s, %s, %s)"
GOOD = ("Is it warm?", "The sea is warm in July.", ["The sea is warm in July."])
BAD = ("Is it warm?", "Bananas are purple on Mondays.", ["The sea is warm in July."])
METRICS = (
    "select window_start, metric, value, ci_low, ci_high, n, judged, skipped from ragsql.watch_metrics "
    "where watch = %s order by 1, 2"
)


def _log(conn: psycopg.Connection, schema: str, rows, at: datetime | None = None) -> None:
    """Log rows (question, answer, contexts) into SCHEMA.log at time `at` (now when None)."""
    for question, answer, contexts in rows:
        conn.execute(ROW.format(schema), (at or datetime.now(timezone.utc), question, answer, json.dumps(contexts)))


def _judged_by(side: Side, fake) -> Side:
    """The side with the fake endpoint as its judge."""
    env = dict(side.env, RAGSQL_JUDGE_BASE_URL=fake.base_url, RAGSQL_JUDGE_API_KEY="k", RAGSQL_JUDGE_MODEL="fake-judge")
    return Side(side.name, env, side.url)


def _cli(side: Side, capsys, *args: str) -> tuple[int, str, str]:
    """`ragsql ARGS` against the side, in this process (the offline judge's lexicon loads once, not per command:
    seconds each on a loaded machine); exit code, stdout, stderr."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in side.env.items():
            if name.startswith("RAGSQL_"):
                env.setenv(name, value)
        return run_cli(capsys, *args)


def _run(side: Side, capsys, *names: str) -> dict:
    code, out, err = _cli(side, capsys, "watch", "run", *names, "--once", "--format", "json")
    assert code == 0, err
    return {r["watch"]: r for r in json.loads(out)["watches"]}


def _flow(side: Side, capsys, hour: datetime, source: psycopg.Connection) -> dict:
    """The watch flow on one side (`source` an autocommit connection to it): what it printed and stored, the
    windows named by their offset from `hour`."""
    source.execute(LOG.format("wlog"))
    assert (
        _cli(side, capsys, "watch", "add", "wc", "--source", "wlog.log", *COLUMNS, "--backfill", "--keep", "300d")[0]
        == 0
    )
    for ago, rows in ((400 * 24, [GOOD, BAD]), (4, [GOOD, GOOD, BAD]), (3, [GOOD, BAD, GOOD]), (2, [GOOD, BAD])):
        _log(source, "wlog", rows, hour - timedelta(hours=ago))
    out: dict = {}
    lag = "select uncaptured, unjudged, reason from ragsql.watch_lag"
    with psycopg.connect(side.url) as late:  # begins before the first capture, commits after it
        _log(late, "wlog", [BAD], hour - timedelta(hours=2))
        out["runs"] = [_run(side, capsys, "wc")["wc"]]
        out["lag_before_commit"] = side.rows(lag)
        late.commit()
    out["lag_after_commit"] = side.rows(lag)
    out["runs"].append(_run(side, capsys, "wc")["wc"])
    out["lag"] = side.rows(lag)  # the late row is not read again: the next capture would store nothing
    out["metrics"] = [(start - hour, *rest) for start, *rest in side.rows(METRICS, ("wc",))]
    out["answers"] = side.rows(
        "select count(*) from ragsql.answer as a join ragsql.run as r on r.id = a.run_id where r.name like 'wc@%%'"
    )
    out["duplicates"] = side.rows(
        "select count(*) - count(distinct request_hash) from ragsql.judge_call where status = 'ok'"
    )
    code, check, _ = _cli(
        side, capsys, "check", "--watch", "wc", "--window", "latest", "--baseline", "7d", "--max-drop",
        "faithfulness=0.05", "--format", "json",
    )  # fmt: skip
    out["check"] = (code, json.loads(check)["gates"])
    return out


def test_watch_captures_once_judges_checks_and_expires_the_same_as_on_one_server(citus, plain, capsys):
    """A log table on the coordinator watched through the fake endpoint: rows captured once (a late commit's too),
    the 400-day-old window deleted by --keep 300d, watch_metrics, watch_lag and check --watch (exit 4 on the drop)
    equal to one server of the same PostgreSQL (15)."""
    from tests.fake_openai import FakeOpenAI

    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    out, calls = {}, {}
    with FakeOpenAI() as fake:
        for side in (citus, plain):
            before = fake.chat_calls
            with psycopg.connect(side.url, autocommit=True) as source:
                out[side.name] = _flow(_judged_by(side, fake), capsys, hour, source)
            calls[side.name] = fake.chat_calls - before
    got = out["citus"]
    assert [(r["captured"], r["expired"], r["tasks_failed"]) for r in got["runs"]] == [(10, 1, 0), (1, 0, 0)]
    assert (got["lag_before_commit"], got["lag_after_commit"], got["lag"]) == (
        [(0, 0, None)], [(1, 0, None)], [(0, 0, None)]
    )  # fmt: skip
    assert got["answers"] == [(9,)] and got["duplicates"] == [(0,)]
    faithfulness = [
        (start, value, n) for start, metric, value, _, _, n, _, _ in got["metrics"] if metric == "faithfulness"
    ]
    assert faithfulness == [
        (-timedelta(hours=4), 2 / 3, 3),
        (-timedelta(hours=3), 2 / 3, 3),
        (-timedelta(hours=2), 1 / 3, 3),
    ]
    assert got["check"][0] == 4 and got["check"][1][0]["passed"] is False
    assert calls["citus"] == calls["plain"] > 0
    assert got == out["plain"]


def test_a_trigger_watch_on_the_coordinator_notifies_on_insert(citus, capsys):
    """`watch add --trigger` on a coordinator's table: an insert notifies channel ragsql_watch with the watch's
    name (what wakes `watch run --follow`, tested on one server in tests/test_watch.py), `watch run --once` captures
    and judges the rows, and `watch drop` removes the trigger."""
    from tests.fake_openai import FakeOpenAI

    triggers = "select tgname from pg_trigger where tgrelid = 'wtrig.log'::regclass"
    with (
        FakeOpenAI() as fake,
        psycopg.connect(citus.url, autocommit=True) as source,
        psycopg.connect(citus.url, autocommit=True) as listener,
    ):
        side = _judged_by(citus, fake)
        source.execute(LOG.format("wtrig"))
        assert _cli(side, capsys, "watch", "add", "wt", "--source", "wtrig.log", *COLUMNS, "--trigger")[0] == 0
        assert side.rows(triggers) == [("ragsql_watch_wt",)]
        listener.execute("listen ragsql_watch")
        _log(source, "wtrig", [GOOD, BAD])
        woken = [(n.channel, n.payload) for n in listener.notifies(timeout=10, stop_after=1)]
        assert woken == [("ragsql_watch", "wt")]
        done = _run(side, capsys, "wt")["wt"]
        assert (done["captured"], done["tasks_done"], done["tasks_failed"]) == (2, 2, 0)
        metrics = side.rows("select metric, value, n, judged from ragsql.watch_metrics where watch = 'wt' order by 1")
        assert metrics == [("contradiction_rate", 0.0, 2, 2), ("faithfulness", 0.5, 2, 2)]
        assert side.rows("select uncaptured, unjudged from ragsql.watch_lag where watch = 'wt'") == [(0, 0)]
        assert _cli(side, capsys, "watch", "drop", "wt", "--yes")[0] == 0
        assert side.rows(triggers) == []


def test_a_budget_on_the_cluster_stops_calls_and_marks_the_rest_skipped(citus, capsys):
    """--budget 3 on the cluster: the window's run buys at most 3 calls and marks every row it could not judge
    skipped with the reason (an update of the reference table query chosen by the distributed answers and tasks);
    `watch drop --with-runs` deletes the window's dataset and run."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake, psycopg.connect(citus.url, autocommit=True) as source:
        side = _judged_by(citus, fake)
        source.execute(LOG.format("wbud"))
        add = ("watch", "add", "wb", "--source", "wbud.log", *COLUMNS, "--budget", "3", "--backfill")
        assert _cli(side, capsys, *add)[0] == 0
        hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        _log(source, "wbud", [(f"Is {i} warm?", f"{i} is warm.", [f"{i} is warm."]) for i in range(5)], hour)
        done = _run(side, capsys, "wb")["wb"]
        calls = fake.chat_calls + fake.embedding_calls
        assert 0 < calls <= 3 and done["tasks_failed"] == 0 and done["over_budget"] >= 2, done
        reasons = side.rows(
            "select q.metadata ->> 'skipped' from ragsql.query as q join ragsql.dataset as d on d.id = q.dataset_id "
            "where d.name like 'wb@%%' and q.metadata ? 'skipped'"
        )
        assert reasons == [("budget spent: the window's 3 judge calls were bought",)] * done["over_budget"]
        assert side.rows("select n, judged + skipped from ragsql.watch_metrics where watch = 'wb'") == [(5, 5)] * 2
        assert _cli(side, capsys, "watch", "drop", "wb", "--with-runs", "--yes")[0] == 0
        assert side.rows("select count(*) from ragsql.run where name like 'wb@%%'") == [(0,)]
