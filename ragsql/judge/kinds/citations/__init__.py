"""The citations call (citation validity): each cited answer sentence against the text of the contexts it cites, all in
one call.

Offline: supported when the cited texts cover ≥ 0.6 of the sentence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsql.judge.heuristics import SUPPORTED
from ragsql.judge.lexical import content_tokens, coverage
from ragsql.judge.prompts import JudgeRequest, build_numbered, escape, nonempty, one_line, request_language
from ragsql.judge.verdicts import Item, Numbered

__all__ = ["CitationVerdict", "CitationVerdicts", "offline", "request"]


class CitationVerdict(Item):
    """Whether the cited contexts support one cited answer sentence."""

    supported: bool
    reason: str = ""


class CitationVerdicts(Numbered[CitationVerdict]):
    """Verdicts on all of an answer's citations (citation validity)."""

    what = "citation verdict"


def request(
    claims: Sequence[tuple[str, Sequence[str]]], *, language: str | None = None
) -> JudgeRequest[CitationVerdicts]:
    """Each cited answer sentence against the text of the contexts it cites, all in one call."""
    nonempty(claims, "citations")
    lang = request_language(language, " ".join(s for s, _ in claims))
    rendered = "\n".join(
        f'<claim id="{i}">\n<sentence>{one_line(sentence)}</sentence>\n'
        + "\n".join(f"<cited>\n{escape(c.strip())}\n</cited>" for c in cited)
        + "\n</claim>"
        for i, (sentence, cited) in enumerate(claims, 1)
    )
    return build_numbered(
        "citations",
        lang,
        CitationVerdicts,
        claims,
        inputs={"claims": [(s, list(c)) for s, c in claims]},
        claims=rendered,
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    verdicts = []
    for i, (sentence, cited) in enumerate(request.inputs["claims"], 1):
        score = coverage(sentence, {t for c in cited for t in content_tokens(c)})
        verdicts.append({"id": i, "supported": score >= SUPPORTED, "reason": f"offline: cited text covers {score:.2f}"})
    return {"verdicts": verdicts}
