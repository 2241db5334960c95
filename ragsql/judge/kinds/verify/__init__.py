"""The verify call: all of a text's statements against all of a sample's contexts, in one call (faithfulness, context
recall, and the checks of factual correctness and noise sensitivity).

Offline: `heuristics.support`: a statement's best overlap with any one context: ≥ 0.6 supported, ≥ 0.35 partial, else
unsupported; supported-level overlap with a negation (不/没/非/无/未/否, not/no/never/n't) on one side only of the
statement and its closest context sentence is contradicted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from ragsql.judge.heuristics import support
from ragsql.judge.prompts import JudgeRequest, against_contexts
from ragsql.judge.verdicts import Item, Numbered

__all__ = ["VERDICT_CLASSES", "StatementVerdict", "StatementVerdicts", "offline", "request"]


VERDICT_CLASSES = ("supported", "partial", "unsupported", "contradicted")

# Judges answering a Chinese prompt sometimes write the class in Chinese.
_VERDICT_ALIASES = {
    "支持": "supported",
    "完全支持": "supported",
    "部分支持": "partial",
    "部分": "partial",
    "不支持": "unsupported",
    "无依据": "unsupported",
    "矛盾": "contradicted",
}


def _norm_label(value: object) -> object:
    if isinstance(value, str):
        text = value.strip()
        return _VERDICT_ALIASES.get(text, text.lower() if text.isascii() else text)
    return value


Verdict = Annotated[Literal["supported", "partial", "unsupported", "contradicted"], BeforeValidator(_norm_label)]


class StatementVerdict(Item):
    """Verdict on one numbered statement against all contexts: supported/partial/unsupported/contradicted."""

    verdict: Verdict
    reason: str = ""


class StatementVerdicts(Numbered[StatementVerdict]):
    """Verdicts on all of a text's statements, one per statement id, in id order."""

    what = "verdict"


def request(
    statement_list: Sequence[str], contexts: Sequence[str], *, language: str | None = None
) -> JudgeRequest[StatementVerdicts]:
    """All of a text's statements against all of a sample's contexts, in one call (faithfulness, recall)."""
    return against_contexts("verify", StatementVerdicts, statement_list, contexts, language)


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    contexts = request.inputs["contexts"]
    verdicts = []
    for i, statement in enumerate(request.inputs["statements"], 1):
        verdict, reason = support(statement, contexts)
        verdicts.append({"id": i, "verdict": verdict, "reason": reason})
    return {"verdicts": verdicts}
