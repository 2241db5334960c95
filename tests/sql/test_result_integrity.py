"""ragsql.run_result's references to its run and query, kept by statement triggers (migration 0120) as the two
foreign keys kept them: checked on insert and update, cascaded on delete, fixed keys, truncation together, and
the referenced rows locked against a concurrent delete. In Citus mode (RAGSQL_TEST_CITUS=1) sql/citus.sql has put
the two foreign keys back: the same refusals, worded by the worker that holds the shard."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from ragsql.db import results
from ragsql.errors import InputError
from ragsql.importer import import_trec
from tests.conftest import CITUS_SUITE
from tests.loading import load_trec

SHARD = r"(_\d+)?"  # on Citus a worker names the shard of a table or constraint: run_result_102036

# run_result is partitioned by run on one server only (migration 0160); on Citus it is one distributed table
ONE_SERVER_LAYOUT = pytest.mark.skipif(CITUS_SUITE, reason="one server's layout: Citus keeps run_result whole")


def _assert_key_error(error: psycopg.Error, message: str, table: str, constraint: str) -> None:
    """The error is PostgreSQL's foreign-key error (one server: the trigger's, with its diagnostic fields; Citus:
    the worker's, which names shards and carries no fields)."""
    if CITUS_SUITE:
        pattern = re.escape(message).replace(re.escape("{shard}"), SHARD)
        assert re.match(pattern, str(error)), str(error)
        return
    assert error.diag.message_primary == message.replace("{shard}", "")
    assert (error.diag.schema_name, error.diag.table_name, error.diag.constraint_name) == ("ragsql", table, constraint)


INSERT = "insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno) values (%s, %s, %s, %s, %s)"


def _dataset(conn, name: str, qids=("q1", "q2")) -> tuple[int, int, list[int]]:
    """(dataset id, run id, query ids) of a new dataset with a run and these queries."""
    ds = conn.execute("insert into ragsql.dataset (name) values (%s) returning id", (name,)).fetchone()[0]
    queries = [conn.execute("insert into ragsql.query (dataset_id, qid) values (%s, %s) returning id",
                            (ds, qid)).fetchone()[0] for qid in qids]
    run = conn.execute("insert into ragsql.run (name, dataset_id) values (%s, %s) returning id",
                       (f"{name}-run", ds)).fetchone()[0]
    return ds, run, queries


def _results(conn, run: int) -> list[tuple[int, str]]:
    return conn.execute("select query_id, docno from ragsql.run_result where run_id = %s order by 1, 2",
                        (run,)).fetchall()


def test_a_result_must_name_a_run_and_a_query_of_its_dataset(db):
    """An unknown run or query, a run of another dataset or a query of another dataset is SQLSTATE 23503 naming
    the key and the constraint, on insert (one row or many), update and COPY; nothing of the statement is kept."""
    ds, run, (q1, _) = _dataset(db, "a")
    other_ds, other_run, (other_q, _) = _dataset(db, "b")
    db.execute(INSERT, (run, ds, q1, 1, "d1"))
    cases = [
        ((run + 999, ds, q1, 2, "x"), "run_result_run_id_dataset_id_fkey", f"({run + 999}, {ds})"),
        ((other_run, ds, q1, 2, "x"), "run_result_run_id_dataset_id_fkey", f"({other_run}, {ds})"),
        ((run, ds, q1 + 999, 2, "x"), "run_result_dataset_id_query_id_fkey", f"({ds}, {q1 + 999})"),
        ((run, ds, other_q, 2, "x"), "run_result_dataset_id_query_id_fkey", f"({ds}, {other_q})"),
    ]
    for row, constraint, key in cases:
        with pytest.raises(psycopg.errors.ForeignKeyViolation) as caught, db.transaction():
            db.execute("insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno) "
                       "values (%s, %s, %s, 3, 'ok'), (%s, %s, %s, %s, %s)", (run, ds, q1, *row))
        assert key in str(caught.value)
        _assert_key_error(caught.value, f'insert or update on table "run_result{{shard}}" violates foreign key '
                          f'constraint "{constraint}{{shard}}"', "run_result", constraint)
    with pytest.raises(psycopg.errors.ForeignKeyViolation), db.transaction():
        db.execute("update ragsql.run_result set query_id = %s where run_id = %s", (other_q, run))
    # Citus reports a worker's error in a COPY as an internal error with the worker's message
    copy_error = psycopg.errors.InternalError if CITUS_SUITE else psycopg.errors.ForeignKeyViolation
    with pytest.raises(copy_error, match="violates foreign key constraint"), db.transaction():
        with db.cursor().copy("copy ragsql.run_result (run_id, dataset_id, query_id, rank, docno) from stdin") as copy:
            copy.write_row((run, ds, q1, 5, "c"))
            copy.write_row((run, ds, other_q, 6, "c"))
    assert _results(db, run) == [(q1, "d1")] and _results(db, other_run) == []


