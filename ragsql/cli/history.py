"""`ragsql history`: every run value of a dataset over time, the best and the latest marked."""

from __future__ import annotations

import dataclasses

import click
import psycopg
from rich.table import Table

from ragsql import db
from ragsql.cli.compare import split_measures
from ragsql.cli.options import judge_option, measures_option, resampling_options
from ragsql.cli.output import FORMATS, print_table, render
from ragsql.db import compare, names
from ragsql.db.compare import HistoryValue, Resampling
from ragsql.errors import UsageError

__all__ = ["history_command"]

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """The trend of values as block characters (a space where there is no value)."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    return "".join(
        " " if v is None else SPARK[0 if span == 0 else round((v - low) / span * (len(SPARK) - 1))] for v in values
    )


def _cell(v: HistoryValue) -> str:
    if v.value is None:
        return "NULL"
    text = f"{v.value:.4f}"
    if v.ci_low is not None:
        text += f" [{v.ci_low:.3f}, {v.ci_high:.3f}]"
    return text + (" ★" if v.best else "")


def _table(dataset: str, rows: list[HistoryValue]) -> Table:
    runs = list(dict.fromkeys(r.run for r in rows))  # ragsql.history orders each measure's rows by creation
    table = Table(
        title=f"dataset {dataset}: run values in the order the runs were made (★ best, last column the latest run)",
        title_justify="left",
        show_edge=False,
        header_style="bold",
    )
    table.add_column("measure")
    for run in runs:
        table.add_column(run, justify="right")
    table.add_column("trend")
    by_measure: dict[str, dict[str, HistoryValue]] = {}
    for r in rows:
        by_measure.setdefault(r.measure, {})[r.run] = r
    for measure, values in by_measure.items():
        table.add_row(
            measure,
            *(_cell(values[run]) if run in values else "" for run in runs),
            sparkline([values[run].value if run in values else None for run in runs]),
        )
    return table


@click.command("history")
@click.option("--dataset", required=True, help="The dataset whose runs to list.")
@measures_option("measures to list")
@click.option("--ci", is_flag=True, help="Add each value's percentile bootstrap interval.")
@resampling_options
@judge_option()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def history_command(
    dataset: str, measures: str | None, ci: bool, resamples: int, seed: float, alpha: float, judge: str | None, fmt: str
) -> None:
    """Every run value of a dataset over time: drift across nightly runs at a glance.

    One column per run in the order the runs were made, the best value of each measure
    marked (by its direction: lower is better for contradiction_rate), a trend line,
    and with --ci each value's bootstrap interval.
    """
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.dataset_id(conn, dataset)
        try:
            rows = compare.history(
                conn, dataset, split_measures(measures), ci, Resampling(resamples, seed, alpha), judge
            )
        except psycopg.errors.InvalidParameterValue as exc:
            hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
            raise UsageError(f"--measures: {exc.diag.message_primary}{hint}") from None
    if fmt != "table":
        render(
            [dataclasses.asdict(r) | {"created_at": r.created_at.isoformat()} for r in rows],
            ["run", "created_at", "measure", "kind", "value", "ci_low", "ci_high", "queries", "best", "latest"],
            fmt,
        )
        return
    if not rows:
        click.echo(f"dataset {dataset} has no run yet")
        return
    print_table(_table(dataset, rows))
    latest = next(r.run for r in rows if r.latest)
    click.echo(f"latest run: {latest}")
