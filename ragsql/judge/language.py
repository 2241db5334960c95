"""Language detection (share of CJK characters) and sentence splitting for Chinese and English text."""

from __future__ import annotations

import functools
import re

__all__ = ["LANGUAGES", "LANGUAGE_NAMES", "cjk_ratio", "detect_language", "split_sentences"]

LANGUAGES = ("en", "zh")
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese (中文)"}

# Han ideographs (incl. extension A and compatibility) and kana; a text in them is judged with the zh prompts.
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
# One CJK character carries about as much as a short Latin word, so a modest share of them marks Chinese.
_ZH_THRESHOLD = 0.25

# A sentence ends at 。！？ (with any closing quotes/brackets), at . ! ? before whitespace, a CJK character
# or the end (so 3.14 and example.com stay whole), or at a line break.
_CLOSERS = '\u201d\u2019"\u300d\u300f\uff09)'
_BOUNDARY = re.compile(rf"([\u3002\uff01\uff1f]+[{_CLOSERS}]*|[.!?]+[{_CLOSERS}]*(?=\s|$|[\u3400-\u9fff])|\n+)")


def cjk_ratio(text: str) -> float:
    """Share of CJK characters among the CJK and Latin letters of `text` (0.0 when it has neither)."""
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def detect_language(text: str, default: str = "en") -> str:
    """'zh' when at least a quarter of the letters are CJK, 'en' otherwise; `default` for text with no letters."""
    if not _CJK.search(text) and not _LATIN.search(text):
        return default
    return "zh" if cjk_ratio(text) >= _ZH_THRESHOLD else "en"


def split_sentences(text: str) -> list[str]:
    """Split Chinese or English text into sentences, keeping each sentence's end punctuation."""
    return list(_sentences(text))


@functools.lru_cache(maxsize=4096)  # the judge's tasks split the same contexts again and again
def _sentences(text: str) -> tuple[str, ...]:
    parts = _BOUNDARY.split(text)
    sentences: list[str] = []
    buf = ""
    for i, part in enumerate(parts):
        is_boundary = i % 2 == 1
        if not (is_boundary and part.startswith("\n")):
            buf += part
        if is_boundary:
            if buf.strip():
                sentences.append(" ".join(buf.split()))
            buf = ""
    if buf.strip():
        sentences.append(" ".join(buf.split()))
    return tuple(sentences)
