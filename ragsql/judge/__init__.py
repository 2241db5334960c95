"""The LLM judge: one folder per call in ``kinds/`` (its versioned prompts in English and Chinese, its verdict
schema, its request builder, its offline heuristic), the OpenAI-compatible client and the offline judge.
It knows nothing about tables: callers store what it returns."""

# __all__ names submodules, imported on first use (a star import loads them): pyright takes them for missing names
# pyright: reportUnsupportedDunderAll=false
__all__ = ["client", "heuristics", "kinds", "language", "lexical", "offline", "prompts", "verdicts"]
