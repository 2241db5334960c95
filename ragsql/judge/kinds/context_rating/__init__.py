"""The context_rating call (RAGAS context relevance, NVIDIA): one of two judge passes rating 0/1/2 how relevant the
contexts are to the question.

Offline: pass 1 rates 2 when a context sentence is relevant to the question (`heuristics.relevant`), 1 when one
shares a content token with the question, else 0; pass 2 by the share of the question's content tokens the contexts
hold (≥ 0.5: 2, ≥ 0.25: 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsql.judge.heuristics import ANSWERS, RELEVANT, graded_coverage, relevant
from ragsql.judge.language import split_sentences
from ragsql.judge.lexical import content_tokens
from ragsql.judge.prompts import JudgeRequest, two_pass
from ragsql.judge.verdicts import GradedRating

__all__ = ["offline", "request"]


def request(
    question: str, contexts: Sequence[str], *, judge_pass: int, language: str | None = None
) -> JudgeRequest[GradedRating]:
    """One of RAGAS's two judge passes rating 0/1/2 how relevant the contexts are to the question."""
    return two_pass("context_rating", "question", question, contexts, judge_pass, language)


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    question, contexts = request.inputs["question"], request.inputs["contexts"]
    if request.inputs["judge_pass"] == 2:
        return graded_coverage(question, contexts, RELEVANT, ANSWERS)
    sentences = [s for c in contexts for s in split_sentences(c)]
    if any(relevant(s, question) for s in sentences):
        return {"rating": 2}
    asked = set(content_tokens(question))
    return {"rating": 1 if any(asked & set(content_tokens(s)) for s in sentences) else 0}
