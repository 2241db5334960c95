"""Bulk loads with COPY: datasets, queries, judgments, reference answers, runs, results, answers.

Every function works inside the caller's transaction, so an import either lands whole or not at all.
Rows are streamed through COPY into a temporary staging table and moved with one set-based insert.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from ragsql.db.connect import duplicates_refused
from ragsql.db.rows import value
from ragsql.errors import InputError

if TYPE_CHECKING:
    from typing_extensions import LiteralString

__all__ = [
    "ensure_dataset",
    "add_queries",
    "add_judgments",
    "add_gold_spans",
    "stored_gold_spans",
    "delete_gold_spans",
    "add_reference_answers",
    "create_run",
    "settle_run",
    "add_run_results",
    "add_answers",
    "LOADED",
    "analyze",
    "synthesized",
    "delete_synthesized",
    "stored_judgments",
    "stored_reference_answers",
    "delete_judgments",
    "delete_reference_answers",
]


def _copy(
    conn: psycopg.Connection,
    table: str,
    columns: Sequence[str],
    types: Sequence[LiteralString],
    rows: Iterable,
    *,
    cursor: psycopg.Cursor | None = None,
) -> int:
    """Create temp table `table` (dropped at commit) and COPY rows into it; returns the row count. With `cursor`
    (whose adapters know every type of `types`), the COPY is binary through it."""
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in zip(columns, types))
    # Several loads may share one transaction, so a stage left by an earlier one is replaced.
    conn.execute(sql.SQL("drop table if exists pg_temp.{}").format(sql.Identifier(table)))
    conn.execute(sql.SQL("create temp table {} ({}) on commit drop").format(sql.Identifier(table), cols))
    count = 0
    copy_sql = sql.SQL("copy {} ({}) from stdin{}").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(" (format binary)" if cursor is not None else ""),
    )
    with (cursor or conn.cursor()).copy(copy_sql) as copy:
        if cursor is not None:
            copy.set_types(types)
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def ensure_dataset(conn: psycopg.Connection, name: str, description: str | None = None) -> int:
    """Id of the named dataset, created when new."""
    return value(
        conn.execute(
            """
        insert into ragsql.dataset (name, description) values (%s, %s)
        on conflict (name) do update set description = coalesce(excluded.description, ragsql.dataset.description)
        returning id
        """,
            (name, description),
        )
    )


def add_queries(conn: psycopg.Connection, dataset_id: int, rows: Iterable[tuple]) -> int:
    """Upsert (qid, text, language, metadata dict) rows; known queries keep values not given again."""
    staged = _copy(
        conn,
        "_stage_query",
        ["qid", "text", "language", "metadata"],
        ["text", "text", "text", "jsonb"],
        ((qid, text, lang, json.dumps(meta or {})) for qid, text, lang, meta in rows),
    )
    conn.execute(
        """
        insert into ragsql.query (dataset_id, qid, text, language, metadata)
        select distinct on (s.qid) %s, s.qid, s.text, s.language, s.metadata from _stage_query as s
        on conflict (dataset_id, qid) do update set
            text = coalesce(excluded.text, ragsql.query.text),
            language = coalesce(excluded.language, ragsql.query.language),
            metadata = ragsql.query.metadata || excluded.metadata
        """,
        (dataset_id,),
    )
    return staged


def add_judgments(conn: psycopg.Connection, dataset_id: int, rows: Iterable[tuple]) -> int:
    """Insert (qid, docno, relevance, text) gold judgments; a (qid, docno) judged twice is an error."""
    staged = _copy(
        conn,
        "_stage_judgment",
        ["qid", "docno", "relevance", "text"],
        ["text", "text", "integer", "text"],
        rows,
    )
    _require_known_qids(conn, dataset_id, "_stage_judgment", "judgment")
    with duplicates_refused("an item is judged twice for one query"):
        conn.execute(
            """
            insert into ragsql.judgment (query_id, docno, relevance, text)
            select q.id, s.docno, s.relevance, s.text
            from _stage_judgment as s
            join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
            """,
            (dataset_id,),
        )
    return staged


def add_gold_spans(conn: psycopg.Connection, dataset_id: int, rows: Iterable[tuple]) -> int:
    """Insert (qid, doc_id, start, end, quote, relevance) gold spans, numbered per query in the given order."""
    staged = _copy(
        conn,
        "_stage_span",
        ["ord", "qid", "doc_id", "start_char", "end_char", "quote", "relevance"],
        ["bigint", "text", "text", "integer", "integer", "text", "integer"],
        ((i, *row) for i, row in enumerate(rows)),
    )
    _require_known_qids(conn, dataset_id, "_stage_span", "gold span")
    conn.execute(
        """
        insert into ragsql.gold_span (query_id, position, doc_id, start_char, end_char, quote, relevance)
        select q.id, row_number() over (partition by q.id order by s.ord), s.doc_id, s.start_char, s.end_char,
               s.quote, s.relevance
        from _stage_span as s
        join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
        """,
        (dataset_id,),
    )
    return staged


def stored_gold_spans(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> dict[str, list[tuple]]:
    """{qid: [(doc_id, start, end, quote, relevance), ...]} already stored for these queries, in order."""
    stored: dict[str, list[tuple]] = {}
    for qid, *span in conn.execute(
        """
        select q.qid, g.doc_id, g.start_char, g.end_char, g.quote, g.relevance
        from ragsql.gold_span as g join ragsql.query as q on q.id = g.query_id
        where q.dataset_id = %s and q.qid = any(%s)
        order by q.qid, g.position
        """,
        (dataset_id, qids),
    ):
        stored.setdefault(qid, []).append(tuple(span))
    return stored


def delete_gold_spans(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> None:
    """Remove the gold spans of these queries (before loading replacements)."""
    _delete_of_queries(conn, "gold_span", dataset_id, qids)


def add_reference_answers(conn: psycopg.Connection, dataset_id: int, rows: Iterable[tuple]) -> int:
    """Insert (qid, text) reference answers, numbered after those the query already has."""
    staged = _copy(
        conn,
        "_stage_reference",
        ["ord", "qid", "text"],
        ["bigint", "text", "text"],
        ((i, qid, text) for i, (qid, text) in enumerate(rows)),
    )
    _require_known_qids(conn, dataset_id, "_stage_reference", "reference answer")
    conn.execute(
        """
        insert into ragsql.reference_answer (query_id, position, text)
        select q.id,
               coalesce((select max(r.position) from ragsql.reference_answer as r where r.query_id = q.id), 0)
                   + row_number() over (partition by q.id order by s.ord),
               s.text
        from _stage_reference as s
        join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
        """,
        (dataset_id,),
    )
    return staged


def create_run(
    conn: psycopg.Connection,
    name: str,
    dataset_id: int,
    config: dict | None = None,
    notes: str | None = None,
    replace: bool = False,
) -> int:
    """Create a run; an existing name is an error unless replace=True: then the new run is named
    `_REPLACING + name` until settle_run, the caller's last step, deletes the old run and renames the new one."""
    existing = conn.execute("select id, dataset_id from ragsql.run where name = %s", (name,)).fetchone()
    if existing and not replace:
        holder = value(conn.execute("select name from ragsql.dataset where id = %s", (existing[1],)))
        raise InputError(
            f'run "{name}" already exists, in dataset "{holder}" (use --replace to load it again, '
            f"or ragsql delete run {name} --yes)"
        )
    return value(
        conn.execute(
            "insert into ragsql.run (name, dataset_id, config, notes) values (%s, %s, %s, %s) returning id",
            ((_REPLACING + name) if existing else name, dataset_id, json.dumps(config or {}), notes),
        )
    )


