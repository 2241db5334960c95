"""A ranked run's results into ragsql.run_result: COPY straight into the table, and the few rows that only the whole
run can rank (a query the file comes back to) through a staging table and one window function.

On one server run_result is partitioned by run: a new run's results are copied into a table of its own with no
index (bare_partition), which attach_partition indexes and attaches once they are all in (migration 0160). Where
the table is not partitioned (a Citus coordinator) they are copied into run_result itself.

Works inside the caller's transaction. Duplicates meet the table's unique (run_id, query_id, docno) index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice

import psycopg
from psycopg import sql

from ragsql.db.connect import duplicates_refused
from ragsql.db.rows import value

__all__ = [
    "attach_partition",
    "bare_partition",
    "copy_ranked",
    "index_partition",
    "partitioned",
    "query_ids",
    "rank_staged",
    "ranking_text",
    "stage_unranked",
]

RUN_RESULT = sql.Identifier("ragsql", "run_result")
_COPY = "copy {} (run_id, dataset_id, query_id, rank, docno, score) from stdin"
_RANKS = list(map(str, range(1001)))  # str(rank), grown for the longest ranking seen


def query_ids(conn: psycopg.Connection, dataset_id: int, qids: Sequence[str]) -> dict[str, int]:
    """{qid: query id} of these qids of the dataset (the ones it holds)."""
    return dict(
        conn.execute(
            "select qid, id from ragsql.query where dataset_id = %s and qid = any(%s)", (dataset_id, list(qids))
        ).fetchall()
    )


def ranking_text(docnos: Sequence[str], scores: Sequence[float]) -> str:
    """COPY text of one query's ranking for copy_ranked, rank i for the i-th docno, each line starting with \\x02
    where copy_ranked puts the run, dataset and query ids (an id never holds a control character).

    A score is written as its shortest round-trip repr, which float8 reads back exactly; a backslash is the only
    character to escape, as ids hold no tab, newline or carriage return (a run line is split on whitespace)."""
    global _RANKS
    ranks = _RANKS
    if len(ranks) <= len(docnos):  # a new list, never one another thread is reading, replaced whole
        ranks = _RANKS = list(map(str, range(max(len(docnos) + 1, 2 * len(ranks)))))
    text = "\x02" + "\n\x02".join(map("\t".join, zip(islice(ranks, 1, None), docnos, map(repr, scores)))) + "\n"
    return text.replace("\\", "\\\\") if "\\" in text else text


def partitioned(conn: psycopg.Connection) -> bool:
    """Whether ragsql.run_result is partitioned by run (one server; not on a Citus coordinator)."""
    return value(conn.execute("select relkind = 'p' from pg_class where oid = 'ragsql.run_result'::regclass"))


def bare_partition(conn: psycopg.Connection, run_id: int) -> sql.Composable:
    """A new table, with no index, for the results of this run (which has none): ragsql._run_result_bare."""
    name = value(conn.execute("select ragsql._run_result_bare(%s)::text", (run_id,)))
    return sql.SQL(name)  # already quoted by the server: ragsql.run_result_r<id>


def index_partition(conn: psycopg.Connection, run_id: int) -> None:
    """Check, index and analyze the run's table of results (ragsql._run_result_index), all of attach_partition's
    work but the attach, which locks run_result; a docno twice for a query is an InputError."""
    with duplicates_refused("duplicate result in a run"):
        conn.execute("select ragsql._run_result_index(%s)", (run_id,))


def attach_partition(conn: psycopg.Connection, run_id: int) -> None:
    """Index the run's table of results (unless index_partition did) and attach it as its partition of run_result
    (ragsql._run_result_attach);
    a docno twice for a query is an InputError."""
    with duplicates_refused("duplicate result in a run"):
        conn.execute("select ragsql._run_result_attach(%s)", (run_id,))


def copy_ranked(
    conn: psycopg.Connection,
    run_id: int,
    dataset_id: int,
    rankings: Iterable[tuple[int, str]],
    table: sql.Composable = RUN_RESULT,
) -> None:
    """COPY (query id, ranking_text) rankings straight into the run's results, or into `table`, the run's partition
    made by bare_partition in this transaction: frozen there (all visible at once, so the first reads after the
    import set no hint bits and index-only scans need no heap visit)."""
    copy_sql = sql.SQL(_COPY).format(table) + (sql.SQL("") if table is RUN_RESULT else sql.SQL(" (freeze)"))
    with conn.cursor().copy(copy_sql) as copy:
        for query_id, text in rankings:
            copy.write(text.replace("\x02", f"{run_id}\t{dataset_id}\t{query_id}\t"))


def stage_unranked(conn: psycopg.Connection, rows: Iterable[tuple[int, str, float]]) -> int:
    """Add (query id, docno, score) rows to the temporary table _stage_unranked (made on first use, dropped at
    commit); the row count."""
    conn.execute(
        "create temp table if not exists _stage_unranked (query_id bigint, docno text, score float8) on commit drop"
    )
    count = 0
    with conn.cursor().copy("copy _stage_unranked (query_id, docno, score) from stdin (format binary)") as copy:
        copy.set_types(["int8", "text", "float8"])
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def rank_staged(conn: psycopg.Connection, run_id: int, dataset_id: int, table: sql.Composable = RUN_RESULT) -> None:
    """Rank the staged rows with the results the run already holds for their queries (in run_result, or in `table`,
    its partition), as trec_eval ranks (score descending, ties by docno descending in byte order), and store them;
    the stage is emptied. A docno twice for a query is an InputError (here, or where the partition is indexed)."""
    conn.execute(
        sql.SQL(
            """
            with moved as (
                delete from {} as r
                where r.run_id = %s and r.query_id in (select distinct s.query_id from _stage_unranked as s)
                returning r.query_id, r.docno, r.score
            )
            insert into _stage_unranked (query_id, docno, score) select query_id, docno, score from moved
            """
        ).format(table),
        (run_id,),
    )
    with duplicates_refused("duplicate result in a run"):
        conn.execute(
            sql.SQL(
                """
                insert into {} (run_id, dataset_id, query_id, rank, docno, score)
                select %s, %s, s.query_id,
                       row_number() over (partition by s.query_id order by s.score desc, s.docno collate "C" desc),
                       s.docno, s.score
                from _stage_unranked as s
                """
            ).format(table),
            (run_id, dataset_id),
        )
    conn.execute("truncate _stage_unranked")
