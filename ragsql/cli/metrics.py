"""`ragsql metrics`: retrieval measures of a run, per run or per query; generation metrics when named."""

from __future__ import annotations

import dataclasses

import click
import psycopg

from ragsql import db
from ragsql.cli.options import judge_option, rel_level_option, resampling_options
from ragsql.cli.output import FORMATS, render, warn
from ragsql.cli.specs import metric_names
from ragsql.db import compare, generation, gold, metrics, names
from ragsql.db.compare import Resampling
from ragsql.errors import UsageError

__all__ = ["metrics_command"]


@click.command("metrics")
@click.option("--run", "run", required=True, help="Name of the run to evaluate.")
@click.option(
    "--measures",
    default=None,
    metavar='"P@5 nDCG@10 ..."',
    help="Space- or comma-separated measures (default: ragsql.default_measure): Success@k R@k P@k "
    "RR@k nDCG@k nDCG_burges@k AP AP@k ContextPrecision@k Rprec F1@k Bpref infAP ERR@k RBP Judged@k "
    "NumRet NumRel NumRelRet; without @k the whole ranking; ir_measures' parameters: "
    "P(rel=2)@10, RBP(p=0.9). Or generation metrics alone (faithfulness, token_f1, "
    "factual_correctness(mode=f1), noise_sensitivity(mode=relevant), aspect:NAME, …; see "
    "ragsql.generation_metric), read from stored verdicts as `ragsql scores` reads them.",
)
@rel_level_option()
@click.option("--answerable-only", is_flag=True, help="Average over queries with at least one relevant item only.")
@click.option("--per-query", is_flag=True, help="One row per query and measure.")
@click.option("--ci", is_flag=True, help="Add a percentile bootstrap interval to every run value (ci_low, ci_high).")
@judge_option("the generation metrics of --measures read")
@resampling_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def metrics_command(
    run: str,
    measures: str | None,
    rel_level: int,
    answerable_only: bool,
    per_query: bool,
    ci: bool,
    judge: str | None,
    resamples: int,
    seed: float,
    alpha: float,
    fmt: str,
) -> None:
    """Retrieval measures of a run, computed in SQL with trec_eval -c semantics.

    The run value is the mean over every judged query of the dataset: a judged
    query missing from the run scores 0; queries without judgments are ignored.
    """
    if ci and answerable_only:
        raise UsageError("--ci covers every judged query: it cannot be combined with --answerable-only")
    asked = metric_names(measures)
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        if asked and generation.generation_names(conn, asked):
            _generation_metrics(conn, run, asked, judge, per_query, answerable_only or ci, fmt)
            return
        unmatched = gold.run_unmatched(conn, run)
        if unmatched:
            warn(unmatched.line())
        try:
            if per_query:
                rows = [dataclasses.asdict(v) for v in metrics.query_values(conn, run, asked, rel_level)]
                if answerable_only:
                    rows = [r for r in rows if r["relevant"] > 0]
                render(rows, ["run", "qid", "measure", "value"], fmt, title=f"run {run}")
                return
            values = metrics.run_values(conn, run, asked, rel_level)
            intervals = (
                {
                    i.measure: i
                    for i in compare.measure_ci(
                        conn, run, [v.measure for v in values], Resampling(resamples, seed, alpha), rel_level
                    )
                }
                if ci and values
                else {}
            )
        except psycopg.errors.InvalidParameterValue as exc:  # the measures named are the only parameter checked
            hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
            raise UsageError(f"--measures: {exc.diag.message_primary}{hint}") from None
    rows = []
    for v in values:
        row = dataclasses.asdict(v)
        if answerable_only:
            row["value"], row["queries"] = v.value_answerable, v.answerable
        if ci:
            row["ci_low"], row["ci_high"] = intervals[v.measure].ci_low, intervals[v.measure].ci_high
        rows.append(row)
    columns = ["run", "measure", "value"] + (["ci_low", "ci_high"] if ci else []) + ["queries"]
    if fmt == "table":
        columns += ["answerable", "missing"]
    render(rows, columns, fmt, title=None if fmt != "table" else _title(run, values, rel_level, answerable_only))


def _generation_metrics(
    conn: psycopg.Connection,
    run: str,
    asked: list[str],
    judge: str | None,
    per_query: bool,
    retrieval_only: bool,
    fmt: str,
) -> None:
    """Generation metrics named in --measures, as `ragsql scores` computes them (ragsql.summarize_generation)."""
    if len(generation.generation_names(conn, asked)) < len(asked):
        raise UsageError(
            "--measures mixes generation metrics and retrieval measures: ask for them separately, or "
            "see both with `ragsql scores`"
        )
    if retrieval_only:
        raise UsageError(
            "--ci and --answerable-only apply to retrieval measures; `ragsql scores --ci` gives "
            "generation metrics their intervals"
        )
    try:
        if per_query:
            rows = [{**r, "measure": r["metric"]} for r in generation.query_generation(conn, run, asked, judge)]
            render(rows, ["run", "qid", "measure", "value", "reason"], fmt, title=f"run {run}")
            return
        rows = [{**r, "measure": r["metric"]} for r in generation.run_generation(conn, run, asked, judge)]
    except psycopg.errors.InvalidParameterValue as exc:
        raise UsageError(f"--measures: {exc.diag.message_primary}") from None
    render(
        rows,
        ["run", "measure", "value", "queries", "covered", "missing", "judge_model"],
        fmt,
        title=f"run {run} — generation metrics from stored verdicts (NULLs are not averaged)",
    )


def _title(run: str, values: list[metrics.RunValue], rel_level: int, answerable_only: bool) -> str:
    if not values:
        return f"run {run}: no judged queries"
    v = values[0]
    scope = f"{v.answerable} answerable queries" if answerable_only else f"{v.queries} judged queries"
    return (
        f"run {run} — {scope} ({v.no_relevant} without a relevant item, {v.missing} missing from the run), "
        f"relevance level {rel_level}"
    )
