"""Typed judge verdicts: one pydantic model per prompt's JSON reply, checked against what the prompt asked.

A model is validated with a context (``model_validate(obj, context={...})``) naming what the prompt numbered:
``ids`` (how many items were numbered 1..n), ``answer_ids``/``reference_ids`` for the classification,
``aspects`` (the aspect names asked for), ``n_questions``, ``context_ids`` (the ids an answer may cite). A reply that
skips or invents an item fails validation, so the client asks once for a repair instead of storing a partial verdict.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, ValidationInfo, field_validator, model_validator

__all__ = [
    "CITATION",
    "CITATION_ID",
    "VERDICT_CLASSES",
    "AnswerAnalysis",
    "AspectVerdict",
    "Attribution",
    "Attributions",
    "AspectVerdicts",
    "CitationVerdict",
    "CitationVerdicts",
    "Claims",
    "Classification",
    "Entities",
    "GeneratedAnswer",
    "ContextVerdict",
    "ContextVerdicts",
    "GeneratedQuestions",
    "GradedRating",
    "Rating",
    "ReferenceLabel",
    "SentenceRelevance",
    "StatementLabel",
    "StatementVerdict",
    "StatementVerdicts",
    "Statements",
    "cited_ids",
    "citation_id",
    "context_citations",
]

VERDICT_CLASSES = ("supported", "partial", "unsupported", "contradicted")
CITATION_ID = re.compile(r"[\w.:#/-]+")
CITATION = re.compile(rf"\[({CITATION_ID.pattern}(?:\s*[,;]\s*{CITATION_ID.pattern})*)\]")
"""The syntax of an inline citation: ``[c12]``, ``[3]``, ``[doc-7, doc-9]``. Which bracketed ids count as citations
of an answer's contexts is `context_citations`' rule."""

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


def _upper(value: object) -> object:
    return value.strip().upper() if isinstance(value, str) else value


Verdict = Annotated[Literal["supported", "partial", "unsupported", "contradicted"], BeforeValidator(_norm_label)]


def _clean_texts(values: list[str]) -> list[str]:
    return [" ".join(v.split()) for v in values if v and v.strip()]


def _check_ids(ids: list[int], info: ValidationInfo, key: str = "ids", what: str = "item") -> None:
    expected = (info.context or {}).get(key)
    if expected is None:
        return
    if sorted(ids) != list(range(1, expected + 1)):
        missing = sorted(set(range(1, expected + 1)) - set(ids))
        extra = sorted(set(ids) - set(range(1, expected + 1)))
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        detail = ", ".join(
            f"{name} {vals}" for name, vals in (("missing", missing), ("unknown", extra), ("repeated", dupes)) if vals
        )
        raise ValueError(f"expected exactly one {what} for each id 1..{expected}: {detail}")


class Statements(BaseModel):
    """Atomic factual statements extracted from one text (answer or reference)."""

    statements: list[str]

    @field_validator("statements")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return _clean_texts(v)


class GeneratedQuestions(BaseModel):
    """Questions the answer would answer (RAGAS answer relevance) and whether the answer is non-committal."""

    questions: list[str]
    noncommittal: bool = False

    @field_validator("questions")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return _clean_texts(v)

    @model_validator(mode="after")
    def _count(self, info: ValidationInfo) -> GeneratedQuestions:
        n = (info.context or {}).get("n_questions")
        if n is not None and not self.noncommittal and len(self.questions) < n:
            raise ValueError(f"expected {n} questions, got {len(self.questions)}")
        return self


class AnswerAnalysis(GeneratedQuestions):
    """One call on an answer: its statements, n generated questions, and the non-committal flag."""

    statements: list[str]

    @field_validator("statements")
    @classmethod
    def _clean_statements(cls, v: list[str]) -> list[str]:
        return _clean_texts(v)


class StatementVerdict(BaseModel):
    """Verdict on one numbered statement against all contexts: supported/partial/unsupported/contradicted."""

    id: int
    verdict: Verdict
    reason: str = ""


class StatementVerdicts(BaseModel):
    """Verdicts on all of a text's statements, one per statement id, in id order."""

    verdicts: list[StatementVerdict]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> StatementVerdicts:
        _check_ids([v.id for v in self.verdicts], info, what="verdict")
        self.verdicts.sort(key=lambda v: v.id)
        return self


class StatementLabel(BaseModel):
    """An answer statement: TP if the reference supports it, FP if not."""

    id: int
    label: Annotated[Literal["TP", "FP"], BeforeValidator(_upper)]


class ReferenceLabel(BaseModel):
    """A reference statement: TP if the answer covers it, FN if the answer misses it."""

    id: int
    label: Annotated[Literal["TP", "FN"], BeforeValidator(_upper)]


class Classification(BaseModel):
    """Answer statements vs reference statements (answer correctness): F1 = TP / (TP + ½(FP + FN))."""

    answer: list[StatementLabel]
    reference: list[ReferenceLabel]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> Classification:
        _check_ids([a.id for a in self.answer], info, "answer_ids", "answer label")
        _check_ids([r.id for r in self.reference], info, "reference_ids", "reference label")
        self.answer.sort(key=lambda a: a.id)
        self.reference.sort(key=lambda r: r.id)
        return self

    @property
    def tp(self) -> int:
        """Answer statements the reference supports."""
        return sum(a.label == "TP" for a in self.answer)

    @property
    def fp(self) -> int:
        """Answer statements the reference does not support."""
        return sum(a.label == "FP" for a in self.answer)

    @property
    def fn(self) -> int:
        """Reference statements the answer misses."""
        return sum(r.label == "FN" for r in self.reference)


class ContextVerdict(BaseModel):
    """Whether one retrieved context was useful for arriving at the reference (or the answer)."""

    id: int
    useful: bool
    reason: str = ""


