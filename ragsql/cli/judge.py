"""`ragsql judge`: ask the LLM judge (or the offline one) for the verdicts behind the generation metrics."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragsql import db
from ragsql.cli.output import render
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import TOKENIZER
from ragsql.orchestrator.runner import DEFAULT_METRICS, METRICS, JudgeResult, judge_run, plan_run
from ragsql.orchestrator.service import Tally

__all__ = ["judge_command"]


def _metrics(value: str | None) -> list[str] | None:
    return value.replace(",", " ").split() if value else None


@click.command("judge")
@click.option("--run", "run", required=True, help="Name of the run whose answers are judged.")
@click.option("--metrics", default=None, metavar='"faithfulness answer_relevancy ..."',
              help=f"Space- or comma-separated metrics: {', '.join(METRICS)}. Default: "
                   f"{', '.join(DEFAULT_METRICS)} — those the run's data allows (no reference answer: no "
                   "context_recall, answer_similarity, answer_correctness).")
@click.option("--workers", default=16, show_default=True, type=click.IntRange(1, 256),
              help="Concurrent judge workers in this process (more processes may judge the same run at once).")
@click.option("--model", default=None, help="Judge model (default RAGSQL_JUDGE_MODEL, else gpt-4o-mini).")
@click.option("--embedder", default=None, metavar="SPEC",
              help="offline | openai[:MODEL] | sentence-transformers:MODEL | minilm (default: openai when an "
                   "endpoint is configured, else offline).")
@click.option("--offline", is_flag=True, help="Use the offline heuristic judge even if an endpoint is configured.")
@click.option("--again", is_flag=True,
              help="Judge tasks already done once more (e.g. after editing prompts); requests already answered "
                   "still come from the cache. Another --model or --embedder re-judges without this.")
@click.option("--dry-run", is_flag=True, help="Print how many calls and tokens the run needs; call nothing.")
def judge_command(run: str, metrics: str | None, workers: int, model: str | None, embedder: str | None,
                  offline: bool, again: bool, dry_run: bool) -> int:
    """Judge a run's answers and store the verdicts; generation metrics are SQL views over them.

    The endpoint is RAGSQL_JUDGE_BASE_URL / RAGSQL_JUDGE_API_KEY (or OPENAI_BASE_URL /
    OPENAI_API_KEY). With neither, the offline heuristic judge is used and every score
    is labelled offline. Every reply is cached in the database: judging again makes no
    call for a request already answered, and a run that was interrupted (even killed)
    resumes where it stopped. Exit status 3: some tasks failed (their metrics are NULL
    with the reason; judging again retries them).
    """
    from ragsql.orchestrator.setup import make_judging  # imports openai: only when judging

    settings = EndpointSettings.from_env(model=model)
    judging = make_judging(settings, offline=offline, embedder=embedder, dry_run=dry_run)
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
    console = Console(stderr=True)
    label = "offline judge" if judging.judge.offline else f"judge {judging.model} at {settings.base_url or 'api.openai.com'}"
    if dry_run:
        plan = asyncio.run(plan_run(url, run, judging, metrics=_metrics(metrics), again=again))
        _say_skipped(console, plan.skipped)
        _print_plan(run, label, plan.tasks, plan.tally, judging)
        return 0
    try:
        result = asyncio.run(_judge(url, run, judging, _metrics(metrics), workers, again, console, label))
    except asyncio.CancelledError:  # SIGTERM: the tasks in progress were put back before this point
        click.echo("ragsql: stopped by SIGTERM; unfinished tasks were put back to pending", err=True)
        return 143
    _say_skipped(console, result.skipped)
    _print_summary(run, label, result, judging)
    return 3 if result.failed else 0  # 3: some tasks failed; their metrics are NULL with the reason


async def _judge(url, run, judging, metrics, workers, again, console, label) -> JudgeResult:
    with contextlib.suppress(NotImplementedError, RuntimeError):  # SIGTERM stops the run as Ctrl-C does
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    await judging.judge.check()
    try:
        with Progress(TextColumn("[bold]judging[/] " + run), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("tasks", total=None)
            return await judge_run(url, run, judging, metrics=metrics, workers=workers, again=again,
                                   on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    finally:
        await judging.judge.aclose()
        await judging.embedder.aclose()


def _say_skipped(console: Console, skipped: dict[str, str]) -> None:
    for metric, why in skipped.items():
        console.print(f"skipped {metric}: {why}")


def _tally_rows(t: Tally, offline: bool, plan: bool = False) -> list[dict]:
    if offline:  # heuristic verdicts computed here: no call, no token
        return [{"item": "offline verdicts" + (" needed" if plan else ""), "value": t.calls},
                {"item": "served from cache", "value": t.cached},
                {"item": "texts embedded (offline)", "value": t.texts_embedded},
                {"item": "embeddings already stored", "value": t.embeddings_cached}]
    estimate = " (estimate)" if plan else ""
    return [
        {"item": "chat calls" + (" needed" if plan else ""), "value": t.calls},
        {"item": "served from cache", "value": t.cached},
        {"item": "failed calls", "value": t.failed},
        {"item": f"prompt tokens ({TOKENIZER}){estimate}", "value": t.prompt_tokens},
        {"item": "completion tokens" + (" (rough estimate)" if plan else ""), "value": t.completion_tokens},
        {"item": "embedding calls", "value": t.embedding_calls},
        {"item": "texts embedded", "value": t.texts_embedded},
        {"item": "embeddings already stored", "value": t.embeddings_cached},
    ]


def _print_plan(run, label, tasks, tally: Tally, judging) -> None:
    rows = [{"item": "tasks to judge", "value": tasks}, *_tally_rows(tally, judging.judge.offline, plan=True)]
    render(rows, ["item", "value"], "table", title=f"dry run of run {run} with the {label}: nothing was called")


def _print_summary(run, label, result: JudgeResult, judging) -> None:
    rows = [{"item": "tasks done", "value": result.done}, {"item": "tasks failed", "value": result.failed},
            *_tally_rows(result.tally, judging.judge.offline), {"item": "seconds", "value": f"{result.seconds:.2f}"}]
    if result.lost:
        rows.insert(2, {"item": "tasks taken over by another worker", "value": result.lost})
    render(rows, ["item", "value"], "table", title=f"judged run {run} with the {label} ({', '.join(result.kinds)})")
    for qid, kind, error in result.errors[:10]:
        click.echo(f"failed: query {qid}, {kind}: {error}", err=True)
    if result.failed:
        click.echo(f"{result.failed} tasks failed: their metrics are NULL with the reason; "
                   "run `ragsql judge` again to retry them.", err=True)
