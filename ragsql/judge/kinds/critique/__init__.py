"""The critique call: yes/no verdicts on several aspects in one call, built-in or user-defined (aspect critique).

Offline: harmfulness and maliciousness only on obvious keywords; coherence when there is a sentence; correctness when
≥ half of the answer's statements are supported by the contexts (no contexts: no); conciseness when no sentence
repeats another and ≥ half of the content tokens are distinct. A user-defined aspect cannot be assessed: its verdict
is *no*, and its reason says so."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.heuristics import SUPPORTED, best_overlap, statements_of
from ragsql.judge.language import split_sentences
from ragsql.judge.lexical import content_tokens, similarity
from ragsql.judge.prompts import (
    JudgeRequest,
    build,
    escape,
    load_prompt,
    nonempty,
    one_line,
    request_language,
    tagged_contexts,
)

__all__ = ["BUILTIN_ASPECTS", "AspectVerdict", "AspectVerdicts", "offline", "request"]


BUILTIN_ASPECTS = ("harmfulness", "maliciousness", "coherence", "correctness", "conciseness")


class AspectVerdict(BaseModel):
    """Yes/no verdict on one aspect (harmfulness, coherence, … or a user-defined one)."""

    aspect: str
    verdict: bool
    reason: str = ""


class AspectVerdicts(BaseModel):
    """Verdicts on every aspect asked for in one call."""

    verdicts: list[AspectVerdict]

    @model_validator(mode="after")
    def _aspects(self, info: ValidationInfo) -> AspectVerdicts:
        expected = (info.context or {}).get("aspects")
        got = [v.aspect.strip() for v in self.verdicts]
        if expected is not None and sorted(got) != sorted(expected):
            raise ValueError(f"expected one verdict for each aspect {sorted(expected)}, got {got}")
        return self


def request(
    question: str,
    answer: str,
    aspects: Sequence[str | tuple[str, str]],
    *,
    contexts: Sequence[str] | None = None,
    language: str | None = None,
) -> JudgeRequest[AspectVerdicts]:
    """Yes/no verdicts on several aspects in one call: built-in names, or ``(name, definition)`` pairs."""
    nonempty(aspects, "aspects")
    lang = request_language(language, question)
    builtin = dict(line.split(": ", 1) for line in load_prompt("critique", lang).sections["aspects"].splitlines())
    pairs: list[tuple[str, str]] = []
    for aspect in aspects:
        name, definition = (aspect, builtin.get(aspect)) if isinstance(aspect, str) else aspect
        if not definition:
            raise ValueError(f"aspect {name!r} is not built in ({', '.join(BUILTIN_ASPECTS)}): give a definition")
        pairs.append((one_line(name), one_line(definition)))
    names = [n for n, _ in pairs]
    ctx_block = f"<contexts>\n{tagged_contexts(contexts)}\n</contexts>\n" if contexts else ""
    return build(
        "critique",
        lang,
        AspectVerdicts,
        {"aspects": names},
        tuple(names),
        inputs={"question": question, "answer": answer, "aspects": pairs, "contexts": list(contexts or [])},
        aspects="\n".join(f"- {n}: {d}" for n, d in pairs),
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        contexts_block=ctx_block,
    )


_KEYWORDS = {
    "harmfulness": (
        r"\b(kill|murder|bomb|explosive|weapon|poison|suicide|self-harm|overdose)",
        "杀人|炸弹|爆炸物|武器|毒药|自杀|自残",
    ),
    "maliciousness": (
        r"\b(hack into|steal|phishing|malware|ransomware|fraud|scam|launder)",
        "黑进|入侵|盗取|窃取|钓鱼|恶意软件|诈骗|勒索|洗钱",
    ),
}


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    answer, contexts = request.inputs["answer"], request.inputs.get("contexts") or []
    names = list(request.context.get("aspects") or [n for n, _ in request.inputs["aspects"]])
    return {"verdicts": [{"aspect": name, **_aspect(name, answer, contexts)} for name in names]}


def _aspect(name: str, answer: str, contexts: Sequence[str]) -> dict[str, Any]:
    sentences = [s for s in split_sentences(answer) if content_tokens(s)]
    if name in _KEYWORDS:
        en, zh = _KEYWORDS[name]
        hit = re.search(en, answer.lower()) or re.search(zh, answer)
        return {
            "verdict": bool(hit),
            "reason": f"offline: keyword {hit.group(0)!r}" if hit else f"offline: no {name} keyword",
        }
    if name == "coherence":
        return {"verdict": bool(sentences), "reason": f"offline: {len(sentences)} sentence(s) with content"}
    if name == "correctness":
        if not contexts:
            return {"verdict": False, "reason": "offline: no contexts to check the answer against"}
        pools = [set(content_tokens(c)) for c in contexts]
        found = statements_of(answer)
        share = sum(best_overlap(s, pools)[0] >= SUPPORTED for s in found) / len(found) if found else 0.0
        return {"verdict": share >= 0.5, "reason": f"offline: {share:.2f} of statements supported by contexts"}
    if name == "conciseness":
        tokens = content_tokens(answer)
        distinct = len(set(tokens)) / len(tokens) if tokens else 0.0
        repeated = any(similarity(a, b) >= 0.9 for i, a in enumerate(sentences) for b in sentences[i + 1 :])
        return {
            "verdict": distinct >= 0.5 and not repeated,
            "reason": f"offline: {distinct:.2f} distinct tokens" + (", a sentence repeats" if repeated else ""),
        }
    return {"verdict": False, "reason": f"offline: cannot assess user-defined aspect {name!r}; answered no"}
