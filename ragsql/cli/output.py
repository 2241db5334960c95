"""Rendering rows as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

__all__ = ["FORMATS", "render"]

FORMATS = ("table", "json", "csv")


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
        table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
        for c in columns:
            table.add_column(c, justify="right" if rows and isinstance(rows[0][c], (int, float)) else "left")
        for r in rows:
            table.add_row(*(_cell(r[c]) for c in columns))
        console = Console(soft_wrap=True)
        if not console.is_terminal:  # a pipe or file: as wide as the table needs, never cut a name
            natural = console.measure(table, options=console.options.update_width(1000)).maximum
            console.width = max(console.width, natural, len(title or ""))
        console.print(table)
