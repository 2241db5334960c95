"""The offline judge's shared rules: a text's statements, a statement's support by contexts, a context sentence's
relevance to a question, all by lexical overlap (`ragsql.judge.lexical`). Each call's own heuristic, built on these,
is in its folder (``kinds/<name>/``, function ``offline``), its rule in that module's docstring.

Overlap is the share of one text's content tokens found in another; the thresholds below are the whole model.
Every reason starts with ``offline:``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.lexical import (
    calculations,
    content_tokens,
    content_words,
    coverage,
    has_negation,
    is_number,
    key_terms,
    missing_terms,
    token_set,
)

__all__ = [
    "ANSWERS",
    "ASKS_WHY",
    "BECAUSE",
    "CJK",
    "COVERED",
    "END",
    "meta_words",
    "NUMERAL",
    "PARTIAL",
    "RELEVANT",
    "SUPPORTED",
    "best_overlap",
    "graded_coverage",
    "mentions",
    "relevant",
    "restated",
    "statements_of",
    "strip_filler",
    "support",
]

SUPPORTED, PARTIAL, COVERED, RELEVANT, ANSWERS = 0.6, 0.35, 0.5, 0.5, 0.25

CJK = "\u3400-\u9fff"
_CLAUSE = re.compile(rf"[，；;]|(?<=[{CJK}]),|,(?=[{CJK}])")
END = "。！？.!?；;，, "


def _pieces(sentence: str) -> list[str]:
    out: list[str] = []
    for clause in (c.strip() for c in _CLAUSE.split(sentence)):
        if out and len(content_tokens(clause)) < 3:
            out[-1] = f"{out[-1]}，{clause}" if clause else out[-1]
        elif out and len(content_tokens(out[-1])) < 3:
            out[-1] = f"{out[-1]}，{clause}"
        elif clause:
            out.append(clause)
    return out


_FILLER = re.compile(
    r"^\s*(?:(?:the |my )?(?:short |final )?answer\b(?: is\b)?\s*[:：]?|in short\b,?|yes\b,?|no\b,?|"
    r"(?:according to|based on) the (?:retrieved )?(?:context|contexts|passages?|documents?),?|"
    r"答案是|答案[:：]|回答[:：]|答[:：]|简而言之，?|总之，?|根据(?:检索到的)?(?:上下文|资料|文档|内容)，?)\s*",
    re.IGNORECASE,
)


def strip_filler(statement: str) -> str:
    """`statement` without a leading phrase that carries no claim ("The answer is", "答案是", "According to the
    context,"), so "The answer is 1905." is judged as "1905."."""
    return _FILLER.sub("", statement, count=1).strip() or statement


def statements_of(text: str, question: str | None = None) -> list[str]:
    """The offline statements of a text: its sentences and Chinese clauses that carry content, without filler;
    a sentence that is itself a question states nothing. A bare answer ("1905.", "张伟") to `question` becomes
    the question and the answer together, as an LLM would restate it ("In which year …: 1905")."""
    found = [
        strip_filler(p)
        for s in split_sentences(text)
        if not s.rstrip().endswith(("?", "？"))
        for p in _pieces(s)
        if content_tokens(strip_filler(p))
    ]
    if question and len(found) == 1 and _bare(found[0]) and coverage(found[0], question) < 1:
        return [restated(found[0], question)]
    return found


def restated(answer: str, question: str) -> str:
    """A bare answer said with its question, as an LLM would restate it: "In which year …: 1905"."""
    sep = "：" if detect_language(question) == "zh" else ": "
    return f"{question.strip().rstrip('?？。.!！ ')}{sep}{answer.rstrip(END)}"


def _bare(statement: str) -> bool:
    """A bare answer rather than a sentence: three content tokens at most, in four words or eight characters."""
    core = statement.rstrip(END)
    short = len(core) <= 8 if detect_language(core) == "zh" else len(core.split()) <= 4
    return short and len(content_tokens(core)) <= 3


def graded_coverage(text: str, contexts: Sequence[str], two: float, one: float) -> dict[str, int]:
    """A 0/1/2 rating by the share of `text`'s content tokens the contexts hold: ≥ `two` 2, ≥ `one` 1, else 0."""
    share = coverage(text, {t for c in contexts for t in content_tokens(c)})
    return {"rating": 2 if share >= two else 1 if share >= one else 0}


def best_overlap(text: str, pools: Sequence[set[str]]) -> tuple[float, int]:
    """Highest overlap of `text` with one of `pools` and that pool's 1-based index (0 when there is none)."""
    best, where = 0.0, 0
    for i, pool in enumerate(pools, 1):
        score = coverage(text, pool)
        if score > best:
            best, where = score, i
    return best, where


def support(statement: str, contexts: Sequence[str]) -> tuple[str, str]:
    """The verdict on one statement against the contexts and its reason.

    Supported: the contexts hold all of its key terms (`lexical.key_terms`: every number within the
    best-matching sentence, and its neighbours, of some context — a number is a local fact —, every name somewhere
    in the contexts — an earlier sentence may introduce it —, all but one in four, at least one, of the others) and one
    context covers SUPPORTED of its content tokens (PARTIAL is enough when it has two key terms or more); a number the
    statement itself derives by a calculation that holds ("log2(4) = 2") needs no context. Contradicted: it lacks a
    number or name where the closest sentence has another of the same kind, or a clause and the context clause matching
    it differ in negation. Partial: PARTIAL overlap, or key terms missing. Unsupported: a calculation it states does not
    hold, or too little overlap."""
    core = strip_filler(statement)
    score, where = best_overlap(core, [set(content_tokens(c)) for c in contexts])
    if not where:
        return "unsupported", "offline: no overlap"
    reason = f"offline: overlap {score:.2f} with context {where}"
    terms = key_terms(core)
    if score < (PARTIAL if len(terms) >= 2 else SUPPORTED):
        return ("partial" if score >= PARTIAL else "unsupported"), reason
    derived, wrong = calculations(core)
    if wrong:
        return "unsupported", f"{reason}; the calculation {wrong[0]} does not hold"
    near, _, _ = missing_terms(core, " ".join(_window(core, c) for c in contexts))
    anywhere, soft, n_soft = missing_terms(core, " ".join(contexts))
    strict = [t for t in near if is_number(t) and t not in derived] + [t for t in anywhere if not is_number(t)]
    if strict or len(soft) > max(1, n_soft // 4):
        closest = _window(core, contexts[where - 1], 0)
        numbers = {is_number(t) for t in strict}
        differs = [
            t
            for t, is_strict in key_terms(closest).items()
            if is_strict and t not in core.lower() and is_number(t) in numbers
        ]
        missing = ", ".join((strict or soft)[:3])
        if strict and differs and score >= SUPPORTED:
            return "contradicted", f"{reason}; the context says {', '.join(differs[:3])} where it says {missing}"
        return "partial", f"{reason}; the contexts lack {missing}"
    if _negation_clash(core, contexts[where - 1]):
        return "contradicted", f"{reason} (negation differs)"
    swapped = _substitution(core, contexts)
    if swapped:
        return "contradicted", f"{reason}; it copies the context but says {swapped[0]} where it says {swapped[1]}"
    return "supported", reason


_WORD = re.compile(rf"\d(?:[\d,.]*\d)?[A-Za-z]*|[A-Za-z][\w'-]*|[{CJK}]")


def _substitution(statement: str, contexts: Sequence[str]) -> tuple[str, str] | None:
    """A statement copied from a context sentence (4 in 5 of its words in order, 6 words at least) but for a short
    span that holds a number or a capitalised name on either side and words the contexts lack: (the statement's
    span, the context's). A copied sentence with its answer swapped, or one judged against contexts whose answer
    was swapped, shares most words with them and would otherwise pass."""
    words = _WORD.findall(statement)
    if len(words) < 6:
        return None
    known = frozenset().union(*(_lowered_words(c)[1] for c in contexts))
    ours = [w.lower() for w in words]
    for sentence in (s for c in contexts for s in split_sentences(c) or [c]):
        lowered, held = _lowered_words(sentence)
        # the matching blocks pair distinct words of ours with equal words of theirs: no more than ours has in theirs
        if sum(w in held for w in ours) < 0.8 * len(words):
            continue
        theirs = _WORD.findall(sentence)
        matcher = SequenceMatcher(None, ours, list(lowered), autojunk=False)
        if sum(b.size for b in matcher.get_matching_blocks()) < 0.8 * len(words):
            continue
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            ours, other = words[i1:i2], theirs[j1:j2]
            if (
                op == "replace"
                and len(ours) <= 4
                and len(other) <= 4
                and any(w.lower() not in known for w in ours)
                and any(w[0].isdigit() or w[0].isupper() for w in ours + other)
            ):
                return " ".join(ours), " ".join(other)
    return None


@functools.lru_cache(maxsize=4096)  # a sample's statements are compared with the same context sentences
def _lowered_words(text: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The lowercased words of `text` (`_WORD`) in order, and as a set."""
    lowered = tuple(w.lower() for w in _WORD.findall(text))
    return lowered, frozenset(lowered)


_CLAUSE_BREAK = re.compile(r"[，,；;：:、（）()]|\s(?:and|but|or|while|which|whereas)\s|而且|并且|但是|但|却|而")
_DENIAL = re.compile(
    r"^\s*(?:并非如此|并不是这样|不是这样|事实并非如此|不对|错了|"
    r"it is not (?:true|the case) that|it is false that|not so|that is not true)\b[\s，,：:。.]*",
    re.IGNORECASE,
)


_ELLIPTICAL = re.compile(
    r"\b(?:is|are|was|were|does|do|did|has|have|can|will)(?: not|n't)[\s.!。]*$|(?:不是|没有)[\s。！]*$", re.IGNORECASE
)


def _clauses(text: str, least: int = 2) -> list[str]:
    """`text` cut at clause marks and conjunctions; a clause of fewer than `least` content tokens joins the next."""
    return list(_cut_clauses(text, least))


@functools.lru_cache(maxsize=4096)  # each statement of a sample cuts the same contexts
def _cut_clauses(text: str, least: int) -> tuple[str, ...]:
    out: list[str] = []
    carry = ""
    for clause in _CLAUSE_BREAK.split(text):
        carry = f"{carry} {clause}".strip()
        if len(content_tokens(carry)) >= least:
            out.append(carry)
            carry = ""
    if carry and out:
        out[-1] = f"{out[-1]} {carry}"
    return tuple(out or ([carry] if carry else []))


def _window(statement: str, context: str, around: int = 1) -> str:
    """The sentence of `context` that covers most of `statement`, with `around` sentences either side."""
    sentences = split_sentences(context) or [context]
    at = max(range(len(sentences)), key=lambda i: coverage(statement, sentences[i]))
    return " ".join(sentences[max(0, at - around) : at + around + 1])


def _negation_clash(statement: str, context: str) -> bool:
    """True when a clause of `statement` and the context clause that matches it best (sharing two content tokens
    or more, and half the tokens of one) differ in negation: "the prize was not awarded for X" against "… was
    awarded for X"."""
    theirs = [c for sentence in split_sentences(context) for c in _clauses(sentence, least=1)]
    if not theirs:
        return False
    denied = _DENIAL.match(statement)
    if denied:  # "It is not true that X" / "并非如此：X" negates every clause of X
        return any(
            _match(clause, c) >= COVERED and not has_negation(c)
            for clause in _clauses(statement[denied.end() :])
            for c in theirs
        )
    for clause in _clauses(statement, least=1):
        if _ELLIPTICAL.search(clause):  # "…, the Nobel claim is not": it denies the previous clause's verb
            continue
        best = max(theirs, key=lambda c: _match(clause, c))
        if _match(clause, best) >= COVERED and has_negation(clause) != has_negation(best):
            return True
    return False


def _match(a: str, b: str) -> float:
    """How well two clauses match: the larger share of one's content tokens found in the other (0 when they
    share fewer than two)."""
    ours, theirs = token_set(a), token_set(b)
    shared = len(ours & theirs)  # the coverage of each in the other, as `coverage` counts it
    return max(shared / len(ours), shared / len(theirs)) if shared >= 2 else 0.0


@functools.lru_cache(maxsize=8192)  # sentence_relevance and worth_weighing ask about the same sentences
def mentions(sentence: str, question: str) -> bool:
    """Whether the sentence names one thing the question asks about: enough for a sentence that goes on from a
    relevant one in the same context (the explanation a relevant sentence starts)."""
    return _found(sentence, _asked(question)) >= 1


_FUNCTION_TAGS = ("r", "d", "f", "p", "c", "u", "y", "e", "o", "zg")  # jieba: pronouns (哪里), adverbs (通常), …


def _asked(question: str) -> set[str]:
    """The words a question is about: Latin content tokens, and Chinese words of two characters or more that are
    not question words, adverbs or particles (多少, 哪个, 通常, 分别) — whole words, not character bigrams, so a
    question word does not count as half of what was asked."""
    return {
        w
        for w, tag in content_words(question).items()
        if not re.search(f"[{CJK}]", w)
        or (len(w) >= 2 and not tag.startswith(_FUNCTION_TAGS) and not (tag == "m" and not NUMERAL.search(w)))
    } - meta_words()


@functools.lru_cache(maxsize=8192)
def relevant(sentence: str, question: str) -> bool:
    """A context sentence is relevant when it holds RELEVANT of what the question asks about, or a third of it
    and two items at least (long questions seldom come back whole in one sentence), or one item and a cause when
    the question asks why — counted both as content tokens (CJK bigrams catch part of a word: 负责 for 负责人) and
    as whole words (`_asked`: a question word such as 多少 does not count as half of what was asked)."""
    words, asked = _asked(question), set(content_tokens(question))
    return _holds(len(words), _found(sentence, words), question, sentence) or _holds(
        len(asked), len(asked & set(content_tokens(sentence))), question, sentence
    )


def _found(sentence: str, words: set[str]) -> int:
    """How many of `words` the sentence holds (Chinese as substrings, others as content tokens)."""
    lowered, tokens = sentence.lower(), set(content_tokens(sentence))
    return sum(w in lowered if re.search(f"[{CJK}]", w) else w in tokens for w in words)


def _holds(asked: int, shared: int, question: str, sentence: str) -> bool:
    return asked > 0 and (
        shared / asked >= RELEVANT
        or (shared >= 2 and shared / asked >= 1 / 3)
        or (shared >= 1 and bool(ASKS_WHY.search(question) and BECAUSE.search(sentence)))
    )


NUMERAL = re.compile(
    r"\d|[零一二三四五六七八九十百千万亿两半]|^(?:one|two|three|four|five|six|seven|eight|nine|ten|"
    r"hundred|thousand|million|billion|half|dozen)$",
    re.IGNORECASE,
)
ASKS_WHY = re.compile(r"\bwhy\b|\bwhat causes\b|为什么|为何|什么原因|原因是什么", re.IGNORECASE)
BECAUSE = re.compile(
    r"\b(?:because|since|due to|caused?|causes|so that|as a result|thanks to)\b|因为|由于|所以|导致|因此|"
    r"造成|原因|成因|使得",
    re.IGNORECASE,
)


@functools.cache
def meta_words() -> frozenset[str]:
    """Words about the question rather than its subject ("an important question", "值得研究的话题"): no answer.
    Made on first use: tagging its Chinese words loads jieba's dictionary (1-2 s), which a command that judges
    nothing (`watch run --once` with no new row) should not pay for."""
    return frozenset(
        content_words(
            "question questions topic ask asked important worth study studying careful carefully "
            "many people interesting issue matter subject good great regarding concerning "
            "discuss discussed discussing "
            "问题 话题 关心 值得 认真 研究 重要 很多 人们 有趣 这个 那个 关于 讨论 一个"
        )
    )
