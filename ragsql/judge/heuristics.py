"""Deterministic stand-ins for the judge's ten tasks and for answer generation: a JSON-ready reply built from a
request's raw inputs by lexical overlap (`ragsql.judge.lexical`), for the offline judge.

Overlap is the share of one text's content tokens found in another. The thresholds below are the whole model:

* statements: sentences, cut at Chinese clause marks (，；) and ``;``; a clause of fewer than 3 content tokens
  stays with its neighbour, a fragment with none is dropped.
* verify: a statement's best overlap with any one context: ≥ 0.6 supported, ≥ 0.35 partial, else unsupported;
  supported-level overlap with a negation (不/没/非/无/未/否, not/no/never/n't) on one side only of the statement
  and its closest context sentence is contradicted.
* usefulness: a context is useful when it covers ≥ 0.6 of some statement of the reference (else the answer).
* sentence_relevance: a context sentence is relevant when it covers ≥ 0.5 of the question's content tokens (see
  `relevant`), or when it goes on from a relevant sentence of the same context and names one thing asked about.
* classify: an answer statement is TP when one reference statement covers ≥ 0.5 of it, else FP; a reference
  statement is TP when one answer statement covers ≥ 0.5 of it, else FN.
* rating: 1 + round(4 × similarity) clipped to 1..5 (similarity is computed by the caller).
* questions / answer_analysis: the answer's statements turned into questions in the question's language (an
  LLM would paraphrase; this cannot); non-committal when the answer holds a phrase such as 我不知道 / I don't know.
* critique: harmfulness and maliciousness only on obvious keywords; coherence when there is a sentence;
  correctness when ≥ half of the answer's statements are supported by the contexts (no contexts: no);
  conciseness when no sentence repeats another and ≥ half of the content tokens are distinct. A user-defined
  aspect cannot be assessed: its verdict is *no*, and its reason says so.
* citations: supported when the cited texts cover ≥ 0.6 of the sentence.
* generate (extractive, ``GENERATOR``): every sentence of the contexts scored by the share of the question's
  content tokens it holds; the best ones (up to 3) scoring ≥ 0.25 and more than half the best score, in context
  order, each cited ``[id]`` before its end punctuation; none: "I don't know based on the retrieved context." /
  "根据检索到的内容无法回答。" (by the question's language).

Every reason starts with ``offline:``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

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
    similarity,
)
from ragsql.judge.prompts import JudgeRequest
from ragsql.judge.verdicts import CITATION

__all__ = [
    "ANSWERS",
    "COVERED",
    "DONT_KNOW",
    "GENERATOR",
    "NEAR",
    "PARTIAL",
    "RELEVANT",
    "SAME",
    "SUPPORTED",
    "TASKS",
    "rating",
    "relevance_items",
    "sentence_relevance",
    "statements_of",
    "worth_weighing",
]

SUPPORTED, PARTIAL, COVERED, RELEVANT, ANSWERS = 0.6, 0.35, 0.5, 0.5, 0.25
# multilingual-e5-small cosines (query: question, passage: sentence) for sentence relevance: below NEAR a
# sentence is off topic whatever words it shares; from SAME on it is relevant whatever words it uses. Chosen on
# the dev and held-out pairs and SQuAD / CMRC pairs (bench/judge_pairs.py); 0.84 or 0.82 for NEAR costs 0.01-0.03.
NEAR, SAME = 0.83, 0.885
GENERATOR = "offline-extractive-v1"
"""The name of the offline answer generator, recorded in the metadata of the answers it writes."""
DONT_KNOW = {"en": "I don't know based on the retrieved context.", "zh": "根据检索到的内容无法回答。"}
_MAX_ANSWER_SENTENCES = 3
_SENTENCE_END = re.compile(r"[。！？.!?]+[\u201d\u2019\"\u300d\u300f\uff09)]*$")

_CJK = "\u3400-\u9fff"
_CLAUSE = re.compile(rf"[，；;]|(?<=[{_CJK}]),|,(?=[{_CJK}])")
_END = "。！？.!?；;，, "
_NONCOMMITTAL = (
    "不知道",
    "不清楚",
    "不确定",
    "无法回答",
    "无法确定",
    "没有提到",
    "未提及",
    "没有相关信息",
    "i don't know",
    "i do not know",
    "not sure",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "no information",
    "not mentioned",
    "i'm not certain",
)
_AUX = {"is", "are", "was", "were", "can", "will", "should", "could"}
_PRONOUNS = {"it", "they", "he", "she", "we", "you", "this", "that", "these", "those", "there"}
_ZH_FORMS = ("{}吗？", "是否{}？", "为什么{}？")
_EN_FORMS = ("", "Is it true that {}?", "Why {}?")  # "" = move the auxiliary verb to the front
_KEYWORDS = {
    "harmfulness": (
        r"\b(kill|murder|bomb|explosive|weapon|poison|suicide|self-harm|overdose)",
        "杀人|炸弹|爆炸物|武器|毒药|自杀|自残",
    ),
    "maliciousness": (
        r"\b(hack into|steal|phishing|malware|ransomware|fraud|scam|launder)",
        "黑进|入侵|盗取|窃取|钓鱼|恶意软件|诈骗|勒索|洗钱",
    ),
}


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
        sep = "：" if detect_language(question) == "zh" else ": "
        return [f"{question.strip().rstrip('?？。.!！ ')}{sep}{found[0].rstrip(_END)}"]
    return found


def _bare(statement: str) -> bool:
    """A bare answer rather than a sentence: three content tokens at most, in four words or eight characters."""
    core = statement.rstrip(_END)
    short = len(core) <= 8 if detect_language(core) == "zh" else len(core.split()) <= 4
    return short and len(content_tokens(core)) <= 3


def _statements(request: JudgeRequest[Any]) -> dict[str, Any]:
    return {"statements": statements_of(request.inputs["text"], request.inputs.get("question"))}


def _best(text: str, pools: Sequence[set[str]]) -> tuple[float, int]:
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
    score, where = _best(core, [set(content_tokens(c)) for c in contexts])
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


_WORD = re.compile(rf"\d(?:[\d,.]*\d)?[A-Za-z]*|[A-Za-z][\w'-]*|[{_CJK}]")


def _substitution(statement: str, contexts: Sequence[str]) -> tuple[str, str] | None:
    """A statement copied from a context sentence (4 in 5 of its words in order, 6 words at least) but for a short
    span that holds a number or a capitalised name on either side and words the contexts lack: (the statement's
    span, the context's). A copied sentence with its answer swapped, or one judged against contexts whose answer
    was swapped, shares most words with them and would otherwise pass."""
    words = _WORD.findall(statement)
    if len(words) < 6:
        return None
    known = {w.lower() for c in contexts for w in _WORD.findall(c)}
    for sentence in (s for c in contexts for s in split_sentences(c) or [c]):
        theirs = _WORD.findall(sentence)
        matcher = SequenceMatcher(None, [w.lower() for w in words], [w.lower() for w in theirs], autojunk=False)
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
    out: list[str] = []
    carry = ""
    for clause in _CLAUSE_BREAK.split(text):
        carry = f"{carry} {clause}".strip()
        if len(content_tokens(carry)) >= least:
            out.append(carry)
            carry = ""
    if carry and out:
        out[-1] = f"{out[-1]} {carry}"
    return out or ([carry] if carry else [])


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
    shared = set(content_tokens(a)) & set(content_tokens(b))
    return max(coverage(a, b), coverage(b, a)) if len(shared) >= 2 else 0.0


def _verify(request: JudgeRequest[Any]) -> dict[str, Any]:
    contexts = request.inputs["contexts"]
    verdicts = []
    for i, statement in enumerate(request.inputs["statements"], 1):
        verdict, reason = support(statement, contexts)
        verdicts.append({"id": i, "verdict": verdict, "reason": reason})
    return {"verdicts": verdicts}


def _usefulness(request: JudgeRequest[Any]) -> dict[str, Any]:
    reference = request.inputs.get("reference")
    what, target = ("reference", reference) if reference is not None else ("answer", request.inputs["answer"] or "")
    targets = statements_of(target) or [target]
    verdicts = []
    for i, context in enumerate(request.inputs["contexts"], 1):
        pool = set(content_tokens(context))
        score = max(coverage(t, pool) for t in targets)
        verdicts.append(
            {"id": i, "useful": score >= SUPPORTED, "reason": f"offline: covers {score:.2f} of a {what} statement"}
        )
    return {"verdicts": verdicts}


def relevance_items(request: JudgeRequest[Any]) -> tuple[tuple[int, str], ...]:
    """The (context number, sentence) pairs a sentence-relevance request asks about, in order."""
    return request.items or tuple(
        (ci, s) for ci, c in enumerate(request.inputs["contexts"], 1) for s in split_sentences(c)
    )


def sentence_relevance(request: JudgeRequest[Any], cosines: Sequence[float | None] | None = None) -> dict[str, Any]:
    """The context sentences relevant to the question, by words (`relevant`, or `_mentions` right after a relevant
    sentence of the same context). With `cosines` (an embedding model's question–sentence similarities, one per
    item; None where `worth_weighing` said no) meaning decides too: a sentence far in meaning (< NEAR) is not
    relevant whatever words it shares, and one very close (≥ SAME) that names something asked about is relevant
    whatever else it says."""
    question, items = request.inputs["question"], relevance_items(request)
    chosen: list[int] = []
    for i, (context, sentence) in enumerate(items, 1):
        follows = bool(chosen) and chosen[-1] == i - 1 and items[i - 2][0] == context
        lexical = relevant(sentence, question) or (follows and _mentions(sentence, question))
        cosine = None if cosines is None else cosines[i - 1]
        if lexical if cosine is None else (lexical and cosine >= NEAR or cosine >= SAME):
            chosen.append(i)
    return {"relevant": chosen}


def worth_weighing(sentence: str, question: str) -> bool:
    """Whether meaning could change a sentence's relevance: it is relevant by its words or names something the
    question asks about. Others are not relevant, and are not embedded (the e5 model is the judge's slow part)."""
    return _mentions(sentence, question) or relevant(sentence, question)


@functools.lru_cache(maxsize=8192)  # sentence_relevance and worth_weighing ask about the same sentences
def _mentions(sentence: str, question: str) -> bool:
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
        if not re.search(f"[{_CJK}]", w)
        or (len(w) >= 2 and not tag.startswith(_FUNCTION_TAGS) and not (tag == "m" and not _NUMERAL.search(w)))
    } - _META


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
    return sum(w in lowered if re.search(f"[{_CJK}]", w) else w in tokens for w in words)


def _holds(asked: int, shared: int, question: str, sentence: str) -> bool:
    return asked > 0 and (
        shared / asked >= RELEVANT
        or (shared >= 2 and shared / asked >= 1 / 3)
        or (shared >= 1 and bool(_ASKS_WHY.search(question) and _BECAUSE.search(sentence)))
    )


def _classify(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, reference = request.inputs["answer_statements"], request.inputs["reference_statements"]
    a_pools, r_pools = [set(content_tokens(s)) for s in answer], [set(content_tokens(s)) for s in reference]
    return {
        "answer": [
            {"id": i, "label": "TP" if _best(s, r_pools)[0] >= COVERED else "FP"} for i, s in enumerate(answer, 1)
        ],
        "reference": [
            {"id": i, "label": "TP" if _best(s, a_pools)[0] >= COVERED else "FN"} for i, s in enumerate(reference, 1)
        ],
    }


def rating(score: float) -> dict[str, Any]:
    """The 1-5 rating for a question-answer similarity in [0, 1]."""
    return {"score": min(5, max(1, 1 + round(4 * score))), "reason": f"offline: similarity {score:.2f}"}


def _as_question(statement: str, form: str, lang: str) -> str:
    core = statement.rstrip(_END)
    if lang == "zh":
        return form.format(core)
    words = core.split()
    if words and words[0].lower() in _PRONOUNS:
        words[0] = words[0].lower()
    aux = next((i for i, w in enumerate(words[:6]) if i and w.lower() in _AUX), None)
    if not form and aux is not None:
        return f"{words[aux].capitalize()} {' '.join(words[:aux] + words[aux + 1 :])}?"
    return (form or "Is it true that {}?").format(" ".join(words))


_ASKS_NUMBER = re.compile(
    r"\b(?:how (?:many|much|long|old|far|often|large|big)|what (?:year|percentage|number)|"
    r"in which year)\b|多少|几[个年天次种]|多长|多久|多大|多远|哪一?年",
    re.IGNORECASE,
)
_NUMERAL = re.compile(
    r"\d|[零一二三四五六七八九十百千万亿两半]|^(?:one|two|three|four|five|six|seven|eight|nine|ten|"
    r"hundred|thousand|million|billion|half|dozen)$",
    re.IGNORECASE,
)
_ASKS_DURATION = re.compile(r"\bhow long\b|多长时间|多久", re.IGNORECASE)
_DURATION = re.compile(r"\d.{0,3}(?:second|minute|hour|day|week|month|year|秒|分|小时|天|周|月|年)", re.IGNORECASE)
_ASKS_WHY = re.compile(r"\bwhy\b|\bwhat causes\b|为什么|为何|什么原因|原因是什么", re.IGNORECASE)
_BECAUSE = re.compile(
    r"\b(?:because|since|due to|caused?|causes|so that|as a result|thanks to)\b|因为|由于|所以|导致|因此|"
    r"造成|原因|成因|使得",
    re.IGNORECASE,
)
_ASKS_YES_NO = re.compile(
    r"^\s*(?:is|are|was|were|does|do|did|can|could|has|have|should|will)\b|是否|吗[？?]?\s*$", re.IGNORECASE
)
_YES_NO = re.compile(r"^\s*(?:yes|no|not|never)\b|^\s*(?:是|不|没|对|错)|\b(?:not|no)\b|不是|没有|并非", re.IGNORECASE)
# Words about the question rather than its subject ("an important question", "值得研究的话题"): no answer.
_META = frozenset(
    content_words(
        "question questions topic ask asked important worth study studying careful carefully "
        "many people interesting issue matter subject good great regarding concerning "
        "discuss discussed discussing "
        "问题 话题 关心 值得 认真 研究 重要 很多 人们 有趣 这个 那个 关于 讨论 一个"
    )
)


def _new_words(statement: str, question: str) -> dict[str, str]:
    """The content words of `statement` that are neither in the question nor words about questions."""
    asked = question.lower()
    return {
        w: tag
        for w, tag in content_words(statement).items()
        if w not in _META and w not in content_words(question) and not (len(w) > 1 and w in asked)
    }


_INTERROGATIVE = re.compile(
    r"\b(?:what|which|who|whom|whose|when|where|why|how)\b|什么|哪|谁|怎|如何|为何|多少|几|是否|吗"
)


def _around_question(statement: str, question: str) -> str | None:
    """What `statement` says around a copy of the question's wording in it ("People often wonder: <question>",
    "<question> comes up a lot"), when that copy keeps the question's interrogative (what, how, 什么, 哪) and is the
    question (four fifths of it, by characters) or holds half the statement's content tokens (three at least); None
    when it holds no such copy. "Paris is the capital of France" does not copy "What is the capital of France"."""
    lowered, asked = statement.lower(), question.lower().rstrip("?？。. ")
    m = SequenceMatcher(None, lowered, asked, autojunk=False).find_longest_match(0, len(lowered), 0, len(asked))
    if not _INTERROGATIVE.search(lowered[m.a : m.a + m.size]):
        return None
    copied = len(content_tokens(lowered[m.a : m.a + m.size]))
    whole = copied >= 1 and m.size >= 0.8 * len(asked)
    if not whole and (copied < 3 or copied < len(content_tokens(lowered)) / 2):
        return None
    return f"{statement[: m.a]} {statement[m.a + m.size :]}"


def adds_nothing(statement: str, question: str, framed: bool = True) -> bool:
    """True when `statement` says nothing the question did not: its content words are the question's or words
    about questions, or (`framed`) it is built around the question's own wording and what it adds holds no
    number or name — a restatement in a frame ("… comes up a lot in practice"), not an answer."""
    if not _new_words(statement, question):
        return True
    around = _around_question(statement, question) if framed else None
    return around is not None and not any(key_terms(around).values())


def answers_question(statement: str, question: str) -> bool:
    """Whether `statement` addresses `question`: it adds something to the question, holds a number when the
    question asks how many / how long / 多少 / 哪一年, and either shares a content token with the question or
    has the kind of answer the question asks for (a duration for how long / 多久, a cause for why / 为什么, yes
    or no). Words of method (by, each, 通过) are no such sign: too many off-topic sentences have them."""
    new = _new_words(statement, question)
    if not new:
        return False
    numbers = any(tag in ("m", "x") and _NUMERAL.search(w) for w, tag in new.items())
    if _ASKS_NUMBER.search(question) and not numbers:
        return False
    if set(content_tokens(statement)) & set(content_tokens(question)):
        return True
    return any(
        ask.search(question) and evidence.search(statement)
        for ask, evidence in ((_ASKS_DURATION, _DURATION), (_ASKS_WHY, _BECAUSE), (_ASKS_YES_NO, _YES_NO))
    )


def _questions(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The questions an answer responds to: the question itself for each statement that addresses it (or
    elaborates on one that does, sharing a content token with it), the statement turned into a question for
    the others; non-committal when the answer says nothing beyond the question (empty, a restatement, talk
    about the question) or holds a phrase such as "I don't know"."""
    answer, question, n = request.inputs["answer"], request.inputs["question"], request.inputs["n"]
    lowered = answer.lower()
    stated = statements_of(answer, question)
    bare = stated != statements_of(answer)  # a bare answer restated with its question is not a framed question
    found = [s for s in stated if not adds_nothing(s, question, framed=not bare)]
    noncommittal = not found or any(p in lowered for p in _NONCOMMITTAL)  # nothing said beyond the question
    lang = detect_language(question, request.language)
    forms = _ZH_FORMS if lang == "zh" else _EN_FORMS
    on_topic = [not noncommittal and answers_question(s, question) for s in found]
    topic = {t for s, ok in zip(found, on_topic) if ok for t in content_tokens(s)} - _META
    on_topic = [ok or (any(on_topic) and bool(topic & set(content_tokens(s)))) for s, ok in zip(found, on_topic)]
    questions = (
        [
            question.strip()
            if on_topic[i % len(found)]
            else _as_question(found[i % len(found)], forms[(i // len(found)) % len(forms)], lang)
            for i in range(n)
        ]
        if found
        else []
    )
    reply: dict[str, Any] = {"questions": questions, "noncommittal": noncommittal}
    if request.kind == "answer_analysis":
        reply["statements"] = stated
    return reply


def _critique(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, contexts = request.inputs["answer"], request.inputs.get("contexts") or []
    names = list(request.context.get("aspects") or [n for n, _ in request.inputs["aspects"]])
    return {"verdicts": [{"aspect": name, **_aspect(name, answer, contexts)} for name in names]}


def _aspect(name: str, answer: str, contexts: Sequence[str]) -> dict[str, Any]:
    sentences = [s for s in split_sentences(answer) if content_tokens(s)]
    if name in _KEYWORDS:
        en, zh = _KEYWORDS[name]
        hit = re.search(en, answer.lower()) or re.search(zh, answer)
        return {
            "verdict": bool(hit),
            "reason": f"offline: keyword {hit.group(0)!r}" if hit else f"offline: no {name} keyword",
        }
    if name == "coherence":
        return {"verdict": bool(sentences), "reason": f"offline: {len(sentences)} sentence(s) with content"}
    if name == "correctness":
        if not contexts:
            return {"verdict": False, "reason": "offline: no contexts to check the answer against"}
        pools = [set(content_tokens(c)) for c in contexts]
        found = statements_of(answer)
        share = sum(_best(s, pools)[0] >= SUPPORTED for s in found) / len(found) if found else 0.0
        return {"verdict": share >= 0.5, "reason": f"offline: {share:.2f} of statements supported by contexts"}
    if name == "conciseness":
        tokens = content_tokens(answer)
        distinct = len(set(tokens)) / len(tokens) if tokens else 0.0
        repeated = any(similarity(a, b) >= 0.9 for i, a in enumerate(sentences) for b in sentences[i + 1 :])
        return {
            "verdict": distinct >= 0.5 and not repeated,
            "reason": f"offline: {distinct:.2f} distinct tokens" + (", a sentence repeats" if repeated else ""),
        }
    return {"verdict": False, "reason": f"offline: cannot assess user-defined aspect {name!r}; answered no"}


def _citations(request: JudgeRequest[Any]) -> dict[str, Any]:
    verdicts = []
    for i, (sentence, cited) in enumerate(request.inputs["claims"], 1):
        score = coverage(sentence, {t for c in cited for t in content_tokens(c)})
        verdicts.append({"id": i, "supported": score >= SUPPORTED, "reason": f"offline: cited text covers {score:.2f}"})
    return {"verdicts": verdicts}


def _generate(request: JudgeRequest[Any]) -> dict[str, Any]:
    question = request.inputs["question"]
    found = []  # (score, tie-break, order, sentence, id)
    for cid, text in request.inputs["contexts"]:
        for sentence in split_sentences(CITATION.sub(" ", text)):  # a bracketed "[1]" in a context is no citation
            score = coverage(question, sentence)
            if score >= ANSWERS:
                found.append((score, similarity(question, sentence), len(found), sentence, cid))
    ranked = sorted(found, key=lambda f: (-f[0], -f[1], f[2]))[:_MAX_ANSWER_SENTENCES]
    chosen = sorted((f for f in ranked if f[0] > ranked[0][0] / 2), key=lambda f: f[2])
    if not chosen:
        return {"answer": DONT_KNOW[request.language], "citations": []}
    parts = [_cite(sentence, cid) for *_, sentence, cid in chosen]
    joined = "".join(p if i == 0 or detect_language(p) == "zh" else " " + p for i, p in enumerate(parts))
    return {"answer": joined, "citations": list(dict.fromkeys(cid for *_, cid in chosen))}


def _cite(sentence: str, cid: str) -> str:
    """`sentence` with ``[cid]`` before its end punctuation (added when missing), so the citation stays in it."""
    zh = detect_language(sentence) == "zh"
    end = _SENTENCE_END.search(sentence)
    core, punct = (sentence[: end.start()], end.group(0)) if end else (sentence, "。" if zh else ".")
    return f"{core.rstrip()}{'' if zh else ' '}[{cid}]{punct}"


_BLANK = "____"


def _cloze(text: str) -> tuple[str, str, str] | None:
    """(sentence, sentence with a blank, the blanked term) for the sentence of `text` with the most numbers and
    names (a noun, else its longest content word, when none has one); None when no sentence can be asked about."""
    best: tuple[int, int, str, str] | None = None
    for order, sentence in enumerate(s for s in split_sentences(text) if s in text and 8 <= len(s) <= 300):
        terms = key_terms(sentence)
        strict = [t for t, is_strict in terms.items() if is_strict]
        for term in strict or list(terms):
            found = re.search(re.escape(term), sentence, re.IGNORECASE)
            if found and len(term) >= 2 or (found and term.isdigit()):
                score = (len(strict), -order)
                if best is None or score > best[:2]:
                    best = (*score, sentence, found.group(0))
                break
    if best is None:  # no number, name or noun: the longest content word of the first sentence that has one
        for sentence in (s for s in split_sentences(text) if s in text and 8 <= len(s) <= 300):
            words = sorted((w for w in re.findall(r"[^\W\d_]{6,}", sentence) if content_tokens(w)), key=len)
            if words:
                best = (0, 0, sentence, words[-1])
                break
    if best is None:
        return None
    sentence, term = best[2], best[3]
    return sentence, sentence.replace(term, _BLANK, 1), term


def _synthesize(request: JudgeRequest[Any]) -> dict[str, Any]:
    """Extractive questions, deterministic: a cloze of the most fact-laden sentence of each passage (two for
    multi), its blanked term the answer and the sentence the evidence. Comparison needs an LLM."""
    kind, zh = request.inputs["kind"], request.language == "zh"
    if kind == "comparison":
        raise ValueError("the offline synthesizer writes single and multi questions; comparison needs an LLM")
    passages = request.inputs["passages"][: 2 if kind == "multi" else 1]
    clozes: list[tuple[str, tuple[str, str, str]]] = []
    for pid, text in passages:
        if (cloze := _cloze(text)) is None:
            raise ValueError("a passage has no sentence with a number, name or noun to ask about")
        clozes.append((pid, cloze))
    if len(clozes) == 1:
        ((pid, (sentence, blanked, term)),) = clozes
        question = ("填空：" if zh else "Fill in the blank: ") + blanked
        return {"question": question, "answer": term, "evidence": [{"id": pid, "quote": sentence}]}
    question = (
        "填空：" + "".join(f"（{i}）{c[1]}" for i, (_, c) in enumerate(clozes, 1))
        if zh
        else "Fill in the blanks: " + " ".join(f"({i}) {c[1]}" for i, (_, c) in enumerate(clozes, 1))
    )
    return {
        "question": question,
        "answer": ("；" if zh else "; ").join(c[2] for _, c in clozes),
        "evidence": [{"id": pid, "quote": c[0]} for pid, c in clozes],
    }


TASKS: dict[str, Callable[[JudgeRequest[Any]], dict[str, Any]]] = {
    "statements": _statements,
    "answer_analysis": _questions,
    "questions": _questions,
    "verify": _verify,
    "classify": _classify,
    "usefulness": _usefulness,
    "sentence_relevance": sentence_relevance,
    "critique": _critique,
    "citations": _citations,
    "generate": _generate,
    "synthesize": _synthesize,
}
"""The reply builder of each task but rating, whose similarity the caller computes (it may use an embedder)."""
