"""The rubric call (RAGAS rubrics score): the answer scored 1-5 by five score descriptions.

Offline: the rubric's text cannot be read; the score is 1 + round(4 q), q the share of the reference's content
tokens the answer holds (a rubric with reference), else the share of the answer's statements the contexts support,
else the share of the question's content tokens in the answer — and the reason says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsql.judge.heuristics import statements_of, support
from ragsql.judge.kinds.rating import Rating
from ragsql.judge.lexical import content_tokens, coverage
from ragsql.judge.prompts import JudgeRequest, build, escape, one_line, request_language, tagged, tagged_contexts

__all__ = ["offline", "request"]


def request(
    question: str,
    answer: str,
    descriptions: Sequence[str],
    *,
    references: Sequence[str] = (),
    contexts: Sequence[str] = (),
    language: str | None = None,
) -> JudgeRequest[Rating]:
    """RAGAS's rubrics score: the answer scored 1-5 by five score descriptions, with the reference answers and
    contexts to judge it by when given."""
    if len(descriptions) != 5 or not all(d.strip() for d in descriptions):
        raise ValueError("a rubric has five non-empty score descriptions, for scores 1 to 5")
    lang = request_language(language, question)
    extra = "".join(
        [
            *(tagged("reference", r) + "\n" for r in references),
            f"<contexts>\n{tagged_contexts(contexts)}\n</contexts>\n" if contexts else "",
        ]
    )
    return build(
        "rubric",
        lang,
        Rating,
        inputs={
            "question": question,
            "answer": answer,
            "descriptions": list(descriptions),
            "references": list(references),
            "contexts": list(contexts),
        },
        rubric="\n".join(f"score{i}_description: {one_line(d)}" for i, d in enumerate(descriptions, 1)),
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        extra_block=extra,
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    answer, references, contexts = request.inputs["answer"], request.inputs["references"], request.inputs["contexts"]
    if references:
        share, basis = max(coverage(r, set(content_tokens(answer))) for r in references), "reference tokens in it"
    elif contexts and statements_of(answer):
        found = statements_of(answer)
        share = sum(support(s, contexts)[0] == "supported" for s in found) / len(found)
        basis = "its statements the contexts support"
    else:
        share, basis = coverage(request.inputs["question"], set(content_tokens(answer))), "question tokens in it"
    return {"score": 1 + round(4 * share), "reason": f"offline: the rubric is not read; {share:.2f} of {basis}"}
