"""`ragsql report`: a run's metrics with intervals, its comparison with other runs, its diagnosis and the
judge's cost, as terminal tables and as one self-contained HTML page with charts."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from ragsql import db
from ragsql.cli.compare import pair_table
from ragsql.cli.options import judge_option, resampling_options
from ragsql.cli.output import print_table, warn
from ragsql.db import compare, names
from ragsql.db.compare import IntervalValue, Resampling
from ragsql.db.report import ReportData, headline, read_report
from ragsql.errors import InputError

__all__ = ["report_command", "write_report"]


MARKS = {"better": "▲ better", "worse": "▼ worse", "": ""}


def _value(v: IntervalValue | None) -> str:
    return "no value" if v is None or v.value is None else f"{v.value:.4f}"


def headline_table(data: ReportData, higher: dict[str, bool]) -> Table:
    """Who won: the headline measures of the run and each compared run, significant differences marked."""
    table = Table(
        title=f"headline: {', '.join(data.compared)} against {data.run}" if data.compared else f"headline: {data.run}",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    table.add_column("measure")
    table.add_column(data.run, justify="right")
    for run in data.compared:
        table.add_column(run, justify="right")
        table.add_column("diff", justify="right")
        table.add_column("", justify="left")
    for row in headline(data):
        cells = [row.measure, _value(row.baseline)]
        for run, (v, c) in row.compared.items():
            diff = "" if c is None or c.diff is None else f"{c.diff:+.4f}"
            cells += [_value(v), diff, MARKS[row.verdict(run, higher.get(row.measure, True))]]
        table.add_row(*cells)
    return table


def _overview_table(data: ReportData) -> Table:
    table = Table(
        title=f"run {data.run} (dataset {data.dataset}): values with their "
        f"{1 - data.resampling.alpha:.0%} bootstrap intervals",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    table.add_column("measure")
    for run in data.overview:
        table.add_column(run, justify="right")
    if data.ppi:
        table.add_column(f"{data.run}: prediction-powered (labels)", justify="right")
    table.add_column("judge")
    rows = {run: {v.measure: v for v in values} for run, values in data.overview.items()}
    judges = {v.measure: v.judge_model for values in data.overview.values() for v in values if v.judge_model}
    for measure in dict.fromkeys(v.measure for values in data.overview.values() for v in values):
        cells = []
        for run in data.overview:
            v = rows[run].get(measure)
            cells.append(
                _value(v) if v is None or v.value is None else f"{v.value:.4f} [{v.ci_low:.3f}, {v.ci_high:.3f}]"
            )
        if data.ppi:
            p = data.ppi.get(measure)
            cells.append(
                "" if p is None else f"{p['estimate']:.4f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}] ({p['labelled']})"
            )
        judge = judges.get(measure) or ""
        table.add_row(measure, *cells, ("OFFLINE " if judge.startswith("offline") else "") + judge)
    return table


def _rows_table(title: str, rows: list[dict], columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(
            *("" if r[c] is None else (f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c])) for c in columns)
        )
    return table


def write_report(
    conn,
    run: str,
    compared: list[str],
    html: Path | None,
    resampling: Resampling,
    judge: str | None = None,
    terminal: bool = True,
) -> Path | None:
    """Print the report of `run` (against each of `compared`) and write its HTML page when asked."""
    for name in [run, *compared]:
        names.run_id(conn, name)
    for other in compared:
        refused = conn.execute(
            "select r.dataset_id <> o.dataset_id from ragsql.run as r, ragsql.run as o "
            "where r.name = %s and o.name = %s",
            (run, other),
        ).fetchone()[0]
        if refused:
            raise InputError(f'run "{other}" is of another dataset than "{run}": only runs of one dataset compare')
    data = read_report(conn, run, compared, resampling, judge)
    diffs = {other: compare.config_diff(conn, run, other) for other in compared}
    measures = list(dict.fromkeys(v.measure for values in data.overview.values() for v in values))
    higher = compare.higher_is_better(conn, measures)
    if terminal:
        for note in data.missing:
            warn(f"{run}: {note}")
        print_table(headline_table(data, higher))
        print_table(_overview_table(data))
        for name, reasons in data.no_value.items():
            for measure, reason in reasons.items():
                click.echo(f"no value: {name} {measure}: {reason}")
        for rows in data.comparisons.values():
            if rows:
                print_table(pair_table(rows, resampling.alpha, higher))
        if data.diagnosis:
            print_table(
                _rows_table(
                    f"diagnosis of {run}", data.diagnosis, ["check_name", "value", "threshold", "passed", "advice"]
                )
            )
        if data.judge_usage:
            print_table(
                _rows_table(
                    "cost (the calls sent for these runs)",
                    data.judge_usage,
                    [
                        "run",
                        "purpose",
                        "kind",
                        "model",
                        "prompt_version",
                        "calls",
                        "failed",
                        "prompt_tokens",
                        "completion_tokens",
                    ],
                )
            )
    if html is None:
        return None
    from ragsql.report import write_html  # matplotlib and jinja2 load only when a page is written

    return write_html(html, data, diffs, higher)


@click.command("report")
@click.option("--run", "run", required=True, help="The run to report on.")
@click.option(
    "--compare",
    "compared",
    multiple=True,
    metavar="RUN",
    help="Compare with this run (repeatable): the report's run is the baseline.",
)
@click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Also write one self-contained HTML page with charts (no script, no network) to this file.",
)
@judge_option()
@resampling_options
def report_command(
    run: str, compared: tuple[str, ...], html: Path | None, judge: str | None, resamples: int, seed: float, alpha: float
) -> None:
    """A run's report: every metric with its interval, the comparison with other runs, the diagnosis, the judge's cost.

    With --html, one self-contained page: the metric overview with intervals, the comparison
    as a forest plot, the per-query heat map and distributions, the diagnosis with the worst
    queries (question, contexts, answer, and the judge's statement verdicts and reasons), the
    judge cost and the run's configuration. Offline values are labelled OFFLINE.
    """
    with db.connect() as conn:
        db.ensure_schema(conn)
        path = write_report(conn, run, list(compared), html, Resampling(resamples, seed, alpha), judge)
    if path is not None:
        click.echo(f"report written to {path}")
