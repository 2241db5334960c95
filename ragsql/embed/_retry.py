"""Retry policy for embedding calls: transient errors (429, 408, 409, 5xx, timeouts, dropped connections) are
tried again with exponential backoff and jitter, a server's Retry-After (capped at 300 s) winning.

It mirrors ``ragsql.judge.retry``, which this sibling layer may not import; both belong in ``ragsql.llm``.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

__all__ = ["describe", "retrying"]

_MAX_WAIT = 300.0


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # includes APITimeoutError


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    try:
        if (ms := response.headers.get("retry-after-ms")) is not None:
            return min(_MAX_WAIT, max(0.0, float(ms) / 1000))
        raw = response.headers.get("retry-after")
        if raw is None:
            return None
        try:
            seconds = float(raw)
        except ValueError:
            seconds = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
        return min(_MAX_WAIT, max(0.0, seconds))
    except (TypeError, ValueError, OverflowError):
        return None


def describe(exc: BaseException, attempts: int = 1) -> str:
    """One line for a failed call: ``HTTP 429 after 5 attempts: rate limited``."""
    after = f" after {attempts} attempts" if attempts > 1 else ""
    if isinstance(exc, openai.APIStatusError):
        message = exc.body.get("message") if isinstance(exc.body, dict) else None
        text = f"HTTP {exc.status_code}{after}: {message or exc.body or exc.message}"
    elif isinstance(exc, openai.APITimeoutError):
        text = f"timeout{after}"
    elif isinstance(exc, openai.APIConnectionError):
        text = f"connection error{after}: {exc.__cause__ or exc}"
    else:
        text = f"{type(exc).__name__}{after}: {exc}"
    return " ".join(text.split())[:300]


def retrying(attempts: int, *, initial: float = 0.5, maximum: float = 30.0,
             on_rate_limit: Callable[[float], None] | None = None) -> AsyncRetrying:
    """Up to `attempts` tries of transient errors; `on_rate_limit(seconds)` hears the wait after a 429."""
    backoff = wait_exponential_jitter(multiplier=initial, max=maximum, jitter=initial)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = _retry_after(exc) if exc is not None else None
        delay = asked if asked is not None else backoff(state)
        if on_rate_limit is not None and isinstance(exc, openai.RateLimitError):
            on_rate_limit(delay)
        return delay

    return AsyncRetrying(stop=stop_after_attempt(max(1, attempts)), wait=wait,
                         retry=retry_if_exception(_transient), reraise=True)
