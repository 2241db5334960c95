"""`ragsql watch`: a production log table judged where it is, each sampled row captured exactly once (late commits
included), in windowed runs, through the judge queue."""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import offline_database, run_cli
from tests.sql.test_roles import _member

LOG = """
create schema app;
create table app.log (
    id bigint generated always as identity primary key,
    logged_at timestamptz not null default now(),
    question text,
    answer text,
    contexts jsonb,
    reference text
);
"""
ADD = (
    "watch", "add", "w", "--source", "app.log", "--key", "id", "--time", "logged_at", "--question", "question",
    "--answer", "answer", "--contexts", "contexts", "--judge", "offline", "--metrics", "faithfulness",
)  # fmt: skip
DOC_URL = "postgresql://watcher@db/app"  # the database URL of docs/guides/watch.md's cron line and systemd unit
ROOT = Path(__file__).resolve().parents[1]
ROW = "insert into app.log (question, answer, contexts) values (%s, %s, %s)"


def _log(conn: psycopg.Connection, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        conn.execute(ROW, (f"What is {i}?", f"{i} is a number.", json.dumps([f"{i} is a number.", "Numbers count."])))


@pytest.fixture
def source(fresh_db, monkeypatch):
    """The fresh database with table app.log, no judge endpoint; yields an autocommit connection to it."""
    offline_database(monkeypatch, fresh_db)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute(LOG)
        yield conn


def _run(capsys, *names: str) -> dict:
    code, out, err = run_cli(capsys, "watch", "run", *names, "--once", "--format", "json")
    assert code == 0, err
    return {r["watch"]: r for r in json.loads(out)["watches"]}


def _captured(conn: psycopg.Connection, watch: str = "w") -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "select q.qid from ragsql.watch as w join ragsql.watch_window as ww on ww.watch_id = w.id "
            "join ragsql.run as r on r.id = ww.run_id join ragsql.query as q on q.dataset_id = r.dataset_id "
            "where w.name = %s order by q.qid::bigint",
            (watch,),
        )
    ]


def test_rows_logged_while_watching_are_judged_once_across_runs(source, capsys):
    """Rows logged after the watch was added are captured into their window's run and judged; a second run captures
    only the newer rows, and no row has two answers, two tasks of a kind, or a reply bought twice."""
    assert run_cli(capsys, *ADD)[0] == 0
    _log(source, 3)
    first = _run(capsys)["w"]
    assert (first["captured"], first["tasks_done"], first["tasks_failed"]) == (3, 3, 0)
    _log(source, 2, start=3)
    second = _run(capsys)["w"]
    assert (second["captured"], second["tasks_done"]) == (2, 2)
    assert _run(capsys)["w"]["captured"] == 0
    assert _captured(source) == ["1", "2", "3", "4", "5"]
    runs = source.execute(
        "select r.name, count(a.*) from ragsql.run as r join ragsql.answer as a on a.run_id = r.id group by r.name"
    ).fetchall()
    assert sum(n for _, n in runs) == 5 and all(name.startswith("w@") for name, _ in runs)
    tasks = source.execute("select status, count(*) from ragsql.judge_task group by status").fetchall()
    assert tasks == [("done", 5)]
    assert source.execute("select count(*) = count(distinct request_hash) from ragsql.judge_call").fetchone()[0]
    metrics = source.execute(
        "select metric, sum(n)::int, sum(judged)::int from ragsql.watch_metrics "
        "where watch = 'w' and metric = 'faithfulness' group by metric"
    ).fetchall()
    assert metrics == [("faithfulness", 5, 5)]
    lag = source.execute("select uncaptured, unjudged, reason from ragsql.watch_lag").fetchall()
    assert lag == [(0, 0, None)]


def test_a_late_committing_transaction_is_captured_exactly_once(source, fresh_db, capsys):
    """A transaction that logs a row (one in a savepoint) before another transaction's row is captured, and commits
    after that capture, has its rows captured by the next run; later runs capture nothing again."""
    assert run_cli(capsys, *ADD)[0] == 0
    with psycopg.connect(fresh_db) as late:
        _log(late, 1, start=100)
        late.execute("savepoint s")
        _log(late, 1, start=101)
        late.execute("release savepoint s")
        _log(source, 1)  # committed now, while `late` is open
        assert _run(capsys)["w"]["captured"] == 1
        assert source.execute("select uncaptured from ragsql.watch_lag").fetchone()[0] == 0
        late.commit()
    assert source.execute("select uncaptured from ragsql.watch_lag").fetchone()[0] == 2
    assert _run(capsys)["w"]["captured"] == 2
    assert _run(capsys)["w"]["captured"] == 0
    assert _captured(source) == ["1", "2", "3"]


def test_a_dropped_source_column_is_one_error_line_and_stores_nothing(source, capsys):
    """A column the watch maps, dropped from the source, makes `watch run` fail with one line naming it; the rows
    stay uncaptured (the watermark does not move), and are captured once the mapping can be read again."""
    assert run_cli(capsys, *ADD)[0] == 0
    _log(source, 2)
    source.execute("alter table app.log rename column contexts to ctx")
    code, out, err = run_cli(capsys, "watch", "run", "w", "--once")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and 'app.log has no column "contexts" (--contexts)' in err
    assert _captured(source) == []
    source.execute("alter table app.log rename column ctx to contexts")
    assert _run(capsys)["w"]["captured"] == 2