# Deleting a run that has its own partition of run_result drops it, which locks run_result (ACCESS EXCLUSIVE)
# until commit: every reader of every run would wait for the rest of the import (issue 26). A replacing run
# is loaded under this name (no name a person types starts with a control character) and the old run is
# deleted only at the end.
_REPLACING = "\x1freplacing\x1f"


def settle_run(conn: psycopg.Connection, run_id: int) -> None:
    """Delete the run that run `run_id` (made by create_run with replace=True) replaces and give it that run's
    name; nothing when it replaces none. The last step before commit: run_result is locked from here on."""
    name = value(conn.execute("select name from ragsql.run where id = %s", (run_id,)))
    if not name.startswith(_REPLACING):
        return
    name = name.removeprefix(_REPLACING)
    conn.execute("delete from ragsql.run where name = %s", (name,))
    conn.execute("update ragsql.run set name = %s where id = %s", (name, run_id))


def add_run_results(conn: psycopg.Connection, run_id: int, rows: Iterable[tuple], rank_by_score: bool = False) -> int:
    """Insert (qid, rank, docno, score, text) results of a run.

    With rank_by_score the given ranks are ignored and rebuilt as trec_eval does: score descending,
    ties by docno descending in byte order.
    """
    staged = _copy(
        conn,
        "_stage_result",
        ["qid", "rank", "docno", "score", "text"],
        ["text", "integer", "text", "float8", "text"],
        rows,
    )
    dataset_id = value(conn.execute("select dataset_id from ragsql.run where id = %s", (run_id,)))
    _require_known_qids(conn, dataset_id, "_stage_result", "result")
    rank = (
        sql.SQL('row_number() over (partition by s.qid order by s.score desc, s.docno collate "C" desc)')
        if rank_by_score
        else sql.SQL("s.rank")
    )
    try:
        with duplicates_refused("duplicate result in a run"):
            conn.execute(
                sql.SQL(
                    """
                    insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score, text)
                    select %s, q.dataset_id, q.id, {rank}, s.docno, s.score, s.text
                    from _stage_result as s
                    join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
                    """
                ).format(rank=rank),
                (run_id, dataset_id),
            )
    except psycopg.errors.CheckViolation as exc:
        raise InputError(f"invalid result ({_detail(exc)})") from exc
    return staged


