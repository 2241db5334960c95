"""What a run report shows, read in one place: values with intervals, comparisons, per-query values,
the diagnosis, the worst queries with their answers and verdicts, and the judge's cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

import psycopg

from ragsql import registry
from ragsql.db import compare, review
from ragsql.db.compare import Comparison, IntervalValue, Resampling
from ragsql.db.review import AnswerTexts, answer_texts
from ragsql.db.rows import dict_rows, typed_rows, value

__all__ = ["HeadlineRow", "ReportData", "WatchPoint", "WorstQuery", "headline", "read_report", "read_watch"]

WORST = 5


@dataclass
class WorstQuery:
    """A query the diagnosis flags, with everything needed to see why."""

    qid: str
    question: str | None
    cause: str
    answer_correctness: float | None
    answer: str | None
    contexts: list[str]
    references: list[str]
    statements: list[dict]


@dataclass
class ReportData:
    run: str
    dataset: str
    compared: list[str]
    overview: dict[str, list[IntervalValue]]
    comparisons: dict[str, list[Comparison]]
    per_query: list[dict]
    diagnosis: list[dict]
    worst: list[WorstQuery]
    judge_usage: list[dict]
    config: list[tuple[str, str | None]]
    resampling: Resampling
    missing: list[str] = field(default_factory=list)
    ppi: dict[str, dict] = field(default_factory=dict)
    no_value: dict[str, dict[str, str]] = field(default_factory=dict)
    """run -> measure -> why the run has no value for it (the most common reason among its queries)."""


@dataclass(frozen=True)
class HeadlineRow:
    """A headline measure: the baseline's value, then each compared run's value and its comparison."""

    measure: str
    baseline: IntervalValue | None
    compared: dict[str, tuple[IntervalValue | None, Comparison | None]]

    def verdict(self, run: str, higher: bool) -> str:
        """'better' or 'worse' when `run` differs significantly from the baseline, else ''."""
        comparison = self.compared[run][1]
        if comparison is None or not comparison.significant or comparison.diff is None:
            return ""
        return "better" if (comparison.diff > 0) == higher else "worse"


def headline(data: ReportData) -> list[HeadlineRow]:
    """The few measures that say who won: the registry's headline metrics and measures the report has, in order."""
    names = [*registry.HEADLINE_MEASURES, *(m.name for m in registry.METRICS if m.headline)]
    index = {run: {v.measure: v for v in values} for run, values in data.overview.items()}
    pairs = {run: {c.measure: c for c in rows} for run, rows in data.comparisons.items()}
    return [
        HeadlineRow(
            name,
            index[data.run].get(name),
            {run: (index[run].get(name), pairs.get(run, {}).get(name)) for run in data.compared},
        )
        for name in names
        if any(name in values for values in index.values())
    ]


def _worst(conn: psycopg.Connection, run: str, judge: str | None) -> list[WorstQuery]:
    """The queries with the lowest answer correctness (or faithfulness when there is none), with the answer,
    its contexts and references and the judge's statement verdicts."""
    flagged = dict_rows(
        conn,
        """
        select d.qid, q.text as question, d.cause, d.answer_correctness
        from ragsql.diagnose_queries(%s, model => %s) as d
        join ragsql.run as ru on ru.name = %s
        join ragsql.query as q on q.dataset_id = ru.dataset_id and q.qid = d.qid
        where d.answer_correctness is not null and d.cause not like 'ok%%'
        order by d.answer_correctness, d.qid collate "C"
        limit %s""",
        (run, judge, run, WORST),
    )
    if not flagged:
        flagged = dict_rows(
            conn,
            """
            select f.qid, q.text as question, 'low faithfulness' as cause, null::float8 as answer_correctness
            from ragsql.generation_measure(%s, 'faithfulness', %s) as f
            join ragsql.run as ru on ru.name = %s
            join ragsql.query as q on q.dataset_id = ru.dataset_id and q.qid = f.qid
            where f.value is not null
            order by f.value, f.qid collate "C"
            limit %s""",
            (run, judge, run, WORST),
        )
    texts = answer_texts(conn, run, [row["qid"] for row in flagged])
    worst = []
    for row in flagged:
        statements = dict_rows(
            conn,
            """
            select purpose, statement_no, statement, verdict, reason, model
            from ragsql.statement_verdicts(%s, array['faithfulness', 'correctness_answer'], %s)
            where qid = %s""",
            (run, judge, row["qid"]),
        )
        text = texts.get(row["qid"], AnswerTexts(None, [], []))
        worst.append(
            WorstQuery(
                row["qid"],
                row["question"],
                row["cause"],
                row["answer_correctness"],
                text.answer,
                text.contexts,
                text.references,
                statements,
            )
        )
    return worst


