"""The sentence_relevance call (context relevance): context sentences (split here, numbered across contexts) judged
relevant to the question or not.

Offline: a context sentence is relevant when it covers ≥ 0.5 of the question's content tokens (see
`heuristics.relevant`), or when it goes on from a relevant sentence of the same context and names one thing asked about;
with a relevance model, meaning decides too (`offline`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.heuristics import mentions, relevant
from ragsql.judge.language import split_sentences
from ragsql.judge.prompts import JudgeRequest, build_numbered, escape, nonempty, numbered, request_language
from ragsql.judge.verdicts import IdSet, check_within

__all__ = ["NEAR", "SAME", "SentenceRelevance", "offline", "relevance_items", "request", "worth_weighing"]


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


# multilingual-e5-small cosines (query: question, passage: sentence) for sentence relevance: below NEAR a
# sentence is off topic whatever words it shares; from SAME on it is relevant whatever words it uses. Chosen on
# the dev and held-out pairs and SQuAD / CMRC pairs (bench/judge_pairs.py); 0.84 or 0.82 for NEAR costs 0.01-0.03.
NEAR, SAME = 0.83, 0.885


def relevance_items(request: JudgeRequest[Any]) -> tuple[tuple[int, str], ...]:
    """The (context number, sentence) pairs a sentence-relevance request asks about, in order."""
    return request.items or tuple(
        (ci, s) for ci, c in enumerate(request.inputs["contexts"], 1) for s in split_sentences(c)
    )


def offline(request: JudgeRequest[Any], cosines: Sequence[float | None] | None = None) -> dict[str, Any]:
    """The context sentences relevant to the question, by words (`relevant`, or `mentions` right after a relevant
    sentence of the same context). With `cosines` (an embedding model's question–sentence similarities, one per
    item; None where `worth_weighing` said no) meaning decides too: a sentence far in meaning (< NEAR) is not
    relevant whatever words it shares, and one very close (≥ SAME) that names something asked about is relevant
    whatever else it says."""
    question, items = request.inputs["question"], relevance_items(request)
    chosen: list[int] = []
    for i, (context, sentence) in enumerate(items, 1):
        follows = bool(chosen) and chosen[-1] == i - 1 and items[i - 2][0] == context
        lexical = relevant(sentence, question) or (follows and mentions(sentence, question))
        cosine = None if cosines is None else cosines[i - 1]
        if lexical if cosine is None else (lexical and cosine >= NEAR or cosine >= SAME):
            chosen.append(i)
    return {"relevant": chosen}


def worth_weighing(sentence: str, question: str) -> bool:
    """Whether meaning could change a sentence's relevance: it is relevant by its words or names something the
    question asks about. Others are not relevant, and are not embedded (the e5 model is the judge's slow part)."""
    return mentions(sentence, question) or relevant(sentence, question)
