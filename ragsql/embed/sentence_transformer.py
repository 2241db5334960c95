"""Local embeddings with sentence-transformers (the optional extra ``ragsql[sentence-transformers]``).

The model is loaded on first use and runs in a worker thread; vectors are L2-normalised. Loading may download
the model from the Hugging Face hub, so a machine without network needs it in its cache.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Sequence
from typing import Any

from ragsql.embed.embedder import EmbeddingFailed, require_text
from ragsql.errors import JudgeError
from ragsql.llm.calls import CallRecord

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """A sentence-transformers model run locally; JudgeError at construction when the extra is missing."""

    offline = True

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 64):
        try:
            self._module: Any = importlib.import_module("sentence_transformers")
        except ImportError:
            raise JudgeError("the sentence-transformers embedder needs the optional extra: "
                             "pip install ragsql[sentence-transformers]") from None
        self.model_name = model
        self.name = f"sentence-transformers:{model}"
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _encode(self, texts: list[str]) -> list[list[float]]:
        with self._load_lock:
            if self._model is None:
                try:
                    self._model = self._module.SentenceTransformer(self.model_name, device=self.device)
                except (OSError, ValueError) as exc:
                    raise EmbeddingFailed(f"cannot load sentence-transformers model {self.model_name!r}: "
                                          + " ".join(str(exc).split())[:200]) from None
        matrix = self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return matrix.tolist()

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One unit vector per text, in order; no call records."""
        require_text(texts)
        if not texts:
            return [], []
        return await asyncio.to_thread(self._encode, list(texts)), []

    async def aclose(self) -> None:
        """Drop the model."""
        self._model = None
