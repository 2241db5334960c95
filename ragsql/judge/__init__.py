"""The LLM judge: versioned prompts (English and Chinese), verdict schemas, the OpenAI-compatible client, and the
offline heuristic judge. It knows nothing about tables: callers store what it returns."""

__all__ = ["client", "heuristics", "language", "lexical", "offline", "prompts", "verdicts"]
