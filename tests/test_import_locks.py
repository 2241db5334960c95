"""A TREC import or a run's deletion waiting for a lock on ragsql.run_result (to attach or drop the run's partition)
while a long transaction reads the table never makes readers of other runs wait behind it (issue 26)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from ragsql.cli import main
from ragsql.db import results
from ragsql.importer import import_trec
from ragsql.ingest import ingest
from ragsql.llm.settings import EndpointSettings
from tests.conftest import CITUS_SUITE
from tests.loading import generated_run, load_trec

# run_result is partitioned by run on one server only (migration 0160); on Citus the import takes its ordinary path
pytestmark = pytest.mark.skipif(CITUS_SUITE, reason="one server's layout: Citus keeps run_result whole")

DEMO = Path(__file__).resolve().parents[1] / "ragsql" / "data" / "demo" / "corpus.jsonl"
MEASURES = ("nDCG@10", "AP", "P@5", "RR@10")


@pytest.fixture
def runs(fresh_db, tmp_path) -> Iterator[tuple[str, Path, Path]]:
    """fresh_db holding run A in the default partition of run_result (stored row by row, as retrieval does) and
    run B0 imported from the TREC file B whose import the tests start again; (url, qrels, B)."""
    qrels, run_a, run_b = tmp_path / "q.qrels", tmp_path / "a.run", tmp_path / "b.run"
    qrels.write_text("".join(f"T{t:02} 0 D{d} {1 + d % 2}\n" for t in range(30) for d in range(0, 300, 7)))
    generated_run(run_a, "rank order", seed=1)
    generated_run(run_b, "queries come back", seed=2)
    with psycopg.connect(fresh_db) as conn:
        load_trec(conn, qrels, run_a, run_name="A", dataset="ds")
        import_trec(conn, "ds", qrels, run_b, run_name="B0")
    yield fresh_db, qrels, run_b


@pytest.fixture
def long_reader(runs) -> Iterator[psycopg.Connection]:
    """A transaction that read run A (a report, say) and stays open until the test ends: it holds ACCESS SHARE on
    run_result and, its run id known only when it ran, on every partition."""
    with psycopg.connect(runs[0]) as reader:
        reader.execute(
            "select count(*) from ragsql.run_result where run_id = (select id from ragsql.run where name = 'A')"
        )
        yield reader
        reader.rollback()


def values(url: str, run: str) -> list[float]:
    with psycopg.connect(url) as conn:
        return [conn.execute("select value from ragsql.measure(%s, %s)", (run, m)).fetchone()[0] for m in MEASURES]


def partitions(conn: psycopg.Connection, run_id: int) -> list[tuple[str, int]]:
    """The tables of ragsql.run_result that hold the run's rows, with their row counts."""
    return conn.execute(
        "select r.tableoid::regclass::text, count(*) from ragsql.run_result as r where r.run_id = %s group by 1",
        (run_id,),
    ).fetchall()


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, dict]:
    """`work` started in a thread; the dict gets its "result" or "error" and the "seconds" it took."""
    outcome: dict = {}

    def target() -> None:
        started = time.monotonic()
        try:
            outcome["result"] = work()
        except Exception as exc:  # noqa: BLE001 - the test reports it
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def wait_for_call(url: str, pid: int, call: str) -> None:
    """Until session `pid` has spent half a second in a statement calling `call` (it waits for its lock there)."""
    with psycopg.connect(url, autocommit=True) as admin:
        for _ in range(200):
            seconds = admin.execute(
                "select extract(epoch from clock_timestamp() - query_start) from pg_stat_activity "
                "where pid = %s and state = 'active' and query like %s",
                (pid, f"%{call}%"),
            ).fetchone()
            if seconds and seconds[0] > 0.5:
                return
            time.sleep(0.05)
    raise AssertionError(f"session {pid} never called {call}")


def timed_metrics(capsys, monkeypatch, run: str) -> tuple[float, int, str]:
    """`ragsql metrics --run RUN` in this process: seconds, exit code, stderr; a statement waiting 8 s fails."""
    monkeypatch.setenv("PGOPTIONS", "-c statement_timeout=8s")
    capsys.readouterr()
    started = time.monotonic()
    code = main(["metrics", "--run", run])
    seconds = time.monotonic() - started
    monkeypatch.delenv("PGOPTIONS")
    return seconds, code, capsys.readouterr().err


def test_import_waiting_to_attach_never_queues_readers_of_other_runs(runs, long_reader, capsys, monkeypatch):
    """While a long transaction that read run A is open, `ragsql import trec` of run B waits to attach its
    partition, yet `ragsql metrics --run A` answers at once; when the reader ends, B is attached with the values
    of the same file imported with nobody reading."""
    url, qrels, run_b = runs
    with psycopg.connect(url) as importer:
        thread, imported = in_thread(lambda: import_trec(importer, "ds", qrels, run_b, run_name="B"))
        try:
            wait_for_call(url, importer.info.backend_pid, "_run_result_attach")
            seconds, code, err = timed_metrics(capsys, monkeypatch, "A")
            assert (code, err) == (0, "") and seconds < 2, (seconds, err)
            assert thread.is_alive()  # still waiting for the reader's lock
        finally:
            long_reader.rollback()
            thread.join(30)
        assert "error" not in imported and "seconds" in imported, imported
    with psycopg.connect(url) as conn:
        run_id = conn.execute("select id from ragsql.run where name = 'B'").fetchone()[0]
        partition = partitions(conn, run_id)
    assert partition == [(f"ragsql.run_result_r{run_id}", 1200)]
    assert values(url, "B") == values(url, "B0") and None not in values(url, "B0")


