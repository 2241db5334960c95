"""Rerankers: score a query's candidate texts so a retrieval run can be reordered after retrieval.

``endpoint[:model]``: a Cohere/Jina-style ``POST {base}/rerank`` ({model, query, documents, top_n} ->
{results: [{index, relevance_score}]}) at RAGSQL_RERANK_BASE_URL (else the judge's endpoint), through the
official openai client's HTTP layer, with the same retry policy and rate limits as the judge.
``cross-encoder:<model>``: a local sentence-transformers CrossEncoder (a hub name or a directory; the optional
extra ``ragsql[local]``) scoring (query, document) pairs in a worker thread.
"""

from ragsql.rerank.cross_encoder import CrossEncoderReranker
from ragsql.rerank.endpoint import EndpointReranker
from ragsql.rerank.reranker import RerankFailed, Reranker
from ragsql.rerank.spec import SPECS, make_reranker

__all__ = ["SPECS", "CrossEncoderReranker", "EndpointReranker", "RerankFailed", "Reranker", "make_reranker"]