def test_add_checks_columns_against_the_catalog_and_stores_nothing_on_error(source, capsys):
    """A missing column, a time column that is not a timestamp and a source that does not exist are one line each;
    no watch and no dataset is stored."""
    wrong = {
        "--answer": ("nope", 'app.log has no column "nope" (--answer)'),
        "--time": ("question", '--time column "question" of app.log is text: use a timestamptz'),
        "--source": ("app.missing", "no table or view app.missing"),
    }
    for option, (column, message) in wrong.items():
        args = list(ADD)
        args[args.index(option) + 1] = column
        code, _, err = run_cli(capsys, *args)
        assert code == 1 and err.count("\n") == 1 and message in err, err
    assert (
        source.execute("select (select count(*) from ragsql.watch) + (select count(*) from ragsql.dataset)").fetchone()[
            0
        ]
        == 0
    )


def test_sampling_is_chosen_by_the_key_and_stable_across_replays(source, capsys):
    """With --sample 0.3 the rows kept are exactly those whose key's sha256 (first 52 bits / 2^52) is below 0.3: a
    second watch of the same log (a replay) keeps the same rows."""
    _log(source, 200)
    for name in ("a", "b"):
        args = ["watch", "add", name, *ADD[3:], "--sample", "0.3", "--backfill"]
        assert run_cli(capsys, *args)[0] == 0
    _run(capsys, "a", "b")
    expected = [
        str(i) for i in range(1, 201) if int(hashlib.sha256(str(i).encode()).hexdigest()[:13], 16) / 2**52 < 0.3
    ]
    assert 40 < len(expected) < 80
    assert _captured(source, "a") == expected == _captured(source, "b")


def test_a_view_in_another_schema_is_read_by_time_with_a_settle_delay(source, capsys):
    """A view has no xmin: rows are read by time from the last capture minus --settle; a row committed later than
    that after its logged time is not captured (the documented limit of a view source)."""
    source.execute("create schema feed; create view feed.recent as select * from app.log")
    args = ["watch", "add", "v", *ADD[3:], "--settle", "10m", "--backfill"]
    args[args.index("--source") + 1] = "feed.recent"
    assert run_cli(capsys, *args)[0] == 0
    _log(source, 1)
    assert _run(capsys, "v")["v"]["captured"] == 1
    for ago, question in (("5 minutes", "late but within the settle delay"), ("1 hour", "later than it")):
        source.execute(
            "insert into app.log (logged_at, question, answer, contexts) "
            "values (now() - %s::interval, %s, 'yes', '[\"yes\"]')",
            (ago, question),
        )
    assert _run(capsys, "v")["v"]["captured"] == 1
    assert _captured(source, "v") == ["1", "2"]


def test_a_watcher_needs_only_select_on_the_source(source, fresh_db, capsys, monkeypatch):
    """A ragsql_writer login with SELECT on the source (in another schema) and nothing else on it captures and
    judges; without SELECT, adding the watch says which grant is missing and stores nothing."""
    with _member(fresh_db, "ragsql_writer") as url:
        login = psycopg.conninfo.conninfo_to_dict(url)["user"]
        monkeypatch.setenv("RAGSQL_DATABASE_URL", url)
        code, _, err = run_cli(capsys, *ADD)
        assert code == 1 and err.count("\n") == 1 and "may not read app.log" in err
        source.execute(f'grant usage on schema app to "{login}"; grant select on app.log to "{login}"')
        assert run_cli(capsys, *ADD)[0] == 0
        _log(source, 2)
        assert _run(capsys)["w"]["tasks_done"] == 2
        source.execute(f'revoke all on app.log from "{login}"; revoke all on schema app from "{login}"')


def test_pause_resume_show_and_drop(source, capsys):
    """A paused watch captures nothing until resumed; show lists its windows' runs; drop needs --yes and keeps the
    runs unless --with-runs."""
    assert run_cli(capsys, *ADD, "--settle", "soon")[0] == 2
    assert run_cli(capsys, *ADD)[0] == 0
    code, _, err = run_cli(capsys, "watch", "run", "w")
    assert code == 2 and "pass --once" in err
    assert run_cli(capsys, "watch", "pause", "w")[0] == 0
    _log(source, 2)
    assert _run(capsys)["w"]["captured"] == 0
    assert run_cli(capsys, "watch", "resume", "w")[0] == 0
    assert _run(capsys)["w"]["captured"] == 2
    code, out, _ = run_cli(capsys, "watch", "show", "w", "--format", "json")
    shown = json.loads(out)
    assert code == 0 and shown["state"] == "active" and shown["columns"]["contexts"] == "contexts"
    assert [w["run"].split("@")[0] for w in shown["windows"]] == ["w"] * len(shown["windows"])
    assert sum(w["captured"] for w in shown["windows"]) == 2
    assert run_cli(capsys, "watch", "drop", "w")[0] == 2
    assert run_cli(capsys, "watch", "drop", "w", "--yes")[0] == 0
    assert source.execute("select count(*) from ragsql.run where name like 'w@%'").fetchone()[0] >= 1
    assert run_cli(capsys, "watch", "add", "w2", *ADD[3:])[0] == 0
    _log(source, 1, start=2)
    assert _run(capsys)["w2"]["captured"] == 1
    assert run_cli(capsys, "watch", "drop", "w2", "--with-runs", "--yes")[0] == 0
    left = (
        "select (select count(*) from ragsql.run where name like 'w2@%') "
        "+ (select count(*) from ragsql.dataset where name like 'w2@%')"
    )
    assert source.execute(left).fetchone()[0] == 0
    code, _, err = run_cli(capsys, "watch", "show", "w2")
    assert code == 1 and 'unknown watch "w2"' in err


