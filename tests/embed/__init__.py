"""Tests of the embedders: the offline hashing embedder, the spec parser and the OpenAI-compatible client."""

__all__: list[str] = []