def test_deleting_a_run_a_query_or_a_dataset_deletes_their_results(db):
    """A deleted run takes its results, a deleted query its results in every run, a deleted dataset all of its
    results; results of other runs and datasets stay."""
    ds, run, (q1, q2) = _dataset(db, "a")
    second = db.execute("insert into ragsql.run (name, dataset_id) values ('a2', %s) returning id", (ds,)).fetchone()[0]
    other_ds, other_run, (other_q, _) = _dataset(db, "b")
    for r in (run, second):
        for q in (q1, q2):
            db.execute(INSERT, (r, ds, q, 1, "d"))
    db.execute(INSERT, (other_run, other_ds, other_q, 1, "d"))
    db.execute("delete from ragsql.run where id = %s", (second,))
    assert _results(db, second) == [] and _results(db, run) == [(q1, "d"), (q2, "d")]
    db.execute("delete from ragsql.query where id = %s", (q1,))
    assert _results(db, run) == [(q2, "d")]
    db.execute("delete from ragsql.dataset where id = %s", (ds,))
    count = db.execute("select count(*) from ragsql.run_result where dataset_id = %s", (ds,)).fetchone()[0]
    assert count == 0 and _results(db, other_run) == [(other_q, "d")]


def test_a_run_or_query_with_results_keeps_its_key_and_is_truncated_only_with_them(db):
    """Moving a run or query with results to another dataset is SQLSTATE 23503 (without results it is allowed);
    truncating run or query alone while results exist is refused; with run_result in the same command it works."""
    ds, run, (q1, q2) = _dataset(db, "a")
    other_ds, _, _ = _dataset(db, "b", ("x1",))
    db.execute(INSERT, (run, ds, q1, 1, "d"))
    for statement, params, table, constraint in [
            ("update ragsql.run set dataset_id = %s where id = %s", (other_ds, run), "run",
             "run_result_run_id_dataset_id_fkey"),
            ("update ragsql.query set dataset_id = %s where id = %s", (other_ds, q1), "query",
             "run_result_dataset_id_query_id_fkey")]:
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="still referenced") as caught, db.transaction():
            db.execute(statement, params)
        _assert_key_error(caught.value, f'update or delete on table "{table}{{shard}}" violates foreign key '
                          f'constraint "{constraint}{{shard}}" on table "run_result{{shard}}"', table, constraint)
    db.execute("update ragsql.query set dataset_id = %s where id = %s", (other_ds, q2))
    db.execute("update ragsql.query set text = 'same key' where id = %s", (q1,))
    for table in ("run", "query"):
        if CITUS_SUITE:  # real foreign keys: truncate ... cascade takes run_result with it, as PostgreSQL does
            break
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="cannot truncate"), db.transaction():
            db.execute(f"truncate ragsql.{table} cascade")
    db.execute("truncate ragsql.run_result, ragsql.run, ragsql.query cascade")
    assert db.execute("select count(*) from ragsql.run_result").fetchone()[0] == 0


