"""`ragsql watch run --follow` through a restart of the database server: it reconnects (its LISTEN connection too)
and judges the rows logged after the restart, without a traceback and without exiting."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import CITUS_SUITE, restartable, run_cli
from tests.test_watch import ADD, _log, _until, count, follower, source  # noqa: F401 (source: the fixture)


def _restart() -> None:
    """Stop and start the suite's server (the embedded one, or every node of the Citus cluster)."""
    from ragsql.db import server

    if CITUS_SUITE:
        from tests import cluster

        cluster.restart()
    else:
        server.stop_embedded()
        server.ensure_embedded()


DONE = "select count(*) from ragsql.judge_task where status = 'done'"


@pytest.mark.skipif(not restartable(), reason="the database server is someone else's: it is not restarted")
def test_follow_reconnects_after_a_database_restart_and_judges_the_rows_logged_after_it(source, fresh_db, capsys):
    """A watcher following a watch with a trigger, waiting out a one-hour interval, loses its connections to a
    restart of the server; it reconnects, LISTEN included, so rows logged after the restart are judged within
    seconds; it keeps running through the outage (at most clean one-line errors, no traceback) and SIGTERM then
    stops it with exit 143."""
    assert run_cli(capsys, *ADD, "--trigger")[0] == 0
    with follower(fresh_db, "--interval", "1h"):
        _log(source, 1)
        _until(lambda: count(fresh_db, DONE) == 1)  # the first pass, or the trigger's wake-up
        _restart()
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            _log(conn, 2, start=1)  # after the restart: only a NOTIFY on a new LISTEN brings a pass before an hour
        _until(lambda: count(fresh_db, DONE) == 3, seconds=30)
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            _log(conn, 1, start=3)  # and the next wake-up comes on the same new connection
        _until(lambda: count(fresh_db, DONE) == 4, seconds=30)
    assert count(fresh_db, "select count(*) from ragsql.answer") == 4


@pytest.mark.skipif(not restartable(), reason="the database server is someone else's: it is not restarted")
def test_follow_survives_a_database_restart_in_the_middle_of_judging(source, fresh_db, endpoint, capsys):
    """A restart while a watcher's judge calls are in flight fails that pass with clean one-line errors at most; the
    watcher keeps running, judges every row (those of the interrupted pass and those logged after the restart)
    once, and leaves no task running."""
    args = list(ADD)
    del args[args.index("--judge") : args.index("--judge") + 2]  # the configured (fake) endpoint
    assert run_cli(capsys, *args)[0] == 0
    with follower(fresh_db, "--interval", "1s", "--workers", "2"):
        endpoint.latency = 0.3
        _log(source, 6)
        _until(lambda: endpoint.chat_calls >= 2)
        _restart()
        endpoint.latency = 0
        with psycopg.connect(fresh_db, autocommit=True) as conn:
            _log(conn, 2, start=6)
        _until(lambda: count(fresh_db, DONE) == 8, seconds=120)
    assert count(fresh_db, "select count(*) from ragsql.answer") == 8
