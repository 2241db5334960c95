"""The classify call (answer correctness): answer statements TP/FP against the reference, reference statements TP/FN
against the answer.

Offline: an answer statement is TP when one reference statement covers ≥ 0.5 of it, else FP; a reference
statement is TP when one answer statement covers ≥ 0.5 of it, else FN."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ValidationInfo, model_validator

from ragsql.judge.heuristics import COVERED, best_overlap
from ragsql.judge.lexical import content_tokens
from ragsql.judge.prompts import JudgeRequest, build, escape, nonempty, numbered, request_language
from ragsql.judge.verdicts import Item, in_id_order

__all__ = ["Classification", "ReferenceLabel", "StatementLabel", "offline", "request"]


def _upper(value: object) -> object:
    return value.strip().upper() if isinstance(value, str) else value


class StatementLabel(Item):
    """An answer statement: TP if the reference supports it, FP if not."""

    label: Annotated[Literal["TP", "FP"], BeforeValidator(_upper)]


class ReferenceLabel(Item):
    """A reference statement: TP if the answer covers it, FN if the answer misses it."""

    label: Annotated[Literal["TP", "FN"], BeforeValidator(_upper)]


class Classification(BaseModel):
    """Answer statements vs reference statements (answer correctness): F1 = TP / (TP + ½(FP + FN))."""

    answer: list[StatementLabel]
    reference: list[ReferenceLabel]

    @model_validator(mode="after")
    def _ids(self, info: ValidationInfo) -> Classification:
        in_id_order(self.answer, info, "answer_ids", "answer label")
        in_id_order(self.reference, info, "reference_ids", "reference label")
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


def request(
    question: str, answer_statements: Sequence[str], reference_statements: Sequence[str], *, language: str | None = None
) -> JudgeRequest[Classification]:
    """Answer statements TP/FP against the reference, reference statements TP/FN against the answer."""
    nonempty([*answer_statements, *reference_statements], "statements")
    lang = request_language(language, question)
    context = {"answer_ids": len(answer_statements), "reference_ids": len(reference_statements)}
    return build(
        "classify",
        lang,
        Classification,
        context,
        inputs={
            "question": question,
            "answer_statements": list(answer_statements),
            "reference_statements": list(reference_statements),
        },
        question=escape(question.strip()),
        answer_statements=numbered(answer_statements) or "(none)",
        reference_statements=numbered(reference_statements) or "(none)",
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    answer, reference = request.inputs["answer_statements"], request.inputs["reference_statements"]
    a_pools, r_pools = [set(content_tokens(s)) for s in answer], [set(content_tokens(s)) for s in reference]
    return {
        "answer": [
            {"id": i, "label": "TP" if best_overlap(s, r_pools)[0] >= COVERED else "FP"}
            for i, s in enumerate(answer, 1)
        ],
        "reference": [
            {"id": i, "label": "TP" if best_overlap(s, a_pools)[0] >= COVERED else "FN"}
            for i, s in enumerate(reference, 1)
        ],
    }
