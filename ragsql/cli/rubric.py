"""`ragsql rubric`: add, list and remove the rubrics rubrics_score scores every answer by (RAGAS RubricsScore)."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.aspect import listing_command, removal_command, say_added
from ragsql.cli.output import format_option
from ragsql.db import rubrics

__all__ = ["rubric_group"]


@click.group("rubric")
def rubric_group() -> None:
    """The rubrics of rubrics_score: RAGAS's two defaults and your own.

    A rubric is five score descriptions; the judge scores every answer 1 to 5 by each rubric
    (`ragsql judge --metrics rubrics_score`), read as rubrics_score:<name> by scores, metrics,
    compare, check and SQL (ragsql.rubrics_score).
    """


@rubric_group.command("add")
@click.argument("name")
@click.option("--score1", required=True, help='What earns a 1, e.g. "The answer is wrong or off topic."')
@click.option("--score2", required=True, help="What earns a 2.")
@click.option("--score3", required=True, help="What earns a 3.")
@click.option("--score4", required=True, help="What earns a 4.")
@click.option("--score5", required=True, help="What earns a 5.")
@click.option(
    "--with-reference",
    is_flag=True,
    help="Show the judge the reference answers too (queries without one get no score).",
)
@click.option("--replace", is_flag=True, help="Change the descriptions of a rubric of that name.")
@format_option()
def add_command(
    name: str,
    score1: str,
    score2: str,
    score3: str,
    score4: str,
    score5: str,
    with_reference: bool,
    replace: bool,
    fmt: str,
) -> None:
    """Add a rubric NAME (lower-case letters, digits, _)."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction():
            done = rubrics.add(conn, name, [score1, score2, score3, score4, score5], with_reference, replace)
    say_added("rubric", name, done, f"rubrics_score:{name}", fmt, with_reference=with_reference)


rubric_group.add_command(
    listing_command(
        "rubrics",
        rubrics.list_rubrics,
        ["name", "metric", "builtin", "with_reference", "descriptions", "verdicts"],
        "Every rubric: built-ins first, its metric, its descriptions (1 | … | 5) and how many scores it has.",
    )
)


rubric_group.add_command(removal_command("rubric", rubrics.remove, "scores"))
