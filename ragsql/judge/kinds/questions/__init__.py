"""The questions call (RAGAS answer relevance): `n` questions the answer answers, written in the question's language.

Offline: the answer's statements turned into questions in the question's language (an LLM would paraphrase; this
cannot); non-committal when the answer holds a phrase such as 我不知道 / I don't know."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.heuristics import (
    ASKS_WHY,
    BECAUSE,
    CJK,
    END,
    NUMERAL,
    meta_words,
    restated,
    statements_of,
    strip_filler,
)
from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.lexical import content_tokens, content_words, coverage, key_terms
from ragsql.judge.prompts import LANG_WORDS, JudgeRequest, build, escape, request_language
from ragsql.judge.verdicts import Texts

__all__ = ["GeneratedQuestions", "adds_nothing", "answers_question", "asked_back", "offline", "request"]

T = TypeVar("T", bound=BaseModel)


class GeneratedQuestions(BaseModel):
    """Questions the answer would answer (RAGAS answer relevance) and whether the answer is non-committal."""

    questions: Texts
    noncommittal: bool = False

    @model_validator(mode="after")
    def _count(self, info: ValidationInfo) -> GeneratedQuestions:
        n = (info.context or {}).get("n_questions")
        if n is not None and not self.noncommittal and len(self.questions) < n:
            raise ValueError(f"expected {n} questions, got {len(self.questions)}")
        return self


def request(
    answer: str, *, question: str, n: int = 3, language: str | None = None, contexts: Sequence[str] = ()
) -> JudgeRequest[GeneratedQuestions]:
    """RAGAS answer relevance: `n` questions the answer answers, written in the question's language."""
    return asked_back("questions", GeneratedQuestions, answer, question, n, language, contexts)


def asked_back(
    name: str,
    schema: type[T],
    answer: str,
    question: str,
    n: int,
    language: str | None,
    contexts: Sequence[str] = (),
) -> JudgeRequest[T]:
    """A request for `n` questions `answer` answers, in the language of `question` (which is not shown, nor are the
    `contexts` the answer was written from: only the offline judge reads them, `offline`)."""
    lang = request_language(language, question)
    return build(
        name,
        lang,
        schema,
        {"n_questions": n},
        n=n,
        inputs={"answer": answer, "question": question, "n": n, "contexts": list(contexts)},
        language=LANG_WORDS[lang][detect_language(question, lang)],
        answer=escape(answer.strip()),
    )


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


def _as_question(statement: str, form: str, lang: str) -> str:
    core = statement.rstrip(END)
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

# A question asking for a point in time ("when did", "in which year", 哪一年, 什么时候) and the words that give one: a
# number, a month, a century, a time word (jieba's tag t: 清朝, 年代) or a character of dates (年, 世纪, 纪).
_ASKS_TIME = re.compile(
    r"^\s*when\b|\bwhen (?:was|were|did|does|is|will)\b|\b(?:what|which|in which|in what) (?:year|century|decade|"
    r"date|month|day|era|period)\b|何时|什么时候|什么时间|哪一?年|何年|哪个(?:朝代|时期|年代)|什么(?:年代|时期|朝代)",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"^(?:\d+(?:st|nd|rd|th|s)?|january|february|march|april|may|june|july|august|september|october|november|"
    r"december|centur(?:y|ie)|decade|era|period|age|bc|ad|bce|ce|spring|summer|autumn|winter|year|month|week|day|"
    r"today|yesterday|ago|recent|recently|early|late|mid)$|[年月日]$|世纪|年代|[纪朝]$|时期",
    re.IGNORECASE,
)
# A question asking for a person or a place: a bare date or number does not answer it.
_ASKS_AGENT = re.compile(
    r"\b(?:who|whom|whose|where)\b|谁|哪里|哪儿|在哪|什么地方|哪个(?:国家|地方|城市|人)|哪国|哪位|什么人", re.IGNORECASE
)

_ASKS_DURATION = re.compile(r"\bhow long\b|多长时间|多久", re.IGNORECASE)

_DURATION = re.compile(r"\d.{0,3}(?:second|minute|hour|day|week|month|year|秒|分|小时|天|周|月|年)", re.IGNORECASE)

_ASKS_YES_NO = re.compile(
    r"^\s*(?:is|are|was|were|does|do|did|can|could|has|have|should|will)\b|是否|吗[？?]?\s*$", re.IGNORECASE
)

_YES_NO = re.compile(r"^\s*(?:yes|no|not|never)\b|^\s*(?:是|不|没|对|错)|\b(?:not|no)\b|不是|没有|并非", re.IGNORECASE)


