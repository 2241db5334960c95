"""`ragsql aspect`: add, list and remove the yes/no aspects that aspect critique asks of every answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from ragsql import db, registry
from ragsql.cli.output import FORMATS, format_option, render, report
from ragsql.db import aspects
from ragsql.errors import UsageError

if TYPE_CHECKING:
    import psycopg

__all__ = ["aspect_group", "listing_command", "removal_command", "say_added"]


@click.group("aspect")
def aspect_group() -> None:
    """The aspects of aspect critique: RAGAS's five built-ins and your own.

    An aspect is a yes/no question the judge asks of every answer (`ragsql judge --metrics
    aspect_critique`); its value per query is 1 for yes, read as aspect:<name> by scores,
    compare, check and SQL.
    """


@aspect_group.command("add")
@click.argument("name")
@click.option("--definition", required=True, help='The question, e.g. "Does the answer cite a source for every claim?"')
@click.option(
    "--lower-is-better",
    is_flag=True,
    help="Yes is the bad verdict (as for harmfulness): compare and check read a rise as a drop.",
)
@click.option("--replace", is_flag=True, help="Change the definition of an aspect of that name.")
@format_option()
def add_command(name: str, definition: str, lower_is_better: bool, replace: bool, fmt: str) -> None:
    """Add an aspect NAME (lower-case letters, digits, _)."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction():
            done = aspects.add(conn, name, definition, not lower_is_better, replace)
    say_added("aspect", name, done, f"aspect:{name}", fmt, higher_is_better=not lower_is_better)


def say_added(kind: str, name: str, done: str, metric: str, fmt: str, **extra: object) -> None:
    """What `aspect add` and `rubric add` print: how to judge the new one (its judge kind, from the registry) and
    the metric name to read it by."""
    task = registry.metric(metric).task
    if fmt == "json":
        report({kind: name, "done": done, "metric": metric, **extra})
        return
    click.echo(f"{done} {kind} {name}: judge it with `ragsql judge --run RUN --metrics {task}`, read it as {metric}")


def listing_command(
    title: str, rows: Callable[[psycopg.Connection], list[dict]], columns: list[str], help: str
) -> click.Command:
    """The `list` command of `ragsql aspect` and `ragsql rubric`: every row, built-ins first."""

    @click.command("list", help=help)
    @click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
    def list_command(fmt: str) -> None:
        with db.connect() as conn:
            db.ensure_schema(conn)
            found = rows(conn)
        render(found, columns, fmt, title=title)

    return list_command


aspect_group.add_command(
    listing_command(
        "aspects",
        aspects.list_aspects,
        ["name", "definition", "builtin", "higher_is_better", "verdicts"],
        "Every aspect: built-ins first, its definition, its direction and how many verdicts it has.",
    )
)


def removal_command(kind: str, remove: Callable[[psycopg.Connection, str], int], verdicts: str) -> click.Command:
    """The `remove` command of `ragsql aspect` and `ragsql rubric`: a user's NAME and its verdicts, only with --yes."""

    @click.command("remove", help=f"Remove your {kind} NAME and its {verdicts} (built-ins stay).")
    @click.argument("name")
    @click.option("--yes", is_flag=True, help=f"Really remove it and its {verdicts} (nothing is removed without it).")
    @format_option()
    def remove_command(name: str, yes: bool, fmt: str) -> None:
        if not yes:
            raise UsageError(f"{kind} remove {name}: add --yes to remove it and its {verdicts}")
        with db.connect() as conn:
            db.ensure_schema(conn)
            with conn.transaction():
                removed = remove(conn, name)
        if fmt == "json":
            report({kind: name, "removed": True, "verdicts": removed})
            return
        click.echo(f"removed {kind} {name} ({removed} {verdicts})")

    return remove_command


aspect_group.add_command(removal_command("aspect", aspects.remove, "verdicts"))
