"""The rating call: the seed's 1-5 answer relevance rating.

Offline: 1 + round(4 × similarity) clipped to 1..5 (the similarity is computed by the caller: `OfflineJudge`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from ragsql.judge.prompts import JudgeRequest, build, escape, request_language

__all__ = ["Rating", "offline", "request"]


class Rating(BaseModel):
    """Answer relevance on the seed's 1-5 scale, normalised as (score - 1) / 4."""

    score: Annotated[int, Field(ge=1, le=5)]
    reason: str = ""


def request(question: str, answer: str, *, language: str | None = None) -> JudgeRequest[Rating]:
    """The seed's 1-5 answer relevance rating."""
    lang = request_language(language, question)
    return build(
        "rating",
        lang,
        Rating,
        inputs={"question": question, "answer": answer},
        question=escape(question.strip()),
        answer=escape(answer.strip()),
    )


def offline(score: float) -> dict[str, Any]:
    """The 1-5 rating for a question-answer similarity in [0, 1]."""
    return {"score": min(5, max(1, 1 + round(4 * score))), "reason": f"offline: similarity {score:.2f}"}
