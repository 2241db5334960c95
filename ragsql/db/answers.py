"""What `ragsql generate` reads and writes: each query's top retrieved results, and the answers it generates.

Async (psycopg AsyncConnection, autocommit) like the judge's queries; a batch of answers and their contexts is
stored in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from ragsql.db.rows import value_async

__all__ = ["NewAnswer", "QueryContexts", "answer_count", "delete_answers", "store_answers", "top_results"]


@dataclass(frozen=True)
class QueryContexts:
    """A query of the run's dataset and its top results with text, (docno, text) in rank order."""

    query_id: int
    qid: str
    question: str
    language: str | None
    contexts: list[tuple[str, str]]


@dataclass(frozen=True)
class NewAnswer:
    """A generated answer and the contexts it was generated from, (docno, text) in prompt order."""

    query_id: int
    text: str
    metadata: dict = field(default_factory=dict)
    contexts: list[tuple[str, str]] = field(default_factory=list)


async def answer_count(conn: psycopg.AsyncConnection, rid: int) -> int:
    """How many answers the run has."""
    cur = await conn.execute("select count(*) from ragsql.answer where run_id = %s", (rid,))
    return await value_async(cur)


async def delete_answers(conn: psycopg.AsyncConnection, rid: int) -> int:
    """Delete the run's answers; their contexts, judge tasks and verdicts go with them (on delete cascade)."""
    cur = await conn.execute("delete from ragsql.answer where run_id = %s", (rid,))
    return cur.rowcount


async def top_results(conn: psycopg.AsyncConnection, rid: int, top_n: int) -> tuple[int, list[QueryContexts]]:
    """The run's dataset id and every query of that dataset with its `top_n` best-ranked results that have text
    (none for a query the run retrieved nothing for), in one statement."""
    cur = await conn.execute(
        """
        select ru.dataset_id, q.id, q.qid, coalesce(q.text, ''), q.language,
               coalesce(jsonb_agg(jsonb_build_array(r.docno, r.text) order by r.rank)
                        filter (where r.docno is not null), '[]')
        from ragsql.run as ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        left join lateral (
            select rr.rank, rr.docno, rr.text
            from ragsql.run_result as rr
            where rr.run_id = %(run)s and rr.query_id = q.id and btrim(coalesce(rr.text, '')) <> ''
            order by rr.rank
            limit %(top)s
        ) as r on true
        where ru.id = %(run)s
        group by ru.dataset_id, q.id
        order by q.id
        """,
        {"run": rid, "top": top_n},
    )  # the run id on run_result too: on Citus one shard's query
    rows = await cur.fetchall()
    if not rows:
        cur = await conn.execute("select dataset_id from ragsql.run where id = %s", (rid,))
        return await value_async(cur), []
    return rows[0][0], [
        QueryContexts(query_id, qid, question, language, [tuple(c) for c in contexts])
        for _, query_id, qid, question, language, contexts in rows
    ]


async def store_answers(conn: psycopg.AsyncConnection, rid: int, dataset_id: int, answers: Sequence[NewAnswer]) -> None:
    """Insert a batch of answers and their contexts (positions 1..n) in one transaction."""
    if not answers:
        return
    async with conn.transaction():
        async with conn.cursor() as cur:
            await cur.executemany(
                "insert into ragsql.answer (run_id, dataset_id, query_id, text, metadata) values (%s, %s, %s, %s, %s)",
                [(rid, dataset_id, a.query_id, a.text, json.dumps(a.metadata, ensure_ascii=False)) for a in answers],
            )
            await cur.executemany(
                "insert into ragsql.answer_context (run_id, query_id, position, docno, text) "
                "values (%s, %s, %s, %s, %s)",
                [
                    (rid, a.query_id, pos, docno, text)
                    for a in answers
                    for pos, (docno, text) in enumerate(a.contexts, 1)
                ],
            )
