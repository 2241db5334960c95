"""Lexical overlap for Chinese and English, used by the offline judge: content tokens and how much one text
shares with another.

Content tokens are CJK character bigrams (a run of Han characters is first cut at function characters such as
的/是/了, and a one-character piece is kept whole) and lowercased Latin words or numbers without English stop
words and negations (`has_negation` looks for those apart), with a crude plural and possessive strip
(``contexts`` → ``context``). Nothing is learned and nothing is random, so the
same texts give the same numbers on every machine.
"""

from __future__ import annotations

import ast
import functools
import logging
import marshal
import math
import operator
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragsql.llm.local_model import cache_dir

__all__ = [
    "NEGATIONS_EN",
    "NEGATIONS_ZH",
    "calculations",
    "content_tokens",
    "content_words",
    "coverage",
    "has_negation",
    "is_number",
    "key_terms",
    "missing_terms",
    "similarity",
    "token_set",
]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_CJK = re.compile(f"[{_CJK}]")
# A number is one token ("10.389", "1,000" → "1000"), so "$10.4 billion" does not match "$10.389 billion".
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<num>\d{{1,3}}(?:,\d{{3}})+(?![\d,])|\d+(?:\.\d+)?)(?![^\W_{_CJK}])"
    rf"|(?P<word>[^\W_{_CJK}]+(?:'[a-z]+)?)"
)
# Function characters: particles, copulas, pronouns and question words that carry no content on their own.
_ZH_STOP = set("的了是在于和与及其之也都就而并或被把吗呢吧啊哪么什怎这那它他她我你们着过个将从给让")
_EN_STOP = frozenset(
    """
a an the and or but if then else of to in on at by for with from into onto about as than that this these those
is are was were be been being am do does did done has have had having it its it's they them their there here
he she his her him we our us you your i me my what which who whom whose when where why how can could will would
shall should may might must so such very also just only any some all each both either same other more most
""".split()
)
NEGATIONS_ZH = ("不", "没", "非", "无", "未", "否")
# Words holding a negation character that negate nothing (不断 "continuously", 非常 "very", 未来 "future", …).
_ZH_NOT_NEGATIONS = re.compile(
    "不断|不同|不仅|不过|不少|不久|不论|不管|不但|不只|不如|不妨|不及|不得不|差不多|了不起|"
    "非常|非洲|无论|无数|无线|无限|无比|无人机|未来|否则|是否|能否|可否|与否"
)
_ZH_STRICT_FLAGS = {"nr", "nrt", "nrfg", "ns", "nt", "nz", "eng", "m"}  # jieba: names, Latin words, numerals
_ZH_KEY_FLAGS = ("n", "vn", "l", "i", "j")  # jieba: other nouns, idioms, abbreviations
NEGATIONS_EN = frozenset({"not", "no", "never", "none", "nor", "neither", "cannot", "without"})


def _stem(word: str) -> str:
    if word.endswith("n't"):
        return "not"
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _bigrams(run: str) -> Iterable[str]:
    piece = ""
    for ch in run + "的":  # a trailing stop character flushes the last piece
        if ch in _ZH_STOP:
            if len(piece) == 1:
                yield piece
            yield from (piece[i : i + 2] for i in range(len(piece) - 1))
            piece = ""
        else:
            piece += ch


def content_tokens(text: str) -> list[str]:
    """The content tokens of `text` in order: CJK bigrams and lowercased non-stop words (with repeats)."""
    return list(_content_tokens(text))


# The judge's tasks (eight a sample) tokenise, tag and compare the same question, answer and context sentences
# again and again: the per-text work below is kept for the last _TEXTS texts (tokens and tags, which the runs of one
# dataset share) or the last _RECENT (what the tasks of one sample share: a few hundred samples' worth, so that a
# long run's memory stays bounded), as tuples and frozensets that no caller can change (a function that returns a
# dict or a list returns a copy).
_TEXTS = 32768
_RECENT = 4096


@functools.lru_cache(maxsize=_RECENT)
def token_set(text: str) -> frozenset[str]:
    """The distinct content tokens of `text`."""
    return frozenset(_content_tokens(text))


@functools.lru_cache(maxsize=_TEXTS)
def _content_tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        if match.group("cjk"):
            out.extend(_bigrams(match.group("cjk")))
        elif match.group("num"):
            out.append(match.group("num").replace(",", ""))
        elif match.group("word") not in _EN_STOP:  # before stemming: "does" is not "doe"
            word = _stem(match.group("word"))
            if word not in _EN_STOP and word not in NEGATIONS_EN and (len(word) > 1 or word.isdigit()):
                out.append(word)
    return tuple(out)


