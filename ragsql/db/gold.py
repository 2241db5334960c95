"""Gold evidence that matches nothing (ragsql.run_unmatched_gold, ragsql.dataset_unmatched_gold), summed up as
the one-line warning import, retrieve and metrics print, so no query leaves the measures unsaid."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from ragsql.db import names
from ragsql.db.rows import value

__all__ = ["UnmatchedGold", "dataset_unmatched", "require_corpus", "run_unmatched"]

FIRST = 3
"""How many unmatched items a warning names."""


@dataclass(frozen=True)
class UnmatchedGold:
    """Unmatched gold items, the queries they belong to, the queries left with no gold (dropped from every measure),
    the first few (qid, evidence, reason), and the SQL that lists them all."""

    items: int = 0
    queries: int = 0
    dropped: int = 0
    first: list[tuple[str, str, str]] = field(default_factory=list)
    query: str = ""

    def __bool__(self) -> bool:
        return self.items > 0

    def line(self) -> str:
        """The one-line warning, without its `warning:` prefix (empty when everything matched)."""
        if not self.items:
            return ""
        dropped = (
            f"; {self.dropped} of these queries have no gold left and are left out of every measure"
            if self.dropped
            else ""
        )
        shown = "; ".join(f"{qid}: {reason}" for qid, _, reason in self.first)
        more = f"; … {self.items - len(self.first)} more" if self.items > len(self.first) else ""
        items, queries = _count(self.items, "gold evidence item"), _count(self.queries, "query", "queries")
        return (
            f"{items} of {queries} match{'es' if self.items == 1 else ''} nothing{dropped} "
            f"({shown}{more}); all: {self.query}"
        )

    def as_json(self) -> dict:
        """The warning's numbers for a command's JSON output."""
        return {
            "items": self.items,
            "queries": self.queries,
            "dropped_queries": self.dropped,
            "first": [{"qid": q, "evidence": e, "reason": r} for q, e, r in self.first],
            "sql": self.query,
        }


def run_unmatched(conn: psycopg.Connection, run: str) -> UnmatchedGold:
    """The run's gold evidence that matches nothing it is judged on (see ragsql.run_unmatched_gold)."""
    rows = conn.execute("select qid, evidence, reason, dropped from ragsql.run_unmatched_gold(%s)", (run,)).fetchall()
    query = f"select * from ragsql.run_unmatched_gold({_literal(run)})"
    return _summary(rows, {qid for qid, *_, dropped in rows if dropped}, query)


def dataset_unmatched(conn: psycopg.Connection, dataset: str, corpus: str | None = None) -> UnmatchedGold:
    """The dataset's gold evidence that matches nothing in `corpus`, or (None) in any corpus the database holds;
    nothing when it holds none (see ragsql.dataset_unmatched_gold)."""
    if corpus is None and value(conn.execute("select not exists (select from ragsql.corpus)")):
        return UnmatchedGold()
    rows = conn.execute(
        "select qid, evidence, reason from ragsql.dataset_unmatched_gold(%s, %s)", (dataset, corpus)
    ).fetchall()
    args = _literal(dataset) + ("" if corpus is None else f", {_literal(corpus)}")
    return _summary(rows, set(), f"select * from ragsql.dataset_unmatched_gold({args})")


def require_corpus(conn: psycopg.Connection, corpus: str | None) -> None:
    """InputError naming the corpora there are when `corpus` is given and unknown."""
    if corpus is not None:
        names.corpus_id(conn, corpus)


def _summary(rows: list[tuple], dropped: set[str], query: str) -> UnmatchedGold:
    return UnmatchedGold(len(rows), len({r[0] for r in rows}), len(dropped), [r[:3] for r in rows[:FIRST]], query)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _literal(text: str) -> str:
    """A SQL string literal of `text`, for the query a warning shows (never executed by ragsql)."""
    return "'" + text.replace("'", "''") + "'"
