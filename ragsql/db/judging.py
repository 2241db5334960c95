"""What the judge orchestrator reads and writes: tasks, samples, the call cache, embeddings and verdicts.

Async (psycopg AsyncConnection): one connection per judge worker. Calls are stored by the call service
(`ragsql.calls`, SQL in `ragsql.db.calls`) on connections of its own the moment they return; a task's
verdicts and its closing are one transaction (`finish_task` inside `conn.transaction()`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg
from psycopg.rows import dict_row

from ragsql.db import names, verdict_rows
from ragsql.db.connect import vector_cursor_async
from ragsql.db.rows import one_async, value_async
from ragsql.errors import DatabaseError

__all__ = [
    "NO_CONTEXT_TEXTS",
    "Context",
    "aspects",
    "judged_aspects",
    "Sample",
    "Task",
    "claim_tasks",
    "close_tasks",
    "connect_async",
    "enqueue_tasks",
    "finish_task",
    "release_tasks",
    "load_samples",
    "record_embedder",
    "missing_embeddings",
    "run_exists",
    "run_id",
    "run_shape",
    "store_embeddings",
    "store_extractions",
    "rubrics",
    "task_counts",
    "text_hash",
]


def text_hash(text: str) -> str:
    """ragsql.text_hash in Python: sha256 hex of the UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def connect_async(url: str) -> psycopg.AsyncConnection:
    """An autocommit async connection for one judge worker."""
    return await psycopg.AsyncConnection.connect(url, autocommit=True, application_name="ragsql judge")


@dataclass(frozen=True)
class Task:
    """A claimed judge task."""

    id: int
    run_id: int
    query_id: int
    kind: str
    attempts: int


NO_CONTEXT_TEXTS = "no context texts: the record gives only ids"
"""Why an answer whose contexts are known by id alone has no value on a metric that reads context texts (the SQL
metrics say the same: ragsql._scope_rows)."""


@dataclass(frozen=True)
class Context:
    """One context an answer was generated from."""

    position: int
    docno: str | None
    text: str


@dataclass
class Sample:
    """Everything the judge sees of one answered query."""

    query_id: int
    qid: str
    question: str
    language: str | None
    answer: str
    contexts: list[Context] = field(default_factory=list)  # those with a text
    references: list[str] = field(default_factory=list)
    context_ids: int = 0  # contexts given by id alone (RAGAS retrieved_context_ids without texts): nothing to judge


async def run_id(conn: psycopg.AsyncConnection, run: str) -> int:
    """The run's id; InputError naming the known runs when there is no such run (ragsql.db.names)."""
    return await names.run_id_async(conn, run)


async def run_exists(conn: psycopg.AsyncConnection, rid: int) -> bool:
    """Whether the run is still there (a run deleted while it is judged stops its judge)."""
    cur = await conn.execute("select exists (select from ragsql.run where id = %s)", (rid,))
    return await value_async(cur)


async def run_shape(conn: psycopg.AsyncConnection, rid: int) -> dict[str, int]:
    """How many answers with a text (a record with no response has none to judge), of them with contexts (with a
    text), with contexts given by id alone, with references and with question text the run has."""
    cur = await conn.execute(
        """
        select count(*) as answers,
               count(*) filter (where exists (select from ragsql.answer_context as c
                                              where c.run_id = a.run_id and c.query_id = a.query_id
                                                and c.text is not null)) as with_contexts,
               count(*) filter (where exists (select from ragsql.answer_context as c
                                              where c.run_id = a.run_id and c.query_id = a.query_id
                                                and c.text is null)) as with_context_ids,
               count(*) filter (where exists (select from ragsql.reference_answer as r
                                              where r.query_id = a.query_id)) as with_references,
               count(*) filter (where btrim(coalesce(q.text, '')) <> '') as with_question
        from ragsql.answer as a
        join ragsql.query as q on q.id = a.query_id
        where a.run_id = %s and a.text is not null
        """,
        (rid,),
    )
    names = ("answers", "with_contexts", "with_context_ids", "with_references", "with_question")
    return dict(zip(names, await one_async(cur)))


async def enqueue_tasks(
    conn: psycopg.AsyncConnection,
    rid: int,
    kinds: Sequence[str],
    *,
    judge: str | None = None,
    reset_done: bool = False,
    model: str | None = None,
) -> int:
    """A task per answered query and kind (kept if present); failed tasks, done ones with `reset_done`, done ones
    another judge closed and, given the judge's `model`, done ones with an aspect or rubric it has not judged go
    back to pending."""
    cur = await conn.execute(
        "select ragsql._enqueue_judge_tasks(%s, %s, true, %s, %s)", (rid, list(kinds), reset_done, judge)
    )
    added = await value_async(cur)
    if model is not None:
        cur = await conn.execute("select ragsql._reopen_unjudged_definitions(%s, %s, %s)", (rid, list(kinds), model))
        added += await value_async(cur)
    return added