def coverage(text: str, other: str | Iterable[str]) -> float:
    """Share of the distinct content tokens of `text` found in `other` (a text or its tokens); 0.0 if none."""
    wanted = token_set(text)
    if not wanted:
        return 0.0
    have = token_set(other) if isinstance(other, str) else other
    return len(wanted.intersection(have)) / len(wanted)


def similarity(a: str, b: str) -> float:
    """Cosine of the content-token count vectors of `a` and `b` (0.0 when either has no content token)."""
    ca, cb = Counter(content_tokens(a)), Counter(content_tokens(b))
    dot = sum(n * cb[t] for t, n in ca.items())
    if not dot:
        return 0.0
    return dot / math.sqrt(sum(n * n for n in ca.values()) * sum(n * n for n in cb.values()))


@functools.lru_cache(maxsize=_RECENT)
def has_negation(text: str) -> bool:
    """True when `text` holds a negation: 不/没/非/无/未/否 outside words such as 不断/非常/未来, or
    not/no/never/n't/…"""
    lowered = _ZH_NOT_NEGATIONS.sub("", text.lower())
    if any(ch in lowered for ch in NEGATIONS_ZH):
        return True
    words = {_stem(m.group("word")) for m in _TOKEN.finditer(lowered) if m.group("word")}
    return bool(words & NEGATIONS_EN)


@functools.cache
def _posseg():
    """jieba's part-of-speech tagger, loaded once and quietly, its dictionary from ragsql's cache (`_dictionary`)."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    _dictionary(jieba.dt)
    return jieba.posseg


def _dictionary(tokenizer: Any) -> None:
    """Give jieba's default tokenizer its prefix dictionary from a file of ragsql's cache dir, made by jieba's own
    code on first use: jieba would read the same table from its cache in the system's temp dir with marshal.load on
    the file, object by object (~0.6 s of CPU), where marshal.loads of the whole file takes ~0.2 s."""
    import jieba

    with tokenizer.lock:
        if tokenizer.initialized or tokenizer.dictionary != jieba.DEFAULT_DICT:
            return
        words = Path(jieba.__file__).parent / jieba.DEFAULT_DICT_NAME
        path = cache_dir() / f"jieba-{jieba.__version__}-{words.stat().st_size}.marshal"
        try:
            tokenizer.FREQ, tokenizer.total = marshal.loads(path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(tokenizer.get_dict_file())
            staging = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                staging.write_bytes(marshal.dumps((tokenizer.FREQ, tokenizer.total)))
                os.replace(staging, path)  # whole or not at all, for a process that starts meanwhile
            except OSError:  # a read-only cache: jieba's table works as well, made again next time
                staging.unlink(missing_ok=True)
        tokenizer.initialized = True


@functools.lru_cache(maxsize=_TEXTS)  # jieba's tagger is the slowest of this per-text work
def _tagged(text: str) -> tuple[tuple[str, str], ...]:
    """jieba's words of `text` with their part-of-speech tags, in order."""
    return tuple((word.word, word.flag) for word in _posseg().cut(text))


def key_terms(text: str) -> dict[str, bool]:
    """The tokens a statement stands or falls by, lowercased, in order, each with whether it is strict: numbers
    and names (capitalised mid-sentence; jieba's person, place, organisation and other proper-noun tags, Latin
    words in Chinese) are strict, other Chinese nouns and idioms of two characters or more are not."""
    return dict(_key_terms(text))


@functools.lru_cache(maxsize=_RECENT)
def _key_terms(text: str) -> tuple[tuple[str, bool], ...]:
    terms: dict[str, bool] = {}
    lowered = text.lower()
    for match in _TOKEN.finditer(lowered):
        if match.group("num"):
            terms[match.group("num").replace(",", "")] = True
    for match in re.finditer(r"(?<=[\w,;:)] )[A-Z][\w-]*(?: [A-Z][\w-]*)*", text):  # a capitalised name mid-sentence
        terms.update((w.lower(), True) for w in match.group(0).split() if w.lower() not in _EN_STOP)
    if _HAS_CJK.search(text):
        for word, flag in _tagged(text):
            w = word.lower()
            if flag == "m" and not re.search(r"[0-9零一二三四五六七八九十百千万亿两半]", w):
                continue  # 多少, 几: a question word, not a number
            if flag in _ZH_STRICT_FLAGS and w.strip() and not w.isdigit():
                terms.setdefault(w, len(w) >= 2 or not re.search(f"[{_CJK}]", w))
            elif flag.startswith(_ZH_KEY_FLAGS) and len(w) >= 2 and not set(w) <= _ZH_STOP and not w.isdigit():
                terms.setdefault(w, False)
    return tuple(terms.items())