def test_one_broken_watch_leaves_the_others_to_run(source, capsys):
    """`watch run --once` over every watch: a watch whose source lost a column is one error line naming it (exit 1),
    and the other watches capture and judge."""
    assert run_cli(capsys, *ADD)[0] == 0
    source.execute("create table app.other as select * from app.log")
    args = ["watch", "add", "broken", *ADD[3:]]
    args[args.index("--source") + 1] = "app.other"
    assert run_cli(capsys, *args)[0] == 0
    source.execute("alter table app.other drop column answer")
    _log(source, 2)
    code, out, err = run_cli(capsys, "watch", "run", "--once", "--format", "json")
    assert code == 1
    assert [r["captured"] for r in json.loads(out)["watches"]] == [2]
    assert err.splitlines() == ['ragsql: error: watch broken: app.other has no column "answer" (--answer)']


def test_captures_running_at_once_store_each_row_once(source, fresh_db):
    """Captures of one watch in several threads, while rows keep arriving, store every row once: the capture lock
    and the key leave no row out and none twice."""
    from concurrent.futures import ThreadPoolExecutor

    from ragsql.cli import main
    from ragsql.orchestrator.watch import capture

    assert main(list(ADD)) == 0

    def log() -> None:
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            for i in range(60):
                _log(conn, 1, start=i)

    def captures() -> int:
        return sum(capture(fresh_db, "w").rows for _ in range(8))

    with ThreadPoolExecutor(4) as pool:
        writer = pool.submit(log)
        counts = [pool.submit(captures) for _ in range(3)]
        writer.result()
        stored = sum(c.result() for c in counts) + capture(fresh_db, "w").rows
    assert stored == 60
    assert _captured(source) == [str(i) for i in range(1, 61)]
    assert source.execute("select count(*) from ragsql.answer").fetchone()[0] == 60


def test_a_metric_the_log_cannot_feed_is_skipped_with_the_reason_once(source, capsys):
    """A watch without contexts asked for faithfulness: the run says why the metric is skipped, the window counts as
    done, and the next run does not try it again."""
    args = list(ADD)
    del args[args.index("--contexts") : args.index("--contexts") + 2]
    assert run_cli(capsys, *args)[0] == 0
    _log(source, 1)
    code, out, err = run_cli(capsys, "watch", "run", "--once", "--format", "json")
    assert code == 0 and json.loads(out)["watches"][0]["judged_runs"] == 1
    assert err == "skipped faithfulness in watch w: no contexts\n"
    code, out, err = run_cli(capsys, "watch", "run", "--once", "--format", "json")
    assert (code, json.loads(out)["watches"][0]["judged_runs"], err) == (0, 0, "")


def test_a_row_without_an_answer_is_kept_as_skipped_with_the_reason(source, capsys):
    """A logged row with no answer is captured once as skipped, its reason on its query, and counted as skipped in
    ragsql.watch_metrics beside the judged rows of its window."""
    assert run_cli(capsys, *ADD)[0] == 0
    _log(source, 1)
    source.execute(ROW, ("Unanswered?", None, None))
    done = _run(capsys)["w"]
    assert (done["captured"], done["skipped"], done["tasks_done"]) == (1, 1, 1)
    reasons = source.execute("select qid, metadata ->> 'skipped' from ragsql.query order by qid").fetchall()
    assert reasons == [("1", None), ("2", "no answer")]
    counts = source.execute(
        "select sum(n)::int, sum(judged)::int, sum(skipped)::int from ragsql.watch_metrics "
        "where metric = 'faithfulness'"
    ).fetchone()
    assert counts == (2, 1, 1)
    assert _run(capsys)["w"]["skipped"] == 0


