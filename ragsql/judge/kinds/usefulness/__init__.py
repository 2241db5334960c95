"""The usefulness call (LLM context precision): every context of a sample judged useful or not for the reference (else
the answer), in one call.

Offline: a context is useful when it covers ≥ 0.6 of some statement of the reference (else the answer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsql.judge.heuristics import SUPPORTED, statements_of
from ragsql.judge.lexical import content_tokens, coverage
from ragsql.judge.prompts import (
    JudgeRequest,
    build_numbered,
    escape,
    nonempty,
    request_language,
    tagged,
    tagged_contexts,
)
from ragsql.judge.verdicts import Item, Numbered

__all__ = ["ContextVerdict", "ContextVerdicts", "offline", "request"]


class ContextVerdict(Item):
    """Whether one retrieved context was useful for arriving at the reference (or the answer)."""

    useful: bool
    reason: str = ""


class ContextVerdicts(Numbered[ContextVerdict]):
    """Usefulness of every retrieved context of a sample, judged in one call (LLM context precision)."""

    what = "context verdict"


_TARGETS = {
    "en": {"reference": "reference answer", "answer": "answer"},
    "zh": {"reference": "标准答案", "answer": "回答"},
}


def request(
    question: str,
    contexts: Sequence[str],
    *,
    reference: str | None = None,
    answer: str | None = None,
    language: str | None = None,
) -> JudgeRequest[ContextVerdicts]:
    """Every context of a sample judged useful or not for the reference (else the answer), in one call."""
    nonempty(contexts, "contexts")
    if reference is None and answer is None:
        raise ValueError("usefulness needs a reference or an answer")
    lang = request_language(language, question)
    tag, target_text = ("reference", reference) if reference is not None else ("answer", answer or "")
    return build_numbered(
        "usefulness",
        lang,
        ContextVerdicts,
        contexts,
        inputs={"question": question, "contexts": list(contexts), "reference": reference, "answer": answer},
        question=escape(question.strip()),
        target=_TARGETS[lang][tag],
        target_block=tagged(tag, target_text),
        contexts=tagged_contexts(contexts),
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
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
