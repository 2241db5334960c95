"""`ragsql review`: export a sheet of judged queries for people to label, and import their labels."""

from __future__ import annotations

from pathlib import Path

import click
import psycopg

from ragsql import db
from ragsql.cli.options import judge_option
from ragsql.cli.output import format_option, report
from ragsql.cli.specs import Float8, OutputFile, int4
from ragsql.db import names, review as review_db
from ragsql.errors import InputError, UsageError
from ragsql.formats.review import read_labels, sheet_csv, sheet_jsonl

__all__ = ["review_group"]


@click.group("review")
def review_group() -> None:
    """Human review of the judge: export a sheet to label, import the labels, then read the agreement.

    \b
    ragsql review export --run v2 --sample 50 --stratify faithfulness --output sheet.jsonl
    (people fill in each "label": a score in [0, 1] per metric, a verdict per statement)
    ragsql review import sheet.jsonl --reviewer alice
    psql: select * from ragsql.judge_agreement('v2'); select * from ragsql.ppi_mean('v2', 'faithfulness');
    """


def _item(label) -> str:
    """`alice labelled en-01 faithfulness:2`: who labelled what, for a message."""
    return f"{label.reviewer} labelled {label.qid} {label.metric}" + (f" {label.item}" if label.item else "")


@review_group.command("export")
@click.option("--run", "run", required=True, help="The judged run to review.")
@click.option("--sample", type=int4(1), default=50, show_default=True, help="Queries to sample.")
@click.option(
    "--stratify",
    default=None,
    metavar="METRIC",
    help="Sample evenly across the quintiles of this metric's value (e.g. faithfulness).",
)
@click.option("--seed", type=Float8(), default=0.42, show_default=True, help="The same seed gives the same sample.")
@judge_option("the sheet shows")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@click.option("--output", type=OutputFile(), default=None, help="Write the sheet here (default: stdout).")
def export_command(
    run: str, sample: int, stratify: str | None, seed: float, judge: str | None, fmt: str, output: Path | None
) -> None:
    """Write a review sheet: sampled queries with question, contexts, answer and reference, the judge's value
    of each metric and its statement-by-statement verdicts, and an empty label beside each."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
        try:
            sheet = review_db.review_sheet(conn, run, sample, stratify, seed, judge)
        except psycopg.errors.InvalidParameterValue as exc:
            raise UsageError(f"--stratify: {exc.diag.message_primary}") from None
    if not sheet:
        raise InputError(f'run "{run}" has no answer to review (ragsql generate or ragsql import answers first)')
    text = sheet_csv(sheet) if fmt == "csv" else sheet_jsonl(sheet)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {len(sheet)} {'query' if len(sheet) == 1 else 'queries'} to review to {output}", err=True)


@review_group.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--reviewer", default=None, help="Who labelled the file (when its lines do not say).")
@format_option()
def import_command(file: Path, reviewer: str | None, fmt: str) -> None:
    """Store the labels of a filled-in review sheet (JSONL or .csv). Nothing is stored when a line is bad (an
    import is one transaction): an item not in the run, a label out of range or of the wrong type, an item
    labelled twice by one reviewer. The judge's values written on the sheet are kept for reference only: the
    agreement statistics read the judge's stored verdicts."""
    labels = read_labels(file, reviewer)
    with db.connect() as conn:
        db.ensure_schema(conn)
        runs = {label.run for label in labels}
        for run in sorted(runs):
            names.run_id(conn, run)
        answered = {run: review_db.answered_qids(conn, run) for run in runs}
        metrics = review_db.known_metrics(conn)
        # (qid, item, model) of each stored statement verdict, and (qid, item, None) for a label naming no judge
        judged = {
            run: {k for q, i, m in review_db.judged_statements(conn, run) for k in ((q, i, m), (q, i, None))}
            for run in runs
        }
        seen: dict[tuple, int] = {}
        for label in labels:
            key = (label.run, label.qid, label.metric, label.item, label.reviewer)
            if label.qid not in answered[label.run]:
                raise InputError(f'query "{label.qid}" has no answer in run "{label.run}"', str(file), label.line)
            if label.metric not in metrics:
                raise InputError(f'unknown metric "{label.metric}"', str(file), label.line)
            if label.item and (label.qid, label.item, label.judge_model) not in judged[label.run]:
                by = f" by {label.judge_model}" if label.judge_model else ""
                raise InputError(
                    f'no statement verdict {label.item}{by} of query "{label.qid}" in run "{label.run}"',
                    str(file),
                    label.line,
                )
            if key in seen:
                raise InputError(f"{_item(label)} twice (first at line {seen[key]})", str(file), label.line)
            seen[key] = label.line
        earlier = review_db.labelled(conn, list(seen))
        for label in labels:
            where = earlier.get((label.run, label.qid, label.metric, label.item, label.reviewer))
            if where is not None:
                raise InputError(f"{_item(label)} already (from {where})", str(file), label.line)
        with conn.transaction():
            count = review_db.store_labels(
                conn,
                [
                    (
                        x.run,
                        x.qid,
                        x.metric,
                        x.item,
                        x.reviewer,
                        x.score,
                        x.verdict,
                        x.judge_model,
                        x.judge_value,
                        x.judge_verdict,
                        f"{file.name}:{x.line}",
                    )
                    for x in labels
                ],
            )
    result = {
        "file": str(file),
        "labels": count,
        "reviewers": sorted({x.reviewer for x in labels}),
        "runs": sorted(runs),
    }
    if fmt == "json":
        report(result)
    else:
        click.echo(
            f"stored {count} labels of {', '.join(result['reviewers'])} for run {', '.join(result['runs'])}; "
            f"see ragsql.judge_agreement and ragsql.ppi_mean"
        )