def test_a_run_being_filled_cannot_be_deleted_and_a_deleted_run_cannot_be_filled(fresh_db):
    """Results inserted for a run lock it until commit, so a concurrent delete waits and then deletes them too;
    a run deleted by a transaction that commits first refuses the results that wait on it (as with foreign keys)."""
    with psycopg.connect(fresh_db) as a, psycopg.connect(fresh_db) as b:
        ds, run, (q1, _) = _dataset(a, "a")
        a.commit()
        a.execute(INSERT, (run, ds, q1, 1, "d"))
        deleted = threading.Thread(target=lambda: (b.execute("delete from ragsql.run where id = %s", (run,)),
                                                   b.commit()))
        deleted.start()
        time.sleep(0.5)
        assert deleted.is_alive()  # waits for a's lock on the run
        a.commit()
        deleted.join(10)
        assert a.execute("select count(*) from ragsql.run_result").fetchone()[0] == 0
        a.commit()

        run = a.execute("insert into ragsql.run (name, dataset_id) values ('again', %s) returning id",
                        (ds,)).fetchone()[0]
        a.commit()
        b.execute("delete from ragsql.run where id = %s", (run,))
        errors = []

        def insert() -> None:
            try:
                a.execute(INSERT, (run, ds, q1, 1, "d"))
            except psycopg.Error as exc:
                errors.append(exc)
            a.rollback()

        inserting = threading.Thread(target=insert)
        inserting.start()
        time.sleep(0.5)
        assert inserting.is_alive()  # waits for b's delete
        b.commit()
        inserting.join(10)
        assert [type(e) for e in errors] == [psycopg.errors.ForeignKeyViolation]
        assert a.execute("select count(*) from ragsql.run_result").fetchone()[0] == 0


CAST = Path(__file__).resolve().parents[1] / "data" / "trec" / "cast2021"


def _partition(conn, run: int) -> tuple | None:
    """(attached to run_result, index names) of the run's own partition, or None when it has none."""
    table = conn.execute("select to_regclass(%s)", (f"ragsql.run_result_r{run}",)).fetchone()[0]
    if table is None:
        return None
    return conn.execute(
        """
        select exists (select from pg_inherits as i where i.inhrelid = %(t)s::regclass
                                                    and i.inhparent = 'ragsql.run_result'::regclass),
               array(select c.relname::text from pg_index as x join pg_class as c on c.oid = x.indexrelid
                     where x.indrelid = %(t)s::regclass and x.indisvalid order by 1)
        """, {"t": table}).fetchone()


@ONE_SERVER_LAYOUT
def test_an_imported_run_is_a_partition_of_its_own_that_goes_with_its_run(db):
    """On one server `import trec` stores a run in a partition of its own, indexed and attached (migration 0160),
    with the same rows as the staging path stores in the default partition (CAsT 2021, 18,570 ranked rows); a run
    filled by SQL stays in the default partition; deleting the run drops its partition and nothing else."""
    qrels, run_file = CAST / "trec-cast-qrels-docs.2021.qrel", CAST / "org_manual_bm25.run"
    db.execute("select 1")  # the import then runs in the test's transaction, rolled back after it
    summary = import_trec(db, "cast", qrels, run_file, run_name="fast")
    slow = load_trec(db, qrels, run_file, run_name="slow")
    fast = db.execute("select id from ragsql.run where name = 'fast'").fetchone()[0]
    assert summary.results == 18570
    assert _partition(db, fast) == (True, [f"run_result_r{fast}_pkey",
                                           f"run_result_r{fast}_run_id_query_id_docno_rank_key"])
    assert _partition(db, slow) is None
    rows = "select q.qid, r.rank, r.docno, r.score, r.tableoid::regclass::text from ragsql.run_result as r " \
           "join ragsql.query as q on q.id = r.query_id where r.run_id = %s order by 1, 2"
    fast_rows, slow_rows = db.execute(rows, (fast,)).fetchall(), db.execute(rows, (slow,)).fetchall()
    assert [r[:4] for r in fast_rows] == [r[:4] for r in slow_rows] and len(fast_rows) == 18570
    assert {r[4] for r in fast_rows} == {f"ragsql.run_result_r{fast}"}
    assert {r[4] for r in slow_rows} == {"ragsql.run_result_default"}
    db.execute("delete from ragsql.run where id = %s", (fast,))
    assert _partition(db, fast) is None and _results(db, fast) == []
    assert db.execute("select count(*) from ragsql.run_result where run_id = %s", (slow,)).fetchone()[0] == 18570


