"""The groundedness call (RAGAS response groundedness, NVIDIA): one of two judge passes rating 0/1/2 how far the
contexts support the answer.

Offline: pass 1 rates by the answer's statements against all contexts (all supported 2, some supported or
partial 1, else 0); pass 2 by the share of the answer's content tokens the contexts hold (≥ 0.6: 2, ≥ 0.35: 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsql.judge.heuristics import PARTIAL, SUPPORTED, graded_coverage, statements_of, support
from ragsql.judge.prompts import JudgeRequest, two_pass
from ragsql.judge.verdicts import GradedRating

__all__ = ["offline", "request"]


def request(
    answer: str, contexts: Sequence[str], *, judge_pass: int, language: str | None = None
) -> JudgeRequest[GradedRating]:
    """One of RAGAS's two judge passes rating 0/1/2 how far the contexts support the answer."""
    return two_pass("groundedness", "answer", answer, contexts, judge_pass, language)


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    answer, contexts = request.inputs["answer"], request.inputs["contexts"]
    if request.inputs["judge_pass"] == 2:
        return graded_coverage(answer, contexts, SUPPORTED, PARTIAL)
    verdicts = [support(s, contexts)[0] for s in statements_of(answer)]
    if verdicts and all(v == "supported" for v in verdicts):
        return {"rating": 2}
    return {"rating": 1 if any(v in ("supported", "partial") for v in verdicts) else 0}
