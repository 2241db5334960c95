"""`ragsql judge-check`: pairwise accuracy of the configured judge (or the offline one) on labelled pairs."""

from __future__ import annotations

import asyncio

import click

from ragsql import db
from ragsql.cli.options import JUDGE_WORKERS, judging_options, metrics_option, workers_option
from ragsql.cli.output import format_option, progress, render, report, stderr_console
from ragsql.cli.specs import Float8
from ragsql.errors import GateFailed
from ragsql.formats.files import text_lines
from ragsql.formats.pairs import parse_pairs
from ragsql.llm.settings import EndpointSettings

__all__ = ["judge_check_command"]

_GROUPS = {"metric": ("metric", "language"), "kind": ("metric", "kind", "language")}


@click.command("judge-check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@metrics_option("Check only the pairs of these metrics (default: every pair in the file).")
@judging_options
@click.option(
    "--by",
    type=click.Choice(sorted(_GROUPS)),
    default="metric",
    show_default=True,
    help="Group the accuracy by metric and language, or also by the pairs' kind.",
)
@click.option(
    "--min-accuracy",
    type=Float8(0, 1),
    default=None,
    help="Exit 4 when a metric's pairwise accuracy (per language) is below this.",
)
@workers_option(JUDGE_WORKERS, "Concurrent judge workers.")
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the judge-check-<hash> dataset and its runs (to read the verdicts) instead of deleting it.",
)
@format_option(("table", "json", "csv"))
def judge_check_command(
    file: str,
    metrics: list[str] | None,
    model: str | None,
    embedder: str | None,
    offline: bool,
    by: str,
    min_accuracy: float | None,
    workers: int,
    keep: bool,
    fmt: str,
) -> int:
    """Measure a judge on labelled pairs before trusting it.

    FILE is JSONL, one pair per line: id, metric, question, optional language, kind and
    reference, and the two sides `better` and `worse` (answer and/or contexts; shared
    `answer` / `contexts` apply to both). Both sides are judged as runs are, and a pair
    counts 1 when the better side scores strictly higher, 1/2 on a tie (or a value the
    judge could not give), 0 otherwise; a group where no pair got a value has no accuracy
    (NULL) and fails --min-accuracy. The judge-call cache makes a second check free.
    tests/data/judge_pairs/ holds 950 pairs built from the demo corpus (en and zh).
    """
    from ragsql.orchestrator.setup import make_judging  # imports openai: only when judging

    pairs = parse_pairs(text_lines(file), file, metrics)
    if not pairs:
        raise click.UsageError(f"no pair of {', '.join(metrics or [])} in {file}")
    settings = EndpointSettings.from_env(model=model)
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
    judging = make_judging(settings, offline=offline, embedder=embedder)
    console = stderr_console()
    result = asyncio.run(_check(url, pairs, judging, workers, keep, console))
    rows = result.summary(_GROUPS[by])
    columns = [*_GROUPS[by], "pairs", "accuracy", "better", "ties", "worse", "no_value"]
    judge = "the offline judge (OFFLINE heuristics)" if result.offline else f"judge {result.judge}"
    if fmt == "json":
        report(
            {
                "file": file,
                "judge": result.judge,
                "offline": result.offline,
                "pairs": len(pairs),
                "dataset": result.dataset if keep else None,
                "groups": rows,
                "failed_tasks": result.failed_tasks,
            }
        )
    else:
        render(rows, columns, fmt, title=f"pairwise accuracy of {judge} on {len(pairs)} pairs of {file}")
        if keep:
            click.echo(f"kept dataset {result.dataset}: runs {result.dataset}:<metric>:better|worse", err=True)
    if result.failed_tasks:
        click.echo(f"{result.failed_tasks} judge tasks failed; their pairs count as ties (no_value)", err=True)
    if min_accuracy is not None:
        low = [r for r in rows if r["accuracy"] is None or r["accuracy"] < min_accuracy]
        for r in low:  # a group without any value cannot pass a gate
            got = "n/a (no pair has a value)" if r["accuracy"] is None else f"{r['accuracy']:.4f}"
            click.echo(f"failed: {' '.join(str(r[c]) for c in _GROUPS[by])} accuracy {got} < {min_accuracy}", err=True)
        if low:
            raise GateFailed(f"{len(low)} group(s) below --min-accuracy {min_accuracy}")
    return 0


async def _check(url, pairs, judging, workers, keep, console):
    from ragsql.orchestrator.pairs import check_pairs

    await judging.judge.check()
    try:
        with progress(console, "judging pairs", "tasks") as on_progress:
            return await check_pairs(
                url,
                pairs,
                judging,
                workers=workers,
                keep=keep,
                on_progress=lambda run, done, total: on_progress(done, total),
            )
    finally:
        await judging.judge.aclose()
        await judging.embedder.aclose()
