"""`finish_together` and `settle_together` end every sibling task, even one that lost a cancellation: CI once saw
`ragsql judge` ignore Ctrl-C for a minute, its last task still reading a held reply (the HTTP stack under the openai
client had swallowed the one cancellation it was sent)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from ragsql.llm.aio import RECANCEL_SECONDS, finish_together, settle_together


class _Stubborn:
    """A task body that swallows its first cancellation, as the library did, then waits forever."""

    def __init__(self) -> None:
        self.cancellations = 0

    async def __call__(self) -> None:
        forever = asyncio.Event()
        while True:
            try:
                await forever.wait()
            except asyncio.CancelledError:
                self.cancellations += 1
                if self.cancellations > 1:
                    raise


async def _fails_soon() -> None:
    await asyncio.sleep(0.05)
    raise ValueError("the database is gone")


def test_a_sibling_that_lost_its_cancellation_is_cancelled_again():
    stubborn = _Stubborn()

    async def go() -> None:
        await asyncio.wait_for(finish_together([stubborn(), _fails_soon()]), timeout=RECANCEL_SECONDS * 5)

    with pytest.raises(ValueError, match="the database is gone"):
        asyncio.run(go())
    assert stubborn.cancellations == 2


@pytest.mark.parametrize("together", [finish_together, settle_together])
def test_ctrl_c_ends_a_call_whose_task_lost_its_cancellation(together):
    """The caller cancelled (Ctrl-C, SIGTERM): the call returns within a few re-cancel periods, not never (where
    asyncio.gather, with or without return_exceptions, waits on such a task for as long as it runs)."""
    stubborn = _Stubborn()

    async def go() -> float:
        loop = asyncio.get_running_loop()
        call = asyncio.ensure_future(together([stubborn(), asyncio.sleep(3600)]))
        await asyncio.sleep(0.05)
        started = loop.time()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, timeout=RECANCEL_SECONDS * 5)
        return loop.time() - started

    assert asyncio.run(go()) < RECANCEL_SECONDS * 3
    assert stubborn.cancellations == 2


def test_every_failure_is_read_and_the_first_raised():
    """Two siblings fail: the first error is raised and the other is not logged as never retrieved."""
    logged: list[dict] = []

    async def fails(delay: float, message: str) -> None:
        await asyncio.sleep(delay)
        raise RuntimeError(message)

    async def go() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: logged.append(context))
        with pytest.raises(RuntimeError, match="first"):
            await finish_together([fails(0.01, "first"), fails(0.01, "second")])
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(go())
    gc.collect()
    assert not [c for c in logged if "never retrieved" in str(c.get("message"))], logged


def test_results_come_back_in_order():
    async def value(delay: float, v: int) -> int:
        await asyncio.sleep(delay)
        return v

    assert asyncio.run(finish_together([value(0.03, 1), value(0.0, 2), value(0.01, 3)])) == [1, 2, 3]


def test_settle_together_runs_every_call_to_its_end_and_returns_errors_in_place():
    """A failure stops no sibling (a judge task's calls all finish before it is closed); results keep order."""
    finished: list[int] = []

    async def value(delay: float, v: int) -> int:
        await asyncio.sleep(delay)
        finished.append(v)
        return v

    got = asyncio.run(settle_together([value(0.05, 1), _fails_soon(), value(0.0, 3)]))
    assert got[0] == 1 and got[2] == 3
    assert isinstance(got[1], ValueError)
    assert sorted(finished) == [1, 3]
