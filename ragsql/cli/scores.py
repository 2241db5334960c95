"""`ragsql scores`: retrieval and generation metrics of a run in one table."""

from __future__ import annotations

import dataclasses

import click

from ragsql import db
from ragsql.cli.output import FORMATS, render
from ragsql.db import generation, metrics, names

__all__ = ["scores_command"]


def _source(row: dict) -> str:
    """Which judge and embedder a value comes from; anything offline says so."""
    parts = [p for p in (row.get("judge_model"), row.get("judge_embedder")) if p]
    label = " + ".join(parts)
    return f"OFFLINE {label}" if any(p.startswith("offline") for p in parts) else label


@click.command("scores")
@click.option("--run", "run", required=True, help="Name of the run.")
@click.option("--per-query", is_flag=True, help="One row per query and metric, with the reason a value is NULL.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def scores_command(run: str, per_query: bool, fmt: str) -> None:
    """Retrieval measures (from gold labels) and generation metrics (from stored verdicts) of a run.

    Generation values come from one judge model and prompt version per metric (the newest);
    "OFFLINE" marks values of the offline heuristic judge or embedder. NULL values have a
    reason (see --per-query); they never count as 0.
    """
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        if per_query:
            rows = [{**dataclasses.asdict(v), "kind": "retrieval", "reason": None, "source": "gold labels"}
                    for v in metrics.query_values(conn, run, None, 1)]
            rows += [{**r, "measure": r["metric"], "kind": "generation", "source": _source(r)}
                     for r in generation.query_generation(conn, run)]
            render(rows, ["qid", "kind", "measure", "value", "reason", "source"], fmt, title=f"run {run}")
            return
        rows = [{"kind": "retrieval", "measure": v.measure, "value": v.value, "queries": v.queries,
                 "covered": v.queries - v.missing, "missing": v.missing, "source": "gold labels"}
                for v in metrics.run_values(conn, run, None, 1) if v.queries]
        rows += [{"kind": "generation", "measure": r["metric"], "value": r["value"], "queries": r["queries"],
                  "covered": r["covered"], "missing": r["missing"], "source": _source(r)}
                 for r in generation.run_generation(conn, run)]
    render(rows, ["kind", "measure", "value", "queries", "covered", "missing", "source"], fmt,
           title=f"run {run} — retrieval from gold labels, generation from judge verdicts (NULLs are not averaged)")
