"""`ragsql report`: a run's metrics with intervals, its comparison with other runs, its diagnosis and the
judge's cost, or a watch's metrics window by window, as terminal tables and as one self-contained HTML page with
charts."""

from __future__ import annotations

from datetime import timezone
from pathlib import Path
from typing import cast

import click
from click.core import ParameterSource
from rich.table import Table

from ragsql import db
from ragsql.cli.compare import pair_table
from ragsql.cli.options import judge_option, resampling_options
from ragsql.cli.output import format_option, print_table, report, warn
from ragsql.db import compare, names, watches
from ragsql.db.compare import IntervalValue, Resampling
from ragsql.db.report import ReportData, WatchPoint, headline, read_report, read_watch
from ragsql.errors import InputError

__all__ = ["report_command", "write_report", "write_watch_report"]


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


def _watch_table(watch: str, metric: str, points: list[WatchPoint]) -> Table:
    table = Table(
        title=f"watch {watch}: {metric} per window, with its 95% bootstrap interval",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    for column in ("window start", "value", "interval", "n", "judged", "skipped", "closed"):
        table.add_column(column, justify="left" if column in ("window start", "closed") else "right")
    for p in points:
        table.add_row(
            p.start,
            "no value" if p.value is None else f"{p.value:.4f}",
            "" if p.ci_low is None or p.ci_high is None else f"[{p.ci_low:.4f}, {p.ci_high:.4f}]",
            str(p.n),
            str(p.judged),
            str(p.skipped),
            "yes" if p.closed else "open",
        )
    return table


def write_watch_report(conn, watch: str, html: Path | None, fmt: str = "table") -> Path | None:
    """Print a table per metric of the watch over its windows (ragsql.watch_metrics), or with fmt json one object
    of them, and write its HTML page when asked; a watch with no judged window yet is one line (a warning in
    JSON), and its page holds that line and no chart."""
    found = watches.get(conn, watch)
    series = read_watch(conn, watch)
    empty = None
    if not series:
        empty = (
            f"watch {watch} has no window yet: run `ragsql watch run {watch} --once`"
            if not watches.windows(conn, found.id)
            else f"watch {watch} has no judged metric in its windows yet: run `ragsql watch run {watch} --once`"
        )
    path = None
    if html is not None:
        from ragsql.report import write_watch_html  # matplotlib and jinja2 load only when a page is written

        path = write_watch_html(html, found, series, empty)
    if fmt == "json":
        metrics = {metric: [_watch_point(watch, p) for p in points] for metric, points in series.items()}
        report(
            {"watch": watch, "metrics": metrics, "html": None if path is None else str(path)}, [empty] if empty else []
        )
        return None
    if empty:
        click.echo(empty)
    for metric, points in series.items():
        print_table(_watch_table(watch, metric, points))
    return path


def _watch_point(watch: str, p: WatchPoint) -> dict:
    """One window of one metric, as `report --watch --format json` gives it: its run and the columns of
    ragsql.watch_metrics, times in UTC."""
    return {
        "run": watches.run_name(watch, p.window_start),
        "window_start": p.window_start.astimezone(timezone.utc).isoformat(),
        "window_end": p.window_end.astimezone(timezone.utc).isoformat(),
        "value": p.value,
        "ci_low": p.ci_low,
        "ci_high": p.ci_high,
        "n": p.n,
        "judged": p.judged,
        "skipped": p.skipped,
        "closed": p.closed,
    }


_RUN_ONLY = ("compared", "judge", "resamples", "seed", "alpha")  # a watch's values are ragsql.watch_metrics' own


@click.command("report")
@click.option("--run", "run", default=None, help="The run to report on.")
@click.option(
    "--watch",
    default=None,
    metavar="NAME",
    help="Report on this watch instead: each metric window by window, as ragsql.watch_metrics has it.",
)
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
@format_option()
def report_command(
    run: str | None,
    watch: str | None,
    compared: tuple[str, ...],
    html: Path | None,
    judge: str | None,
    resamples: int,
    seed: float,
    alpha: float,
    fmt: str,
) -> None:
    """A run's report: every metric with its interval, the comparison with other runs, the diagnosis, the judge's cost.

    With --html, one self-contained page: the metric overview with intervals, the comparison
    as a forest plot, the per-query heat map and distributions, the diagnosis with the worst
    queries (question, contexts, answer, and the judge's statement verdicts and reasons), the
    judge cost and the run's configuration. Offline values are labelled OFFLINE.

    With --watch instead of --run: a table per metric over the watch's windows (value, interval,
    n, judged, skipped, closed), or with --format json one object of them, and with --html each
    metric drawn over time with its interval band, open windows marked. A run's values as JSON:
    `ragsql metrics --run RUN --format json`.
    """
    ctx = click.get_current_context()
    if (run is None) == (watch is None):
        raise click.UsageError("give --run RUN or --watch NAME", ctx=ctx)
    if watch is not None:
        given = [p for p in _RUN_ONLY if ctx.get_parameter_source(p) is ParameterSource.COMMANDLINE]
        if given:
            raise click.UsageError(f"--{given[0].replace('compared', 'compare')} needs --run, not --watch", ctx=ctx)
    elif fmt == "json":
        raise click.UsageError(
            "--format json needs --watch (a run's values as JSON: ragsql metrics --run RUN --format json)", ctx=ctx
        )
    with db.connect() as conn:
        db.ensure_schema(conn)
        if run is None:
            path = write_watch_report(conn, cast(str, watch), html, fmt)  # one of the two is given: checked above
        else:
            path = write_report(conn, run, list(compared), html, Resampling(resamples, seed, alpha), judge)
    if path is not None:
        click.echo(f"report written to {path}")
