"""A Cohere/Jina-style rerank endpoint (``POST /rerank``) through the openai client's HTTP layer."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace

from ragsql.errors import InputError
from ragsql.llm.calls import CallRecord, request_hash
from ragsql.llm.send import EndpointClient, SendFailed
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import count_tokens
from ragsql.rerank.reranker import RerankFailed

__all__ = ["DEFAULT_RERANK_MODEL", "EndpointReranker", "endpoint_reranker"]

DEFAULT_RERANK_MODEL = "rerank-v3.5"


class EndpointReranker(EndpointClient):
    """Relevance scores of documents for a query from ``settings.base_url``/rerank."""

    def __init__(self, settings: EndpointSettings, model: str | None = None):
        if not settings.configured:
            raise InputError(
                "the rerank endpoint is not configured: set RAGSQL_RERANK_BASE_URL (or the judge's "
                "RAGSQL_JUDGE_BASE_URL / OPENAI_BASE_URL) and its key"
            )
        self.settings = settings
        self.model = model or os.environ.get("RAGSQL_RERANK_MODEL") or DEFAULT_RERANK_MODEL
        self.name = f"endpoint:{self.model}"
        self.config = {"reranker": "endpoint", "model": self.model, "base_url": settings.base_url}
        super().__init__(settings)

    def request_hash(self, query: str, documents: Sequence[str]) -> str:
        """Cache key of one rerank request."""
        return request_hash(self.model, {"rerank": {"query": query, "documents": list(documents)}})

    async def rerank(self, query: str, documents: Sequence[str]) -> tuple[list[float], CallRecord]:
        """One score per document (in order) and the call's record; RerankFailed when the endpoint fails."""
        start = time.perf_counter()
        reserve = count_tokens(query) * len(documents) + sum(count_tokens(d) for d in documents)
        attempts, scores, error, reached = 0, [], None, True
        body = {"model": self.model, "query": query, "documents": list(documents), "top_n": len(documents)}
        try:
            sent = await self._sender.send(
                lambda: self._client.post("/rerank", cast_to=object, body=body),
                reserve=reserve,
                check=lambda reply: _scores(reply, len(documents)),
            )
            attempts = sent.attempts
            self._sender.limiter.settle(reserve, reserve)
            scores = _scores(sent.reply, len(documents))
        except SendFailed as exc:
            attempts, error, reached = exc.attempts, exc.reason, exc.reached
        record = CallRecord(
            request_hash=self.request_hash(query, documents),
            kind="rerank",
            model=self.model,
            prompt_name="rerank",
            prompt_version=None,
            status="failed" if error else "ok",
            response=None if error else {"scores": scores},
            error=error,
            prompt_tokens=None if error else reserve,
            completion_tokens=None if error else 0,
            latency_ms=round((time.perf_counter() - start) * 1000),
            attempts=max(1, attempts),
            sent=reached,
        )
        if error:
            where = self.settings.base_url or "https://api.openai.com/v1"
            raise RerankFailed(f"the rerank endpoint {where} failed ({self.model}): {error}", record)
        return scores, record

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()


def _scores(reply: object, n: int) -> list[float]:
    """Scores by document index from {results: [{index, relevance_score | score}]}; every index exactly once."""
    results = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(results, list):
        raise ValueError("no results list")
    scores: list[float | None] = [None] * n
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < n or scores[index] is not None:
            raise ValueError(f"bad or repeated index {index!r}")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ValueError(f"score {score!r} of document {index} is not a number")
        scores[index] = float(score)
    if any(s is None for s in scores):
        raise ValueError(f"{sum(s is None for s in scores)} of {n} documents have no score")
    return [float(s) for s in scores if s is not None]  # all of them (checked above)


def endpoint_reranker(model: str, settings: EndpointSettings | None = None) -> EndpointReranker:
    """The reranker at RAGSQL_RERANK_BASE_URL/_API_KEY, else at the judge's endpoint; `model` may be empty."""
    settings = settings or EndpointSettings.from_env()
    base, key = os.environ.get("RAGSQL_RERANK_BASE_URL"), os.environ.get("RAGSQL_RERANK_API_KEY")
    if base or key:
        settings = replace(settings, base_url=base or settings.base_url, api_key=key or settings.api_key)
    return EndpointReranker(settings, model or None)
