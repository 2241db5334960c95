"""BM25 tokens of Chinese text: jieba segmentation (accurate mode), the same for documents and queries.

Space-delimited languages are tokenised in PostgreSQL by ragsql.text_terms instead (see ragsql.db.corpus).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType

__all__ = ["SEGMENTERS", "zh_terms"]

_WORD = re.compile(r"\w")
_ready = threading.Lock()
_jieba = None


def _segmenter():
    """jieba, imported and initialised once, quietly (its dictionary takes about a second to load)."""
    global _jieba
    with _ready:
        if _jieba is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
    return _jieba


def zh_terms(text: str) -> Counter[str]:
    """Term frequencies of Chinese text: jieba tokens (accurate mode), stripped and lower-cased, keeping those
    with at least one word character (punctuation and spaces are dropped)."""
    tokens = (token.strip().lower() for token in _segmenter().lcut(text or ""))
    return Counter(token for token in tokens if _WORD.search(token))


SEGMENTERS: Mapping[str, Callable[[str], Counter[str]]] = MappingProxyType({"zh": zh_terms})
"""Languages tokenised in Python, and how; every other language is tokenised by ragsql.text_terms in SQL.
Documents (ingest) and queries (``ragsql.db.corpus.query_terms``) both go through this mapping."""
