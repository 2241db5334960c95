"""Embedders: text → vector for answer relevance and similarity, stored once per text and embedder name.

``make_embedder(spec, settings)`` picks one: the built-in offline `HashingEmbedder`, any OpenAI-compatible
endpoint (`OpenAIEmbedder`) or a local sentence-transformers model (`SentenceTransformerEmbedder`), such as the
packaged all-MiniLM-L6-v2 (`minilm_embedder`).
"""

from ragsql.embed.embedder import Embedder, EmbeddingFailed, require_text
from ragsql.embed.hashing import HashingEmbedder
from ragsql.embed.openai_api import OpenAIEmbedder
from ragsql.embed.sentence_transformer import MINILM, SentenceTransformerEmbedder, minilm_embedder
from ragsql.embed.spec import SPECS, make_embedder

__all__ = [
    "MINILM",
    "SPECS",
    "Embedder",
    "EmbeddingFailed",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "make_embedder",
    "minilm_embedder",
    "require_text",
]
