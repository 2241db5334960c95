"""The SQL of the call cache (ragsql.judge_call) and of the claims on requests in flight (judge_call_claim)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import class_row

from ragsql.db.rows import one_async, value_async
from ragsql.llm.calls import CallRecord

__all__ = [
    "Cached",
    "Claim",
    "Purchase",
    "cached_call",
    "cached_calls",
    "claim_call",
    "db_now",
    "release_claim",
    "release_calls",
    "release_claims",
    "renew_claims",
    "reserve_calls",
    "store_call",
    "store_calls",
]


@dataclass(frozen=True)
class Claim:
    """What `claim_call` found: cached (call_id, response), claimed, wait (holder), or failed (error)."""

    state: str
    call_id: int | None = None
    response: Any = None
    holder: str | None = None
    error: str | None = None


class Cached(NamedTuple):
    """The successful call stored for a request: its id and validated reply."""

    call_id: int
    response: Any


@dataclass(frozen=True)
class Purchase:
    """What a call is sent for (judge, synth, rerank, generate) and the run it is bought for, if any."""

    purpose: str
    run_id: int | None = None


def _cached(conn: psycopg.AsyncConnection, request_hash: str) -> Awaitable[psycopg.AsyncCursor[Cached]]:
    return conn.cursor(row_factory=class_row(Cached)).execute(
        "select call_id, response from ragsql.cached_response(%s)", (request_hash,)
    )


async def cached_call(conn: psycopg.AsyncConnection, request_hash: str) -> Cached | None:
    """(call id, validated reply) of the successful call for this request, if any."""
    return await (await _cached(conn, request_hash)).fetchone()


async def claim_call(
    conn: psycopg.AsyncConnection,
    request_hash: str,
    owner: str,
    lease_seconds: float,
    since: dt.datetime | None = None,
    take_from: str | None = None,
) -> Claim:
    """ragsql._claim_call: the stored reply, or the right to send the request, or whom to wait for."""
    cur = await conn.cursor(row_factory=class_row(Claim)).execute(
        "select state, call_id, response, holder, error "
        "from ragsql._claim_call(%s, %s, make_interval(secs => %s), %s, %s)",
        (request_hash, owner, lease_seconds, since, take_from),
    )
    row = await cur.fetchone()
    return row if row is not None else Claim("wait")


async def reserve_calls(conn: psycopg.AsyncConnection, run_id: int, places: int, budget: int) -> bool:
    """ragsql._reserve_calls: take `places` places of the run's call budget, or (False) none when they would pass it."""
    return await value_async(await conn.execute("select ragsql._reserve_calls(%s, %s, %s)", (run_id, places, budget)))


async def release_calls(conn: psycopg.AsyncConnection, run_id: int, places: int) -> None:
    """ragsql._release_calls: give back places of calls known not to have been sent."""
    await conn.execute("select ragsql._release_calls(%s, %s)", (run_id, places))


async def db_now(conn: psycopg.AsyncConnection) -> dt.datetime:
    """The database server's clock (waits are measured on it, not on this machine's)."""
    return await value_async(await conn.execute("select clock_timestamp()"))


_STORE = """
    with released as (
        delete from ragsql.judge_call_claim where request_hash = %(hash)s and owner = %(owner)s
    ),
    added as (
        insert into ragsql.judge_call (request_hash, kind, model, prompt_name, prompt_version, prompt_tokens,
                                       completion_tokens, latency_ms, attempts, status, error, response,
                                       for_run_id, purpose)
        values (%(hash)s, %(kind)s, %(model)s, %(prompt_name)s, %(prompt_version)s, %(prompt_tokens)s,
                %(completion_tokens)s, %(latency_ms)s, %(attempts)s, %(status)s, %(error)s, %(response)s,
                %(run_id)s, %(purpose)s)
        on conflict (request_hash) where status = 'ok' do nothing
        returning id
    )
    select id from added
"""


def _stored(rec: CallRecord, owner: str | None, bought_for: Purchase | None) -> dict[str, Any]:
    """The parameters of _STORE for one call."""
    return {
        "hash": rec.request_hash,
        "owner": owner,
        "kind": rec.kind,
        "model": rec.model,
        "prompt_name": rec.prompt_name,
        "prompt_version": rec.prompt_version,
        "prompt_tokens": rec.prompt_tokens,
        "completion_tokens": rec.completion_tokens,
        "latency_ms": rec.latency_ms,
        "attempts": max(1, rec.attempts),
        "status": rec.status,
        "error": rec.error,
        "response": None if rec.response is None else json.dumps(rec.response, ensure_ascii=False),
        "run_id": bought_for and bought_for.run_id,
        "purpose": bought_for and bought_for.purpose,
    }


async def store_call(
    conn: psycopg.AsyncConnection, rec: CallRecord, owner: str | None = None, bought_for: Purchase | None = None
) -> int:
    """Insert one call (with the run and purpose it was sent for) and release its claim by `owner`, in one
    statement; a successful request stored meanwhile keeps the first row (whose id is returned)."""
    row = await (await conn.execute(_STORE, _stored(rec, owner, bought_for))).fetchone()
    if row is not None:
        return row[0]
    return (await one_async(await _cached(conn, rec.request_hash))).call_id  # the successful call stored first


async def store_calls(
    conn: psycopg.AsyncConnection, recs: Sequence[CallRecord], owner: str | None, bought_for: Purchase | None
) -> list[int]:
    """`store_call` of many calls (of distinct requests) in one pipeline; their ids, in order."""
    ids: list[int | None] = []
    async with conn.cursor() as cur:
        await cur.executemany(_STORE, [_stored(rec, owner, bought_for) for rec in recs], returning=True)
        while True:
            row = await cur.fetchone()
            ids.append(None if row is None else row[0])
            if not cur.nextset():
                break
    first = await cached_calls(conn, [rec.request_hash for rec, i in zip(recs, ids) if i is None])
    return [first[rec.request_hash].call_id if i is None else i for rec, i in zip(recs, ids)]


async def cached_calls(conn: psycopg.AsyncConnection, request_hashes: Sequence[str]) -> dict[str, Cached]:
    """`cached_call` of many requests in one statement: {request hash: (call id, reply)} of those stored."""
    if not request_hashes:
        return {}
    cur = await conn.execute(
        "select request_hash, call_id, response from ragsql.cached_responses(%s)", (list(request_hashes),)
    )
    return {h: Cached(call_id, response) for h, call_id, response in await cur.fetchall()}


async def release_claim(conn: psycopg.AsyncConnection, request_hash: str, owner: str) -> None:
    """Drop one claim (its call was abandoned: nothing stored)."""
    await conn.execute(
        "delete from ragsql.judge_call_claim where request_hash = %s and owner = %s", (request_hash, owner)
    )


async def renew_claims(conn: psycopg.AsyncConnection, owner: str, lease_seconds: float) -> int:
    """Extend the lease of every claim `owner` holds."""
    cur = await conn.execute("select ragsql._renew_call_claims(%s, make_interval(secs => %s))", (owner, lease_seconds))
    return await value_async(cur)


async def release_claims(conn: psycopg.AsyncConnection, owner: str) -> int:
    """Drop every claim `owner` holds."""
    return await value_async(await conn.execute("select ragsql._release_call_claims(%s)", (owner,)))