def test_import_that_waits_past_lock_wait_fails_in_one_line_and_stores_nothing(runs, long_reader, capsys, monkeypatch):
    """An import still waiting after ragsql.lock_wait: exit 1, one line naming the lock and the setting, and
    nothing of it left (no run, no table of results); the reader's transaction is untouched."""
    url, qrels, run_b = runs
    monkeypatch.setenv("PGOPTIONS", "-c ragsql.lock_wait=1s -c lock_timeout=5s")  # the latter: a wait unbounded
    capsys.readouterr()
    started = time.monotonic()
    code = main(["import", "trec", "--dataset", "ds", "--qrels", str(qrels), "--file", str(run_b), "--run", "B"])
    seconds = time.monotonic() - started
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and len(err) == 1 and seconds < 10, (seconds, err)
    assert (
        err[0].startswith("ragsql: error: the results of run ")
        and "were not attached to ragsql.run_result: "
        "another session held a lock it needs for 00:00:01 (ragsql.lock_wait)"
        in err[0]
    ), err
    assert long_reader.execute("select count(*) from ragsql.run").fetchone()[0] == 2  # A and B0
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from ragsql.run where name = 'B'").fetchone()[0] == 0
        assert (
            conn.execute(
                "select count(*) from pg_class where relname like 'run\\_result\\_r%%' "
                "and not relispartition and relkind = 'r'"
            ).fetchone()[0]
            == 0
        )


def test_deleting_a_run_never_queues_readers_of_other_runs(runs, long_reader, capsys, monkeypatch):
    """`ragsql delete run B0` (its own partition, dropped with an ACCESS EXCLUSIVE lock on run_result itself) waits
    for the long reader without queueing `ragsql metrics --run A`; then the run and its table are gone."""
    url = runs[0]
    with psycopg.connect(url) as conn:
        run_id = conn.execute("select id from ragsql.run where name = 'B0'").fetchone()[0]
    deleter = psycopg.connect(url)
    try:

        def delete() -> None:
            with deleter.transaction():
                deleter.execute("delete from ragsql.run where id = %s", (run_id,))

        thread, deleted = in_thread(delete)
        try:
            wait_for_call(url, deleter.info.backend_pid, "delete from ragsql.run")
            seconds, code, err = timed_metrics(capsys, monkeypatch, "A")
            assert (code, err) == (0, "") and seconds < 2, (seconds, err)
            assert thread.is_alive()
        finally:
            long_reader.rollback()
            thread.join(30)
        assert "error" not in deleted and "seconds" in deleted, deleted
    finally:
        deleter.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("select to_regclass(%s)", (f"ragsql.run_result_r{run_id}",)).fetchone()[0] is None
        assert conn.execute("select count(*) from ragsql.run_result where run_id = %s", (run_id,)).fetchone()[0] == 0


def measure_seconds(url: str, run: str) -> float:
    """Seconds `ragsql.measure(run, 'nDCG@10')` takes in a connection of its own; a wait of 8 s fails."""
    with psycopg.connect(url, options="-c statement_timeout=8s") as conn:
        started = time.monotonic()
        conn.execute("select value from ragsql.measure(%s, 'nDCG@10')", (run,)).fetchone()
        return time.monotonic() - started