def add_answers(conn: psycopg.Connection, run_id: int, answers: Iterable[tuple], contexts: Iterable[tuple]) -> int:
    """Insert (qid, text, metadata) answers and (qid, position, docno, text) contexts they used."""
    staged = _copy(
        conn,
        "_stage_answer",
        ["qid", "text", "metadata"],
        ["text", "text", "jsonb"],
        ((q, t, json.dumps(m or {})) for q, t, m in answers),
    )
    _copy(conn, "_stage_context", ["qid", "position", "docno", "text"], ["text", "integer", "text", "text"], contexts)
    dataset_id = value(conn.execute("select dataset_id from ragsql.run where id = %s", (run_id,)))
    _require_known_qids(conn, dataset_id, "_stage_answer", "answer")
    conn.execute(
        """
        insert into ragsql.answer (run_id, dataset_id, query_id, text, metadata)
        select %s, q.dataset_id, q.id, s.text, s.metadata
        from _stage_answer as s join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
        """,
        (run_id, dataset_id),
    )
    conn.execute(
        """
        insert into ragsql.answer_context (run_id, query_id, position, docno, text)
        select %s, q.id, s.position, s.docno, s.text
        from _stage_context as s join ragsql.query as q on q.dataset_id = %s and q.qid = s.qid
        """,
        (run_id, dataset_id),
    )
    return staged


def synthesized(conn: psycopg.Connection, dataset_id: int, seed: str) -> dict[str, str]:
    """{qid: text} of the dataset's questions that `ragsql synth` wrote with `seed` (metadata.synth_seed)."""
    return dict(
        conn.execute(
            "select qid, text from ragsql.query where dataset_id = %s and metadata ->> 'synth_seed' = %s",
            (dataset_id, seed),
        ).fetchall()
    )


def delete_synthesized(conn: psycopg.Connection, dataset_id: int, seed: str) -> None:
    """Delete the questions `ragsql synth` wrote with `seed`, with their gold labels and any answers to them."""
    conn.execute(
        "delete from ragsql.query where dataset_id = %s and metadata ->> 'synth_seed' = %s", (dataset_id, seed)
    )