async def record_embedder(conn: psycopg.AsyncConnection, rid: int, judge_model: str, embedder: str) -> None:
    """Record that `embedder` judges the run with `judge_model` (ragsql.run_embedder, newest last): the run's
    embedding metrics read the embedder of the judge whose verdicts they use."""
    await conn.execute(
        "insert into ragsql.run_embedder (run_id, judge_model, embedder) values (%s, %s, %s) "
        "on conflict (run_id, judge_model, embedder) do update set created_at = excluded.created_at",
        (rid, judge_model, embedder),
    )


async def task_counts(conn: psycopg.AsyncConnection, rid: int, kinds: Sequence[str]) -> dict[str, int]:
    """Tasks of the run and kinds by status."""
    cur = await conn.execute(
        "select status, count(*) from ragsql.judge_task where run_id = %s and kind = any(%s) group by status",
        (rid, list(kinds)),
    )
    return {status: n for status, n in await cur.fetchall()}


async def claim_tasks(
    conn: psycopg.AsyncConnection, rid: int, worker: str, n: int, kinds: Sequence[str], lease_seconds: float
) -> list[Task]:
    """Claim up to n pending (or lease-expired) tasks, for update skip locked."""
    cur = await conn.execute(
        "select id, run_id, query_id, kind, attempts "
        "from ragsql._claim_judge_tasks(%s, %s, %s, make_interval(secs => %s), 3, %s)",
        (rid, worker, n, lease_seconds, list(kinds)),
    )
    return [Task(*row) for row in await cur.fetchall()]


async def close_tasks(
    conn: psycopg.AsyncConnection,
    closing: Sequence[tuple[Task, Sequence[verdict_rows.Row], str | None]],
    worker: str,
    judge: str | None = None,
) -> list[bool]:
    """Close tasks (task, verdict rows, error) in one transaction, so a killed worker leaves each task's rows and
    status both or neither; one bool each (False: the worker lost the task, nothing is stored for it).

    The rows go in before the tasks close, the order in which `ragsql delete` takes its locks (answers, then
    tasks), so the two never deadlock. When the worker lost one of the tasks (its lease ran out and another worker
    took it), all roll back and each is closed on its own. A database error rolls back all of them and is a
    DatabaseError naming it: close them one by one then, so only the task at fault fails.
    """
    try:
        async with conn.transaction():
            await verdict_rows.store(conn, [row for _, rows, _ in closing for row in rows])
            cur = await conn.execute(
                "select ragsql._finish_judge_task(t.run_id, t.id, %s, t.error, %s) "
                "from unnest(%s::bigint[], %s::bigint[], %s::text[]) with ordinality as t(run_id, id, error, n) "
                "order by t.n",
                (
                    worker,
                    judge,
                    [task.run_id for task, _, _ in closing],
                    [task.id for task, _, _ in closing],
                    [error for _, _, error in closing],
                ),
            )
            kept = [bool(held) for (held,) in await cur.fetchall()]
            if all(kept):
                return kept
            raise psycopg.Rollback()  # a lost task's rows must not stay
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DatabaseError(f"storing the verdicts failed: {first}") from exc
    if len(closing) == 1:
        return [False]
    return [held for one in closing for held in await close_tasks(conn, [one], worker, judge)]


async def finish_task(
    conn: psycopg.AsyncConnection, task: Task, worker: str, error: str | None = None, judge: str | None = None
) -> bool:
    """Close a task held by `worker` (failed when error is given) as judged by `judge`; False when the worker
    lost it."""
    cur = await conn.execute(
        "select ragsql._finish_judge_task(%s, %s, %s, %s, %s)", (task.run_id, task.id, worker, error, judge)
    )
    return await value_async(cur)


async def release_tasks(conn: psycopg.AsyncConnection, workers_like: str, rid: int | None = None) -> int:
    """Put back to pending the running tasks of the workers whose name is LIKE `workers_like` (this process's, on
    its way out or after a lost connection); the claim does not count as an attempt."""
    cur = await conn.execute(
        "update ragsql.judge_task set status = 'pending', lease_until = null, worker = null, "
        "attempts = greatest(attempts - 1, 0), updated_at = statement_timestamp() "
        "where status = 'running' and worker like %s and (%s::bigint is null or run_id = %s)",
        (workers_like, rid, rid),
    )
    return cur.rowcount


async def load_samples(conn: psycopg.AsyncConnection, rid: int, query_ids: Iterable[int]) -> dict[int, Sample]:
    """Question, answer, contexts (prompt order) and distinct reference answers of the given queries."""
    ids = sorted(set(query_ids))
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            """
            select a.query_id, q.qid, coalesce(q.text, '') as question, q.language, a.text as answer,
                   coalesce((select jsonb_agg(jsonb_build_array(c.position, c.docno, c.text) order by c.position)
                             from ragsql.answer_context as c
                             where c.run_id = a.run_id and c.query_id = a.query_id and c.text is not null), '[]')
                       as contexts,
                   (select count(*) from ragsql.answer_context as c
                    where c.run_id = a.run_id and c.query_id = a.query_id and c.text is null) as context_ids,
                   coalesce((select jsonb_agg(r.text order by r.first)
                             from (select r.text, min(r.position) as first from ragsql.reference_answer as r
                                   where r.query_id = a.query_id group by r.text) as r), '[]') as refs
            from ragsql.answer as a
            join ragsql.query as q on q.id = a.query_id
            where a.run_id = %s and a.query_id = any(%s)
            """,
            (rid, ids),
        )
        rows = await cur.fetchall()
    return {
        r["query_id"]: Sample(
            r["query_id"],
            r["qid"],
            r["question"],
            r["language"],
            r["answer"],
            [Context(*c) for c in r["contexts"]],
            list(r["refs"]),
            r["context_ids"],
        )
        for r in rows
    }


