"""Rendering rows as a table, JSON or CSV; a command's JSON report; progress bars (`ragsql.llm.progress`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from ragsql.llm.progress import progress

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "FORMATS",
    "REPORT_FORMATS",
    "console",
    "format_option",
    "print_table",
    "progress",
    "render",
    "report",
    "stderr_console",
    "warn",
]

FORMATS = ("table", "json", "csv")
REPORT_FORMATS = ("table", "json")  # a batch step's summary: a table for people, one JSON object for scripts


def format_option(choices: Sequence[str] = REPORT_FORMATS):
    """The `--format` option every command shares (table by default)."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="table for people; json: one object on stdout (docs/guides/ci.md: Scheduled jobs).",
    )


def console(stderr: bool = False, highlight: bool = False) -> Console:
    """The one way the CLI makes a rich console: strings printed or put in a table are shown literally, never read
    as markup or emoji codes, since they hold user names and text (a run named "[/bold] x" or ":x:")."""
    from rich.console import Console

    return Console(stderr=stderr, markup=False, emoji=False, highlight=highlight, soft_wrap=True)


def stderr_console() -> Console:
    """A console on stderr for notes and progress; never markup or highlighting of user text."""
    return console(stderr=True)


def warn(message: str) -> None:
    """One `warning: …` line on stderr."""
    click.echo("warning: " + " ".join(message.split()), err=True)


def report(data: dict, warnings: Sequence[str] = ()) -> None:
    """A command's JSON report: one object on stdout, its `warnings` list always present."""
    click.echo(json.dumps({**data, "warnings": list(warnings)}, ensure_ascii=False, indent=2, default=str))


def _cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render(rows: Sequence[dict], columns: Sequence[str], fmt: str, title: str | None = None) -> None:
    """Print rows (dicts) with the given columns in the chosen format."""
    if fmt == "json":
        click.echo(json.dumps([{c: r[c] for c in columns} for r in rows], indent=2, ensure_ascii=False))
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(["" if r[c] is None else r[c] for c in columns])
        click.echo(buffer.getvalue(), nl=False)
    else:
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
        for c in columns:
            table.add_column(c, justify="right" if rows and isinstance(rows[0][c], (int, float)) else "left")
        for r in rows:
            table.add_row(*(_cell(r[c]) for c in columns))
        print_table(table)


def print_table(table: Table) -> None:
    """Print a rich table on stdout; to a pipe or file as wide as the table needs, never cutting a name."""
    out = console(highlight=True)
    if not out.is_terminal:
        natural = out.measure(table, options=out.options.update_width(1000)).maximum
        out.width = max(out.width, natural, len(str(table.title or "")))
    out.print(table)
