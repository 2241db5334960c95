"""`ragsql compare`: is a run really better than another? Differences with intervals and p-values."""

from __future__ import annotations

import dataclasses

import click
import psycopg
from rich.table import Table

from ragsql import db
from ragsql.cli.options import judge_option, measures_option, rel_level_option, resampling_options
from ragsql.cli.output import FORMATS, print_table, render, warn
from ragsql.cli.specs import int4, metric_names
from ragsql.db import compare, names, review
from ragsql.db.compare import Comparison, Resampling
from ragsql.errors import InputError, UsageError

__all__ = ["compare_command", "pair_table", "split_measures"]

COLUMNS = [
    "baseline",
    "run",
    "measure",
    "kind",
    "baseline_value",
    "value",
    "diff",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "p_t",
    "significant",
    "queries",
    "improved",
    "regressed",
    "tied",
    "left_out",
    "judge_model",
    "note",
]
PPI_COLUMNS = ["ppi_baseline", "ppi_value", "ppi_diff", "ppi_low", "ppi_high", "ppi_labelled", "ppi_method"]
QUESTION_WIDTH = 70


def split_measures(measures: str | None) -> list[str] | None:
    return metric_names(measures)


def _compared(
    conn: psycopg.Connection,
    baseline: str,
    run: str,
    measures: list[str] | None,
    resampling: Resampling,
    rel_level: int,
    judge: str | None,
) -> list[Comparison]:
    """ragsql.compare with its errors as the CLI contract's: data problems exit 1, option problems 2."""
    try:
        conn.execute("select ragsql._comparable_runs(%s, %s)", (baseline, run))
    except psycopg.errors.InvalidParameterValue as exc:
        raise InputError(exc.diag.message_primary or str(exc)) from None
    try:
        rows = compare.compare(conn, baseline, run, measures, resampling, rel_level, judge)
    except psycopg.errors.InvalidParameterValue as exc:
        hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
        message = exc.diag.message_primary or str(exc)
        if "no measure to compare" in message:
            raise InputError(message) from None
        raise UsageError(f"--measures: {message}{hint}") from None
    if rows and all(r.queries == 0 for r in rows):
        raise InputError(f'runs "{baseline}" and "{run}" have no query measured in both')
    return rows


def _ppi_fields(row: dict | None) -> dict:
    """The prediction-powered columns of a compare row (None where the runs have no human labels)."""
    if row is None:
        return dict.fromkeys(PPI_COLUMNS)
    return {
        "ppi_baseline": row["baseline_estimate"],
        "ppi_value": row["estimate"],
        "ppi_diff": row["diff"],
        "ppi_low": row["ci_low"],
        "ppi_high": row["ci_high"],
        "ppi_labelled": row["labelled_both"],
        "ppi_method": row["method"],
    }


