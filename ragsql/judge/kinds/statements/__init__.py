"""The statements call: the factual statements of one text (an answer or a reference), one call per text.

Offline: `heuristics.statements_of`: sentences, cut at Chinese clause marks (，；) and ``;``; a clause of fewer than 3
content tokens stays with its neighbour, a fragment with none is dropped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ragsql.judge.heuristics import statements_of
from ragsql.judge.prompts import JudgeRequest, build, escape, request_language, tagged
from ragsql.judge.verdicts import Texts

__all__ = ["Statements", "offline", "request"]


class Statements(BaseModel):
    """Atomic factual statements extracted from one text (answer or reference)."""

    statements: Texts


def request(text: str, *, question: str | None = None, language: str | None = None) -> JudgeRequest[Statements]:
    """Extract the factual statements of one text (an answer or a reference); one call per text."""
    lang = request_language(language, question or text)
    block = tagged("question", question) + "\n" if question else ""
    return build(
        "statements",
        lang,
        Statements,
        inputs={"text": text, "question": question},
        question_block=block,
        text=escape(text.strip()),
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    return {"statements": statements_of(request.inputs["text"], request.inputs.get("question"))}