def test_windows_are_utc_hours_or_days_and_a_closed_window_keeps_its_values(source, capsys, monkeypatch):
    """Rows fall in the run of their UTC hour (or day), whatever the sessions' time zone; rows arriving in a later
    window leave an earlier window's values, interval and counts as they were."""
    monkeypatch.setenv("PGTZ", "Asia/Shanghai")  # the watch's sessions: UTC+8, where 10:05 UTC is 18:05
    source.execute("set time zone 'Asia/Shanghai'")
    for at in ("2026-01-01 10:05+00", "2026-01-01 10:50+00"):
        source.execute(
            "insert into app.log (logged_at, question, answer, contexts) values (%s, 'q?', 'It is a.', '[\"a\"]')",
            (at,),
        )
    assert run_cli(capsys, *ADD, "--backfill")[0] == 0
    assert run_cli(capsys, "watch", "add", "daily", *ADD[3:], "--window", "1d", "--backfill")[0] == 0
    _run(capsys)
    shown = (
        "select watch, run, n, value, ci_low, ci_high, closed from ragsql.watch_metrics where metric = 'faithfulness'"
    )
    before = source.execute(shown + " order by watch, run").fetchall()
    assert [(r[0], r[1], r[2], r[6]) for r in before] == [
        ("daily", "daily@2026-01-01T00:00Z", 2, True),
        ("w", "w@2026-01-01T10:00Z", 2, True),
    ]
    source.execute(
        "insert into app.log (logged_at, question, answer, contexts) "
        "values ('2026-01-01 11:30+00', 'q?', 'It is b.', '[\"a\"]')"
    )
    _run(capsys)
    assert source.execute(shown + " and run = 'w@2026-01-01T10:00Z'").fetchall() == [before[1]]
    assert [r[1] for r in source.execute(shown + " and watch = 'w' order by run")] == [
        "w@2026-01-01T10:00Z",
        "w@2026-01-01T11:00Z",
    ]


def test_a_reader_reads_the_windows_values_through_ragsql_report(source, fresh_db, capsys):
    """ragsql_reader, who may not read answers, reads each window's values from ragsql_report.watch_metrics, the
    same rows as ragsql.watch_metrics."""
    assert run_cli(capsys, *ADD)[0] == 0
    _log(source, 2)
    _run(capsys)
    shown = "select watch, run, metric, value, n, judged, skipped from {}.watch_metrics order by run, metric"
    rows = source.execute(shown.format("ragsql")).fetchall()
    assert "faithfulness" in {r[2] for r in rows}
    with _member(fresh_db, "ragsql_reader") as url, psycopg.connect(url) as reader:
        assert reader.execute(shown.format("ragsql_report")).fetchall() == rows
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("select text from ragsql.answer")


def test_a_watcher_killed_mid_window_loses_no_row_and_buys_no_reply_twice(source, fresh_db, endpoint, capsys):
    """SIGKILL while a window's judge calls are in flight; the next `watch run --once` captures no row again, judges
    every row, and no request is answered twice."""
    import subprocess
    import sys

    from tests.test_judge_run import _AS_IN_A_TERMINAL, kill_while_held

    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]  # the configured (fake) endpoint
    assert run_cli(capsys, *args)[0] == 0
    _log(source, 12)
    endpoint.latency = 0.3
    command = [sys.executable, "-c", _AS_IN_A_TERMINAL, "watch", "run", "--once", "--workers", "2"]
    kill_while_held(
        endpoint, 6, lambda: subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    )
    first = endpoint.chat_calls
    stored_before = source.execute("select count(*) from ragsql.judge_call where status = 'ok'").fetchone()[0]
    endpoint.latency = 0
    again = _run(capsys)["w"]
    assert again["captured"] == 0
    assert source.execute("select count(*) from ragsql.answer").fetchone()[0] == 12
    assert source.execute("select status, count(*) from ragsql.judge_task group by 1").fetchall() == [("done", 12)]
    duplicates = "select count(*) - count(distinct request_hash) from ragsql.judge_call where status = 'ok'"
    assert source.execute(duplicates).fetchone()[0] == 0
    stored = source.execute("select count(*) from ragsql.judge_call where status = 'ok'").fetchone()[0]
    assert endpoint.chat_calls - first == stored - stored_before  # the rerun sent only what was not stored
    assert source.execute("select unjudged from ragsql.watch_lag").fetchone()[0] == 0


