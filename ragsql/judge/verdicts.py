"""What the typed judge verdicts share (each call's own reply model is in its folder, ``kinds/<name>/``): checks
of numbered items, cleaned texts, the citation syntax, and the reply shapes of several calls (yes/no, 0/1/2).

A model is validated with a context (``model_validate(obj, context={...})``) naming what the prompt numbered:
``ids`` (how many items were numbered 1..n), ``answer_ids``/``reference_ids`` for the classification,
``aspects`` (the aspect names asked for), ``n_questions``, ``context_ids`` (the ids an answer may cite). A reply that
skips or invents an item fails validation, so the client asks once for a repair instead of storing a partial verdict.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated, ClassVar, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, Field, ValidationInfo, model_validator

__all__ = [
    "CITATION",
    "CITATION_ID",
    "GradedRating",
    "IdSet",
    "Item",
    "Numbered",
    "Texts",
    "YesNo",
    "check_within",
    "cited_ids",
    "citation_id",
    "context_citations",
    "in_id_order",
    "nonblank",
]

CITATION_ID = re.compile(r"[\w.:#/-]+")
CITATION = re.compile(rf"\[({CITATION_ID.pattern}(?:\s*[,;]\s*{CITATION_ID.pattern})*)\]")
"""The syntax of an inline citation: ``[c12]``, ``[3]``, ``[doc-7, doc-9]``. Which bracketed ids count as citations
of an answer's contexts is `context_citations`' rule."""


def _clean_texts(values: list[str]) -> list[str]:
    return [" ".join(v.split()) for v in values if v and v.strip()]


Texts = Annotated[list[str], AfterValidator(_clean_texts)]
"""Texts with their whitespace collapsed, blank ones dropped."""
IdSet = Annotated[list[int], AfterValidator(lambda ids: sorted(set(ids)))]
"""Ids, each once, in ascending order."""


def nonblank(message: str) -> AfterValidator:
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


def check_within(ids: Collection[int], n: int | None, what: str) -> None:
    bad = sorted({i for i in ids if n is not None and not 1 <= i <= n})
    if bad:
        raise ValueError(f"{what} ids must be within 1..{n}: got {bad}")


class Item(BaseModel):
    """One entry of a reply about numbered items: the item's id."""

    id: int


_I = TypeVar("_I", bound=Item)


def in_id_order(items: list[_I], info: ValidationInfo, key: str, what: str) -> None:
    """Check `items` hold one entry for each id the prompt numbered (``info.context[key]``), then sort them."""
    _check_ids([i.id for i in items], info, key, what)
    items.sort(key=lambda i: i.id)


class Numbered(BaseModel, Generic[_I]):
    """A reply with one entry (`what`) for each numbered item, in id order."""

    what: ClassVar[str]
    verdicts: list[_I]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> Numbered[_I]:
        in_id_order(self.verdicts, info, "ids", self.what)
        return self


class YesNo(BaseModel):
    """The judge's yes (true) or no on the question of a yes/no metric (ragsql/registry.py `yes_no`)."""

    verdict: bool
    reason: str = ""


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
