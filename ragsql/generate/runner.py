"""Generate a run's answers: load every query's top results in one statement, answer the queries with N
concurrent workers (each with its own connection), and store the answers in batches, one transaction each."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ragsql.calls import CallService
from ragsql.db import answers as store, judging as cache
from ragsql.db.answers import NewAnswer, QueryContexts
from ragsql.errors import InputError
from ragsql.generate.generator import Calls, GenerationFailed, answer_query
from ragsql.llm.aio import finish_together

__all__ = ["BATCH", "GenerateResult", "Plan", "generate_answers", "generate_run", "prepare_run"]

BATCH = 32
"""Most answers a worker holds before storing them (in one transaction)."""


@dataclass
class GenerateResult:
    """What a generate run did."""

    queries: int = 0
    answers: int = 0
    no_context: int = 0
    replaced: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (qid, reason)
    calls: Calls = field(default_factory=Calls)
    seconds: float = 0.0


@dataclass(frozen=True)
class Plan:
    """A run ready to be answered: its queries with retrieved context, and the result filled in so far."""

    url: str
    rid: int
    dataset_id: int
    todo: list[QueryContexts]
    top_n: int
    result: GenerateResult


async def prepare_run(url: str, run: str, *, top_n: int = 5, replace: bool = False) -> Plan:
    """Look the run up, load every query's `top_n` best-ranked results with text, and clear the way.

    A run that already has answers is refused (InputError) unless `replace`, which deletes them, with their
    judge tasks and verdicts; replies already in the call cache are reused, so regenerating costs nothing.
    """
    result = GenerateResult()
    conn = await cache.connect_async(url)
    async with conn:
        rid = await cache.run_id(conn, run)
        existing = await store.answer_count(conn, rid)
        if existing and not replace:
            raise InputError(
                f'run "{run}" already has {existing} answers: pass --replace to delete them '
                "(and their judge verdicts) and generate new ones"
            )
        dataset_id, queries = await store.top_results(conn, rid, top_n)
        todo = [q for q in queries if q.contexts]
        result.queries, result.no_context = len(queries), len(queries) - len(todo)
        if existing:
            result.replaced = await store.delete_answers(conn, rid)
    return Plan(url, rid, dataset_id, todo, top_n, result)


async def generate_answers(
    plan: Plan, client: Any, *, workers: int = 8, on_progress: Callable[[int, int], None] | None = None
) -> GenerateResult:
    """Answer the plan's queries with `workers` concurrent workers and store the answers; a query whose answer
    cannot be had is listed in ``result.failed`` with the reason and gets no answer."""
    started = time.perf_counter()
    done = 0

    def progress() -> None:
        nonlocal done
        done += 1
        if on_progress:
            on_progress(done, len(plan.todo))

    if on_progress:
        on_progress(0, len(plan.todo))
    pending = iter(plan.todo)  # shared: each worker takes the next query when it is free
    async with CallService(plan.url, purpose="generate", run_id=plan.rid) as service:
        # a worker that fails stops the others before the service's pool closes under them
        await finish_together(
            _worker(plan, pending, client, service, progress) for _ in range(min(workers, len(plan.todo)))
        )
    plan.result.seconds = time.perf_counter() - started
    return plan.result


async def generate_run(
    url: str,
    run: str,
    client: Any,
    *,
    top_n: int = 5,
    replace: bool = False,
    workers: int = 8,
    on_progress: Callable[[int, int], None] | None = None,
) -> GenerateResult:
    """`prepare_run` then `generate_answers`: answer every query of `run` that has retrieved results."""
    plan = await prepare_run(url, run, top_n=top_n, replace=replace)
    return await generate_answers(plan, client, workers=workers, on_progress=on_progress)


async def _worker(
    plan: Plan, pending: Iterator[QueryContexts], client: Any, service: CallService, progress: Callable[[], None]
) -> None:
    result = plan.result
    conn = await cache.connect_async(plan.url)
    async with conn:
        batch: list[NewAnswer] = []
        for query in pending:
            try:
                batch.append(await answer_query(client, query, service, result.calls, plan.top_n))
            except (GenerationFailed, ValueError) as exc:  # ValueError: a cached reply that no longer validates
                result.failed.append((query.qid, " ".join(str(exc).split())[:300]))
            if len(batch) >= BATCH:
                await _flush(conn, plan, batch)
            progress()
        await _flush(conn, plan, batch)


async def _flush(conn, plan: Plan, batch: list[NewAnswer]) -> None:
    await store.store_answers(conn, plan.rid, plan.dataset_id, batch)
    plan.result.answers += len(batch)
    batch.clear()
