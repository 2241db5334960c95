"""The judge as the tasks see it: every request goes through the call service (`ragsql.calls`: the database
cache, a claim on the request, identical requests in flight sent once, every call stored the moment it returns
on the service's own connections), and the tally of calls, cache hits, failures and tokens is kept for the
closing summary. A dry run answers with the offline judge instead, stores nothing and counts what a real run
would send."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

import psycopg
from pydantic import BaseModel

from ragsql.calls import CallService
from ragsql.db import judging as db
from ragsql.judge.prompts import JudgeRequest
from ragsql.llm.aio import Batched
from ragsql.llm.calls import CallFailed, CallRecord
from ragsql.llm.tokens import count_message_tokens, tokenizer_name

__all__ = ["Answer", "CallFailed", "Judging", "Tally", "WorkerDb"]

T = TypeVar("T", bound=BaseModel)
# A judge writes roughly this many completion tokens per item it judges (dry-run estimate only).
_COMPLETION_PER_ITEM = 30


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

    def merge(self, other: Tally) -> None:
        """Add `other`'s counts to these (the plan of several judge repeats)."""
        for f in fields(self):
            if f.name == "by_prompt":
                self.by_prompt.update(other.by_prompt)
            else:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

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
    """A validated verdict and the call it came from (call_id 0 in a dry run, which stores nothing)."""

    verdict: T
    call_id: int


class Judging:
    """Shared by every worker of a process: the judge, the embedder, the in-flight map and the tally."""

    def __init__(
        self,
        judge: Any,
        embedder: Any,
        *,
        dry_run: bool = False,
        stand_in: Any = None,
        claim_settings: tuple[str, str] = ("low", "low"),
    ):
        self.judge = judge
        self.claim_settings = claim_settings  # RAGAS's (atomicity, coverage) of factual_correctness's claims
        self.embedder = embedder
        self.dry_run = dry_run
        self.stand_in = stand_in  # the offline judge that answers for the real one in a dry run
        self.tally = Tally()
        self.calls: CallService  # bound by the runner (`bind`) for the length of a run
        self._planned: dict[str, Answer] = {}  # dry run: a request planned once is shared, as the cache would be
        self._embedding: dict[str, asyncio.Future] = {}  # text hash -> the embedding in flight in this process
        if dry_run:
            tokenizer_name()  # the tokenizer loads here (~1 s), not on the event loop

    @property
    def model(self) -> str:
        """The judge model verdicts are stored under."""
        return self.judge.model

    @property
    def identity(self) -> str:
        """Judge model and embedder, recorded on every task they close: another pair judges the run again."""
        return f"{self.judge.model} + {self.embedder.name}"

    def bind(self, calls: CallService) -> None:
        """Use `calls` (opened by the runner) for every request; its sent calls go into the tally."""
        calls.on_record = self.tally.add_call
        self.calls = calls
        self._extractions = Batched(functools.partial(calls.run, db.store_extractions))

    async def unbind(self) -> None:
        """The run is over: stop batching extractions (one being stored is cancelled, its callers with it)."""
        await self._extractions.aclose()

    async def store_extraction(
        self, text: str, model: str, prompt_version: str, call_id: int | None, statements: Sequence[str]
    ) -> int:
        """Store the statements extracted from a text once (with those other tasks store meanwhile, in one
        transaction); the extraction's id."""
        return await self._extractions((text, model, prompt_version, call_id, statements))

    async def ask(self, request: JudgeRequest[T], wdb: WorkerDb | None = None) -> Answer[T]:
        """The verdict for `request`: from the cache, from an identical request in flight, or from one call;
        CallFailed when it cannot be had."""
        key = self.judge.request_hash(request)
        if self.dry_run:
            if key in self._planned:
                return self._planned[key]
            hit = await self.calls.lookup(key)
            if hit is not None:
                return self._hit(request, hit)
            self._planned[key] = await self._plan(request)
            return self._planned[key]
        # the offline judge's reply costs less to make than a claim on it costs to take
        stored = await self.calls.get(key, lambda: self.judge.judge(request), claim=not self.judge.offline)
        if stored.cached:
            return self._hit(request, stored)
        return Answer(stored.value, stored.call_id)

    def _hit(self, request: JudgeRequest[T], stored) -> Answer[T]:
        self.tally.cached += 1
        return Answer(request.schema.model_validate(stored.response, context=request.context), stored.call_id)

    async def _plan(self, request: JudgeRequest[T]) -> Answer[T]:
        verdict, _ = await self.stand_in.judge(request)
        self.tally.calls += 1
        self.tally.by_prompt[request.kind] += 1
        self.tally.prompt_tokens += count_message_tokens(request.messages)
        items = max(1, len(request.items) or len(getattr(verdict, "statements", ()) or ()))
        self.tally.completion_tokens += _COMPLETION_PER_ITEM * items
        return Answer(verdict, 0)

    async def embed(self, texts: Sequence[str], wdb: WorkerDb | None = None) -> None:
        """Make sure every text has an embedding by the run's embedder (stored once per text, across runs); a text
        another task of this process is embedding is waited for, not sent again."""
        unique = list(dict.fromkeys(t for t in texts if t and t.strip()))
        if not unique:
            return
        hashes = {db.text_hash(t): t for t in unique}
        shared = {self._embedding[h] for h in hashes if h in self._embedding}
        mine = [h for h in hashes if h not in self._embedding]
        if mine:  # registered before any await, so no other task of this process sends these texts meanwhile
            future = asyncio.get_running_loop().create_future()
            self._embedding.update(dict.fromkeys(mine, future))
            try:
                await self._embed_missing({h: hashes[h] for h in mine})
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # retrieved: waiters re-raise it, nobody else must
                raise
            else:
                future.set_result(None)
            finally:
                for h in mine:
                    self._embedding.pop(h, None)
        for waiting in shared:
            await asyncio.shield(waiting)

    async def _embed_missing(self, hashes: dict[str, str]) -> None:
        missing = await self.calls.run(db.missing_embeddings, list(hashes), self.embedder.name)
        self.tally.embeddings_cached += len(hashes) - len(missing)
        todo = [hashes[h] for h in hashes if h in missing]
        if not todo:
            return
        if self.dry_run:
            self.tally.texts_embedded += len(todo)
            self.tally.embedding_calls += 0 if self.embedder.offline else 1
            return
        # a run's call budget counts embedding calls as well: a place per request the embedder will send
        places = 0
        if self.calls.budget is not None and not self.embedder.offline:
            places = -(-len(todo) // getattr(self.embedder, "batch_size", len(todo)))
            await self.calls.reserve(places)
        try:
            vectors, records = await self.embedder.embed(todo)
        except CallFailed as exc:  # the embedder's own one-line error; its failed calls are still stored
            for rec in exc.records:
                await self.calls.store(rec)
            await self.calls.release(places - sum(rec.sent for rec in exc.records))
            raise CallFailed(f"embedding failed: {exc}") from None
        call_ids: list[int | None] = []
        for rec in records:
            rec_id = await self.calls.store(rec)
            call_ids += [rec_id] * int((rec.response or {}).get("inputs", len(todo)))
        await self.calls.release(places - sum(rec.sent for rec in records))
        call_ids += [None] * (len(todo) - len(call_ids))
        await self.calls.run(
            db.store_embeddings,
            self.embedder.name,
            [(db.text_hash(t), v, c) for t, v, c in zip(todo, vectors, call_ids)],
        )
        self.tally.texts_embedded += len(todo)
