"""One retrying send for every endpoint call (chat, embeddings, rerank): limiter, concurrency slots, tenacity.

`Sender.send(request, reserve=…)` waits for the rate limiter and a slot, sends, retries transient failures
(429, 408, 409, 5xx, timeouts, dropped connections) with backoff and jitter where Retry-After wins, and
returns the reply with the attempts it took. Anything else that goes wrong — a final HTTP status, a 200 whose
body is not JSON (the openai client then hands back a str), a reply `check` rejects, any exception the client
raises — ends as `SendFailed` with a one-line reason. Nothing else escapes but cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ragsql.llm.limiter import RateLimiter
from ragsql.llm.retry import describe, is_refusal, never_connected, retrying
from ragsql.llm.tokens import tokenizer_name

__all__ = ["DEFAULT_BACKOFF", "EndpointClient", "SendFailed", "Sender", "Sent"]

R = TypeVar("R")

DEFAULT_BACKOFF = (0.5, 30.0)
"""Initial and longest backoff between attempts, in seconds (before jitter; Retry-After wins)."""


class SendFailed(Exception):
    """A send that is over: `reason` (one line), the HTTP attempts made, and whether any of them reached the endpoint
    (False: none got a connection, so nothing was bought)."""

    def __init__(self, reason: str, attempts: int, reached: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.reached = reached


class Sent(Generic[R]):
    """A reply and the HTTP attempts it took."""

    __slots__ = ("reply", "attempts")

    def __init__(self, reply: R, attempts: int):
        self.reply = reply
        self.attempts = attempts


class Sender:
    """Sends requests to one endpoint within `concurrency` in flight and the rpm/tpm limits, with retries."""

    @classmethod
    def for_settings(cls, settings, limiter: RateLimiter | None = None) -> Sender:
        """A sender within an `EndpointSettings`' retries, concurrency and rate limits."""
        return cls(
            max_retries=settings.max_retries,
            concurrency=settings.concurrency,
            rpm=settings.rpm,
            tpm=settings.tpm,
            limiter=limiter,
        )

    def __init__(
        self,
        *,
        max_retries: int,
        concurrency: int,
        rpm: float | None = None,
        tpm: float | None = None,
        limiter: RateLimiter | None = None,
        backoff: tuple[float, float] | None = None,
    ):
        self.max_retries = max_retries
        self.backoff = backoff or DEFAULT_BACKOFF
        self.limiter = limiter or RateLimiter(rpm, tpm)
        self._slots = asyncio.Semaphore(concurrency)

    async def send(
        self, request: Callable[[], Awaitable[R]], *, reserve: int = 0, check: Callable[[R], object] | None = None
    ) -> Sent[R]:
        """`request()` with retries; `check(reply)` raises (ValueError, TypeError, …) when the reply is unusable.

        The tokens reserved are given back for a refused request; the caller settles a reply's real usage."""
        attempts = 0
        reached = False  # an attempt got a connection: the request may have been read (and billed)
        policy = retrying(
            self.max_retries + 1, initial=self.backoff[0], maximum=self.backoff[1], on_rate_limit=self.limiter.pause
        )
        try:
            async for attempt in policy:
                with attempt:
                    await self.limiter.acquire(reserve)
                    attempts += 1
                    try:
                        async with self._slots:
                            reply = await request()
                    except Exception as exc:
                        reached = reached or not never_connected(exc)
                        if is_refusal(exc):
                            self.limiter.settle(reserve, 0)  # refused: nothing was spent
                        raise
        except Exception as exc:  # noqa: BLE001 - whatever the client raised, the call is over with a reason
            raise SendFailed(describe(exc, attempts), attempts, reached) from None
        if isinstance(reply, (str, bytes)):
            snippet = " ".join(str(reply if isinstance(reply, str) else reply[:200]).split())[:80]
            raise SendFailed(f"the endpoint answered with a body that is not JSON: {snippet!r}", attempts)
        # tenacity runs the loop at least once and raises unless an attempt returned: reply is bound here, an R
        if check is not None:
            try:
                check(reply)  # pyright: ignore[reportArgumentType]
            except Exception as exc:  # noqa: BLE001 - a reply of the wrong shape, whatever the check raised
                raise SendFailed(f"unusable reply: {describe(exc)}", attempts) from None
        return Sent(reply, attempts)  # pyright: ignore[reportReturnType]


class EndpointClient:
    """Base of the judge, embedding and rerank clients: one openai client (its own retries off, so every
    attempt is counted by the sender) and one `Sender` per endpoint."""

    def __init__(self, settings, limiter: RateLimiter | None = None):
        import openai  # ~0.8 s: only where an endpoint is used

        tokenizer_name()  # load the tokenizer (~1 s) now, not on the event loop where leases are being renewed
        self._sender = Sender.for_settings(settings, limiter)
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url, api_key=settings.api_key or "none", timeout=settings.timeout, max_retries=0
        )

    @property
    def backoff(self) -> tuple[float, float]:
        """Initial and longest backoff between attempts, in seconds (before jitter; Retry-After wins)."""
        return self._sender.backoff

    @backoff.setter
    def backoff(self, value: tuple[float, float]) -> None:
        self._sender.backoff = value