def test_two_watchers_share_the_rows_without_judging_one_twice(source, endpoint, capsys):
    """Two `watch run --once` processes at once: one captures, both judge the window through the queue; every row
    is judged once, by workers of both processes, and no request is answered twice."""
    import subprocess
    import sys

    from tests.test_judge_run import _AS_IN_A_TERMINAL

    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]
    assert run_cli(capsys, *args)[0] == 0
    _log(source, 16)
    endpoint.latency = 2.0  # 16 rows take one process >= 16 s: time for the other to start on a loaded machine
    command = [sys.executable, "-c", _AS_IN_A_TERMINAL, "watch", "run", "--once", "--workers", "2"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert source.execute("select count(*) from ragsql.answer").fetchone()[0] == 16
    assert source.execute("select status, count(*) from ragsql.judge_task group by 1").fetchall() == [("done", 16)]
    duplicates = "select count(*) - count(distinct request_hash) from ragsql.judge_call where status = 'ok'"
    assert source.execute(duplicates).fetchone()[0] == 0
    pids = "select count(distinct split_part(worker, ':', 2)) from ragsql.judge_task"
    assert source.execute(pids).fetchone()[0] == 2


def _log_at(conn: psycopg.Connection, n: int, start: int, at: str = "2026-01-01 10:05+00") -> None:
    """n rows logged at one time (one window), whatever the hour the test runs in."""
    for i in range(start, start + n):
        conn.execute(
            "insert into app.log (logged_at, question, answer, contexts) values (%s, %s, %s, %s)",
            (at, f"What is {i}?", f"{i} is a number.", json.dumps([f"{i} is a number.", "Numbers count."])),
        )


@pytest.mark.parametrize("metric", ["faithfulness", "answer_relevancy"])  # chat calls; a chat and an embedding call
def test_a_budget_stops_calls_at_the_budget_across_runs_and_says_why(source, endpoint, capsys, metric):
    """--budget 3: the window's first run buys at most 3 calls (embedding calls counted and held back too) and
    marks the rows it could not judge skipped with the reason; a second run, with new rows in the same window,
    buys none, and every row is judged or skipped."""
    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]  # the configured (fake) endpoint
    args[args.index("--metrics") + 1] = metric
    assert run_cli(capsys, *args, "--budget", "3", "--backfill")[0] == 0
    _log_at(source, 5, 0)
    first = _run(capsys)["w"]
    calls = endpoint.chat_calls + endpoint.embedding_calls
    assert 0 < calls <= 3 and first["tasks_failed"] == 0 and first["over_budget"] >= 2
    stored = "select count(*) from ragsql.judge_call where for_run_id = (select run_id from ragsql.watch_window)"
    assert source.execute(stored).fetchone()[0] == calls
    _log_at(source, 3, 5)
    second = _run(capsys)["w"]
    assert endpoint.chat_calls + endpoint.embedding_calls == calls  # the budget counts the first run's calls
    assert (second["captured"], second["over_budget"], second["tasks_done"]) == (3, 3, 0)
    reasons = dict(source.execute("select qid, metadata ->> 'skipped' from ragsql.query").fetchall())
    skipped = {qid for qid, why in reasons.items() if why is not None}
    assert len(skipped) == first["over_budget"] + 3
    assert {reasons[q] for q in skipped} == {"budget spent: the window's 3 judge calls were bought"}
    judged = source.execute(
        "select count(distinct q.qid) from ragsql.query as q join ragsql.judge_task as t on t.query_id = q.id "
        "where t.status = 'done'"
    ).fetchone()[0]
    assert judged + len(skipped) == 8
    shown = json.loads(run_cli(capsys, "watch", "show", "w", "--format", "json")[1])
    assert shown["budget"] == 3 and [w["over_budget"] for w in shown["windows"]] == [len(skipped)]
    metrics = source.execute(
        "select n, judged, skipped from ragsql.watch_metrics where metric = %s", (metric,)
    ).fetchone()
    assert metrics == (8, judged, len(skipped))
    assert _run(capsys)["w"]["over_budget"] == 0  # nothing left to mark, and no call
    assert endpoint.chat_calls + endpoint.embedding_calls == calls


