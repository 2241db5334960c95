"""Rerankers: score a query's candidate texts so a retrieval run can be reordered after retrieval.

``endpoint[:model]``: a Cohere/Jina-style ``POST {base}/rerank`` ({model, query, documents, top_n} ->
{results: [{index, relevance_score}]}) at RAGSQL_RERANK_BASE_URL (else the judge's endpoint), through the
official openai client's HTTP layer, with the same retry policy and rate limits as the judge.
"""

from ragsql.rerank.endpoint import EndpointReranker, RerankFailed, make_reranker

__all__ = ["EndpointReranker", "RerankFailed", "make_reranker"]
