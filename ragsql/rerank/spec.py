"""Pick a reranker from a spec string: ``endpoint[:model]`` or ``cross-encoder:<model>``."""

from __future__ import annotations

from collections.abc import Callable

from ragsql.errors import InputError
from ragsql.llm.settings import EndpointSettings
from ragsql.rerank.cross_encoder import CrossEncoderReranker
from ragsql.rerank.endpoint import endpoint_reranker
from ragsql.rerank.reranker import Reranker

__all__ = ["SPECS", "make_reranker"]

SPECS = ("endpoint[:model]", "cross-encoder:<model>")


def _cross_encoder(arg: str, settings: EndpointSettings | None) -> Reranker:
    if not arg:
        raise InputError(
            "name the model: cross-encoder:<hub name or directory>, "
            "e.g. cross-encoder:cross-encoder/ms-marco-MiniLM-L6-v2"
        )
    return CrossEncoderReranker(arg)


_FACTORIES: dict[str, Callable[[str, EndpointSettings | None], Reranker]] = {
    "endpoint": endpoint_reranker,
    "cross-encoder": _cross_encoder,
}


def make_reranker(spec: str, settings: EndpointSettings | None = None) -> Reranker:
    """The reranker for `spec`: a Cohere/Jina-style /rerank endpoint, or a local cross-encoder."""
    kind, _, arg = spec.strip().partition(":")
    factory = _FACTORIES.get(kind.lower())
    if factory is None:
        raise InputError(
            f"unknown reranker {spec!r}: use endpoint[:model] (a Cohere/Jina-style /rerank API) "
            'or cross-encoder:<model> (a local model: pip install -e ".[local]" in a ragsql checkout)'
        )
    return factory(arg.strip(), settings)
