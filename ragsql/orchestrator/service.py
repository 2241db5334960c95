"""The judge as the tasks see it: every request goes through the database cache, identical requests in
flight are sent once, every call is stored the moment it returns, and the tally of calls, cache hits,
failures and tokens is kept for the closing summary. A dry run answers with the offline judge instead,
stores nothing and counts what a real run would send."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import psycopg

from ragsql.db import judging as db
from ragsql.judge.prompts import JudgeRequest
from ragsql.llm.calls import CallRecord
from ragsql.llm.tokens import count_message_tokens

__all__ = ["Answer", "CallFailed", "Judging", "Tally", "WorkerDb"]

T = TypeVar("T")
# A judge writes roughly this many completion tokens per item it judges (dry-run estimate only).
_COMPLETION_PER_ITEM = 30


class CallFailed(Exception):
    """A judge or embedding call failed for good; the task is closed as failed with this message."""


@dataclass
class Tally:
    """What a judge run cost, for the closing summary and the dry-run plan."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_calls: int = 0
    texts_embedded: int = 0
    embeddings_cached: int = 0
    by_prompt: Counter = field(default_factory=Counter)

    def add_call(self, rec: CallRecord) -> None:
        if rec.kind == "embedding":
            self.embedding_calls += 1
        else:
            self.calls += 1
            self.by_prompt[rec.prompt_name] += 1
        self.failed += not rec.ok
        self.prompt_tokens += rec.prompt_tokens or 0
        self.completion_tokens += rec.completion_tokens or 0


@dataclass
class WorkerDb:
    """One worker's connection; the lock keeps a task's transaction free of other coroutines' statements."""

    conn: psycopg.AsyncConnection
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A validated verdict and the call it came from (call_id None in a dry run)."""

    verdict: T
    call_id: int | None


class Judging:
    """Shared by every worker of a process: the judge, the embedder, the in-flight map and the tally."""

    def __init__(self, judge: Any, embedder: Any, *, dry_run: bool = False, stand_in: Any = None):
        self.judge = judge
        self.embedder = embedder
        self.dry_run = dry_run
        self.stand_in = stand_in  # the offline judge that answers for the real one in a dry run
        self.tally = Tally()
        self._inflight: dict[str, asyncio.Future] = {}
        self._planned: dict[str, Answer] = {}  # dry run: a request planned once is shared, as the cache would be

    @property
    def model(self) -> str:
        """The judge model verdicts are stored under."""
        return self.judge.model

    @property
    def identity(self) -> str:
        """Judge model and embedder, recorded on every task they close: another pair judges the run again."""
        return f"{self.judge.model} + {self.embedder.name}"

    async def ask(self, request: JudgeRequest[T], wdb: WorkerDb) -> Answer[T]:
        """The verdict for `request`: from the cache, from an identical request in flight, or from one call."""
        key = self.judge.request_hash(request)
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key])
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            answer = await self._answer(request, key, wdb)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(answer)
        return answer

    async def _answer(self, request: JudgeRequest[T], key: str, wdb: WorkerDb) -> Answer[T]:
        if key in self._planned:
            return self._planned[key]
        async with wdb.lock:
            hit = await db.cached_call(wdb.conn, key)
        if hit is not None:
            self.tally.cached += 1
            call_id, response = hit
            return Answer(request.schema.model_validate(response, context=request.context), call_id)
        if self.dry_run:
            self._planned[key] = await self._plan(request)
            return self._planned[key]
        verdict, rec = await self.judge.judge(request)
        self.tally.add_call(rec)
        async with wdb.lock:
            call_id = await db.store_call(wdb.conn, rec)
        if verdict is None:
            raise CallFailed(f"{request.kind} call failed: {rec.error}")
        return Answer(verdict, call_id)

    async def _plan(self, request: JudgeRequest[T]) -> Answer[T]:
        verdict, _ = await self.stand_in.judge(request)
        self.tally.calls += 1
        self.tally.by_prompt[request.kind] += 1
        self.tally.prompt_tokens += count_message_tokens(request.messages)
        items = max(1, len(request.items) or len(getattr(verdict, "statements", ()) or ()))
        self.tally.completion_tokens += _COMPLETION_PER_ITEM * items
        return Answer(verdict, None)

    async def embed(self, texts: Sequence[str], wdb: WorkerDb) -> None:
        """Make sure every text has an embedding by the run's embedder (stored once per text, across runs)."""
        unique = list(dict.fromkeys(t for t in texts if t and t.strip()))
        if not unique:
            return
        hashes = {db.text_hash(t): t for t in unique}
        async with wdb.lock:
            missing = await db.missing_embeddings(wdb.conn, list(hashes), self.embedder.name)
        self.tally.embeddings_cached += len(hashes) - len(missing)
        todo = [hashes[h] for h in hashes if h in missing]
        if not todo:
            return
        if self.dry_run:
            self.tally.texts_embedded += len(todo)
            self.tally.embedding_calls += 0 if self.embedder.offline else 1
            return
        try:
            vectors, records = await self.embedder.embed(todo)
        except Exception as exc:  # the embedder's own one-line error; its failed calls are still stored
            records = getattr(exc, "records", [])
            async with wdb.lock:
                for rec in records:
                    self.tally.add_call(rec)
                    await db.store_call(wdb.conn, rec)
            raise CallFailed(f"embedding failed: {exc}") from exc
        call_ids: list[int | None] = []
        async with wdb.lock:
            for rec in records:
                self.tally.add_call(rec)
                rec_id = await db.store_call(wdb.conn, rec)
                call_ids += [rec_id] * int((rec.response or {}).get("inputs", len(todo)))
            call_ids += [None] * (len(todo) - len(call_ids))
            await db.store_embeddings(wdb.conn, self.embedder.name,
                                      [(db.text_hash(t), v, c) for t, v, c in zip(todo, vectors, call_ids)])
        self.tally.texts_embedded += len(todo)