def test_replacing_a_run_never_locks_run_result_while_it_loads(runs, long_reader, tmp_path, monkeypatch):
    """`import trec --replace` of B0 (a partition of its own) loads the new results while readers of run A come and
    go: none waits, neither while the rows are copied nor while the import waits at its end to drop B0's table
    behind a long reader; then B0 holds the values of the new file imported afresh and nothing of the old B0."""
    url, qrels, _ = runs
    run_c = tmp_path / "c.run"
    generated_run(run_c, "all shuffled", seed=3)
    with psycopg.connect(url) as conn:
        old_id = conn.execute("select id from ragsql.run where name = 'B0'").fetchone()[0]
    old_values = values(url, "B0")
    copied, go_on = threading.Event(), threading.Event()
    copy_ranked = results.copy_ranked

    def copy_then_wait(*args, **kwargs) -> None:
        # the import's long middle, held open: its first rows are copied, the rest is still to come
        copy_ranked(*args, **kwargs)
        copied.set()
        go_on.wait(60)

    monkeypatch.setattr(results, "copy_ranked", copy_then_wait)
    with psycopg.connect(url) as importer:
        thread, imported = in_thread(lambda: import_trec(importer, "ds", qrels, run_c, run_name="B0", replace=True))
        try:
            copied.wait(3)
            long_reader.rollback()  # before this fix the import only now drops B0's table, and copies under its lock
            assert copied.wait(20), "the import never copied its first rows"
            during_copy = measure_seconds(url, "A")
            print(f"measure of A while B0's replacement copies: {during_copy:.3f} s")
            assert during_copy < 2, during_copy
            long_reader.execute("select count(*) from ragsql.run_result where run_id = %s", (old_id,))
            go_on.set()
            wait_for_call(url, importer.info.backend_pid, "delete from ragsql.run")
            while_dropping = measure_seconds(url, "A")
            print(f"measure of A while the import waits to drop the old B0: {while_dropping:.3f} s")
            assert while_dropping < 2, while_dropping
            assert thread.is_alive()  # still waiting for the reader of the old B0
        finally:
            go_on.set()
            long_reader.rollback()
            thread.join(30)
        assert "error" not in imported and "seconds" in imported, imported
        import_trec(importer, "ds", qrels, run_c, run_name="C")
    with psycopg.connect(url) as conn:
        new_id = conn.execute("select id from ragsql.run where name = 'B0'").fetchone()[0]
        assert new_id != old_id
        assert conn.execute("select count(*) from ragsql.run where id = %s", (old_id,)).fetchone()[0] == 0
        assert conn.execute("select to_regclass(%s)", (f"ragsql.run_result_r{old_id}",)).fetchone()[0] is None
        assert conn.execute("select count(*) from ragsql.run_result where run_id = %s", (old_id,)).fetchone()[0] == 0
        assert conn.execute("select count(*) from ragsql.run where name not in ('A', 'B0', 'C')").fetchone()[0] == 0
        partition = partitions(conn, new_id)
    assert partition == [(f"ragsql.run_result_r{new_id}", 1200)]
    assert values(url, "B0") == values(url, "C") and None not in values(url, "C")
    assert values(url, "C") != old_values


@pytest.fixture
def corpus_x(fresh_db) -> Iterator[tuple[str, int]]:
    """fresh_db holding corpus X (the demo corpus, ingested); (url, X's version id)."""
    with psycopg.connect(fresh_db) as conn:
        version = ingest(conn, [str(DEMO)], "X", settings=EndpointSettings(embedder="offline")).version_id
    yield fresh_db, version


# a long-lived session's plans: generic ones lock every partition of chunk_term and bm25_list they may read; and
# the banded lists of bm25_list read even for a corpus as small as the demo's
SEARCHER = "-c plan_cache_mode=force_generic_plan -c ragsql.bm25_prune_above=0"


def bm25_seconds(url: str, version: int) -> float:
    """Seconds a BM25 search of the version takes in a connection of its own; a wait of 8 s fails."""
    with psycopg.connect(url, options=f"{SEARCHER} -c statement_timeout=8s") as conn:
        started = time.monotonic()
        found = conn.execute("select count(*) from ragsql.bm25(%s, array['earth', '地球'], 5)", (version,)).fetchone()
        assert found[0]
        return time.monotonic() - started


def test_ingesting_a_corpus_never_queues_bm25_readers_of_another(corpus_x, tmp_path):
    """While a long transaction that searched corpus X with ragsql.bm25 is open, `ragsql ingest` of a new corpus Y
    (its postings attached as a partition of chunk_term, its BM25 lists one of bm25_list) lets other searches of
    X through at once; when the reader ends, Y is searchable."""
    url, version = corpus_x
    docs = tmp_path / "y.jsonl"
    docs.write_text("".join(f'{{"id": "y{i}", "text": "the earth turns, page {i} of Y"}}\n' for i in range(50)))
    with psycopg.connect(url, options=SEARCHER) as reader, psycopg.connect(url) as ingester:
        reader.execute("select count(*) from ragsql.bm25(%s, array['earth', '地球'], 5)", (version,))
        thread, ingested = in_thread(
            lambda: ingest(ingester, [str(docs)], "Y", settings=EndpointSettings(embedder="offline"))
        )
        try:
            time.sleep(3)  # the ingest has loaded Y and waits for the reader's locks
            seconds = bm25_seconds(url, version)
            print(f"bm25 of X while Y is ingested behind a long reader: {seconds:.3f} s")
            assert seconds < 2, seconds
            assert thread.is_alive()
        finally:
            reader.rollback()
            thread.join(60)
        assert "error" not in ingested and "seconds" in ingested, ingested
        y = ingested["result"].version_id
    assert bm25_seconds(url, y) < 2
    with psycopg.connect(url) as conn:  # the partition's keys and index are the ones the attach adopted
        assert (
            conn.execute(
                "select count(*) from pg_constraint where conrelid = %s::regclass and conparentid <> 0",
                (f"ragsql.chunk_term_v{y}",),
            ).fetchone()[0]
            == 2
        )
        assert (
            conn.execute(
                "select count(*) from pg_index where indrelid = %s::regclass", (f"ragsql.chunk_term_v{y}",)
            ).fetchone()[0]
            == 2
        )
