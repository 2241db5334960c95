"""`ragsql scores`: retrieval and generation metrics of a run in one table."""

from __future__ import annotations

import dataclasses

import click

from ragsql import db
from ragsql.cli.options import judge_option, resampling_options
from ragsql.cli.output import FORMATS, render
from ragsql.db import compare, generation, metrics, names, review, scores
from ragsql.db.compare import Resampling

__all__ = ["scores_command"]


_NO_JUDGE = {
    "text_metric": "answer and reference texts",
    "context_id_metric": "context ids and gold labels",
    "string_context_metric": "context texts and gold texts",
}


def _source(row: dict, no_judge: dict[str, str]) -> str:
    """Which judge and embedder a value comes from; anything offline says so; a metric computed with no judge
    says what it reads."""
    if row["metric"] in no_judge:
        return _NO_JUDGE[no_judge[row["metric"]]]
    parts = [p for p in (row.get("judge_model"), row.get("judge_embedder")) if p]
    label = " + ".join(parts)
    return f"OFFLINE {label}" if any(p.startswith("offline") for p in parts) else label


def _run(fmt: str) -> list[str]:
    """The run column of JSON and CSV rows, as `ragsql metrics` gives it (a table names the run in its title)."""
    return [] if fmt == "table" else ["run"]


@click.command("scores")
@click.option("--run", "run", required=True, help="Name of the run.")
@click.option("--per-query", is_flag=True, help="One row per query and metric, with the reason a value is NULL.")
@judge_option()
@click.option(
    "--ci",
    is_flag=True,
    help="Add a percentile bootstrap interval to every run value (ci_low, ci_high) and, for generation "
    "metrics with human labels (ragsql review), the prediction-powered mean and interval (ppi).",
)
@resampling_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def scores_command(
    run: str, per_query: bool, judge: str | None, ci: bool, resamples: int, seed: float, alpha: float, fmt: str
) -> None:
    """Retrieval measures (from gold labels) and generation metrics (from stored verdicts) of a run.

    Generation values come from one judge model and prompt version per metric (the newest
    LLM judge's; the offline judge's only when no LLM judged, or with --judge offline);
    "OFFLINE" marks values of the offline heuristic judge or embedder. NULL values have a
    reason (see --per-query); they never count as 0.
    """
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        text = generation.no_judge_metrics(conn)
        if per_query:
            rows = [
                {**dataclasses.asdict(v), "kind": "retrieval", "reason": None, "source": "gold labels"}
                for v in metrics.query_values(conn, run, None, 1)
            ]
            rows += [
                {**r, "measure": r["metric"], "kind": "generation", "source": _source(r, text)}
                for r in generation.query_generation(conn, run, judge=judge)
            ]
            render(rows, [*_run(fmt), "qid", "kind", "measure", "value", "reason", "source"], fmt, title=f"run {run}")
            return
        rows = [
            {**r, "source": "gold labels" if r["kind"] == "retrieval" else _source(r, text)}
            for r in scores.run_scores(conn, run, judge=judge)
        ]
        if ci and rows:
            intervals = {
                i.measure: i
                for i in compare.measure_ci(
                    conn, run, [r["measure"] for r in rows], Resampling(resamples, seed, alpha), judge=judge
                )
            }
            corrected = review.ppi(conn, run, [r["measure"] for r in rows if r["kind"] == "generation"], alpha, judge)
            for r in rows:
                r["ci_low"], r["ci_high"] = intervals[r["measure"]].ci_low, intervals[r["measure"]].ci_high
                p = corrected.get(r["measure"], {})
                r["ppi"], r["ppi_low"], r["ppi_high"], r["labelled"] = (
                    p.get("estimate"),
                    p.get("ci_low"),
                    p.get("ci_high"),
                    p.get("labelled"),
                )
    extra = ["ci_low", "ci_high"] if ci else []
    if ci and (fmt != "table" or any(r.get("labelled") for r in rows)):
        extra += ["ppi", "ppi_low", "ppi_high", "labelled"]
    render(
        rows,
        [*_run(fmt), "kind", "measure", "value", *extra, "queries", "covered", "missing", "source"],
        fmt,
        title=f"run {run} — retrieval from gold labels, generation from judge verdicts (NULLs are not averaged)",
    )
