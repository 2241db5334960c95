"""The built-in offline embedder: signed feature hashing of character n-grams, for Chinese and English.

Features of a text (lowercased): for each run of CJK characters its 1-, 2- and 3-grams (weights 0.5, 1, 0.5);
for each Latin word or number the word itself (weight 1) and the 3- to 5-grams of ``<word>`` (weight 0.2);
a text with none of these (only punctuation or symbols) uses its characters. Each feature goes to
dimension ``h mod dim`` with sign from bit 63 of its 64-bit hash ``h`` — blake2b for words and characters,
splitmix64 of the packed code points for CJK n-grams — so vectors do not depend on Python's hash seed; the
vector is L2-normalised. Texts sharing words or characters get a clearly higher
cosine than unrelated ones; it knows no synonyms.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np

from ragsql.embed.embedder import require_text
from ragsql.llm.calls import CallRecord

__all__ = ["HashingEmbedder"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff"
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")
_CJK_WEIGHTS = np.array([0.5, 1.0, 0.5])  # 1-, 2- and 3-grams
_WORD_WEIGHT, _GRAM_WEIGHT = 1.0, 0.2
_THREAD_ABOVE = 2000  # texts; a bigger batch is hashed in a thread so the event loop keeps running
_U = np.uint64
Slots = tuple[np.ndarray, np.ndarray]


def _signed(hashes: np.ndarray, weights: np.ndarray, dim: int) -> Slots:
    """Columns ``h % dim`` and weights signed by bit 63 of each hash."""
    return (hashes % _U(dim)).astype(np.int64), np.where(hashes >> _U(63), weights, -weights)


def _blake(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")


@functools.lru_cache(maxsize=1 << 17)
def _word(word: str, dim: int) -> Slots:
    """Slots of a Latin word or number: the word and the 3- to 5-grams of ``<word>``, hashed by blake2b-64."""
    padded = f"<{word}>"
    grams = [padded[i : i + n] for n in (3, 4, 5) for i in range(len(padded) - n + 1)]
    hashes = np.array([_blake(f"w:{word}"), *(_blake(f"g:{g}") for g in grams)], dtype=_U)
    cols, vals = _signed(hashes, np.array([_WORD_WEIGHT] + [_GRAM_WEIGHT] * len(grams)), dim)
    cols.flags.writeable = vals.flags.writeable = False  # cached and shared
    return cols, vals


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (wrapping uint64 arithmetic)."""
    x = x + _U(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
    return x ^ (x >> _U(31))


def _cjk(run: str, dim: int) -> Slots:
    """Slots of a CJK run: its 1-, 2- and 3-grams packed as 21-bit code points (so exact) and mixed."""
    cps = np.frombuffer(run.encode("utf-32-le"), dtype=np.uint32).astype(_U)
    keys = [cps, cps[:-1] | cps[1:] << _U(21), cps[:-2] | cps[1:-1] << _U(21) | cps[2:] << _U(42)]
    weights = np.repeat(_CJK_WEIGHTS, [len(k) for k in keys])
    return _signed(_mix(np.concatenate(keys)), weights, dim)


def _slots(text: str, dim: int) -> Slots:
    parts = [
        _cjk(m.group("cjk"), dim) if m.group("cjk") else _word(m.group("word"), dim)
        for m in _TOKEN.finditer(text.lower())
    ]
    if not parts:  # only punctuation or symbols: hash its characters
        chars = [ch for ch in text if not ch.isspace()]
        parts = [_signed(np.array([_blake(f"p:{ch}") for ch in chars], dtype=_U), np.ones(len(chars)), dim)]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([c for c, _ in parts]), np.concatenate([v for _, v in parts])


class HashingEmbedder:
    """Deterministic hashed character n-gram vectors (default 384 dimensions); no model, no network.

    An empty or blank text raises ValueError (see `require_text`).
    """

    offline = True
    version = "hash-ngram-v1"

    def __init__(self, dim: int = 384):
        if not isinstance(dim, int) or dim < 16:
            raise ValueError(f"the hashing embedder needs at least 16 dimensions, got {dim!r}")
        self.dim = dim
        self.name = f"offline:{self.version}:{dim}"

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """The L2-normalised vectors of `texts` as an ``(n, dim)`` float64 array."""
        require_text(texts)
        slots = [_slots(text, self.dim) for text in texts]
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), [len(c) for c, _ in slots])
        cols = np.concatenate([c for c, _ in slots]) if slots else np.zeros(0, dtype=np.int64)
        vals = np.concatenate([v for _, v in slots]) if slots else np.zeros(0)
        mat = np.bincount(rows * self.dim + cols, weights=vals, minlength=len(texts) * self.dim)
        mat = mat.reshape(len(texts), self.dim)
        norms = np.linalg.norm(mat, axis=1)
        for row in np.flatnonzero(norms == 0):  # every feature cancelled out: keep the first one's axis
            mat[row, slots[row][0][0]] = norms[row] = 1.0
        return mat / norms[:, None]

    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[CallRecord]]:
        """One unit vector per text, in order; no call records (nothing is called)."""
        if len(texts) > _THREAD_ABOVE:
            mat = await asyncio.to_thread(self.vectors, texts)
        else:
            mat = self.vectors(texts)
        return mat.tolist(), []

    async def aclose(self) -> None:
        """Nothing to release."""
