"""What is stored: runs, datasets and corpora with their counts, one run in full, and deleting one of them."""

from __future__ import annotations

import psycopg

from ragsql.db import names
from ragsql.db.rows import dict_rows

__all__ = ["delete", "list_corpora", "list_datasets", "list_runs", "run_details"]


def list_runs(conn: psycopg.Connection) -> list[dict]:
    """Every run: its dataset, when it was made, its ranked results, answers, judge tasks and judges."""
    # counts as subqueries grouped by run id, not correlated ones: Citus runs these on every shard at once
    return dict_rows(
        conn,
        """
        select r.name as run, d.name as dataset, r.created_at,
               coalesce(x.n, 0) as results, coalesce(a.n, 0) as answers, coalesce(t.n, 0) as judge_tasks,
               t.judges
        from ragsql.run as r join ragsql.dataset as d on d.id = r.dataset_id
        left join (select x.run_id, count(*) as n from ragsql.run_result as x group by x.run_id) as x
          on x.run_id = r.id
        left join (select a.run_id, count(*) as n from ragsql.answer as a group by a.run_id) as a on a.run_id = r.id
        left join (select t.run_id, count(*) as n, string_agg(distinct t.judge, ', ') as judges
                   from ragsql.judge_task as t group by t.run_id) as t on t.run_id = r.id
        order by r.created_at, r.id""",
    )


def list_datasets(conn: psycopg.Connection) -> list[dict]:
    """Every dataset: its queries, judgments, reference answers and runs."""
    return dict_rows(
        conn,
        """
        select d.name as dataset, d.created_at,
               (select count(*) from ragsql.query as q where q.dataset_id = d.id) as queries,
               (select count(*) from ragsql.judgment as j join ragsql.query as q on q.id = j.query_id
                where q.dataset_id = d.id) as judgments,
               (select count(*) from ragsql.reference_answer as a join ragsql.query as q on q.id = a.query_id
                where q.dataset_id = d.id) as references,
               (select count(*) from ragsql.run as r where r.dataset_id = d.id) as runs
        from ragsql.dataset as d
        order by d.created_at, d.id""",
    )


def list_corpora(conn: psycopg.Connection) -> list[dict]:
    """Every corpus: its documents, chunkings (versions) with their chunks, and the runs retrieved from it."""
    return dict_rows(
        conn,
        """
        select c.name as corpus, c.created_at,
               (select count(*) from ragsql.document as x where x.corpus_id = c.id) as documents,
               (select count(*) from ragsql.corpus_version as v where v.corpus_id = c.id) as versions,
               (select count(*) from ragsql.chunk as k join ragsql.corpus_version as v on v.id = k.version_id
                where v.corpus_id = c.id) as chunks,
               (select coalesce(sum(rr.n), 0)::bigint from ragsql.corpus_version as v
                join (select rr.version_id, count(*) as n from ragsql.retrieval_run as rr group by rr.version_id) as rr
                  on rr.version_id = v.id
                where v.corpus_id = c.id) as runs
        from ragsql.corpus as c
        order by c.created_at, c.id""",
    )


def run_details(conn: psycopg.Connection, run: str) -> dict:
    """One run: its row of list_runs and its configuration as (key, value) rows."""
    row = next(r for r in list_runs(conn) if r["run"] == run)
    row["config"] = dict(conn.execute("select key, value from ragsql.run_config(%s)", (run,)).fetchall())
    return row


def delete(conn: psycopg.Connection, kind: str, name: str) -> dict:
    """Delete a run (and its repeats R#k), dataset or corpus and everything that belongs to it (the judge-call cache
    stays); returns what went with it ({} for a dataset that does not exist). A corpus that runs were retrieved from is
    refused: their measures read its chunks."""
    if kind == "corpus":
        users = [
            r
            for (r,) in conn.execute(
                "select ru.name from ragsql.retrieval_run as rr "
                "join ragsql.corpus_version as v on v.id = rr.version_id "
                "join ragsql.corpus as c on c.id = v.corpus_id join ragsql.run as ru on ru.id = rr.run_id "
                "where c.name = %s order by ru.name",
                (name,),
            )
        ]
        if users:
            return {"refused": users}
        counts = dict_rows(
            conn,
            "select count(*) as documents from ragsql.document as d join ragsql.corpus as c "
            "on c.id = d.corpus_id where c.name = %s",
            (name,),
        )[0]
        conn.execute("delete from ragsql.corpus where name = %s", (name,))
    elif kind == "dataset":
        found = dict_rows(
            conn,
            "select (select count(*) from ragsql.query as q where q.dataset_id = d.id) as queries, "
            "(select count(*) from ragsql.run as r where r.dataset_id = d.id) as runs "
            "from ragsql.dataset as d where d.name = %s",
            (name,),
        )
        if not found:
            return {}
        counts = found[0]
        conn.execute("delete from ragsql.dataset where name = %s", (name,))
    else:
        # counted by the run's id, not from list_runs: on Citus a read of every shard would keep the delete of a
        # reference row that cascades to the shards from running in this transaction
        counts = dict_rows(
            conn,
            """
            select (select count(*) from ragsql.run_result as x where x.run_id = %(id)s) as results,
                   (select count(*) from ragsql.answer as x where x.run_id = %(id)s) as answers,
                   (select count(*) from ragsql.judge_task as x where x.run_id = %(id)s) as judge_tasks""",
            {"id": names.run_id(conn, name)},
        )[0]
        # its repeats (R#k, ragsql judge --repeat) are copies of its answers: they go with it
        counts["repeats"] = len(
            conn.execute("delete from ragsql.run where config ->> 'repeat_of' = %s returning id", (name,)).fetchall()
        )
        conn.execute("delete from ragsql.run where name = %s", (name,))
    return counts
