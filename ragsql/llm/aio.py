"""Event-loop plumbing every long step shares: CPU-bound local work (heuristics, tokenising, segmenting) runs off
the loop in one thread pool per process sized to the cores, and sibling tasks end together.

A step that holds the loop for a second starves every coroutine waiting on the database or an endpoint: a pooled
connection's holder cannot finish its statement, and the waiters' pool and HTTP timeouts fire though nothing is
wrong (issue 28: "couldn't get a connection after 20.00 sec" on a loaded machine). In a worker thread the same
work gives the loop a turn every few milliseconds (the interpreter's switch interval), and the pool's size bounds
how much of it runs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["Batched", "best_effort", "cores", "finish_together", "off_loop", "settle_together"]

T = TypeVar("T")
K = TypeVar("K")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def _executor() -> ThreadPoolExecutor:
    """The process's compute pool, made on first use and kept across event loops (a CLI command may run several)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="ragsql-compute")
        return _pool


async def off_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in the compute pool, awaited; its context variables go with it, as asyncio.to_thread."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)


RECANCEL_SECONDS = 1.0
"""How long a cancelled task may run on before it is cancelled again (a library lost the first cancellation)."""


async def finish_together(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run the coroutines as tasks; the first that fails stops the others (cancelled and awaited) and its error is
    raised. Unlike asyncio.gather, no sibling outlives the call: none is left running against a connection pool that
    its caller closes next, to fail at asyncio.run()'s shutdown with a traceback."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await _cancel_until_done(tasks)
    for task in tasks:
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc
    return [task.result() for task in tasks]


async def settle_together(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T | BaseException]:
    """Run the coroutines as tasks to their ends and return each one's result or error, in order, as
    asyncio.gather(..., return_exceptions=True) does; but a cancelled caller cancels them until every one has ended,
    even one that lost its cancellation (where gather would wait on it for as long as its endpoint takes)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks)
    finally:
        await _cancel_until_done(tasks)
    return [_outcome(task) for task in tasks]


def _outcome(task: asyncio.Future) -> Any:
    """A finished task's result, or the error it ended with (a CancelledError when it was cancelled)."""
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() or task.result()


async def _cancel_until_done(tasks: Sequence[asyncio.Future]) -> None:
    """Cancel the tasks and wait for them, cancelling again every RECANCEL_SECONDS those still running.

    One cancellation is not always enough: the HTTP stack under the openai client (anyio) can lose one that
    arrives as a read starts, and the task then waits on for the endpoint's reply; Ctrl-C hung for as long as a
    slow endpoint took to answer."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_SECONDS)
    for task in tasks:  # read every error, so none is logged at exit as "Task exception was never retrieved"
        _retrieve(task)


async def best_effort(coro: Coroutine[Any, Any, T]) -> T:
    """Await a clean-up step (put tasks back, drop a claim) that a cancellation of the caller must not stop: it runs
    on as a task of its own, and an error it ends with after the caller is gone is dropped (the caller had already
    given up on it), never logged at exit as "Task exception was never retrieved"."""
    task = asyncio.ensure_future(coro)
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


def _retrieve(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


class Batched(Generic[K, T]):
    """`await batched(item)`: `send(items)` (one result per item, in order) on every item asked for while the last
    batch was being sent, at most `most` at a time: one database statement for the many tasks of a loop that ask
    at once rather than one each. An item whose caller is cancelled is still sent; `send`'s error goes to every
    caller of its batch."""

    def __init__(self, send: Callable[[list[K]], Coroutine[Any, Any, Sequence[T]]], most: int = 256):
        self._send = send
        self._most = most
        self._queue: list[tuple[K, asyncio.Future[T]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def __call__(self, item: K) -> T:
        future = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._sending is None or self._sending.done():
            self._sending = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self._most], self._queue[self._most :]
            try:
                results = await self._send([item for item, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                        future.exception()  # retrieved: the caller re-raises it, nobody else must
                continue
            except BaseException:  # cancelled (the loop is closing): no caller waits on for ever
                for _, future in batch + self._queue:
                    future.cancel()
                self._queue = []
                raise
            for (_, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)

    async def aclose(self) -> None:
        """Stop sending: a batch being sent is cancelled and its callers with it."""
        if self._sending is not None and not self._sending.done():
            self._sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sending
