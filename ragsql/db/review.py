"""Human review: the sheet of sampled queries with the judge's values and verdicts, and the labels people
give back (table ragsql.review_label; statistics in sql/functions/60_review.sql)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from ragsql import registry
from ragsql.db.rows import dict_rows

__all__ = [
    "LABEL_COLUMNS",
    "AnswerTexts",
    "SheetItem",
    "answer_texts",
    "answered_qids",
    "judged_statements",
    "known_metrics",
    "labelled",
    "ppi",
    "ppi_compare",
    "review_sheet",
    "store_labels",
]

STATEMENT_PURPOSES = {p: m.name for m in registry.METRICS for p in m.reviewed_statements}
"""The statement verdicts a review sheet shows, by purpose, and the metric each feeds (from the registry)."""
# a label to store: (run, qid, metric, item, reviewer, score, verdict, judge_model, judge_value, judge_verdict, source)
LABEL_COLUMNS = (
    "run",
    "qid",
    "metric",
    "item",
    "reviewer",
    "score",
    "verdict",
    "judge_model",
    "judge_value",
    "judge_verdict",
    "source",
)


@dataclass(frozen=True)
class SheetItem:
    """One sampled query: what the reviewer reads and what the judge said about it."""

    run: str
    qid: str
    question: str | None
    answer: str | None
    references: list[str]
    contexts: list[str]
    metrics: dict[str, dict]
    statements: list[dict]


@dataclass(frozen=True)
class AnswerTexts:
    """A query's answer in a run, the contexts it was given (in prompt order) and the reference answers."""

    answer: str | None
    contexts: list[str]
    references: list[str]


def answer_texts(conn: psycopg.Connection, run: str, qids: list[str]) -> dict[str, AnswerTexts]:
    """The answer, contexts and references of each of `qids` that has an answer in the run."""
    rows = dict_rows(
        conn,
        """
        select q.qid, a.text as answer,
               array(select c.text from ragsql.answer_context as c
                     where c.run_id = a.run_id and c.query_id = a.query_id and c.text is not null
                     order by c.position) as contexts,
               array(select r.text from ragsql.reference_answer as r
                     where r.query_id = a.query_id order by r.position) as refs
        from ragsql.answer as a
        join ragsql.run as ru on ru.id = a.run_id
        join ragsql.query as q on q.id = a.query_id
        where ru.name = %s and q.qid = any (%s)""",
        (run, qids),
    )
    return {r["qid"]: AnswerTexts(r["answer"], list(r["contexts"]), list(r["refs"])) for r in rows}


def review_sheet(
    conn: psycopg.Connection, run: str, sample: int, stratify: str | None, seed: float, judge: str | None
) -> list[SheetItem]:
    """The sampled queries (ragsql.review_sample) with their texts, metric values and statement verdicts."""
    qids = [
        q
        for (q,) in conn.execute(
            "select qid from ragsql.review_sample(%s, %s, %s, %s, %s)", (run, sample, stratify, seed, judge)
        )
    ]
    values = dict_rows(
        conn,
        "select e.qid, e.metric, e.value, e.judge_model, e.reason from ragsql.evaluate_generation(%s, "
        "model => %s) as e where e.qid = any (%s)",
        (run, judge, qids),
    )
    verdicts = dict_rows(
        conn,
        "select v.* from ragsql.statement_verdicts(%s, %s, %s) as v where v.qid = any (%s)",
        (run, list(STATEMENT_PURPOSES), judge, qids),
    )
    questions = dict(
        conn.execute(
            "select q.qid, q.text from ragsql.query as q join ragsql.run as r on r.dataset_id = q.dataset_id "
            "where r.name = %s and q.qid = any (%s)",
            (run, qids),
        ).fetchall()
    )
    texts = answer_texts(conn, run, qids)
    sheet = []
    for qid in qids:
        metrics = {
            v["metric"]: {"judge": v["value"], "judge_model": v["judge_model"], "label": None}
            for v in values
            if v["qid"] == qid
        }
        statements = [
            {
                "item": f"{v['purpose']}:{v['statement_no']}",
                "metric": STATEMENT_PURPOSES[v["purpose"]],
                "statement": v["statement"],
                "judge": v["verdict"],
                "judge_model": v["model"],
                "reason": v["reason"],
                "label": None,
            }
            for v in verdicts
            if v["qid"] == qid
        ]
        text = texts[qid]
        sheet.append(
            SheetItem(run, qid, questions.get(qid), text.answer, text.references, text.contexts, metrics, statements)
        )
    return sheet