class ContextVerdicts(BaseModel):
    """Usefulness of every retrieved context of a sample, judged in one call (LLM context precision)."""

    verdicts: list[ContextVerdict]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> ContextVerdicts:
        _check_ids([v.id for v in self.verdicts], info, what="context verdict")
        self.verdicts.sort(key=lambda v: v.id)
        return self


class SentenceRelevance(BaseModel):
    """Ids of the numbered context sentences relevant to the question (context relevance = |relevant| / n)."""

    relevant: list[int]

    @field_validator("relevant")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        return sorted(set(v))

    @model_validator(mode="after")
    def _range(self, info: ValidationInfo) -> SentenceRelevance:
        n = (info.context or {}).get("ids")
        bad = [i for i in self.relevant if n is not None and not 1 <= i <= n]
        if bad:
            raise ValueError(f"sentence ids must be within 1..{n}: got {bad}")
        return self


class Rating(BaseModel):
    """Answer relevance on the seed's 1-5 scale, normalised as (score - 1) / 4."""

    score: Annotated[int, Field(ge=1, le=5)]
    reason: str = ""


class YesNo(BaseModel):
    """The judge's yes (true) or no on the question of a yes/no metric (ragsql/registry.py `yes_no`)."""

    verdict: bool
    reason: str = ""


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


class CitationVerdict(BaseModel):
    """Whether the cited contexts support one cited answer sentence."""

    id: int
    supported: bool
    reason: str = ""


class CitationVerdicts(BaseModel):
    """Verdicts on all of an answer's citations (citation validity)."""

    verdicts: list[CitationVerdict]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> CitationVerdicts:
        _check_ids([v.id for v in self.verdicts], info, what="citation verdict")
        self.verdicts.sort(key=lambda v: v.id)
        return self


class Entities(BaseModel):
    """Named entities of one text, each once in first-seen order (RAGAS context entity recall)."""

    entities: list[str]

    @field_validator("entities")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(_clean_texts(v)))


class Claims(BaseModel):
    """Standalone claims of one text, decomposed at the requested atomicity and coverage (RAGAS factual
    correctness)."""

    claims: list[str]

    @field_validator("claims")
    @classmethod
    def _clean(cls, v: list[str]) -> list[str]:
        return _clean_texts(v)


class Attribution(BaseModel):
    """The contexts (ids) that on their own support one numbered statement; empty when none does."""

    id: int
    contexts: list[int]

    @field_validator("contexts")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        return sorted(set(v))


class Attributions(BaseModel):
    """Per-context support of every statement of a text, one entry per statement id (noise sensitivity)."""

    verdicts: list[Attribution]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> Attributions:
        _check_ids([v.id for v in self.verdicts], info, what="entry")
        n = (info.context or {}).get("contexts")
        bad = sorted({c for v in self.verdicts for c in v.contexts if n is not None and not 1 <= c <= n})
        if bad:
            raise ValueError(f"context ids must be within 1..{n}: got {bad}")
        self.verdicts.sort(key=lambda v: v.id)
        return self


class GradedRating(BaseModel):
    """One judge pass's 0/1/2 rating (RAGAS's NVIDIA metrics: response groundedness, context relevance)."""

    rating: Annotated[int, Field(ge=0, le=2)]


def citation_id(docno: str | None, position: int) -> str:
    """The id a context is cited by, as the generator writes it in ``[id]``: its docno, or its 1-based position
    when it has no docno or one that cannot be written in brackets."""
    return docno if docno and CITATION_ID.fullmatch(docno) else str(position)


def context_citations(text: str, ids: Collection[str]) -> list[str]:
    """The citations in `text`, in order: every bracketed id that is one of `ids` (the contexts' `citation_id`s).
    Any other bracketed text is not a citation: a Wikipedia footnote ``[1]`` copied into an answer whose contexts
    are cited by docno cites nothing."""
    return [i for m in CITATION.finditer(text) for i in (x.strip() for x in re.split(r"[,;]", m.group(1))) if i in ids]


def cited_ids(text: str) -> list[str]:
    """The ids cited inline in `text` (``[c12]``, ``[a, b]``), each once, in order."""
    return list(dict.fromkeys(i.strip() for m in CITATION.finditer(text) for i in re.split(r"[,;]", m.group(1))))


class GeneratedAnswer(BaseModel):
    """A generated answer with inline ``[id]`` citations; `citations` ends up as every id it cites, in order,
    and each must be one of the contexts given (``context_ids``)."""

    answer: str
    citations: list[str] = []

    @field_validator("answer")
    @classmethod
    def _nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the answer is empty")
        return v.strip()

    @model_validator(mode="after")
    def _cited(self, info: ValidationInfo) -> GeneratedAnswer:
        cited = list(dict.fromkeys([*cited_ids(self.answer), *(c.strip() for c in self.citations if c.strip())]))
        given = (info.context or {}).get("context_ids")
        if given is not None and (unknown := [c for c in cited if c not in given]):
            raise ValueError(f"citations {unknown} name no given context; cite only {list(given)}")
        self.citations = cited
        return self


class SynthEvidence(BaseModel):
    """One quote a synthesized question stands on: the passage's id and text copied from it."""

    id: str
    quote: str

    @field_validator("quote")
    @classmethod
    def _quoted(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("an evidence quote is empty")
        return v.strip()


class SynthQuestion(BaseModel):
    """A synthesized question with its reference answer and evidence; each evidence id must be a passage given
    (``passage_ids``), and a multi-hop or comparison question (``kind``) must quote two passages."""

    question: str
    answer: str
    evidence: list[SynthEvidence]

    @field_validator("question", "answer")
    @classmethod
    def _nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the question and the answer must not be empty")
        return v.strip()

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