async def missing_embeddings(conn: psycopg.AsyncConnection, hashes: Sequence[str], embedder: str) -> set[str]:
    """The text hashes that have no embedding by `embedder` yet."""
    cur = await conn.execute(
        "select h from unnest(%s::text[]) as h where not exists "
        "(select from ragsql.text_embedding as e where e.text_hash = h and e.embedder = %s)",
        (list(hashes), embedder),
    )
    return {r[0] for r in await cur.fetchall()}


async def store_embeddings(
    conn: psycopg.AsyncConnection, embedder: str, rows: Sequence[tuple[str, Sequence[float], int | None]]
) -> None:
    """(text hash, vector, call id) rows; an embedding stored meanwhile is kept."""
    async with await vector_cursor_async(conn) as cur:
        await cur.executemany(
            "insert into ragsql.text_embedding (text_hash, embedder, embedding, call_id) "
            "values (%s, %s, %s, %s) on conflict do nothing",
            [(h, embedder, np.asarray(vec, dtype=np.float32), call_id) for h, vec, call_id in rows],
        )


async def store_extractions(
    conn: psycopg.AsyncConnection, extractions: Sequence[tuple[str, str, str, int | None, Sequence[str]]]
) -> list[int]:
    """The statements of texts, each (text, model, prompt version, call id, statements) stored once per (text,
    model, prompt version), in one transaction; the extraction id of each, in order."""
    keys = [(text_hash(text), model, version) for text, model, version, _, _ in extractions]
    statements = {key: extracted[4] for key, extracted in zip(keys, extractions, strict=True)}
    calls = {key: extracted[3] for key, extracted in zip(keys, extractions, strict=True)}
    order = sorted(calls)  # one order for every process: two never wait on each other's rows
    columns = [list(c) for c in zip(*order, strict=True)]
    async with conn.transaction():  # an extraction and its statements: both or neither
        cur = await conn.execute(
            "insert into ragsql.statement_extraction (text_hash, model, prompt_version, call_id) "
            "select * from unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) "
            "on conflict (text_hash, model, prompt_version) do nothing returning id, text_hash, model, prompt_version",
            (*columns, [calls[key] for key in order]),
        )
        ids = {(h, m, v): i for i, h, m, v in await cur.fetchall()}
        async with conn.cursor() as c:
            await c.executemany(
                "insert into ragsql.text_statement (extraction_id, statement_no, statement) values (%s, %s, %s)",
                [(i, no, s) for key, i in ids.items() for no, s in enumerate(statements[key], 1)],
            )
        if len(ids) < len(order):  # stored before: their ids
            cur = await conn.execute(
                "select e.id, e.text_hash, e.model, e.prompt_version from ragsql.statement_extraction as e "
                "join unnest(%s::text[], %s::text[], %s::text[]) as k (h, m, v) "
                "on e.text_hash = k.h and e.model = k.m and e.prompt_version = k.v",
                columns,
            )
            ids.update({(h, m, v): i for i, h, m, v in await cur.fetchall()})
    return [ids[key] for key in keys]


async def rubrics(conn: psycopg.AsyncConnection) -> list[tuple[str, list[str], bool, str]]:
    """(name, five descriptions, with reference, definition hash) of every rubric, by name."""
    cur = await conn.execute(
        "select name, descriptions, with_reference, ragsql._rubric_hash(name) "
        'from ragsql.rubric order by name collate "C"'
    )
    return [tuple(r) for r in await cur.fetchall()]


async def judged_aspects(conn: psycopg.AsyncConnection, task: Task, model: str) -> set[tuple[str, str]]:
    """(aspect, definition hash) of the aspect verdicts `model` gave the task's answer."""
    cur = await conn.execute(
        "select aspect, definition_hash from ragsql.aspect_verdict where run_id = %s and query_id = %s and model = %s",
        (task.run_id, task.query_id, model),
    )
    return {(a, h) for a, h in await cur.fetchall()}


async def aspects(conn: psycopg.AsyncConnection) -> list[tuple[str, str]]:
    """(name, definition) of every aspect: built-ins first, then user-defined, by name."""
    cur = await conn.execute('select name, definition from ragsql.aspect order by not builtin, name collate "C"')
    return [tuple(r) for r in await cur.fetchall()]