_CALCULATION = re.compile(
    r"(?P<expr>(?:(?:log2|log10|ln|sqrt)\s*\(|\d[\d,]*(?:\.\d+)?|[+\-*/×÷^()]|\s)+?)"
    r"\s*(?:=|≈)\s*(?P<result>\d[\d,]*(?:\.\d+)?)(?![\d.]*\d)"
)
_FUNCTIONS = {"log2": math.log2, "log10": math.log10, "ln": math.log, "sqrt": math.sqrt}
_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    """The value of a parsed expression of numbers, + - * / **, and log2 / log10 / ln / sqrt; ValueError else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and len(node.args) == 1
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](_evaluate(node.args[0]))
    raise ValueError("not arithmetic")


def calculations(text: str) -> tuple[set[str], list[str]]:
    """The results of the calculations a text states ("log2(4) = 2", "3/4 = 0.75", "1 / 3 ≈ 0.33"): those that hold
    (the result equals the expression to the result's own precision) and those that do not, as "expr = result".
    Only expressions of numbers, operators and log2 / log10 / ln / sqrt with at least one operation count: "nDCG =
    0.5" states no calculation."""
    holds: set[str] = set()
    fails: list[str] = []
    for match in _CALCULATION.finditer(text):
        expr, result = match.group("expr").strip(), match.group("result").replace(",", "")
        if not re.search(r"[+\-*/×÷^(]", expr):
            continue
        source = re.sub(r"(?<=\d),(?=\d{3})", "", expr).replace("×", "*").replace("÷", "/").replace("^", "**")
        try:
            value = _evaluate(ast.parse(source, mode="eval").body)
        except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
            continue
        decimals = len(result.partition(".")[2])
        if abs(value - float(result)) <= 0.5 * 10**-decimals + 1e-9:
            holds.add(result)
        else:
            fails.append(f"{expr} = {result}")
    return holds, fails


def is_number(term: str) -> bool:
    """Whether a key term is a number ("1905", "0.75")."""
    return bool(re.fullmatch(r"[\d.]+", term))


def missing_terms(text: str, source: str) -> tuple[list[str], list[str], int]:
    """The key terms of `text` that `source` lacks, strict and not (a number as a whole token — 5 is not in 0.5 —,
    a word as a token or the start of one, Chinese as a substring), and how many non-strict key terms `text`
    has."""
    lowered = source.lower()
    tokens = _source_tokens(source)
    terms = key_terms(text)
    missing = [
        t
        for t in terms
        if t not in tokens
        and _stem(t) not in tokens
        and not (_HAS_CJK.search(t) and t in lowered)
        and (is_number(t) or not re.search(rf"(?<![a-z0-9]){re.escape(t)}", lowered))
    ]
    return (
        [t for t in missing if terms[t]],
        [t for t in missing if not terms[t]],
        sum(not strict for strict in terms.values()),
    )


@functools.lru_cache(maxsize=1024)  # the statements of one sample are checked against the same joined contexts
def _source_tokens(source: str) -> frozenset[str]:
    """What `missing_terms` finds a term in: the content tokens of `source` and its lowercased raw tokens."""
    return token_set(source) | {m.group(0).lower() for m in _TOKEN.finditer(source.lower())}


def content_words(text: str) -> dict[str, str]:
    """The words of `text` that carry content, with a coarse tag: Chinese by jieba's segmentation (function
    characters dropped; its tag), Latin as content tokens ('m' for numbers, 'x' otherwise). Unlike the bigrams
    of `content_tokens`, these never cross a word boundary."""
    return dict(_content_words(text))


@functools.lru_cache(maxsize=_RECENT)
def _content_words(text: str) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for match in _TOKEN.finditer(text.lower()):
        if match.group("cjk"):
            for word, flag in _tagged(match.group("cjk")):
                if not set(word) <= _ZH_STOP:
                    out.setdefault(word, flag)
        elif match.group("num"):
            out.setdefault(match.group("num").replace(",", ""), "m")
        elif match.group("word") not in _EN_STOP:
            word = _stem(match.group("word"))
            if word not in _EN_STOP and word not in NEGATIONS_EN and (len(word) > 1 or word.isdigit()):
                out.setdefault(word, "x")
    return tuple(out.items())
