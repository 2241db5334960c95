"""The claims call (RAGAS factual correctness): the claim decomposition of one text at an atomicity and a coverage.

Offline: atomicity high gives the offline statements (clauses), low the content sentences; coverage low keeps only
the pieces that hold a number or a name (all of them when none does), high keeps every piece."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from ragsql.judge.heuristics import statements_of, strip_filler
from ragsql.judge.language import split_sentences
from ragsql.judge.lexical import content_tokens, key_terms
from ragsql.judge.prompts import JudgeRequest, build, escape, request_language
from ragsql.judge.verdicts import Texts

__all__ = ["CLAIM_SETTINGS", "Claims", "offline", "request"]


CLAIM_SETTINGS = ("low", "high")
"""RAGAS's atomicity and coverage levels of claim decomposition (factual correctness); its default is low, low."""


class Claims(BaseModel):
    """Standalone claims of one text, decomposed at the requested atomicity and coverage (RAGAS factual
    correctness)."""

    claims: Texts


def request(
    text: str, *, atomicity: str = "low", coverage: str = "low", language: str | None = None
) -> JudgeRequest[Claims]:
    """RAGAS's claim decomposition of one text; the settings are part of the prompt version the claims are
    stored under (``claims.v1[atomicity=low,coverage=low]``), so claims of two settings live side by side."""
    if atomicity not in CLAIM_SETTINGS or coverage not in CLAIM_SETTINGS:
        raise ValueError(f"atomicity and coverage must be low or high, got {atomicity!r} and {coverage!r}")
    lang = request_language(language, text)
    request = build(
        "claims",
        lang,
        Claims,
        inputs={"text": text, "atomicity": atomicity, "coverage": coverage},
        atomicity=atomicity,
        coverage=coverage,
        text=escape(text.strip()),
    )
    return dataclasses.replace(
        request, prompt_version=f"{request.prompt_version}[atomicity={atomicity},coverage={coverage}]"
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    text = request.inputs["text"]
    if request.inputs["atomicity"] == "high":
        pieces = statements_of(text)
    else:
        pieces = [
            strip_filler(s)
            for s in split_sentences(text)
            if not s.rstrip().endswith(("?", "？")) and content_tokens(strip_filler(s))
        ]
    if request.inputs["coverage"] == "low":
        factual = [p for p in pieces if any(strict for strict in key_terms(p).values())]
        pieces = factual or pieces
    return {"claims": pieces}
