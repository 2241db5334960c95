"""The synthesize call (`ragsql synth`): one eval question of a kind (single | multi | comparison) from passages, with
its answer and exact quotes as evidence.

Offline: a cloze of the most fact-laden sentence of each passage (two for multi), its blanked term the answer and
the sentence the evidence; comparison needs an LLM."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.language import split_sentences
from ragsql.judge.lexical import content_tokens, key_terms
from ragsql.judge.prompts import JudgeRequest, build, escape, nonempty, request_language, tagged_contexts
from ragsql.judge.verdicts import nonblank

__all__ = ["SYNTH_KINDS", "SynthEvidence", "SynthQuestion", "offline", "request"]


SYNTH_KINDS = ("single", "multi", "comparison")

_SYNTH_LANGUAGE = {"en": "English", "zh": "Chinese (中文)"}


class SynthEvidence(BaseModel):
    """One quote a synthesized question stands on: the passage's id and text copied from it."""

    id: str
    quote: Annotated[str, nonblank("an evidence quote is empty")]


class SynthQuestion(BaseModel):
    """A synthesized question with its reference answer and evidence; each evidence id must be a passage given
    (``passage_ids``), and a multi-hop or comparison question (``kind``) must quote two passages."""

    question: Annotated[str, nonblank("the question and the answer must not be empty")]
    answer: Annotated[str, nonblank("the question and the answer must not be empty")]
    evidence: list[SynthEvidence]

    @model_validator(mode="after")
    def _evidence(self, info: ValidationInfo) -> SynthQuestion:
        given = (info.context or {}).get("passage_ids")
        if given is not None and (unknown := [e.id for e in self.evidence if e.id not in given]):
            raise ValueError(f"evidence ids {unknown} name no given passage; use {list(given)}")
        needed = 2 if (info.context or {}).get("kind") in ("multi", "comparison") else 1
        if len({e.id for e in self.evidence}) < needed:
            raise ValueError(
                f"a {(info.context or {}).get('kind', 'single')} question needs evidence from {needed} passage(s)"
            )
        return self


def request(
    passages: Sequence[tuple[str, str]],
    kind: str,
    *,
    language: str,
    style: str = "plain",
) -> JudgeRequest[SynthQuestion]:
    """One eval question of `kind` (single | multi | comparison) from `(id, text)` passages, in `language`
    (en | zh) and `style`, with its answer and exact quotes as evidence."""
    nonempty(passages, "passages")
    if kind not in SYNTH_KINDS:
        raise ValueError(f"kind must be one of {SYNTH_KINDS}, got {kind!r}")
    ids = [str(i) for i, _ in passages]
    lang = request_language(language)
    return build(
        "synthesize",
        lang,
        SynthQuestion,
        {"passage_ids": ids, "kind": kind},
        tuple(ids),
        inputs={"passages": [(i, t) for i, (_, t) in zip(ids, passages)], "kind": kind, "style": style},
        kind=kind,
        language=_SYNTH_LANGUAGE[lang],
        style=escape(style),
        passages=tagged_contexts([t for _, t in passages], ids),
    )


_BLANK = "____"


def _cloze(text: str) -> tuple[str, str, str] | None:
    """(sentence, sentence with a blank, the blanked term) for the sentence of `text` with the most numbers and
    names (a noun, else its longest content word, when none has one); None when no sentence can be asked about."""
    best: tuple[int, int, str, str] | None = None
    for order, sentence in enumerate(s for s in split_sentences(text) if s in text and 8 <= len(s) <= 300):
        terms = key_terms(sentence)
        strict = [t for t, is_strict in terms.items() if is_strict]
        for term in strict or list(terms):
            found = re.search(re.escape(term), sentence, re.IGNORECASE)
            if found and len(term) >= 2 or (found and term.isdigit()):
                score = (len(strict), -order)
                if best is None or score > best[:2]:
                    best = (*score, sentence, found.group(0))
                break
    if best is None:  # no number, name or noun: the longest content word of the first sentence that has one
        for sentence in (s for s in split_sentences(text) if s in text and 8 <= len(s) <= 300):
            words = sorted((w for w in re.findall(r"[^\W\d_]{6,}", sentence) if content_tokens(w)), key=len)
            if words:
                best = (0, 0, sentence, words[-1])
                break
    if best is None:
        return None
    sentence, term = best[2], best[3]
    return sentence, sentence.replace(term, _BLANK, 1), term


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """Extractive questions, deterministic: a cloze of the most fact-laden sentence of each passage (two for
    multi), its blanked term the answer and the sentence the evidence. Comparison needs an LLM."""
    kind, zh = request.inputs["kind"], request.language == "zh"
    if kind == "comparison":
        raise ValueError("the offline synthesizer writes single and multi questions; comparison needs an LLM")
    passages = request.inputs["passages"][: 2 if kind == "multi" else 1]
    clozes: list[tuple[str, tuple[str, str, str]]] = []
    for pid, text in passages:
        if (cloze := _cloze(text)) is None:
            raise ValueError("a passage has no sentence with a number, name or noun to ask about")
        clozes.append((pid, cloze))
    if len(clozes) == 1:
        ((pid, (sentence, blanked, term)),) = clozes
        question = ("填空：" if zh else "Fill in the blank: ") + blanked
        return {"question": question, "answer": term, "evidence": [{"id": pid, "quote": sentence}]}
    question = (
        "填空：" + "".join(f"（{i}）{c[1]}" for i, (_, c) in enumerate(clozes, 1))
        if zh
        else "Fill in the blanks: " + " ".join(f"({i}) {c[1]}" for i, (_, c) in enumerate(clozes, 1))
    )
    return {
        "question": question,
        "answer": ("；" if zh else "; ").join(c[2] for _, c in clozes),
        "evidence": [{"id": pid, "quote": c[0]} for pid, c in clozes],
    }
