"""A run's call budget across processes: a call is sent only after a place is reserved in ragsql.run_calls; the place
is given back when nothing was sent, and stays spent when the call may have been (a killed process included)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from ragsql.calls import CallService
from ragsql.calls.service import BudgetSpent
from ragsql.judge.client import JudgeClient
from ragsql.judge.kinds import statements
from ragsql.judge.prompts import JudgeRequest
from ragsql.llm.calls import CallFailed
from ragsql.llm.settings import EndpointSettings
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = 7  # a budget counts by run id (ragsql.judge_call.for_run_id): no run row is needed
REQUESTS = [statements.request(f"Fact number {i} is true. It is plain.") for i in range(8)]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def _client(base_url: str, **overrides) -> JudgeClient:
    client = JudgeClient(
        EndpointSettings(**{"base_url": base_url, "api_key": "k", "model": "judge", "max_retries": 0, **overrides})
    )
    client.backoff = (0.01, 0.05)
    return client


async def _buy(url: str, client: JudgeClient, requests: Sequence[JudgeRequest], budget: int) -> list[str]:
    """Each request through one CallService with `budget` for RUN_ID, all at once: bought, spent or failed each."""

    async def one(calls: CallService, request: JudgeRequest) -> str:
        try:
            await calls.get(client.request_hash(request), lambda: client.judge(request))
        except BudgetSpent:
            return "spent"
        except CallFailed:
            return "failed"
        return "bought"

    async with CallService(url, purpose="judge", run_id=RUN_ID, budget=budget) as calls:
        return list(await asyncio.gather(*(one(calls, r) for r in requests)))


def _buy_apart(url: str, client: JudgeClient, groups: Sequence[Sequence[JudgeRequest]], budget: int) -> list[str]:
    """The groups of requests bought at once, each by a CallService of its own (own pool, own owner), then the
    client closed."""

    async def go() -> list[str]:
        try:
            outcomes = await asyncio.gather(*(_buy(url, client, group, budget) for group in groups))
        finally:
            await client.aclose()
        return [o for group in outcomes for o in group]

    return asyncio.run(go())


def _reserved(url: str) -> int | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("select reserved from ragsql.run_calls where run_id = %s", (RUN_ID,)).fetchone()
    return None if row is None else row[0]


def test_services_buying_at_once_buy_at_most_the_budget(fresh_db, fake):
    """Three call services (as three processes) each send 3 requests at once under a budget of 4: 4 are bought in
    all, the other 5 refused by the budget (each service counting only its own calls in flight bought up to 12)."""
    fake.latency = 0.5  # every service's calls are in flight together
    groups = [REQUESTS[0:3], REQUESTS[3:6], REQUESTS[6:8] + [statements.request("One more fact. It is plain.")]]
    outcomes = _buy_apart(fresh_db, _client(fake.base_url), groups, budget=4)
    assert fake.chat_calls == 4, outcomes
    assert sorted(outcomes) == ["bought"] * 4 + ["spent"] * 5
    assert _reserved(fresh_db) == 4
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("select count(*) from ragsql.judge_call where for_run_id = %s", (RUN_ID,)).fetchone() == (
            4,
        )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_call_refused_before_any_reply_gives_its_place_back(fresh_db, fake):
    """Budget 1: a call whose connection is refused is stored failed but costs no place, so the next request is
    bought; under budget 2, a call the endpoint answered with HTTP 500 keeps its place (it reached the endpoint)."""
    refused = _client(f"http://127.0.0.1:{_closed_port()}/v1", max_retries=1)
    assert _buy_apart(fresh_db, refused, [REQUESTS[:1]], 1) == ["failed"]
    with psycopg.connect(fresh_db) as conn:
        failed = conn.execute("select status, error from ragsql.judge_call where for_run_id = %s", (RUN_ID,)).fetchall()
    assert [status for status, _ in failed] == ["failed"] and "connection error" in failed[0][1]
    assert _buy_apart(fresh_db, _client(fake.base_url), [REQUESTS[1:2]], 1) == ["bought"]
    assert fake.chat_calls == 1 and _reserved(fresh_db) == 1
    fake.fail_next(500)
    assert _buy_apart(fresh_db, _client(fake.base_url), [REQUESTS[2:3]], 2) == ["failed"]
    assert _buy_apart(fresh_db, _client(fake.base_url), [REQUESTS[3:4]], 2) == ["spent"]
    assert fake.chat_calls == 2 and _reserved(fresh_db) == 2


_HOLD = """
import asyncio, sys
from tests.test_call_budget import REQUESTS, _buy, _client
asyncio.run(_buy(sys.argv[1], _client(sys.argv[2], timeout=120), REQUESTS[:2], 3))
"""


def test_a_killed_process_keeps_its_places_spent(fresh_db, fake):
    """A process SIGKILLed while 2 of its calls (budget 3) are at the endpoint stored nothing; its 2 places stay
    spent, so the next process buys 1 call of the 4 it wants."""
    fake.latency = 60.0
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, fresh_db, fake.base_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while fake.chat_calls < 2 and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.chat_calls == 2, holder.stderr and holder.stderr.read()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    fake.latency = 0.0
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("select count(*) from ragsql.judge_call").fetchone() == (0,)
    outcomes = _buy_apart(fresh_db, _client(fake.base_url), [REQUESTS[2:6]], 3)
    assert sorted(outcomes) == ["bought"] + ["spent"] * 3
    assert fake.chat_calls == 3 and _reserved(fresh_db) == 3