LOADED = ("query", "judgment", "reference_answer", "run_result", "answer", "answer_context")
"""The tables bulk loads write."""


def analyze(conn: psycopg.Connection, tables: Sequence[str] = LOADED) -> None:
    """Refresh planner statistics of these tables of schema ragsql (by default every table bulk loads write).

    On Citus, tables distributed or replicated to the workers are left out: their shards are planned with the
    workers' own statistics (autovacuum keeps them), and an analyze after the load's writes to the coordinator's
    placements is refused inside the load's transaction. Where run_result is partitioned by run (one server), its
    default partition is analyzed, the one bulk loads write (a run's own partition is analyzed when attached)."""
    if "run_result" in tables and value(
        conn.execute("select relkind = 'p' from pg_class where oid = 'ragsql.run_result'::regclass")
    ):
        tables = [t if t != "run_result" else "run_result_default" for t in tables]
    if value(conn.execute("select to_regclass('pg_catalog.pg_dist_partition') is not null")):
        spread = {
            r[0]
            for r in conn.execute(
                "select c.relname from pg_dist_partition as p join pg_class as c on c.oid = p.logicalrelid "
                "where c.relnamespace = 'ragsql'::regnamespace"
            )
        }
        tables = [t for t in tables if t not in spread]
    for table in tables:
        conn.execute(sql.SQL("analyze ragsql.{}").format(sql.Identifier(table)))


def stored_judgments(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> dict[str, dict[str, int]]:
    """{qid: {docno: relevance}} already stored for these queries of the dataset."""
    stored: dict[str, dict[str, int]] = {}
    for qid, docno, relevance in conn.execute(
        """
        select q.qid, j.docno, j.relevance
        from ragsql.judgment as j join ragsql.query as q on q.id = j.query_id
        where q.dataset_id = %s and q.qid = any(%s)
        """,
        (dataset_id, qids),
    ):
        stored.setdefault(qid, {})[docno] = relevance
    return stored


def stored_reference_answers(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> dict[str, list[str]]:
    """{qid: [reference answer, ...]} already stored for these queries, in position order."""
    stored: dict[str, list[str]] = {}
    for qid, text in conn.execute(
        """
        select q.qid, r.text
        from ragsql.reference_answer as r join ragsql.query as q on q.id = r.query_id
        where q.dataset_id = %s and q.qid = any(%s)
        order by q.qid, r.position
        """,
        (dataset_id, qids),
    ):
        stored.setdefault(qid, []).append(text)
    return stored


def delete_judgments(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> None:
    """Remove the judgments of these queries (before loading replacements)."""
    _delete_of_queries(conn, "judgment", dataset_id, qids)


def delete_reference_answers(conn: psycopg.Connection, dataset_id: int, qids: list[str]) -> None:
    """Remove the reference answers of these queries (before loading replacements)."""
    _delete_of_queries(conn, "reference_answer", dataset_id, qids)


def _delete_of_queries(conn: psycopg.Connection, table: str, dataset_id: int, qids: list[str]) -> None:
    """Remove the rows of ragsql.<table> (keyed by query_id) that belong to these queries of the dataset."""
    conn.execute(
        sql.SQL(
            """
            delete from ragsql.{} as x using ragsql.query as q
            where q.id = x.query_id and q.dataset_id = %s and q.qid = any(%s)
            """
        ).format(sql.Identifier(table)),
        (dataset_id, qids),
    )


def _require_known_qids(conn: psycopg.Connection, dataset_id: int, stage: str, what: str) -> None:
    missing = conn.execute(
        sql.SQL(
            """
            select distinct s.qid from {} as s
            where not exists (select from ragsql.query as q where q.dataset_id = %s and q.qid = s.qid)
            order by 1 limit 6
            """
        ).format(sql.Identifier(stage)),
        (dataset_id,),
    ).fetchall()
    if missing:
        names = ", ".join(r[0] for r in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise InputError(f"{what} for a query that is not in the dataset: {names}")


def _detail(exc: psycopg.Error) -> str:
    diag = exc.diag
    return (diag.message_detail or diag.message_primary or str(exc)).strip()
