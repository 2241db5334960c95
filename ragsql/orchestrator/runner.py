"""Judge a run: enqueue its tasks, let N async workers claim them (for update skip locked, with leases that
are renewed while a task is worked on), store each task's verdicts and its closing in one transaction,
and report what it cost. Any number of processes on any machines can judge the same run at once.

A failed call fails the tasks that needed it, nothing more. A worker whose connection drops (a server
restart) reconnects and puts its unfinished tasks back; a run that stops for any reason (an error, Ctrl-C,
SIGTERM) first puts back every task this process still holds and drops its request claims."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg

from ragsql import registry
from ragsql.calls import CallService, alive
from ragsql.calls.service import BudgetSpent
from ragsql.db import judging as db
from ragsql.errors import DatabaseError, InputError
from ragsql.judge.verdicts import citation_id
from ragsql.llm.aio import Batched, best_effort, finish_together
from ragsql.orchestrator import tasks as t
from ragsql.orchestrator.service import CallFailed, Judging, Tally, WorkerDb
from ragsql.orchestrator.tasks.citations import has_citations

__all__ = ["METRICS", "JudgePlan", "JudgeResult", "choose_kinds", "judge_run", "plan_run"]

# `ragsql judge --metrics` names the registry's judge kinds; the opt-in ones cost calls the default ones do not share
METRICS = list(registry.KINDS)
DEFAULT_METRICS = [name for name, kind in registry.KINDS.items() if kind.default]
# why a kind is skipped for a run without an input every metric of it needs
_MISSING = {"contexts": "no contexts", "reference": "no reference answers", "cites": "no answer cites its contexts"}
LEASE_SECONDS = 120.0
MAX_BATCH = 32  # most tasks one worker claims at once


@dataclass
class JudgeResult:
    """What a judge run did."""

    kinds: list[str]
    skipped: dict[str, str]
    done: int = 0
    failed: int = 0
    lost: int = 0
    over_budget: int = 0  # tasks closed failed because the run's call budget was spent (not in failed)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (qid, kind, error), first few
    tally: Tally = field(default_factory=Tally)
    seconds: float = 0.0


@dataclass
class JudgePlan:
    """What a run would send (dry run)."""

    kinds: list[str]
    skipped: dict[str, str]
    tasks: int
    tally: Tally


def worker_name(index: int) -> str:
    """host:pid:index — lets a later run on this host release the tasks of a worker that was killed."""
    return f"{socket.gethostname()}:{os.getpid()}:{index}"


async def choose_kinds(conn, rid: int, metrics: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
    """Task kinds for the asked metrics (default: every one the run's data allows) and why others are skipped."""
    unknown = [m for m in metrics or [] if m not in METRICS]
    if unknown:
        raise InputError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    shape = await db.run_shape(conn, rid)
    if shape["answers"] == 0:
        raise InputError(
            "the run has no answers to judge (import them with `ragsql import jsonl|csv FILE --dataset D --run RUN`, "
            "or write them with `ragsql generate --run RUN`)"
        )
    wanted = list(dict.fromkeys(metrics or DEFAULT_METRICS))
    missing = {
        n for n, count in (("reference", shape["with_references"]), ("contexts", shape["with_contexts"])) if not count
    }
    if metrics is None and any("cites" in registry.kind(m).needs for m in wanted):
        # an answer may cite nothing: a named kind is judged (and says so), a default one is skipped
        missing |= set() if await _any_citation(conn, rid) else {"cites"}
    why_missing = dict(_MISSING)
    if shape["with_context_ids"]:  # contexts, but given by id alone: nothing to judge them on
        why_missing["contexts"] = "no context texts: the records give only ids"
    reasons = {m: [why_missing[n] for n in why_missing if n in missing and n in registry.kind(m).needs] for m in wanted}
    skipped = {m: why[0] for m, why in reasons.items() if why}
    return [m for m in wanted if m not in skipped], skipped


async def _any_citation(conn, rid: int) -> bool:
    cur = await conn.execute(
        "select a.text, array_agg(c.position order by c.position), array_agg(c.docno order by c.position) "
        "from ragsql.answer as a join ragsql.answer_context as c on c.run_id = a.run_id and c.query_id = a.query_id "
        "where a.run_id = %s and a.text is not null group by a.query_id, a.text",
        (rid,),
    )
    return any(
        has_citations(text, {citation_id(d, p) for p, d in zip(positions, docnos)})
        for text, positions, docnos in await cur.fetchall()
    )


async def release_dead_workers(conn, rid: int) -> int:
    """Put back to pending the running tasks of workers on this host whose process is gone (e.g. SIGKILL)."""
    cur = await conn.execute(
        "select distinct worker from ragsql.judge_task where run_id = %s and status = 'running' and worker like %s",
        (rid, socket.gethostname() + ":%"),
    )
    dead = [w for (w,) in await cur.fetchall() if not alive(w)]
    if not dead:
        return 0
    cur = await conn.execute(
        "update ragsql.judge_task set status = 'pending', lease_until = null, updated_at = statement_timestamp() "
        "where run_id = %s and status = 'running' and worker = any(%s)",
        (rid, dead),
    )
    return cur.rowcount


async def judge_run(
    url: str,
    run: str,
    judging: Judging,
    *,
    metrics: Sequence[str] | None = None,
    workers: int = 8,
    again: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    budget: int | None = None,
) -> JudgeResult:
    """Judge every pending task of `run` with `workers` concurrent workers; returns counts and costs.

    Tasks done by another judge (model + embedder), and with `again` every done task, are judged anew; requests
    already answered still come from the cache. With a `budget`, a call is sent only after a place of the run's budget
    is reserved in the database (shared by every process); once they are all taken, the tasks needing a call close
    failed with a reason starting "budget spent" (counted in `over_budget`)."""
    started = time.perf_counter()
    conn = await db.connect_async(url)
    async with conn:
        rid = await db.run_id(conn, run)
        kinds, skipped = await choose_kinds(conn, rid, metrics)
        result = JudgeResult(kinds=kinds, skipped=skipped, tally=judging.tally)
        if not kinds:
            return result
        await db.enqueue_tasks(conn, rid, kinds, judge=judging.identity, reset_done=again, model=judging.model)
        await db.record_embedder(conn, rid, judging.model, judging.embedder.name)
        await release_dead_workers(conn, rid)
        counts = await db.task_counts(conn, rid, kinds)
        total = counts.get("pending", 0) + counts.get("running", 0)
        if on_progress:
            on_progress(0, total)
        # a claim holds at least one sample's tasks (they share calls), more when the run is large: the workers'
        # first claims take about half the run, leaving work for other processes that join; the client's
        # concurrency bounds the calls in flight
        batch = max(len(kinds), min(MAX_BATCH, -(-total // (2 * max(1, workers)))))
    async with CallService(url, purpose="judge", run_id=rid, budget=budget) as calls:
        judging.bind(calls)
        try:
            await finish_together(
                [
                    _worker(url, rid, kinds, batch, judging, result, worker_name(i), total, on_progress)
                    for i in range(max(1, workers))
                ]
            )
            if not await calls.run(db.run_exists, rid):  # deleted after the workers' last look
                raise _RunDeleted()
        except _RunDeleted:
            raise InputError(f"run {run!r} was deleted while it was judged") from None
        finally:
            await judging.unbind()
            # whatever ended the run: the tasks this process still holds go back to pending
            with contextlib.suppress(Exception):
                await best_effort(calls.run(db.release_tasks, _process_workers(), rid, patience=5.0))
    result.seconds = time.perf_counter() - started
    return result


def _process_workers() -> str:
    """LIKE pattern of this process's worker names."""
    return worker_name(0).rsplit(":", 1)[0].replace("%", r"\%").replace("_", r"\_") + ":%"


_LOST = (psycopg.OperationalError, psycopg.InterfaceError)


class _RunDeleted(Exception):
    """The run being judged was deleted (`ragsql delete run`): every worker stops."""


async def _connect(url: str, patience: float) -> psycopg.AsyncConnection:
    """A worker connection, retried for `patience` seconds while the server is down (e.g. restarting)."""
    deadline = time.monotonic() + patience
    delay = 0.1
    while True:
        try:
            return await db.connect_async(url)
        except _LOST as exc:
            if time.monotonic() + delay > deadline:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise DatabaseError(f"lost the database connection: {first}") from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def _broken(conn: psycopg.AsyncConnection) -> bool:
    return conn.closed or conn.broken


async def _worker(url, rid, kinds, batch, judging, result, name, total, on_progress) -> None:
    conn: psycopg.AsyncConnection | None = None

    def tick() -> None:  # after every task, not every claim: a claim of 32 tasks can take minutes
        if on_progress:
            on_progress(result.done + result.failed + result.lost, total)

    try:
        while True:
            if conn is None or _broken(conn):
                reconnecting = conn is not None
                if conn is not None:
                    await conn.close()
                conn = await _connect(url, judging.calls.db_patience)
                if reconnecting:  # the tasks this worker held when the connection dropped go back to pending
                    await db.release_tasks(conn, name, rid)
            wdb = WorkerDb(conn)
            try:
                claimed = await db.claim_tasks(conn, rid, name, batch, kinds, LEASE_SECONDS)
                if claimed:
                    samples = await db.load_samples(conn, rid, [c.query_id for c in claimed])
                # a task whose answer is gone went with it (judge_task cascades): the run is being deleted
                if (not claimed or len(samples) < len({c.query_id for c in claimed})) and not await db.run_exists(
                    conn, rid
                ):
                    raise _RunDeleted()
                if not claimed:
                    return
                claimed = [c for c in claimed if c.query_id in samples]
            except _LOST:
                continue
            renew = asyncio.create_task(_renew(wdb, claimed, name))
            close = _closer(wdb, name)
            try:
                # not asyncio.gather: a task that fails (the database lost) must not leave its siblings running
                await finish_together(
                    _judge_task(t.Job(task, samples[task.query_id], judging), close, result, tick) for task in claimed
                )
            finally:
                renew.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await renew
                await close.aclose()
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


async def _renew(wdb: WorkerDb, claimed, name: str) -> None:
    while not _broken(wdb.conn):
        await asyncio.sleep(LEASE_SECONDS / 3)
        async with wdb.lock:
            for task in claimed:
                await wdb.conn.execute(
                    "select ragsql._renew_judge_lease(%s, %s, %s, make_interval(secs => %s))",
                    (task.run_id, task.id, name, LEASE_SECONDS),
                )


_Closing = tuple[t.Job, Sequence[t.Store], str | None]  # a judged task, its verdict rows, its error
_Closed = tuple[bool, str | None] | None  # (the worker still held it, its error); None: the connection dropped


def _closer(wdb: WorkerDb, name: str) -> Batched[_Closing, _Closed]:
    """Closes the tasks that end while the last close is being sent in one transaction (`db.close_tasks`); after
    a database error one by one, so only the task at fault fails (its rows unstored, its error naming why)."""

    async def store(closing: list[_Closing]) -> list[_Closed]:
        if _broken(wdb.conn):
            return [None] * len(closing)
        try:
            judge = closing[0][0].judging.identity
            kept = await db.close_tasks(
                wdb.conn, [(job.task, rows, error) for job, rows, error in closing], name, judge
            )
        except DatabaseError as exc:
            if _broken(wdb.conn):
                return [None] * len(closing)
            if len(closing) > 1:
                return [closed for one in closing for closed in await store([one])]
            ((job, rows, _),) = closing
            if not rows:
                raise
            return await store([(job, [], str(exc))])
        return [(held, error) for held, (_, _, error) in zip(kept, closing, strict=True)]

    async def close(closing: list[_Closing]) -> list[_Closed]:
        async with wdb.lock:
            return await store(closing)

    return Batched(close)


async def _judge_task(
    job: t.Job, close: Batched[_Closing, _Closed], result: JudgeResult, tick: Callable[[], None]
) -> None:
    over_budget = False
    try:
        stores, error = await t.run_task(job), None
    except t.NothingToJudge:
        stores, error = [], None
    except (t.TaskFailed, CallFailed, ValueError) as exc:  # ValueError: nothing to judge, an invalid cached reply
        stores, error = [], " ".join(str(exc).split())[:500]
        over_budget = isinstance(exc, BudgetSpent)
    closed = await close((job, stores, error))
    if closed is None:
        return  # the connection dropped: the worker reconnects and puts the task back (its calls are stored)
    kept, error = closed
    if not kept:
        result.lost += 1  # the lease ran out and another worker took the task over: it stores the verdicts
    elif error is None:
        result.done += 1
    elif over_budget:
        result.over_budget += 1
    else:
        result.failed += 1
        if len(result.errors) < 20:
            result.errors.append((job.sample.qid, job.task.kind, error))
    tick()


async def plan_run(
    url: str, run: str, judging: Judging, *, metrics: Sequence[str] | None = None, again: bool = False
) -> JudgePlan:
    """Dry run: what judging `run` would send, built from the same requests, answered by the offline stand-in."""
    conn = await db.connect_async(url)
    async with conn:
        rid = await db.run_id(conn, run)
        kinds, skipped = await choose_kinds(conn, rid, metrics)
        cur = await conn.execute(
            "select a.query_id, k.kind from ragsql.answer as a cross join unnest(%s::text[]) as k(kind) "
            "where a.run_id = %s and a.text is not null "  # an answer without text (no response): nothing to judge
            "and (not exists (select from ragsql.judge_task as j where j.run_id = a.run_id "
            "and j.query_id = a.query_id and j.kind = k.kind and j.status = 'done' and j.judge = %s and not %s) "
            "or (a.query_id, k.kind) in (select * from ragsql._unjudged_definitions(%s, %s, %s))) "
            "order by 1, 2",
            (kinds, rid, judging.identity, again, rid, kinds, judging.model),
        )
        todo = await cur.fetchall()
        samples = await db.load_samples(conn, rid, [q for q, _ in todo])
    async with CallService(url, purpose="judge", run_id=rid) as calls:
        judging.bind(calls)
        for query_id, kind in todo:
            job = t.Job(db.Task(0, rid, query_id, kind, 0), samples[query_id], judging)
            with contextlib.suppress(t.TaskFailed, CallFailed):
                await t.run_task(job)
    return JudgePlan(kinds=kinds, skipped=skipped, tasks=len(todo), tally=judging.tally)
