"""A database whose run_result was partitioned by run on one server (migration 0160, before Citus came) is
distributed by `db init --distribute` with every row it holds."""

from __future__ import annotations

from pathlib import Path

import psycopg

from ragsql.db import install
from ragsql.db.install import sql_dir
from tests.citus.conftest import Side, _reset

TREC = Path(__file__).resolve().parents[1] / "data" / "trec"
RESULTS = """select q.qid, r.rank, r.docno, r.score, r.text from ragsql.run_result as r
             join ragsql.run as ru on ru.id = r.run_id join ragsql.query as q on q.id = r.query_id
             order by ru.name, q.qid, r.rank"""


def test_a_run_result_partitioned_before_citus_is_distributed_with_its_rows(citus: Side):
    """One server's layout on the coordinator (migration 0160 as it runs where the citus extension was not yet
    created): an imported run in a partition of its own, another in the default partition; --distribute makes
    run_result one hash-distributed table again, with the same rows, indexes, checks and grants, and the
    measures are unchanged."""
    migration = (sql_dir() / "migrations" / "0160_run_result_partitions.sql").read_text()
    assert "exists (select from pg_extension where extname = 'citus')" in migration
    try:
        with psycopg.connect(citus.url) as conn:
            conn.execute("drop schema if exists ragsql_report cascade")
            conn.execute("drop schema if exists ragsql cascade")
            conn.commit()
            install(conn)
            conn.execute(migration.replace("exists (select from pg_extension where extname = 'citus')", "false"))
            conn.commit()
            install(conn)  # the grants and functions that follow the migration in install.sql
            conn.commit()
        trec = TREC / "trec_eval_test"
        for name in ("imported", "by-sql"):
            citus.cli(
                "import",
                "trec",
                "--dataset",
                "d",
                "--qrels",
                str(trec / "qrels.test"),
                "--file",
                str(trec / "results.test"),
                "--run",
                name,
            )
        run_id = citus.rows("select id from ragsql.run where name = 'imported'")[0][0]
        # the second run moved to the default partition, where retrieval or a JSONL import store theirs
        with psycopg.connect(citus.url) as conn:
            other = conn.execute("select id from ragsql.run where name = 'by-sql'").fetchone()[0]
            rows = conn.execute(f"select * from ragsql.run_result_r{other}").fetchall()
            conn.execute(f"drop table ragsql.run_result_r{other}")
            with conn.cursor().copy("copy ragsql.run_result from stdin") as copy:
                for row in rows:
                    copy.write_row(row)
            conn.commit()
        kinds = citus.rows(
            "select c.relname::text from pg_inherits as i join pg_class as c on c.oid = i.inhrelid "
            "where i.inhparent = 'ragsql.run_result'::regclass order by 1"
        )
        assert kinds == [("run_result_default",), (f"run_result_r{run_id}",)]
        before, measures = citus.rows(RESULTS), citus.json("metrics", "--run", "imported")
        assert len(before) > 1000
        acl = citus.rows("select relacl::text from pg_class where oid = 'ragsql.run_result'::regclass")
        assert "ragsql_writer=arwd" in acl[0][0]

        assert "distributed on Citus" in citus.cli("db", "init", "--distribute").stdout
        assert citus.rows(RESULTS) == before
        assert citus.json("metrics", "--run", "imported") == measures
        assert citus.rows(
            "select c.relkind::text, p.partmethod::text from pg_class as c "
            "join pg_dist_partition as p on p.logicalrelid = c.oid "
            "where c.oid = 'ragsql.run_result'::regclass"
        ) == [("r", "h")]
        assert citus.rows("select relacl::text from pg_class where oid = 'ragsql.run_result'::regclass") == acl
        assert citus.rows(
            "select array_agg(relname::text order by relname) from pg_class "
            "where relnamespace = 'ragsql'::regnamespace and relname like 'run\\_result%%' "
            "and relkind in ('r', 'p', 'i', 'I')"
        ) == [(["run_result", "run_result_pkey", "run_result_run_id_query_id_docno_rank_key"],)]
        assert {
            c
            for (c,) in citus.rows(
                "select conname::text from pg_constraint where conrelid = 'ragsql.run_result'::regclass"
            )
        } >= {
            "run_result_rank_check",
            "run_result_docno_check",
            "run_result_pkey",
            "run_result_run_id_query_id_docno_rank_key",
            "run_result_run_id_dataset_id_fkey",
            "run_result_dataset_id_query_id_fkey",
        }
    finally:
        _reset(citus.url, distribute=True)
