"""When an endpoint call (chat or embeddings) is retried, how long to wait first, how a failure reads in one line.

Transient failures (429, 408, 409, 5xx, timeouts, dropped connections) are retried with exponential
backoff and jitter; a server's ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms`` wins over
the backoff. Everything else (400, 401, 403, 404, 422) is final on the first answer.
"""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Callable
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

__all__ = ["MAX_RETRY_AFTER", "describe", "is_refusal", "is_transient", "never_connected", "retry_after", "retrying"]

MAX_RETRY_AFTER = 300.0
"""Longest Retry-After honoured (seconds); a longer one is cut to this."""

_TRANSIENT_STATUS = {408, 409, 429}


def _is(exc: BaseException, name: str) -> bool:
    """isinstance(exc, openai.<name>) without importing openai (~0.8 s): an exception of openai's exists only
    once openai was imported, by the client that raised it."""
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, getattr(openai, name))


def is_refusal(exc: BaseException) -> bool:
    """True for an HTTP error status from the endpoint (the request was refused, so it spent no tokens)."""
    return _is(exc, "APIStatusError")


def never_connected(exc: BaseException) -> bool:
    """True when the request never left this machine: no connection to the endpoint was made (refused, unknown
    host, connect timeout), so nothing was read or billed."""
    if not _is(exc, "APIConnectionError"):
        return False
    # by name: the openai client's HTTP library is httpx or, in newer releases, its fork httpx2 (same classes)
    return any(kind.__name__ in ("ConnectError", "ConnectTimeout") for kind in type(exc.__cause__).__mro__)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth another attempt: rate limits, server errors, timeouts, connection problems."""
    if _is(exc, "APIStatusError"):
        error: Any = exc  # an openai.APIStatusError (_is), whose class is not imported here
        return error.status_code in _TRANSIENT_STATUS or error.status_code >= 500
    return _is(exc, "APIConnectionError")  # includes APITimeoutError


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or date), else None."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return min(MAX_RETRY_AFTER, max(0.0, float(ms) / 1000))
        raw = headers.get("retry-after")
        if raw is None:
            return None
        try:
            seconds = float(raw)
        except ValueError:
            when = email.utils.parsedate_to_datetime(raw)
            seconds = when.timestamp() - time.time()
        return min(MAX_RETRY_AFTER, max(0.0, seconds))
    except (TypeError, ValueError, OverflowError):
        return None


def describe(exc: BaseException, attempts: int = 1) -> str:
    """One line for a failed call: ``HTTP 429 after 5 attempts: rate limited``."""
    after = f" after {attempts} attempts" if attempts > 1 else ""
    if _is(exc, "APIStatusError"):
        error: Any = exc  # an openai.APIStatusError (_is), whose class is not imported here
        body = error.body
        message = body.get("message") if isinstance(body, dict) else None
        text = str(message or body or error.message)
        return _line(f"HTTP {error.status_code}{after}: {text}")
    if _is(exc, "APITimeoutError"):
        return f"timeout{after}"
    if _is(exc, "APIConnectionError"):
        cause = exc.__cause__ or exc
        return _line(f"connection error{after}: {cause}")
    return _line(f"{type(exc).__name__}{after}: {exc}")


def _line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retrying(
    attempts: int, *, initial: float = 0.5, maximum: float = 30.0, on_rate_limit: Callable[[float], None] | None = None
) -> AsyncRetrying:
    """Tenacity policy: up to `attempts` tries of transient errors; Retry-After wins over the jittered backoff.

    `on_rate_limit(seconds)` is told the wait after a 429 (the rate limiter pauses every caller for it).
    """
    backoff = wait_exponential_jitter(multiplier=initial, max=maximum, jitter=initial)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after(exc) if exc is not None else None
        delay = asked if asked is not None else backoff(state)
        if on_rate_limit is not None and exc is not None and _is(exc, "RateLimitError"):
            on_rate_limit(delay)
        return delay

    return AsyncRetrying(
        stop=stop_after_attempt(max(1, attempts)), wait=wait, retry=retry_if_exception(is_transient), reraise=True
    )
