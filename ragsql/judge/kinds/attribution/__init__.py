"""The attribution call (RAGAS noise sensitivity): which contexts, each on its own, support each statement; one call per
text.

Offline: a statement is supported by each context that on its own makes `heuristics.support` say supported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationInfo, model_validator

from ragsql.judge.heuristics import support
from ragsql.judge.prompts import JudgeRequest, against_contexts
from ragsql.judge.verdicts import IdSet, Item, Numbered, check_within

__all__ = ["Attribution", "Attributions", "offline", "request"]


class Attribution(Item):
    """The contexts (ids) that on their own support one numbered statement; empty when none does."""

    contexts: IdSet


class Attributions(Numbered[Attribution]):
    """Per-context support of every statement of a text, one entry per statement id (noise sensitivity)."""

    what = "entry"

    @model_validator(mode="after")
    def _contexts(self, info: ValidationInfo) -> Attributions:
        check_within([c for v in self.verdicts for c in v.contexts], (info.context or {}).get("contexts"), "context")
        return self


def request(
    statement_list: Sequence[str], contexts: Sequence[str], *, language: str | None = None
) -> JudgeRequest[Attributions]:
    """Which contexts, each on its own, support each statement: one call per text (noise sensitivity)."""
    return against_contexts("attribution", Attributions, statement_list, contexts, language, number_contexts=True)


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    contexts = request.inputs["contexts"]
    return {
        "verdicts": [
            {"id": i, "contexts": [c for c, ctx in enumerate(contexts, 1) if support(s, [ctx])[0] == "supported"]}
            for i, s in enumerate(request.inputs["statements"], 1)
        ]
    }