def test_watchers_judging_one_window_at_once_buy_at_most_its_budget(source, endpoint, capsys):
    """Two `watch run` processes judge one window with --budget 3 while every call takes 4 s: 3 calls are bought in
    all (each process counting only its own calls in flight bought up to 6), and every row is judged or skipped."""
    from tests.test_judge_run import _AS_IN_A_TERMINAL

    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]  # the configured (fake) endpoint
    assert run_cli(capsys, *args, "--budget", "3", "--backfill")[0] == 0
    _log_at(source, 8, 0)
    endpoint.latency = 4.0  # both processes have calls in flight together
    command = [sys.executable, "-c", _AS_IN_A_TERMINAL, "watch", "run", "--once", "--workers", "4"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert endpoint.chat_calls + endpoint.embedding_calls == 3
    assert source.execute("select reserved from ragsql.run_calls").fetchall() == [(3,)]
    skipped = source.execute("select count(*) from ragsql.query where metadata ->> 'skipped' is not null").fetchone()
    judged = source.execute(
        "select count(distinct t.query_id) from ragsql.judge_task as t where t.status = 'done'"
    ).fetchone()
    assert judged[0] + skipped[0] == 8 and skipped[0] >= 5


GOOD = ("Is it warm?", "The sea is warm in July.", ["The sea is warm in July."])
BAD = ("Is it warm?", "Bananas are purple on Mondays.", ["The sea is warm in July."])


def _window(conn: psycopg.Connection, at: str, rows: list[tuple[str, str, list[str]]]) -> None:
    for question, answer, contexts in rows:
        conn.execute(
            "insert into app.log (logged_at, question, answer, contexts) values (%s, %s, %s, %s)",
            (at, question, answer, json.dumps(contexts)),
        )


def _check(capsys, *gates: str) -> tuple[int, list[dict], str]:
    code, out, err = run_cli(
        capsys, "check", "--watch", "w", "--window", "latest", "--baseline", "7d", *gates, "--format", "json"
    )
    return code, (json.loads(out)["gates"] if out else []), err


def test_check_watch_exits_4_on_a_drop_from_the_baseline_windows(source, capsys):
    """The latest closed window against the pooled rows of the windows in the 7 days before it: a window of bad
    answers after faithful ones exits 4 (with --significant too), a later faithful window exits 0; with one
    window only there is no baseline, said in one line."""
    assert run_cli(capsys, *ADD, "--backfill")[0] == 0
    _window(source, "2026-01-01 08:05+00", [GOOD] * 4 + [BAD])
    _run(capsys)
    code, _, err = _check(capsys, "--max-drop", "faithfulness=0.05")
    assert code == 1 and err.count("\n") == 1 and "no window in the 7 days before" in err, err
    _window(source, "2026-01-01 09:05+00", [GOOD] * 4 + [BAD])
    _window(source, "2026-01-01 10:05+00", [BAD] * 5)
    _run(capsys)
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05")
    assert code == 4 and "faithfulness dropped" in err, err
    assert (rows[0]["baseline_value"], rows[0]["value"]) == (pytest.approx(0.8), 0)
    assert _check(capsys, "--max-drop", "faithfulness=0.05", "--significant")[0] == 4
    assert _check(capsys, "--max-drop", "faithfulness=0.9")[0] == 0
    _window(source, "2026-01-01 11:05+00", [GOOD] * 3)
    _run(capsys)
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05", "--significant")
    assert (code, rows[0]["value"], rows[0]["passed"]) == (0, 1, True), err


def test_check_watch_significant_passes_a_small_drop_that_is_not_significant(source, capsys):
    """Baseline windows half faithful, the latest window a third: a drop of 0.17 fails --max-drop 0.05, but with
    --significant it passes (Welch p far above 0.05 on so few rows), saying why."""
    assert run_cli(capsys, *ADD, "--backfill")[0] == 0
    _window(source, "2026-01-01 08:05+00", [GOOD, BAD, GOOD])
    _window(source, "2026-01-01 09:05+00", [BAD, GOOD, BAD])
    _window(source, "2026-01-01 10:05+00", [GOOD, BAD, BAD])
    _run(capsys)
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05")
    assert code == 4 and rows[0]["diff"] == pytest.approx(1 / 3 - 1 / 2), err
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05", "--significant")
    assert code == 0 and rows[0]["passed"] and rows[0]["p_adjusted"] > 0.5
    assert "not significant at alpha 0.05, so it passes" in rows[0]["reason"]


def test_check_watch_says_why_a_drop_has_no_welch_p(source, capsys):
    """A latest window of one row has no Welch p (fewer than 2 values): the failed drop's reason says so instead of
    printing an empty "Welch p = ", and --significant lets it pass with the note."""
    assert run_cli(capsys, *ADD, "--backfill")[0] == 0
    _window(source, "2026-01-01 08:05+00", [GOOD, GOOD])
    _window(source, "2026-01-01 09:05+00", [GOOD, GOOD])
    _window(source, "2026-01-01 10:05+00", [BAD])
    _run(capsys)
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05")
    assert code == 4 and rows[0]["p_adjusted"] is None, err
    assert "Welch p = none: fewer than 2 values on a side)" in rows[0]["reason"]
    code, rows, err = _check(capsys, "--max-drop", "faithfulness=0.05", "--significant")
    assert code == 0 and "not significant at alpha 0.05, so it passes" in rows[0]["reason"], err


def test_keep_deletes_exactly_the_windows_older_than_it_and_moves_no_other_value(source, capsys):
    """--keep 300d: `watch run` deletes the dataset and run of each window that started more than 300 days ago,
    before judging it, and only those; the kept windows have the values another watch of the same rows has."""
    assert run_cli(capsys, *ADD, "--backfill", "--keep", "300d")[0] == 0
    assert run_cli(capsys, "watch", "add", "other", *ADD[3:], "--backfill")[0] == 0
    for ago, rows in (("400 days", [GOOD, BAD]), ("301 days", [GOOD]), ("299 days", [BAD, GOOD]), ("0 days", [GOOD])):
        for question, answer, contexts in rows:
            source.execute(
                "insert into app.log (logged_at, question, answer, contexts) values (now() - %s::interval, %s, %s, %s)",
                (ago, question, answer, json.dumps(contexts)),
            )
    done = _run(capsys)
    assert (done["w"]["expired"], done["other"]["expired"]) == (2, 0)
    shown = (
        "select window_start, metric, value, ci_low, ci_high, n, judged, skipped from ragsql.watch_metrics "
        "where watch = %s order by 1, 2"
    )
    kept, other = (source.execute(shown, (name,)).fetchall() for name in ("w", "other"))
    assert len({r[0] for r in other}) == 4 and len({r[0] for r in kept}) == 2
    assert kept == [r for r in other if r[0] in {k[0] for k in kept}]
    assert min(r[0] for r in other) < min(r[0] for r in kept)
    left = "select count(*) from ragsql.{} where name like 'w@%'"
    assert [source.execute(left.format(t)).fetchone()[0] for t in ("run", "dataset")] == [2, 2]
    tasks = (
        "select count(*) from ragsql.judge_task as t join ragsql.run as r on r.id = t.run_id where r.name like 'w@%'"
    )
    assert source.execute(tasks).fetchone()[0] == 3  # the kept windows' rows only: the old ones were never judged
    again = _run(capsys)
    assert (again["w"]["expired"], again["w"]["captured"]) == (0, 0)
    assert source.execute(shown, ("w",)).fetchall() == kept
    code, out, _ = run_cli(capsys, "watch", "show", "w", "--format", "json")
    assert json.loads(out)["keep_seconds"] == 300 * 86400


def _until(what, seconds: float = 60):
    """Poll `what()` until it is true (a failed assertion after `seconds`)."""
    import time

    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def count(url: str, query: str) -> int:
    """One number read on a connection of its own (-1 while the server does not answer, e.g. restarting)."""
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            return conn.execute(query).fetchone()[0]
    except psycopg.OperationalError:
        return -1


@contextlib.contextmanager
def follower(url: str, *args: str) -> Iterator[subprocess.Popen]:
    """`ragsql watch run --follow ARGS` in a process of its own, as in a terminal; on leaving, SIGTERM: it must exit
    143 with no traceback, its stderr one-line errors at most and the stop line, and no judge task left running."""
    from tests.test_judge_run import _AS_IN_A_TERMINAL

    command = [sys.executable, "-c", _AS_IN_A_TERMINAL, "watch", "run", "--follow", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
        assert proc.poll() is None, proc.communicate()  # it is still following
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("ragsql: stopped by SIGTERM"), err
    assert all(line.startswith("ragsql: error: ") for line in lines[:-1]), err
    assert count(url, "select count(*) from ragsql.judge_task where status <> 'done'") == 0


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [(signal.SIGTERM, 143, "ragsql: stopped by SIGTERM"), (signal.SIGINT, 130, "ragsql: aborted")],
)
def test_follow_judges_rows_as_they_arrive_and_a_signal_stops_it_cleanly(source, endpoint, capsys, signum, code, line):
    """`watch run --follow`: rows logged while it follows are captured and judged once, pass after pass; SIGTERM
    (143) or Ctrl-C (130) mid-judging stops it within seconds with one line, no task left running and no request
    claimed; `watch run --once` then judges the rest, sending only requests whose reply was not stored."""
    import subprocess
    import sys
    import time

    from tests.fake_openai import default_responder
    from tests.test_judge_run import _AS_IN_A_TERMINAL, _hold_replies_after

    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]  # the configured (fake) endpoint
    assert run_cli(capsys, *args)[0] == 0
    command = [sys.executable, "-c", _AS_IN_A_TERMINAL, "watch", "run", "--follow", "--interval", "1s"]
    proc = subprocess.Popen(
        [*command, "--workers", "2", "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    done = "select count(*) from ragsql.judge_task where status = 'done'"
    try:
        for start in (0, 3):
            _log(source, 3, start=start)
            _until(lambda n=start + 3: source.execute(done).fetchone()[0] == n)
        endpoint.latency = 0.2
        held = _hold_replies_after(endpoint, 2)
        try:
            _log(source, 8, start=6)
            assert held.wait(60), "the watcher never judged the rows logged last"
            proc.send_signal(signum)
            began = time.monotonic()
            out, err = proc.communicate(timeout=30)
            stopped = time.monotonic() - began
        finally:
            held.release.set()
            endpoint.responder = default_responder
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert stopped < 5, stopped
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(line), err
    passes = [json.loads(row) for row in out.splitlines()]  # a line per finished pass: not the one stopped
    assert 6 <= sum(p["captured"] for p in passes) < 14 and {p["watch"] for p in passes} == {"w"}
    assert source.execute("select count(*) from ragsql.answer").fetchone()[0] == 14
    assert source.execute("select count(*) from ragsql.judge_task where status = 'running'").fetchone()[0] == 0
    assert source.execute("select count(*) from ragsql.judge_call_claim").fetchone()[0] == 0
    endpoint.latency = 0
    stored = "select count(*) from ragsql.judge_call where kind = 'chat'"
    sent, before = endpoint.chat_calls, source.execute(stored).fetchone()[0]
    again = _run(capsys)["w"]
    assert again["captured"] == 0
    assert source.execute("select status, count(*) from ragsql.judge_task group by 1").fetchall() == [("done", 14)]
    duplicates = "select count(*) - count(distinct request_hash) from ragsql.judge_call where status = 'ok'"
    assert source.execute(duplicates).fetchone()[0] == 0
    assert endpoint.chat_calls - sent == source.execute(stored).fetchone()[0] - before


def test_a_trigger_wakes_follow_at_once_and_drop_removes_it(source, fresh_db, capsys):
    """`watch add --trigger` (TRIGGER on the table needed; a view refused; one line each, nothing stored): an
    insert by a role with no ragsql privilege wakes `watch run --follow --interval 1h`, which captures and judges
    the row within seconds; `watch drop` removes the trigger."""
    source.execute("create view app.recent as select * from app.log")
    view = list(ADD)
    view[view.index("--source") + 1] = "app.recent"
    code, _, err = run_cli(capsys, *view, "--trigger")
    assert code == 1 and err.count("\n") == 1 and "--trigger needs a table" in err, err
    with _member(fresh_db, "ragsql_writer") as url:
        login = psycopg.conninfo.conninfo_to_dict(url)["user"]
        source.execute(f'grant usage on schema app to "{login}"; grant select on app.log to "{login}"')
        with pytest.MonkeyPatch.context() as env:
            env.setenv("RAGSQL_DATABASE_URL", url)
            code, _, err = run_cli(capsys, *ADD, "--trigger")
        assert code == 1 and err.count("\n") == 1 and "grant it TRIGGER on the table" in err, err
        source.execute(f'revoke all on app.log from "{login}"; revoke all on schema app from "{login}"')
    assert source.execute("select count(*) from ragsql.watch").fetchone()[0] == 0
    triggers = "select count(*) from pg_trigger where tgrelid = 'app.log'::regclass"
    assert source.execute(triggers).fetchone()[0] == 0
    assert run_cli(capsys, *ADD, "--trigger")[0] == 0
    assert source.execute(triggers).fetchone()[0] == 1
    assert json.loads(run_cli(capsys, "watch", "show", "w", "--format", "json")[1])["trigger"] == "ragsql_watch_w"
    source.execute(
        "create role app_writer; grant usage on schema app to app_writer; grant insert on app.log to app_writer"
    )
    answers = "select count(*) from ragsql.answer"
    try:
        with follower(fresh_db, "--interval", "1h"):
            _log(source, 1)
            _until(lambda: source.execute(answers).fetchone()[0] == 1)  # the first pass, which runs at start
            source.execute("set role app_writer")
            _log(source, 1, start=1)  # after the first pass: only the trigger's NOTIFY brings a pass before an hour
            source.execute("reset role")
            _until(lambda: source.execute(answers).fetchone()[0] == 2, seconds=20)
            _until(lambda: source.execute("select unjudged from ragsql.watch_lag").fetchone()[0] == 0, seconds=20)
    finally:
        source.execute("reset role")
    assert run_cli(capsys, "watch", "drop", "w", "--yes")[0] == 0
    assert source.execute(triggers).fetchone()[0] == 0
    source.execute("drop owned by app_writer; drop role app_writer")


def _documented(lang: str, marker: str) -> str:
    """The one fenced `lang` block of docs/guides/watch.md holding `marker`."""
    from tests.docs_runner import blocks

    page = (ROOT / "docs" / "guides" / "watch.md").read_text(encoding="utf-8")
    found = [b.code for b in blocks(page) if b.lang == lang and marker in b.code]
    assert len(found) == 1, f"{len(found)} ```{lang} blocks with {marker!r} in docs/guides/watch.md"
    return found[0]


def test_the_documented_cron_line_and_systemd_unit_run_the_watch(source, fresh_db, tmp_path):
    """The crontab line of docs/guides/watch.md, run by sh with only the variables it sets (its database URL and
    log file replaced by the test's), captures and judges the new rows; so does the systemd service's ExecStart with
    its Environment= lines; systemd-analyze, where installed, finds nothing to say about the two units."""
    import shlex
    import shutil
    import subprocess
    import sys

    from ragsql.cli import main

    assert main(list(ADD)) == 0
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ragsql").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ragsql "$@"\n')
    (shim / "ragsql").chmod(0o755)
    base = {"PATH": f"{shim}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}

    line = next(x for x in _documented("text", "ragsql watch run --once").splitlines() if "watch run" in x)
    schedule, command = line.split(None, 5)[:5], line.split(None, 5)[5]
    assert schedule == ["*"] * 5
    log = tmp_path / "watch.log"
    command = command.replace(DOC_URL, shlex.quote(fresh_db)).replace("/var/log/ragsql-watch.log", str(log))
    _log(source, 2)
    done = subprocess.run(["/bin/sh", "-c", command], env=base, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, log.read_text()
    assert _captured(source) == ["1", "2"] and "watch run" in log.read_text()

    unit = _documented("ini", "[Service]")
    service = unit.split("[Service]", 1)[1]
    settings = [x.split("=", 1) for x in service.splitlines() if "=" in x and not x.startswith("#")]
    env = {k: v for key, value in settings if key == "Environment" for k, v in [value.split("=", 1)]}
    assert env.pop("RAGSQL_DATABASE_URL") == DOC_URL
    argv = shlex.split(next(value for key, value in settings if key == "ExecStart"))
    assert argv[0].endswith("/ragsql") and argv[1:3] == ["watch", "run"] and "--once" in argv
    _log(source, 1, start=2)
    done = subprocess.run(
        [str(shim / "ragsql"), *argv[1:]],
        env={**base, **env, "RAGSQL_DATABASE_URL": fresh_db},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert _captured(source) == ["1", "2", "3"]
    assert source.execute("select status, count(*) from ragsql.judge_task group by 1").fetchall() == [("done", 3)]

    if analyze := shutil.which("systemd-analyze"):
        for block, name in (
            (unit, "ragsql-watch.service"),
            (_documented("ini", "OnUnitInactiveSec"), "ragsql-watch.timer"),
        ):
            (tmp_path / name).write_text(block.replace(argv[0], str(shim / "ragsql")))
        names = [str(tmp_path / "ragsql-watch.service"), str(tmp_path / "ragsql-watch.timer")]
        checked = subprocess.run([analyze, "verify", *names], capture_output=True, text=True, timeout=120)
        assert (checked.returncode, checked.stderr) == (0, "")
