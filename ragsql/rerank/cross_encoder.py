"""A local cross-encoder (sentence-transformers ``CrossEncoder``, the optional extra ``ragsql[local]``).

The model is loaded when the reranker is made, so a model that cannot be loaded stops a run before it starts.
Each query's (query, document) pairs are scored in a worker thread, one query at a time (torch already uses every
core); scores are the model's own (after its activation, a sigmoid for one-label models). Replies are not cached:
a directory's model may change under the same name, and scoring again costs no call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from ragsql.errors import InputError
from ragsql.llm.calls import CallRecord
from ragsql.llm.local_model import load_model, model_source, require_extra
from ragsql.rerank.reranker import RerankFailed

__all__ = ["CrossEncoderReranker"]


class CrossEncoderReranker:
    """Relevance scores of (query, document) pairs from a cross-encoder given as a hub name or a directory."""

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32):
        module = require_extra("sentence_transformers", "the cross-encoder reranker")
        self._model: Any = load_model(
            module.CrossEncoder, model, device=device, what="cross-encoder model", error=InputError
        )
        self.model = model_source(model)
        self.name = f"cross-encoder:{self.model}"
        self.batch_size = batch_size
        self.config = {
            "reranker": "cross-encoder",
            "model": self.model,
            "max_length": getattr(self._model, "max_seq_length", None),  # older versions: max_length
            "activation": type(self._model.activation_fn).__name__,
        }
        self._lock = threading.Lock()

    def request_hash(self, query: str, documents: Sequence[str]) -> None:
        """None: a local model's scores are not cached."""
        return None

    def _predict(self, pairs: list[tuple[str, str]]) -> list[float]:
        with self._lock:
            scores = self._model.predict(
                pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
            )
        return [float(s) for s in scores]

    async def rerank(self, query: str, documents: Sequence[str]) -> tuple[list[float], CallRecord | None]:
        """One score per document, in order; RerankFailed when the model cannot score them."""
        if not documents:
            return [], None
        try:
            return await asyncio.to_thread(self._predict, [(query, d) for d in documents]), None
        except (RuntimeError, ValueError) as exc:
            raise RerankFailed(f"the cross-encoder {self.model} failed: " + " ".join(str(exc).split())[:300]) from None

    async def aclose(self) -> None:
        """Drop the model."""
        self._model = None
