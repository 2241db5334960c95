"""What every embedder is: the `Embedder` protocol, the error a failed endpoint raises, and the empty-text rule."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ragsql.llm.calls import CallFailed, CallRecord

__all__ = ["Embedder", "EmbeddingFailed", "LocalBatches", "embed_queries", "prepare", "require_text"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; `name` (model and, where fixed, dimension) keys ragsql.text_embedding. An embedder
    that embeds search queries differently also has ``async embed_queries(texts)`` (see `embed_queries`)."""

    name: str
    offline: bool

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One vector per text, in order, and the records of the HTTP calls made (none for a local embedder)."""
        ...

    async def aclose(self) -> None:
        """Release connections or models."""
        ...


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
    """Vectors of search queries: the embedder's own `embed_queries` when it embeds queries differently from
    passages (E5's ``query: `` prefix), else `embed`."""
    method = getattr(embedder, "embed_queries", None)
    return await (method(texts) if method is not None else embedder.embed(texts))


async def prepare(
    embedder: Embedder, on_start: Callable[[str], None] | None = None, subject: str = "the local embedder"
) -> float | None:
    """A local model's one-time preparation (e5-onnx's graph build: its ``preparing()`` and ``prepare()``) done now,
    off the loop, `on_start` told first in one line ("preparing SUBJECT (once): what it does …"), so that a first use
    shows a named step rather than a silent pause; its seconds, or None when the embedder has none left to do."""
    preparing = getattr(embedder, "preparing", None)
    what = await asyncio.to_thread(preparing) if preparing is not None else None
    if what is None:
        return None
    if on_start is not None:
        on_start(f"preparing {subject} (once): {what} …")
    started = time.perf_counter()
    await asyncio.to_thread(embedder.prepare)  # pyright: ignore[reportAttributeAccessIssue]
    return time.perf_counter() - started


class EmbeddingFailed(CallFailed):
    """An embedding call failed for good; `records` holds every call made, the failed ones included."""


def require_text(texts: Sequence[str]) -> None:
    """Raise ValueError for an empty or blank text: its vector would be zero, which the database reads as
    'no value', so it is refused before any work (callers drop blank texts first)."""
    for i, text in enumerate(texts, 1):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"cannot embed an empty text (item {i} of {len(texts)})")


class LocalBatches:
    """A local model's `embed` / `embed_queries`: `_encode` on batches of 32 texts in a worker thread, so the loop
    gets a turn between batches; no call records."""

    def _encode(self, texts: list[str], query: bool) -> list[list[float]]:
        raise NotImplementedError

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One unit vector per text (a passage: chunk, answer, reference), in order; no call records."""
        return await self._embed(texts, query=False)

    async def embed_queries(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One unit vector per search query, in order; no call records."""
        return await self._embed(texts, query=True)

    async def _embed(self, texts: Sequence[str], query: bool) -> tuple[list[list[float]], list[CallRecord]]:
        require_text(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), 32):
            vectors += await asyncio.to_thread(self._encode, list(texts[start : start + 32]), query)
        return vectors, []
