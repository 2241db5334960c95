"""Cache-or-claim-call-and-store, the one way ragsql gets a reply from an endpoint (judge, generator, reranker).

`CallService.get(key, call)` returns the stored reply of the request `key` if there is one; otherwise it claims
the request in the database (ragsql._claim_call), so that no other process sends it meanwhile, sends it with
`call()` and stores the call, which releases the claim, in one transaction. A request another process holds
is waited for (its reply is then read from the cache); a claim whose lease ran out, or whose holder on this
host is dead, is taken over. Identical requests in flight in this process are sent once. Calls are stored on
the service's own pooled connections, never on a caller's: a task that stops early cannot strand a sibling's
reply, and a dropped connection is replaced by the pool (statements are retried for `db_patience` seconds).
Every failure of a call ends as `CallFailed` with a one-line reason; a lost database as `DatabaseError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ragsql.calls.owner import alive, process_owner, retire
from ragsql.db import calls as db
from ragsql.errors import DatabaseError
from ragsql.llm.aio import Batched, best_effort
from ragsql.llm.calls import CallFailed, CallRecord
from ragsql.llm.retry import describe

__all__ = ["BUDGET_SPENT", "BudgetSpent", "CallService", "Stored"]

# how the reason of a call refused by a budget starts: callers tell the tasks it failed from failed ones by it
BUDGET_SPENT = "budget spent"


class BudgetSpent(CallFailed):
    """A call not sent: the places of the run's call budget (ragsql.run_calls) are all taken."""


# the pool logs every failed reconnection attempt; a restart is handled here and must not print a line
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

T = TypeVar("T")
Call = Callable[[], Awaitable[tuple[Any, CallRecord]]]


@dataclass(frozen=True)
class Stored:
    """A reply: its JSON (`response`), the judge_call id, whether it came from the cache, and the value the call
    returned when it was sent here (None when cached)."""

    response: Any
    call_id: int
    cached: bool
    value: Any = None


