"""The rows a judge task stores: one typed row per verdict table (its fields are the table's columns, in order),
and one insert for any mix of them (`store`). A row already stored (the same key) is kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from typing import ClassVar

import psycopg
from psycopg import sql

__all__ = [
    "AspectVerdict",
    "CitationVerdict",
    "ContextVerdict",
    "EntityExtraction",
    "GeneratedQuestion",
    "GradedVerdict",
    "Rating",
    "Row",
    "RubricVerdict",
    "SentenceVerdict",
    "StatementAttribution",
    "StatementVerdict",
    "Verdict",
    "YesNoVerdict",
    "store",
]


@dataclass(frozen=True)
class Row:
    """A row of one of ragsql's verdict tables (`TABLE`)."""

    TABLE: ClassVar[str]


@dataclass(frozen=True)
class Verdict(Row):
    """A verdict on one answer of a run, by one judge model and prompt version."""

    run_id: int
    query_id: int
    model: str
    prompt_version: str


@dataclass(frozen=True)
class StatementVerdict(Verdict):
    TABLE = "statement_verdict"
    purpose: str
    extraction_id: int
    statement_no: int
    verdict: str
    reason: str | None
    call_id: int


@dataclass(frozen=True)
class ContextVerdict(Verdict):
    TABLE = "context_verdict"
    position: int
    useful: bool
    reason: str
    call_id: int


@dataclass(frozen=True)
class SentenceVerdict(Verdict):
    TABLE = "context_sentence_verdict"
    position: int
    sentence_no: int
    sentence: str
    relevant: bool
    call_id: int


@dataclass(frozen=True)
class GeneratedQuestion(Verdict):
    TABLE = "generated_question"
    n: int
    question: str
    noncommittal: bool
    call_id: int


@dataclass(frozen=True)
class YesNoVerdict(Verdict):
    TABLE = "yes_no_verdict"
    metric: str
    verdict: bool
    reason: str
    call_id: int


@dataclass(frozen=True)
class Rating(Verdict):
    TABLE = "rating"
    criterion: str
    score: int
    reason: str
    call_id: int


@dataclass(frozen=True)
class AspectVerdict(Verdict):
    TABLE = "aspect_verdict"
    aspect: str
    definition_hash: str
    verdict: bool
    reason: str
    call_id: int


@dataclass(frozen=True)
class CitationVerdict(Verdict):
    """Citation 0 (docno, supports, reason, call_id None): a sentence without citation."""

    TABLE = "citation_verdict"
    sentence_no: int
    citation_no: int
    sentence: str
    docno: str | None
    supports: bool | None
    reason: str | None
    call_id: int | None


@dataclass(frozen=True)
class StatementAttribution(Verdict):
    TABLE = "statement_attribution"
    extraction_id: int
    statement_no: int
    position: int
    supported: bool
    call_id: int


@dataclass(frozen=True)
class GradedVerdict(Verdict):
    """A pass whose call failed: score and call_id None, its error as the reason."""

    TABLE = "graded_verdict"
    metric: str
    judge_pass: int
    score: int | None
    reason: str | None
    call_id: int | None


@dataclass(frozen=True)
class RubricVerdict(Verdict):
    TABLE = "rubric_verdict"
    rubric: str
    definition_hash: str
    score: int
    reason: str
    call_id: int


@dataclass(frozen=True)
class EntityExtraction(Row):
    """The entities of a text, kept once per (text, model, prompt version) for every run."""

    TABLE = "entity_extraction"
    text_hash: str
    model: str
    prompt_version: str
    entities: list[str]
    call_id: int


async def store(conn: psycopg.AsyncConnection, rows: Sequence[Row]) -> None:
    """Insert the rows, table by table in the order they first come; a row already stored is kept."""
    by_type: dict[type[Row], list[Row]] = {}
    for row in rows:
        by_type.setdefault(type(row), []).append(row)
    async with conn.cursor() as cur:
        for kind, same in by_type.items():
            columns = [f.name for f in fields(kind)]
            query = sql.SQL("insert into {} ({}) values ({}) on conflict do nothing").format(
                sql.Identifier("ragsql", kind.TABLE),
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            )
            await cur.executemany(query, [astuple(r) for r in same])
