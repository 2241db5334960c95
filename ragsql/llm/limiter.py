"""Requests-per-minute and tokens-per-minute limiter for one asyncio event loop.

Each limit is a token bucket that refills continuously: the request bucket holds one request and the token
bucket one second's worth, so calls are spaced out instead of bursting at the top of each minute and a limit
published per minute is kept in every window. A request reserves its cost before it is sent and
waits until the bucket can pay; the tokens reserved beyond what the reply used are given back afterwards.
A 429's Retry-After pauses every caller, not only the one that was told.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["RateLimiter"]


class _Bucket:
    def __init__(self, per_minute: float, capacity: float):
        self.rate = per_minute / 60.0
        self.capacity = capacity
        self.level = self.capacity
        self.stamp = time.monotonic()

    def reserve(self, cost: float) -> float:
        """Take `cost` from the bucket (it may go below zero) and return how long the caller must wait first."""
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        need = min(cost, self.capacity)
        wait = max(0.0, (need - self.level) / self.rate)
        self.level -= cost
        return wait

    def refund(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


class RateLimiter:
    """Spaces calls to at most `rpm` requests and `tpm` tokens per minute (None: no limit)."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None):
        for name, value in (("rpm", rpm), ("tpm", tpm)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self._requests = _Bucket(rpm, 1.0) if rpm else None
        self._tokens = _Bucket(tpm, max(1.0, tpm / 60.0)) if tpm else None
        self._paused_until = 0.0

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about `tokens` tokens may be sent, and reserve it."""
        waits = [self._paused_until - time.monotonic()]
        if self._requests is not None:
            waits.append(self._requests.reserve(1))
        if self._tokens is not None:
            waits.append(self._tokens.reserve(tokens))
        delay = max(waits)
        if delay > 0:
            await asyncio.sleep(delay)
        # A pause announced while this caller slept applies to it too.
        while (rest := self._paused_until - time.monotonic()) > 0:
            await asyncio.sleep(rest)

    def settle(self, reserved: int, used: int) -> None:
        """Give back the tokens reserved for a call beyond the `used` tokens its reply reported."""
        if self._tokens is not None and reserved > used:
            self._tokens.refund(reserved - used)

    def pause(self, seconds: float) -> None:
        """Hold every caller for `seconds` (an endpoint's Retry-After)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