@ONE_SERVER_LAYOUT
def test_a_bare_partition_is_attached_only_with_queries_of_its_dataset_and_no_docno_twice(db):
    """The rows copied into a run's own table are checked when it is attached, as the statement triggers check an
    insert: a query of another dataset is SQLSTATE 23503 naming the foreign key; a docno twice for a query is the
    unique index's error, an InputError of the import."""
    ds, run, (q1, _) = _dataset(db, "a")
    _, _, (other_q, _) = _dataset(db, "b")
    for rows, error in [([(q1, 1, "d"), (other_q, 1, "d")], psycopg.errors.ForeignKeyViolation),
                        ([(q1, 1, "d"), (q1, 2, "d")], InputError)]:
        with pytest.raises(error) as caught, db.transaction():
            table = results.bare_partition(db, run)
            for query, rank, docno in rows:
                db.execute(sql.SQL("insert into {} (run_id, dataset_id, query_id, rank, docno) "
                                   "values (%s, %s, %s, %s, %s)").format(table), (run, ds, query, rank, docno))
            results.attach_partition(db, run)
        if error is InputError:
            assert "duplicate result in a run" in str(caught.value) and f"({run}, {q1}, d)" in str(caught.value)
        else:
            assert caught.value.diag.constraint_name == "run_result_dataset_id_query_id_fkey"
            assert f"({ds}, {other_q})" in caught.value.diag.message_detail
        assert _partition(db, run) is None
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction():  # the table holds this run's rows only
        table = results.bare_partition(db, run)
        db.execute(sql.SQL("insert into {} (run_id, dataset_id, query_id, rank, docno) values (%s, %s, %s, 1, 'd')")
                   .format(table), (run + 1, ds, q1))


@ONE_SERVER_LAYOUT
def test_a_metric_query_reads_only_its_runs_partition(fresh_db):
    """The metric queries name `run_id = <id>`: with two imported runs and the default partition, the measures of
    one run lock (so read) run_result and that run's partition only; comparing two reads their two."""
    qrels, run_file = CAST / "trec-cast-qrels-docs.2021.qrel", CAST / "org_manual_bm25.run"
    with psycopg.connect(fresh_db) as conn:
        for name in ("a", "b"):
            import_trec(conn, "cast", qrels, run_file, run_name=name)
        conn.execute("insert into ragsql.run (name, dataset_id) select 'by-sql', id from ragsql.dataset")
        conn.execute("insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno) "
                     "select r.id, r.dataset_id, q.id, 1, 'd' from ragsql.run as r join ragsql.query as q "
                     "on q.dataset_id = r.dataset_id where r.name = 'by-sql'")  # rows in the default partition
        conn.commit()
        ids = dict(conn.execute("select name, id from ragsql.run").fetchall())
        read = ("select relation::regclass::text from pg_locks where pid = pg_backend_pid() and locktype = 'relation' "
                "and relation = any (select c.oid from pg_class as c where c.relname like 'run\\_result%%' "
                "and c.relkind in ('r', 'p')) order by 1")
        for query, runs in [("select count(*) from ragsql.run_measure where run = 'a'", ["a"]),
                            ("select count(*) from ragsql.measure('b', 'nDCG@10')", ["b"]),
                            ("select count(*) from ragsql.compare('a', 'b')", ["a", "b"])]:
            assert conn.execute(query).fetchone()[0] > 0
            assert [r for (r,) in conn.execute(read)] == ["ragsql.run_result"] + [
                f"ragsql.run_result_r{ids[run]}" for run in runs], query
            conn.rollback()
