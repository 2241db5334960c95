"""`ragsql judge`: ask the LLM judge (or the offline one) for the verdicts behind the generation metrics."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal

import click
from rich.console import Console

from ragsql import db
from ragsql.cli.options import JUDGE_WORKERS, judging_options, metrics_option, workers_option
from ragsql.cli.output import format_option, progress, render, report, stderr_console, warn
from ragsql.db import consistency, names
from ragsql.embed import prepare
from ragsql.errors import UsageError
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import tokenizer_name
from ragsql.orchestrator.runner import DEFAULT_METRICS, METRICS, JudgeResult, judge_run, plan_run
from ragsql.orchestrator.service import Tally

__all__ = ["judge_command"]


@click.command("judge")
@click.option("--run", "run", required=True, help="Name of the run whose answers are judged.")
@metrics_option(
    f"Space- or comma-separated metrics: {', '.join(METRICS)}. Default: "
    f"{', '.join(DEFAULT_METRICS)} — those the run's data allows (no reference answer: no "
    "context_recall, answer_similarity, answer_correctness).",
)
@workers_option(
    JUDGE_WORKERS, "Concurrent judge workers in this process (more processes may judge the same run at once)."
)
@judging_options
@click.option(
    "--again",
    is_flag=True,
    help="Judge tasks already done once more (e.g. after editing prompts); requests already answered "
    "still come from the cache. Another --model or --embedder re-judges without this.",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Judge the answers N times, with seeds s, s+1, … (temperature: RAGSQL_JUDGE_TEMPERATURE), and "
    "report how much the values move; repeat k >= 2 is stored as run RUN#k. Costs N times the calls.",
)
@click.option(
    "--atomicity",
    type=click.Choice(["low", "high"]),
    default="low",
    show_default=True,
    help="factual_correctness: claims of one fact each (high) or as the text groups them (low), as RAGAS.",
)
@click.option(
    "--coverage",
    type=click.Choice(["low", "high"]),
    default="low",
    show_default=True,
    help="factual_correctness: claims keep every detail (high) or the main facts (low), as RAGAS. Claims "
    "of each setting are stored apart; judge a done run again with --again.",
)
@click.option("--dry-run", is_flag=True, help="Print how many calls and tokens the run needs; call nothing.")
@format_option()
def judge_command(
    run: str,
    metrics: list[str] | None,
    workers: int,
    model: str | None,
    embedder: str | None,
    offline: bool,
    again: bool,
    repeat: int,
    atomicity: str,
    coverage: str,
    dry_run: bool,
    fmt: str,
) -> int:
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
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
    judging = make_judging(settings, offline=offline, embedder=embedder, dry_run=dry_run)
    judging.claim_settings = (atomicity, coverage)
    if repeat > 1 and judging.judge.offline:
        raise UsageError("--repeat needs an LLM judge: the offline judge gives the same verdicts every time")
    console = stderr_console()
    label = (
        "offline judge"
        if judging.judge.offline
        else f"judge {judging.model} at {settings.base_url or 'api.openai.com'}"
    )
    if dry_run:
        plans = [
            asyncio.run(
                plan_run(
                    url,
                    run,
                    judging if k == 1 else _seeded(settings, k, embedder, dry_run),
                    metrics=metrics,
                    again=again,
                )
            )
            for k in range(1, repeat + 1)
        ]
        plan = plans[0]
        for other in plans[1:]:
            plan.tally.merge(other.tally)
        tasks = sum(p.tasks for p in plans)
        _say_skipped(console, plan.skipped)
        if fmt == "json":
            report(
                {
                    "run": run,
                    "judge": label,
                    "offline": judging.judge.offline,
                    "dry_run": True,
                    "tasks": tasks,
                    **_tally_json(plan.tally),
                    "skipped": plan.skipped,
                    **({"repeats": repeat} if repeat > 1 else {}),
                }
            )
        else:
            _print_plan(run if repeat == 1 else f"{run} × {repeat} repeats", label, tasks, plan.tally, judging)
        return 0
    results = []
    for k in range(1, repeat + 1):
        target = run
        if k > 1:
            with db.connect() as conn:
                target = consistency.repeat_run(conn, run, k)
            judging = _seeded(settings, k, embedder, dry_run)
            judging.claim_settings = (atomicity, coverage)
        try:
            result = asyncio.run(_judge(url, target, judging, metrics, workers, again, console, label))
        except asyncio.CancelledError:  # SIGTERM: the tasks in progress were put back before this point
            click.echo("ragsql: stopped by SIGTERM; unfinished tasks were put back to pending", err=True)
            return 143
        results.append((target, result))
        _say_skipped(console, result.skipped)
        if fmt != "json":
            _print_summary(target, label + (f", seed {settings.seed + k - 1}" if repeat > 1 else ""), result, judging)
    failed = sum(r.failed for _, r in results)
    spread = _consistency(run, metrics) if repeat > 1 else []
    if fmt == "json":
        runs = [
            {
                "run": target,
                "metrics": list(r.kinds),
                "done": r.done,
                "failed": r.failed,
                "lost": r.lost,
                "errors": [{"qid": qid, "metric": kind, "error": error} for qid, kind, error in r.errors],
                **_tally_json(r.tally),
                "skipped": r.skipped,
                "seconds": round(r.seconds, 3),
            }
            for target, r in results
        ]
        one = {k: v for k, v in runs[0].items() if k != "run"}
        report(
            {
                "run": run,
                "judge": label,
                "offline": judging.judge.offline,
                "dry_run": False,
                **one,
                **({"repeats": runs, "consistency": spread} if repeat > 1 else {}),
            }
        )
        if failed:
            click.echo(
                f"{failed} tasks failed: their metrics are NULL with the reason; "
                "run `ragsql judge` again to retry them.",
                err=True,
            )
    elif spread:
        render(
            spread,
            ["metric", "repeats", "mean", "sd", "min", "max", "queries", "flipping", "flip_share", "mean_query_range"],
            "table",
            title=f"judge consistency over {repeat} judgings of {run} (SQL: ragsql.judge_consistency, judge_flips)",
        )
    if repeat > 1 and settings.temperature == 0:
        warn(
            "temperature 0: repeats differ only by seed; set RAGSQL_JUDGE_TEMPERATURE to measure the spread at "
            "the temperature you judge with"
        )
    return 3 if failed else 0  # 3: some tasks failed; their metrics are NULL with the reason


def _seeded(settings: EndpointSettings, k: int, embedder: str | None, dry_run: bool):
    """The judging service of repeat k: the same endpoint with seed + k - 1."""
    from ragsql.orchestrator.setup import make_judging

    return make_judging(dataclasses.replace(settings, seed=settings.seed + k - 1), embedder=embedder, dry_run=dry_run)


def _consistency(run: str, metrics: list[str] | None) -> list[dict]:
    with db.connect() as conn:
        return consistency.consistency(conn, run, metrics)


async def _judge(url, run, judging, metrics, workers, again, console, label) -> JudgeResult:
    with contextlib.suppress(NotImplementedError, RuntimeError):  # SIGTERM stops the run as Ctrl-C does
        if (task := asyncio.current_task()) is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    await judging.judge.check()
    if (relevance := getattr(judging.judge, "relevance", None)) is not None:  # e5-onnx's graph build, named
        await prepare(relevance, lambda line: console.print(line, markup=False), "the offline judge")
    try:
        with progress(console, f"judging {run}", "tasks") as on_progress:
            return await judge_run(
                url, run, judging, metrics=metrics, workers=workers, again=again, on_progress=on_progress
            )
    finally:
        await judging.judge.aclose()
        await judging.embedder.aclose()


def _say_skipped(console: Console, skipped: dict[str, str]) -> None:
    for metric, why in skipped.items():
        console.print(f"skipped {metric}: {why}")


def _tally_json(t: Tally) -> dict[str, int]:
    return {
        "calls": t.calls,
        "cached": t.cached,
        "failed_calls": t.failed,
        "prompt_tokens": t.prompt_tokens,
        "completion_tokens": t.completion_tokens,
        "embedding_calls": t.embedding_calls,
        "texts_embedded": t.texts_embedded,
        "embeddings_cached": t.embeddings_cached,
    }


def _tally_rows(t: Tally, offline: bool, plan: bool = False) -> list[dict]:
    if offline:  # heuristic verdicts computed here: no call, no token
        return [
            {"item": "offline verdicts" + (" needed" if plan else ""), "value": t.calls},
            {"item": "served from cache", "value": t.cached},
            {"item": "texts embedded (offline)", "value": t.texts_embedded},
            {"item": "embeddings already stored", "value": t.embeddings_cached},
        ]
    estimate = " (estimate)" if plan else ""
    return [
        {"item": "chat calls" + (" needed" if plan else ""), "value": t.calls},
        {"item": "served from cache", "value": t.cached},
        {"item": "failed calls", "value": t.failed},
        {"item": f"prompt tokens ({tokenizer_name()}){estimate}", "value": t.prompt_tokens},
        {"item": "completion tokens" + (" (rough estimate)" if plan else ""), "value": t.completion_tokens},
        {"item": "embedding calls", "value": t.embedding_calls},
        {"item": "texts embedded", "value": t.texts_embedded},
        {"item": "embeddings already stored", "value": t.embeddings_cached},
    ]


def _print_plan(run, label, tasks, tally: Tally, judging) -> None:
    rows = [{"item": "tasks to judge", "value": tasks}, *_tally_rows(tally, judging.judge.offline, plan=True)]
    render(rows, ["item", "value"], "table", title=f"dry run of run {run} with the {label}: nothing was called")


def _print_summary(run, label, result: JudgeResult, judging) -> None:
    rows = [
        {"item": "tasks done", "value": result.done},
        {"item": "tasks failed", "value": result.failed},
        *_tally_rows(result.tally, judging.judge.offline),
        {"item": "seconds", "value": f"{result.seconds:.2f}"},
    ]
    if result.lost:
        rows.insert(2, {"item": "tasks taken over by another worker", "value": result.lost})
    render(rows, ["item", "value"], "table", title=f"judged run {run} with the {label} ({', '.join(result.kinds)})")
    for qid, kind, error in result.errors[:10]:
        click.echo(f"failed: query {qid}, {kind}: {error}", err=True)
    if result.failed:
        click.echo(
            f"{result.failed} tasks failed: their metrics are NULL with the reason; "
            "run `ragsql judge` again to retry them.",
            err=True,
        )