class CallService:
    """One per process and database; an async context manager (opens the pool, releases claims on the way out)."""

    def __init__(
        self,
        url: str,
        *,
        purpose: str,
        run_id: int | None = None,
        lease: float = 60.0,
        poll: float = 0.05,
        db_patience: float = 20.0,
        on_record: Callable[[CallRecord], None] | None = None,
        max_connections: int = 4,
        budget: int | None = None,
    ):
        self.owner = process_owner()
        if budget is not None and run_id is None:
            raise ValueError("a call budget is per run: give run_id")
        self.bought_for = db.Purchase(purpose, run_id)  # recorded with every call sent, for the run's cost
        # the most places of run_id's budget (ragsql.run_calls) taken by every process: a call is sent only after
        # one is reserved in the database, so processes on any machines together never buy more
        self.budget = budget
        self.lease = lease
        self.poll = poll
        self.db_patience = db_patience
        self.on_record = on_record
        self.sent = self.cached = self.waits = 0
        self._inflight: dict[str, asyncio.Future] = {}
        self._pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            open=False,
            kwargs={"autocommit": True, "application_name": "ragsql calls"},
            reconnect_timeout=db_patience,
        )
        self._renewer: asyncio.Task | None = None
        # the unclaimed calls' cache look-ups and stores, each batched: one statement for many tasks
        self._lookups: Batched[str, Stored | None] = Batched(self._lookup_many)
        self._stores: Batched[CallRecord, int] = Batched(self._store_many)
        self._answered = float("-inf")  # the loop's time when a statement last completed on the pool

    async def __aenter__(self) -> CallService:
        try:
            await self._pool.open(wait=True, timeout=self.db_patience)
        except PoolTimeout:
            await self._pool.close()
            raise DatabaseError("cannot connect to the database for the call cache") from None
        self._renewer = asyncio.create_task(self._renew())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop renewing, drop this service's claims (best effort; a claim left behind, say while the database
        was down, is taken over at once by a later service of this process) and close the pool."""
        retire(self.owner)
        await self._lookups.aclose()
        await self._stores.aclose()
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
            self._renewer = None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.run(db.release_claims, self.owner, patience=2.0), 5.0)
        await self._pool.close()

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any, patience: float | None = None) -> T:
        """`fn(conn, *args)` on a pooled connection; retried while the database is unreachable, for at most
        `patience` seconds (default `db_patience`), then DatabaseError with one line."""
        loop = asyncio.get_running_loop()
        patience = self.db_patience if patience is None else patience
        deadline = loop.time() + patience
        delay = 0.1
        while True:
            asked = loop.time()
            try:
                async with self._pool.connection(timeout=max(0.1, deadline - asked)) as conn:
                    value = await fn(conn, *args)
                self._answered = loop.time()
                return value
            except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
                if isinstance(exc, PoolTimeout) and self._answered > asked and not self._pool.closed:
                    # every connection was busy and their statements kept completing: a queue (many tasks on a
                    # loaded machine), not a lost database; wait in it again
                    deadline = loop.time() + patience
                    continue
                if loop.time() + delay > deadline:
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise DatabaseError(f"lost the database connection: {first}") from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def lookup(self, key: str) -> Stored | None:
        """The stored reply of `key`, if any (no claim; a dry run asks this)."""
        hit = await self.run(db.cached_call, key)
        return None if hit is None else Stored(hit.response, hit.call_id, True)

    async def _lookup_many(self, keys: list[str]) -> list[Stored | None]:
        hits = await self.run(db.cached_calls, keys)
        return [Stored(hits[k].response, hits[k].call_id, True) if k in hits else None for k in keys]

    async def _store_many(self, recs: list[CallRecord]) -> list[int]:
        return await self.run(db.store_calls, recs, self.owner, self.bought_for)

    async def store(self, rec: CallRecord) -> int:
        """Store a call made outside `get` (an embedding batch); returns its id."""
        call_id = await self.run(db.store_call, rec, None, self.bought_for)
        self._count(rec)
        return call_id

    async def get(self, key: str, call: Call, *, claim: bool = True) -> Stored:
        """The reply of request `key`: stored, waited for, or got by `call()` (which returns (value, record)
        and does not raise) and stored; CallFailed with the reason when the call failed. Without `claim` (a local,
        deterministic call such as the offline judge's: cheaper to make twice than to claim) no other process is
        kept from making it meanwhile; the first reply stored is the one every later request reads."""
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key])
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            stored = await self._get(key, call, claim)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(stored)
        return stored

    async def _get(self, key: str, call: Call, claim: bool) -> Stored:
        since: dt.datetime | None = None
        take_from: str | None = None
        delay = self.poll
        if not claim:
            hit = await self._lookups(key)
            if hit is not None:
                self.cached += 1
                return hit
        while claim:
            got = await self.run(db.claim_call, key, self.owner, self.lease, since, take_from)
            if got.state == "cached":
                self.cached += 1
                # a cached claim carries its call id (ragsql.claim_call returns both)
                return Stored(got.response, got.call_id, True)  # pyright: ignore[reportArgumentType]
            if got.state == "failed":
                raise CallFailed(f"the call failed in another process: {got.error}")
            if got.state == "claimed":
                break
            if since is None:
                self.waits += 1
                since = await self.run(db.db_now)
            take_from = got.holder if got.holder and not alive(got.holder) else None
            if take_from is None:
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, 1.0)
        try:
            if self.budget is not None:
                await self.reserve()
            # a call abandoned from here on (cancelled, a caller's bug) keeps its place: it may have been sent
            value, rec = await call()
        except (Exception, asyncio.CancelledError) as exc:
            # the call was abandoned (cancelled, or a caller's bug) or not allowed: let others send it
            with contextlib.suppress(Exception):
                await best_effort(self.run(db.release_claim, key, self.owner, patience=2.0))
            if isinstance(exc, (asyncio.CancelledError, BudgetSpent)):
                raise
            raise CallFailed(f"the call failed: {describe(exc)}") from None
        if claim:
            call_id = await self.run(db.store_call, rec, self.owner, self.bought_for)
        else:
            call_id = await self._stores(rec)
        if self.budget is not None and not rec.sent:
            await self.release(1)
        self._count(rec)
        if not rec.ok:
            raise CallFailed(f"{rec.prompt_name} call failed: {rec.error}", rec)
        return Stored(rec.response, call_id, False, value)

    async def reserve(self, places: int = 1) -> None:
        """Take `places` places of the run's budget in the database, atomically across processes, before as many
        calls are sent (`get` does it; an embedding batch asks itself), or BudgetSpent with none taken. A place
        stays taken once its call may have been sent, also when this process dies: never more than the budget."""
        run_id = self.bought_for.run_id
        if run_id is None or self.budget is None:
            raise ValueError("reserve needs a budget and a run")
        if not await self.run(db.reserve_calls, run_id, places, self.budget):
            raise BudgetSpent(f"{BUDGET_SPENT}: {self.budget} calls bought for this run")

    async def release(self, places: int) -> None:
        """Give back places of calls known not to have been sent (no attempt reached the endpoint). Best effort:
        a place not given back stays spent, which errs on the side of the budget."""
        run_id = self.bought_for.run_id
        if run_id is None or places < 1:
            return
        with contextlib.suppress(DatabaseError):
            await self.run(db.release_calls, run_id, places, patience=2.0)

    def _count(self, rec: CallRecord) -> None:
        self.sent += 1
        if self.on_record is not None:
            self.on_record(rec)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            with contextlib.suppress(DatabaseError):
                await self.run(db.renew_claims, self.owner, self.lease)
