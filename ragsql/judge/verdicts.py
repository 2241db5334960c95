"""Typed judge verdicts: one pydantic model per prompt's JSON reply, checked against what the prompt asked.

A model is validated with a context (``model_validate(obj, context={...})``) naming what the prompt numbered:
``ids`` (how many items were numbered 1..n), ``answer_ids``/``reference_ids`` for the classification,
``aspects`` (the aspect names asked for), ``n_questions``, ``context_ids`` (the ids an answer may cite). A reply that
skips or invents an item fails validation, so the client asks once for a repair instead of storing a partial verdict.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated, ClassVar, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationInfo, model_validator

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


Texts = Annotated[list[str], AfterValidator(_clean_texts)]
"""Texts with their whitespace collapsed, blank ones dropped."""
IdSet = Annotated[list[int], AfterValidator(lambda ids: sorted(set(ids)))]
"""Ids, each once, in ascending order."""


def _nonblank(message: str) -> AfterValidator:
    """A text stripped of surrounding whitespace; `message` when nothing is left."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(message)
        return value.strip()

    return AfterValidator(check)


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


def _check_within(ids: Collection[int], n: int | None, what: str) -> None:
    bad = sorted({i for i in ids if n is not None and not 1 <= i <= n})
    if bad:
        raise ValueError(f"{what} ids must be within 1..{n}: got {bad}")


class _Item(BaseModel):
    """One entry of a reply about numbered items: the item's id."""

    id: int


_I = TypeVar("_I", bound=_Item)


def _in_id_order(items: list[_I], info: ValidationInfo, key: str, what: str) -> None:
    """Check `items` hold one entry for each id the prompt numbered (``info.context[key]``), then sort them."""
    _check_ids([i.id for i in items], info, key, what)
    items.sort(key=lambda i: i.id)


class _Numbered(BaseModel, Generic[_I]):
    """A reply with one entry (`what`) for each numbered item, in id order."""

    what: ClassVar[str]
    verdicts: list[_I]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> _Numbered[_I]:
        _in_id_order(self.verdicts, info, "ids", self.what)
        return self


class Statements(BaseModel):
    """Atomic factual statements extracted from one text (answer or reference)."""

    statements: Texts


class GeneratedQuestions(BaseModel):
    """Questions the answer would answer (RAGAS answer relevance) and whether the answer is non-committal."""

    questions: Texts
    noncommittal: bool = False

    @model_validator(mode="after")
    def _count(self, info: ValidationInfo) -> GeneratedQuestions:
        n = (info.context or {}).get("n_questions")
        if n is not None and not self.noncommittal and len(self.questions) < n:
            raise ValueError(f"expected {n} questions, got {len(self.questions)}")
        return self


class AnswerAnalysis(GeneratedQuestions):
    """One call on an answer: its statements, n generated questions, and the non-committal flag."""

    statements: Texts


class StatementVerdict(_Item):
    """Verdict on one numbered statement against all contexts: supported/partial/unsupported/contradicted."""

    verdict: Verdict
    reason: str = ""


class StatementVerdicts(_Numbered[StatementVerdict]):
    """Verdicts on all of a text's statements, one per statement id, in id order."""

    what = "verdict"


class StatementLabel(_Item):
    """An answer statement: TP if the reference supports it, FP if not."""

    label: Annotated[Literal["TP", "FP"], BeforeValidator(_upper)]


class ReferenceLabel(_Item):
    """A reference statement: TP if the answer covers it, FN if the answer misses it."""

    label: Annotated[Literal["TP", "FN"], BeforeValidator(_upper)]


class Classification(BaseModel):
    """Answer statements vs reference statements (answer correctness): F1 = TP / (TP + ½(FP + FN))."""

    answer: list[StatementLabel]
    reference: list[ReferenceLabel]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> Classification:
        _in_id_order(self.answer, info, "answer_ids", "answer label")
        _in_id_order(self.reference, info, "reference_ids", "reference label")
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


class ContextVerdict(_Item):
    """Whether one retrieved context was useful for arriving at the reference (or the answer)."""

    useful: bool
    reason: str = ""


class ContextVerdicts(_Numbered[ContextVerdict]):
    """Usefulness of every retrieved context of a sample, judged in one call (LLM context precision)."""

    what = "context verdict"


class SentenceRelevance(BaseModel):
    """Ids of the numbered context sentences relevant to the question (context relevance = |relevant| / n)."""

    relevant: IdSet

    @model_validator(mode="after")
    def _range(self, info: ValidationInfo) -> SentenceRelevance:
        _check_within(self.relevant, (info.context or {}).get("ids"), "sentence")
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


class CitationVerdict(_Item):
    """Whether the cited contexts support one cited answer sentence."""

    supported: bool
    reason: str = ""


class CitationVerdicts(_Numbered[CitationVerdict]):
    """Verdicts on all of an answer's citations (citation validity)."""

    what = "citation verdict"


class Entities(BaseModel):
    """Named entities of one text, each once in first-seen order (RAGAS context entity recall)."""

    entities: Annotated[Texts, AfterValidator(lambda texts: list(dict.fromkeys(texts)))]


class Claims(BaseModel):
    """Standalone claims of one text, decomposed at the requested atomicity and coverage (RAGAS factual
    correctness)."""

    claims: Texts


class Attribution(_Item):
    """The contexts (ids) that on their own support one numbered statement; empty when none does."""

    contexts: IdSet


class Attributions(_Numbered[Attribution]):
    """Per-context support of every statement of a text, one entry per statement id (noise sensitivity)."""

    what = "entry"

    @model_validator(mode="after")
    def _contexts(self, info: ValidationInfo) -> Attributions:
        _check_within([c for v in self.verdicts for c in v.contexts], (info.context or {}).get("contexts"), "context")
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

    answer: Annotated[str, _nonblank("the answer is empty")]
    citations: list[str] = []

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
    quote: Annotated[str, _nonblank("an evidence quote is empty")]


class SynthQuestion(BaseModel):
    """A synthesized question with its reference answer and evidence; each evidence id must be a passage given
    (``passage_ids``), and a multi-hop or comparison question (``kind``) must quote two passages."""

    question: Annotated[str, _nonblank("the question and the answer must not be empty")]
    answer: Annotated[str, _nonblank("the question and the answer must not be empty")]
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