def _no_value(conn: psycopg.Connection, run: str, values: list[IntervalValue], judge: str | None) -> dict[str, str]:
    """Why each measure without a value has none: its queries' most common reason (ragsql.evaluate_generation)."""
    empty = [v.measure for v in values if v.value is None]
    reasons = {m: "no query has a value" for m in empty}
    generation = [v.measure for v in values if v.value is None and v.kind == "generation"]
    if generation:
        for row in dict_rows(
            conn,
            """
            select distinct on (metric) metric, reason, count(*) as queries,
                sum(count(*)) over (partition by metric) as total
            from ragsql.evaluate_generation(%s, %s, %s)
            where value is null
            group by metric, reason
            order by metric, count(*) desc, reason collate "C"
            """,
            (run, generation, judge),
        ):
            reasons[row["metric"]] = (
                f"{row['reason'] or 'no reason recorded'} ({row['queries']} of {row['total']} queries)"
            )
    return reasons


def read_report(
    conn: psycopg.Connection, run: str, compared: list[str], resampling: Resampling, judge: str | None = None
) -> ReportData:
    """Everything the report of `run` (and its comparison with each of `compared`) shows."""
    dataset = value(
        conn.execute(
            "select d.name from ragsql.run as r join ragsql.dataset as d on d.id = r.dataset_id where r.name = %s",
            (run,),
        )
    )
    overview = {name: compare.measure_ci(conn, name, None, resampling, judge=judge) for name in [run, *compared]}
    comparisons = {name: compare.compare(conn, run, name, None, resampling, judge=judge) for name in compared}
    per_query = dict_rows(
        conn, "select measure, kind, qid, value, judge_model from ragsql.query_values(%s, null, 1, %s)", (run, judge)
    )
    has_generation = any(v.kind == "generation" for v in overview[run])
    diagnosis = (
        dict_rows(conn, "select * from ragsql.diagnose_run(%s, model => %s)", (run, judge)) if has_generation else []
    )
    missing = []
    if not has_generation:
        missing.append("no generation metrics: the run has no judged answers (ragsql generate, then ragsql judge)")
    if not any(v.kind == "retrieval" for v in overview[run]):
        missing.append("no retrieval measures: the run has no ranked results")
    return ReportData(
        run=run,
        dataset=dataset,
        compared=compared,
        overview=overview,
        comparisons=comparisons,
        per_query=per_query,
        diagnosis=diagnosis,
        worst=_worst(conn, run, judge) if has_generation else [],
        judge_usage=dict_rows(
            conn,
            "select * from ragsql.run_usage where run = any(%s) "
            'order by run collate "C", purpose, kind, model, prompt_name',
            ([run, *compared],),
        ),
        config=conn.execute("select key, value from ragsql.run_config(%s)", (run,)).fetchall(),
        resampling=resampling,
        missing=missing,
        no_value={name: _no_value(conn, name, values, judge) for name, values in overview.items()},
        ppi={
            m: p
            for m, p in review.ppi(
                conn, run, [v.measure for v in overview[run] if v.kind == "generation"], resampling.alpha, judge
            ).items()
            if p["labelled"]
        }
        if _labelled(conn, run)
        else {},
    )


def _labelled(conn: psycopg.Connection, run: str) -> bool:
    """Whether a person labelled a whole answer of the run: without one no metric has a prediction-powered
    estimate, and asking ragsql.ppi_mean would evaluate every metric again to say so."""
    return bool(
        value(
            conn.execute(
                # `select 1`, not an empty target list: Citus cannot plan that join without a column
                "select exists (select 1 from ragsql.review_label as l join ragsql.run as ru on ru.id = l.run_id "
                "where ru.name = %s and l.item = '')",
                (run,),
            )
        )
    )


@dataclass(frozen=True)
class WatchPoint:
    """One window's value of one metric of a watch, as ragsql.watch_metrics has it."""

    window_start: datetime
    window_end: datetime
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    judged: int
    skipped: int
    closed: bool

    @property
    def start(self) -> str:
        """The window's start in UTC, as its run's name spells it (NAME@2026-11-27T08:00Z)."""
        return self.window_start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def read_watch(conn: psycopg.Connection, watch: str) -> dict[str, list[WatchPoint]]:
    """Each metric's windows, oldest first, from ragsql_report.watch_metrics (the rows of ragsql.watch_metrics, which
    a reader may read too)."""
    points = typed_rows(
        conn,
        WatchPoint,
        """
        select window_start, window_end, metric, value, ci_low, ci_high, n, judged, skipped, closed
        from ragsql_report.watch_metrics
        where watch = %s
        order by metric collate "C", window_start""",
        (watch,),
    )
    series: dict[str, list[WatchPoint]] = {}
    for point in points:
        series.setdefault(point.metric, []).append(point)
    return series