def _new_words(statement: str, question: str) -> dict[str, str]:
    """The content words of `statement` that are neither in the question nor words about questions (a Chinese word
    counts as in the question when the question's text holds it; a Latin one only as a whole word: "Active" is not
    in "interactive", nor "Sky" in "BSkyB")."""
    asked, words, meta = question.lower(), content_words(question), meta_words()
    return {
        w: tag
        for w, tag in content_words(statement).items()
        if w not in meta
        and w not in words
        and not (len(w) > 1 and (w in asked if re.search(f"[{CJK}]", w) else re.search(rf"\b{re.escape(w)}\b", asked)))
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


def of_the_kind_asked(new: dict[str, str], question: str) -> bool:
    """Whether the new words of an answer (`_new_words`) are of the kind the question asks for: a number for how
    many / 多少, a time for when / 哪一年, something besides a date or a number for who / where / 谁 / 哪里."""
    numbers = any(tag in ("m", "x") and NUMERAL.search(w) for w, tag in new.items())
    if _ASKS_NUMBER.search(question) and not numbers:
        return False
    times = [w for w, tag in new.items() if tag == "t" or _TIME.search(w) or (tag == "m" and NUMERAL.search(w))]
    if _ASKS_TIME.search(question) and not times:
        return False
    return not (_ASKS_AGENT.search(question) and len(times) == len(new))


def answers_question(statement: str, question: str) -> bool:
    """Whether `statement` addresses `question`: it adds something to the question, holds a number when the
    question asks how many / how long / 多少 / 哪一年, and either shares a content token with the question or
    has the kind of answer the question asks for (a duration for how long / 多久, a cause for why / 为什么, yes
    or no). Words of method (by, each, 通过) are no such sign: too many off-topic sentences have them."""
    new = _new_words(statement, question)
    if not new or not of_the_kind_asked(new, question):
        return False
    if set(content_tokens(statement)) & set(content_tokens(question)):
        return True
    return any(
        ask.search(question) and evidence.search(statement)
        for ask, evidence in ((_ASKS_DURATION, _DURATION), (ASKS_WHY, BECAUSE), (_ASKS_YES_NO, _YES_NO))
    )


def _phrase(answer: str, statement: str) -> bool:
    """Whether an answer is one short phrase ("at the Battle of Hastings", "The answer is Sky Active.", "为了抵御水压"):
    one statement of at most eight words or twenty characters, with no end mark of its own, not already said with
    the question."""
    said = strip_filler(answer.strip())
    core = said.rstrip("。！？.!? ")
    if not core or statement.rstrip(END) != core or (said == answer.strip() and said[-1] in "。！？.!?"):
        return False  # a sentence of its own, unless a frame ("The answer is …", "答案是…") holds it
    return len(core) <= 20 if detect_language(core) == "zh" else len(core.split()) <= 8


def aligned(answer: str, question: str, contexts: Sequence[str]) -> float | None:
    """Where the answer sits in the contexts it came from, as an extractive reader would check it: how much of the
    question the context sentence holding the answer covers (its content tokens weighted by rarity among the
    contexts' sentences: a name every sentence repeats tells little), over the most any context sentence covers;
    None when no sentence holds it (its words, or four in five of the content tokens of a longer answer)."""
    core = strip_filler(answer.strip()).rstrip(END).lower()
    sentences = [s for c in contexts for s in split_sentences(c)]
    if not core or not sentences:
        return None
    pattern = re.compile(re.escape(core) if re.search(f"[{CJK}]", core) else rf"(?<!\w){re.escape(core)}(?!\w)")
    held = [s for s in sentences if pattern.search(s.lower())]
    if not held and len(content_tokens(core)) >= 3:
        best = max(sentences, key=lambda s: coverage(core, s))
        held = [best] if coverage(core, best) >= 0.8 else []
    if not held:
        return None
    bags = {s: set(content_tokens(s)) for s in sentences}
    weight = {
        t: math.log(1 + len(sentences) / sum(t in bags[s] for s in sentences))
        for t in set(content_tokens(question))
        if any(t in bag for bag in bags.values())
    }
    # fsum: the exact sum whatever the order (a set's order, and a plain sum's last bit, moves with the hash seed)
    asked = {s: math.fsum(w for t, w in weight.items() if t in bag) for s, bag in bags.items()}
    top = max(asked.values())
    return max(asked[s] for s in held) / top if top else None


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The questions an answer responds to: the question itself for each statement that addresses it (or
    elaborates on one that does, sharing a content token with it), the statement turned into a question for
    the others; non-committal when the answer says nothing beyond the question (empty, a restatement, talk
    about the question) or holds a phrase such as "I don't know"."""
    answer, question, n = request.inputs["answer"], request.inputs["question"], request.inputs["n"]
    lowered = answer.lower()
    stated = statements_of(answer, question)
    if len(stated) == 1 and _phrase(answer, stated[0]):
        stated = [restated(stated[0], question)]
    bare = stated != statements_of(answer)  # a bare answer restated with its question is not a framed question
    found = [s for s in stated if not adds_nothing(s, question, framed=not bare)]
    noncommittal = not found or any(p in lowered for p in _NONCOMMITTAL)  # nothing said beyond the question
    lang = detect_language(question, request.language)
    forms = _ZH_FORMS if lang == "zh" else _EN_FORMS
    on_topic = [not noncommittal and answers_question(s, question) for s in found]
    topic = {t for s, ok in zip(found, on_topic) if ok for t in content_tokens(s)} - meta_words()
    on_topic = [ok or (any(on_topic) and bool(topic & set(content_tokens(s)))) for s, ok in zip(found, on_topic)]
    fit = aligned(answer, question, request.inputs.get("contexts") or ())
    same = n
    if (
        fit is not None
    ):  # the contexts show where it answers: there, it is on topic if of the kind asked, however it is phrased
        on_topic = [not noncommittal and of_the_kind_asked(_new_words(s, question), question) for s in found]
        same = n if fit >= 1 else min(n - 1, round(n * fit))
    questions = (
        [
            question.strip()
            if on_topic[i % len(found)] and i < same
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
