"""What every reranker is: the `Reranker` protocol and the error a failed reranker raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragsql.llm.calls import CallFailed, CallRecord

__all__ = ["RerankFailed", "Reranker"]


@runtime_checkable
class Reranker(Protocol):
    """Scores a query's candidate texts; `name` and `config` go into the run's configuration."""

    name: str
    config: dict

    def request_hash(self, query: str, documents: Sequence[str]) -> str | None:
        """Key of the request in ragsql.judge_call, or None when replies are not cached (a local model)."""
        ...

    async def rerank(self, query: str, documents: Sequence[str]) -> tuple[list[float], CallRecord | None]:
        """One score per document, in order, and the record of the call made (None for a local model)."""
        ...

    async def aclose(self) -> None:
        """Release connections or models."""
        ...


class RerankFailed(CallFailed):
    """A reranker failed for good; `record` is the failed call, if one was made."""