def labelled(conn: psycopg.Connection, keys: Sequence[tuple[str, str, str, str, str]]) -> dict[tuple, str]:
    """Of the (run, qid, metric, item, reviewer) keys, those already labelled: key -> where the label came from."""
    if not keys:
        return {}
    columns = list(zip(*keys))
    rows = conn.execute(
        """
        select ru.name, q.qid, l.metric, l.item, l.reviewer, coalesce(l.source, 'an earlier import')
        from ragsql.review_label as l
        join ragsql.run as ru on ru.id = l.run_id
        join ragsql.query as q on q.id = l.query_id
        where (ru.name, q.qid, l.metric, l.item, l.reviewer) in
              (select * from unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[]))
        """,
        [list(c) for c in columns],
    ).fetchall()
    return {tuple(r[:5]): r[5] for r in rows}


def answered_qids(conn: psycopg.Connection, run: str) -> set[str]:
    """The qids that have an answer in the run (the only ones a label can be about)."""
    return {
        q
        for (q,) in conn.execute(
            "select q.qid from ragsql.answer as a join ragsql.query as q on q.id = a.query_id "
            "join ragsql.run as ru on ru.id = a.run_id where ru.name = %s and a.text is not null",
            (run,),
        )
    }


def judged_statements(conn: psycopg.Connection, run: str) -> set[tuple[str, str, str]]:
    """(qid, item, judge model) of every statement verdict stored for the run (item = purpose:statement_no)."""
    return {
        tuple(r)
        for r in conn.execute(
            "select distinct q.qid, v.purpose || ':' || v.statement_no, v.model from ragsql.statement_verdict as v "
            "join ragsql.query as q on q.id = v.query_id join ragsql.run as ru on ru.id = v.run_id where ru.name = %s",
            (run,),
        )
    }


def known_metrics(conn: psycopg.Connection) -> set[str]:
    """Generation metric names a label may be about (aspects spelled aspect:<name>)."""
    return {
        m
        for (m,) in conn.execute(
            "select metric from ragsql.generation_metric union all select 'aspect:' || name from ragsql.aspect"
        )
    }


def store_labels(conn: psycopg.Connection, labels: Sequence[tuple]) -> int:
    """Insert labels given as LABEL_COLUMNS tuples (in the caller's transaction); returns how many."""
    with conn.cursor() as cur:
        cur.executemany(
            """
            insert into ragsql.review_label (run_id, query_id, metric, item, reviewer, score, verdict, judge_model,
                                             judge_value, judge_verdict, source)
            select ru.id, q.id, %(metric)s, %(item)s, %(reviewer)s, %(score)s, %(verdict)s, %(judge_model)s,
                   %(judge_value)s, %(judge_verdict)s, %(source)s
            from ragsql.run as ru join ragsql.query as q on q.dataset_id = ru.dataset_id and q.qid = %(qid)s
            where ru.name = %(run)s
            """,
            [dict(zip(LABEL_COLUMNS, label)) for label in labels],
        )
    return len(labels)


def ppi_compare(
    conn: psycopg.Connection, baseline: str, run: str, metrics: Sequence[str], alpha: float, judge: str | None = None
) -> dict[str, dict]:
    """Each metric's prediction-powered difference run - baseline with its interval (ragsql.ppi_compare), for
    the metrics both runs have human labels of: {metric: row}."""
    rows = dict_rows(
        conn,
        "select p.* from unnest(%s::text[]) as m(metric), "
        "lateral ragsql.ppi_compare(%s, %s, m.metric, %s, %s) as p where p.method is not null",
        (list(metrics), baseline, run, alpha, judge),
    )
    return {r["metric"]: r for r in rows}


def ppi(
    conn: psycopg.Connection, run: str, metrics: Sequence[str], alpha: float, judge: str | None = None
) -> dict[str, dict]:
    """Each metric's prediction-powered mean and interval (ragsql.ppi_mean): {metric: row}."""
    rows = dict_rows(
        conn,
        "select p.* from unnest(%s::text[]) as m(metric), lateral ragsql.ppi_mean(%s, m.metric, %s, %s) as p",
        (list(metrics), run, alpha, judge),
    )
    return {r["metric"]: r for r in rows}
