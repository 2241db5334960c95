"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint, through the official client.

Texts go in batches of at most `batch_size` (256) per request, at most ``settings.concurrency`` requests at
once, within the rpm/tpm limits; each goes through `ragsql.llm.send.Sender` (retries on transient errors, the
client's own retries off, so every attempt is counted) and yields one CallRecord; when one fails for good,
`embed` raises `EmbeddingFailed` (a `CallFailed`) carrying the records of every request made.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ragsql.embed.embedder import EmbeddingFailed, require_text
from ragsql.errors import JudgeError
from ragsql.llm.aio import finish_together
from ragsql.llm.calls import CallRecord, request_hash
from ragsql.llm.limiter import RateLimiter
from ragsql.llm.send import EndpointClient, SendFailed
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import count_tokens

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder(EndpointClient):
    """Vectors from ``settings.base_url`` for model `model` (default ``settings.embed_model``)."""

    offline = False

    def __init__(
        self,
        settings: EndpointSettings,
        model: str | None = None,
        *,
        batch_size: int = 256,
        limiter: RateLimiter | None = None,
    ):
        if not settings.configured:
            raise JudgeError("the openai embedder needs an endpoint: set RAGSQL_JUDGE_BASE_URL or OPENAI_API_KEY")
        if not 1 <= batch_size <= 2048:
            raise ValueError(f"batch_size must be within 1..2048, got {batch_size}")
        self.settings = settings
        self.model = model or settings.embed_model
        self.name = f"openai:{self.model}"
        self.batch_size = batch_size
        super().__init__(settings, limiter)

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One vector per text, in order, and one record per request; EmbeddingFailed if a batch fails."""
        require_text(texts)
        batches = [list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        # a batch never raises, so no sibling is cut short; a cancelled caller ends them all
        results = await finish_together(self._batch(b) for b in batches)
        records = [record for _, record in results]
        failed = next((r for r in records if not r.ok), None)
        if failed is not None:
            where = self.settings.base_url or "https://api.openai.com/v1"
            raise EmbeddingFailed(f"the embedding endpoint {where} failed ({self.model}): {failed.error}", records)
        return [vector for vectors, _ in results for vector in vectors], records

    async def _batch(self, batch: list[str]) -> tuple[list[list[float]], CallRecord]:
        """One request with retries; never raises: a failure comes back as a failed record."""
        start = time.perf_counter()
        reserve = sum(count_tokens(t) for t in batch)
        attempts = tokens = 0
        vectors: list[list[float]] = []
        error: str | None = None
        reached = True

        def check(response: Any) -> None:
            got = [list(d.embedding) for d in sorted(response.data, key=lambda d: d.index)]
            if len(got) != len(batch) or len({len(v) for v in got}) != 1:
                raise ValueError(
                    f"the endpoint returned {len(got)} vectors of sizes "
                    f"{sorted({len(v) for v in got})} for {len(batch)} inputs"
                )

        try:
            sent = await self._sender.send(
                lambda: self._client.embeddings.create(model=self.model, input=batch), reserve=reserve, check=check
            )
            attempts = sent.attempts
            tokens = sent.reply.usage.prompt_tokens if sent.reply.usage else reserve
            self._sender.limiter.settle(reserve, tokens)
            vectors = [list(d.embedding) for d in sorted(sent.reply.data, key=lambda d: d.index)]
        except SendFailed as exc:
            attempts, error, reached = exc.attempts, exc.reason, exc.reached
        record = CallRecord(
            request_hash=request_hash(self.model, {"input": batch}),
            kind="embedding",
            model=self.model,
            prompt_name="embedding",
            prompt_version=None,
            status="failed" if error else "ok",
            response=None if error else {"inputs": len(batch), "dimensions": len(vectors[0])},
            error=error,
            prompt_tokens=tokens if not error else None,
            completion_tokens=0 if not error else None,
            latency_ms=round((time.perf_counter() - start) * 1000),
            attempts=attempts,
            sent=reached,
        )
        return ([] if error else vectors), record

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()
