"""`ragsql list`, `ragsql show run`, `ragsql delete`: see what is stored, and remove what is not needed."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.output import FORMATS, render
from ragsql.db import catalog, names
from ragsql.errors import InputError, UsageError

__all__ = ["delete_command", "list_command", "show_group"]

KINDS = {
    "runs": ("run", catalog.list_runs, ["run", "dataset", "created_at", "results", "answers", "judge_tasks", "judges"]),
    "datasets": (
        "dataset",
        catalog.list_datasets,
        ["dataset", "created_at", "queries", "judgments", "references", "runs"],
    ),
    "corpora": ("corpus", catalog.list_corpora, ["corpus", "created_at", "documents", "versions", "chunks", "runs"]),
}


def _iso(rows: list[dict]) -> list[dict]:
    return [{**r, "created_at": r["created_at"].isoformat(timespec="seconds")} for r in rows]


@click.command("list")
@click.argument("kind", type=click.Choice(list(KINDS)))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def list_command(kind: str, fmt: str) -> None:
    """List the runs, datasets or corpora stored, with what each holds."""
    one, read, columns = KINDS[kind]
    with db.connect() as conn:
        db.ensure_schema(conn)
        rows = _iso(read(conn))
    render(rows, columns, fmt, title=f"{len(rows)} {one if len(rows) == 1 else kind}")


@click.group("show")
def show_group() -> None:
    """Show one stored object in full."""


@show_group.command("run")
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def show_run(run: str, fmt: str) -> None:
    """A run: its dataset, when it was made, its counts, its judges and its whole configuration."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        details = _iso([catalog.run_details(conn, run)])[0]
    if fmt == "json":
        render([details], list(details), "json")
        return
    config = details.pop("config")
    render(
        [{"key": k, "value": v} for k, v in details.items()]
        + [{"key": f"config.{k}", "value": v} for k, v in config.items()],
        ["key", "value"],
        "table",
        title=f"run {run}",
    )


@click.command("delete")
@click.argument("kind", type=click.Choice(["run", "dataset", "corpus"]))
@click.argument("name")
@click.option("--yes", is_flag=True, help="Really delete (nothing is deleted without it).")
def delete_command(kind: str, name: str, yes: bool) -> None:
    """Delete a run (its results, answers, verdicts and labels), a dataset (its queries and runs) or a corpus
    (its documents and chunks). Nothing else is touched; the judge-call cache stays, so judging again is free."""
    if not yes:
        raise UsageError(f"delete {kind} {name}: add --yes to delete it and everything that belongs to it")
    with db.connect() as conn:
        db.ensure_schema(conn)
        {"run": names.run_id, "dataset": names.dataset_id, "corpus": names.corpus_id}[kind](conn, name)
        with conn.transaction():
            gone = catalog.delete(conn, kind, name)
    if "refused" in gone:
        raise InputError(
            f'corpus "{name}" is in use: runs {", ".join(gone["refused"])} were retrieved from it (delete them first)'
        )
    click.echo(f"deleted {kind} {name} (" + ", ".join(f"{v} {k}" for k, v in gone.items()) + ")")
