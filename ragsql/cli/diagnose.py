"""`ragsql diagnose`: the seeds' threshold report of a run and the likely cause of each wrong answer."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.options import judge_option
from ragsql.cli.output import FORMATS, render
from ragsql.db import diagnostics, names

__all__ = ["diagnose_command"]


@click.command("diagnose")
@click.option("--run", "run", required=True, help="Name of the run.")
@click.option("--per-query", is_flag=True, help="The likely cause of each query's wrong answer instead.")
@judge_option()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def diagnose_command(run: str, per_query: bool, judge: str | None, fmt: str) -> None:
    """What is wrong with a run, by the seeds' rules (thresholds are parameters of the SQL functions).

    Checks faithfulness >= 0.8, answer relevancy >= 0.8, answer correctness >= 0.7,
    Success@5 >= 0.8 (else retrieval itself), RR@5 >= 0.5 when Success@20 is high (else
    a reranker), and counts queries by the likely cause of a wrong answer from answer
    correctness x context recall x context precision (ragsql.diagnose_queries).
    Generation checks need `ragsql judge` first.
    """
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        if per_query:
            columns, rows = diagnostics.query_causes(conn, run, judge)
            render(
                rows,
                columns,
                fmt,
                title=f"run {run}: likely cause per query (correctness < 0.7 is wrong; recall, precision >= 0.7 "
                "is high)",
            )
            return
        rows = diagnostics.run_checks(conn, run, judge)
    render(rows, ["check_name", "value", "threshold", "passed", "advice"], fmt, title=f"run {run}: diagnosis")