def _ppi_table(baseline: str, run: str, rows: dict[str, dict], alpha: float) -> Table:
    """The prediction-powered differences of the metrics people labelled in both runs."""
    table = Table(
        title=f"{run} vs {baseline}, prediction-powered with human labels ({1 - alpha:.0%} interval)",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    for name in ("metric", baseline, run, "diff", "interval", "labelled", "method"):
        table.add_column(name, justify="left" if name in ("metric", "method") else "right")
    for metric, r in rows.items():
        table.add_row(
            metric,
            _number(r["baseline_estimate"]),
            _number(r["estimate"]),
            _number(r["diff"]),
            f"[{_number(r['ci_low'])}, {_number(r['ci_high'])}]",
            f"{r['labelled_both']} both ({r['labelled_a']}, {r['labelled_b']})",
            r["method"],
        )
    return table


def _marker(row: Comparison, higher: dict[str, bool]) -> str:
    """▲ significantly better than the baseline, ▼ significantly worse (by the metric's direction)."""
    if not row.significant or not row.diff:
        return ""
    return "▲" if (row.diff > 0) == higher.get(row.measure, True) else "▼"


def _number(value: float | None, digits: int = 4) -> str:
    return "NULL" if value is None else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "NULL" if value is None else (f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}")


def pair_table(rows: list[Comparison], alpha: float, higher: dict[str, bool]) -> Table:
    baseline, run = rows[0].baseline, rows[0].run
    table = Table(
        title=f"{run} against {baseline}: diff = {run} − {baseline}, {1 - alpha:.0%} bootstrap interval, "
        f"randomization p (Holm-adjusted), t-test p",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    for name in ("measure", baseline, run, "diff", "interval", "p", "p_adj", "p_t", "", "+/−/=", "queries", "judge"):
        table.add_column(name, justify="left" if name in ("measure", "judge", "interval", "+/−/=") else "right")
    for r in rows:
        interval = "" if r.ci_low is None else f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]"
        judge = r.judge_model or ""
        if judge.startswith("offline"):
            judge = "OFFLINE " + judge
        queries = str(r.queries) + (f" ({r.left_out} left out)" if r.left_out else "")
        table.add_row(
            r.measure,
            _number(r.baseline_value),
            _number(r.value),
            "NULL" if r.diff is None else f"{r.diff:+.4f}",
            interval,
            _p(r.p_value),
            _p(r.p_adjusted),
            _p(r.p_t),
            _marker(r, higher),
            f"{r.improved}/{r.regressed}/{r.tied}",
            queries,
            judge,
        )
    return table


def _runs_table(results: list[list[Comparison]], higher: dict[str, bool]) -> Table:
    """Like ranx's report: one column per run, each against the first, significant differences marked."""
    baseline = results[0][0].baseline
    table = Table(title=f"each run against {baseline}", title_justify="left", show_edge=False, header_style="bold")
    table.add_column("measure")
    for name in [baseline] + [rows[0].run for rows in results]:
        table.add_column(name, justify="right")
    for i, first in enumerate(results[0]):
        cells = [_number(first.baseline_value)]
        for rows in results:
            r = rows[i]
            cells.append(f"{_number(r.value)}{_marker(r, higher) or ' '}")
        table.add_row(first.measure, *cells)
    return table


def _per_query_rows(
    conn: psycopg.Connection, rows: list[Comparison], top: int, rel_level: int, judge: str | None
) -> dict[str, dict[str, list[dict]]]:
    """For each measure, the queries that improved and regressed most (by the metric's direction)."""
    measures = [r.measure for r in rows]
    pairs = compare.compare_queries(conn, rows[0].baseline, rows[0].run, measures, rel_level, judge)
    higher = compare.higher_is_better(conn, measures)
    out: dict[str, dict[str, list[dict]]] = {}
    for measure in measures:
        sign = 1 if higher[measure] else -1
        gains = sorted(
            ((sign * p.diff, p) for p in pairs if p.measure == measure and p.diff != 0), key=lambda item: item[0]
        )
        out[measure] = {
            "improved": [dataclasses.asdict(p) for gain, p in reversed(gains) if gain > 0][:top],
            "regressed": [dataclasses.asdict(p) for gain, p in gains if gain < 0][:top],
        }
    return out


def _print_per_query(per_query: dict[str, dict[str, list[dict]]], baseline: str, run: str) -> None:
    for measure, moved in per_query.items():
        if not moved["improved"] and not moved["regressed"]:
            continue
        table = Table(
            title=f"{measure}: queries that moved most in {run}",
            title_justify="left",
            show_edge=False,
            header_style="bold",
        )
        for name in ("", "qid", "question", baseline, run, "diff"):
            table.add_column(name, justify="right" if name in (baseline, run, "diff") else "left")
        for label, items in (("improved", moved["improved"]), ("regressed", moved["regressed"])):
            for p in items:
                question = (p["question"] or "")[:QUESTION_WIDTH] + (
                    "…" if len(p["question"] or "") > QUESTION_WIDTH else ""
                )
                table.add_row(
                    label, p["qid"], question, _number(p["baseline_value"]), _number(p["value"]), f"{p['diff']:+.4f}"
                )
        print_table(table)


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, metavar="RUN_A RUN_B [RUN_C ...]")
@measures_option()
@resampling_options
@rel_level_option()
@judge_option()
@click.option("--per-query", is_flag=True, help="Also list the queries that improved and regressed most.")
@click.option(
    "--top",
    type=int4(1),
    default=5,
    show_default=True,
    help="Queries listed per measure and direction with --per-query.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def compare_command(
    runs: tuple[str, ...],
    measures: str | None,
    resamples: int,
    seed: float,
    alpha: float,
    rel_level: int,
    judge: str | None,
    per_query: bool,
    top: int,
    fmt: str,
) -> None:
    """Compare runs of one dataset: each run against the first (the baseline).

    Per measure: both values, the mean per-query difference with its bootstrap interval,
    the paired randomization-test p-value (Holm-adjusted across the measures), the paired
    t-test p-value, and how many queries improved, regressed or tied. Generation metrics
    compare the queries both runs have a value for. ▲/▼ mark significant improvements and
    regressions (adjusted p < alpha). What changed between the runs' configurations is shown
    below the table. Where people labelled a generation metric in both runs (`ragsql review`),
    its prediction-powered difference and interval follow (ppi_* columns in json and csv).
    """
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs: RUN_A RUN_B [RUN_C ...]")
    resampling = Resampling(resamples, seed, alpha)
    asked = split_measures(measures)
    with db.connect() as conn:
        db.ensure_schema(conn)
        for run in runs:
            names.run_id(conn, run)
        results = [_compared(conn, runs[0], run, asked, resampling, rel_level, judge) for run in runs[1:]]
        diffs = {run: compare.config_diff(conn, runs[0], run) for run in runs[1:]}
        higher = compare.higher_is_better(conn, [r.measure for r in results[0]])
        moved = (
            {rows[0].run: _per_query_rows(conn, rows, top, rel_level, judge) for rows in results} if per_query else {}
        )
        labelled = {
            rows[0].run: review.ppi_compare(
                conn, runs[0], rows[0].run, [r.measure for r in rows if r.kind == "generation"], alpha, judge
            )
            for rows in results
        }
    if fmt != "table":
        for run, diff in diffs.items():
            for key, before, after in diff:
                warn(f"configuration of {run} differs from {runs[0]}: {key} {before} → {after}")
        rows = [
            {**dataclasses.asdict(r), **_ppi_fields(labelled[r.run].get(r.measure))} for rows in results for r in rows
        ]
        if per_query and fmt == "json":
            for row in rows:
                row.update({f"top_{k}": v for k, v in moved[row["run"]][row["measure"]].items()})
            render(rows, COLUMNS + PPI_COLUMNS + ["top_improved", "top_regressed"], fmt)
        else:
            render(rows, COLUMNS + PPI_COLUMNS, fmt)
        return
    for rows in results:
        print_table(pair_table(rows, alpha, higher))
        if labelled[rows[0].run]:
            print_table(_ppi_table(runs[0], rows[0].run, labelled[rows[0].run], alpha))
    if len(results) > 1:
        print_table(_runs_table(results, higher))
    click.echo(
        f"▲ / ▼: significantly better / worse than {runs[0]} (Holm-adjusted randomization p < {alpha}); "
        f"{resamples:,} resamples, seed {seed}"
    )
    for run, diff in diffs.items():
        if diff:
            click.echo(
                f"what changed from {runs[0]} to {run}: "
                + "; ".join(f"{key} {before} → {after}" for key, before, after in diff)
            )
    for rows in results:
        if per_query:
            _print_per_query(moved[rows[0].run], runs[0], rows[0].run)
        notes = [f"{r.measure}: {r.note}" for r in rows if r.note]
        for note in notes:
            warn(f"{rows[0].run}: {note}")
