"""Token counts for rate limiting and cost estimates (o200k_base via bpe-openai, else about 4 characters a token)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping

__all__ = ["count_message_tokens", "count_tokens", "tokenizer_name"]


@functools.cache
def _encoder() -> tuple[str, Callable[[str], int] | None]:
    try:
        import bpe_openai

        enc = bpe_openai.get_encoding("o200k_base")
        return "bpe-openai:o200k_base", lambda s: len(enc.encode(s))
    except (ImportError, ValueError, OSError):
        return "chars4", None


def tokenizer_name() -> str:
    """``bpe-openai:o200k_base``, or ``chars4`` without bpe-openai (the tokenizer loads on first use: ~1 s)."""
    return _encoder()[0]


def count_tokens(text: str) -> int:
    """Tokens in `text` under gpt-4o's o200k_base (or ceil(len / 4) when bpe-openai is missing)."""
    if not text:
        return 0
    count = _encoder()[1]
    return count(text) if count is not None else math.ceil(len(text) / 4)


def count_message_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """Prompt tokens of a chat request: Σ (content tokens + 3) + 3, the OpenAI cookbook's accounting."""
    return 3 + sum(3 + count_tokens(str(m.get("content") or "")) for m in messages)
