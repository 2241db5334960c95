"""What the judge, the embedders and the rerankers share: endpoint settings, call records, request hashes, token
counts, rate limits, and the loading of local models."""

__all__: list[str] = []  # a namespace: import from the modules
