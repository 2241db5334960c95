"""The LLM judge: versioned prompts (English and Chinese), verdict schemas, the OpenAI-compatible client, and the
offline heuristic judge. It knows nothing about tables: callers store what it returns."""

# __all__ names submodules, imported on first use (a star import loads them): pyright takes them for missing names
# pyright: reportUnsupportedDunderAll=false
__all__ = ["client", "heuristics", "language", "lexical", "offline", "prompts", "verdicts"]
