"""`ragsql generate`: answers with citations for a run's queries, from the run's retrieved results."""

from __future__ import annotations

import asyncio

import click

from ragsql import db
from ragsql.cli.options import GENERATE_WORKERS, model_option, top_n_option, workers_option
from ragsql.cli.output import format_option, progress, render, report, stderr_console, warn
from ragsql.db import names
from ragsql.errors import NothingDone
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import tokenizer_name

__all__ = ["generate_command"]

_SHOWN_FAILURES = 20


@click.command("generate")
@click.option("--run", "run", required=True, help="Name of the run whose queries are answered.")
@model_option("generator")
@top_n_option(100, "Best-ranked results (with text) given to the generator as contexts.")
@click.option("--offline", is_flag=True, help="Use the offline extractive generator even if an endpoint is configured.")
@click.option(
    "--replace", is_flag=True, help="Delete the run's answers (and their judge verdicts) and generate them again."
)
@workers_option(GENERATE_WORKERS, "Queries answered at once in this process.")
@format_option()
def generate_command(
    run: str, model: str | None, top_n: int, offline: bool, replace: bool, workers: int, fmt: str
) -> int:
    """Generate an answer for every query of a run from its top retrieved results.

    Each answer cites its contexts as [docno] and is stored in ragsql.answer with the
    contexts it used (ragsql.answer_context), ready for `ragsql judge`. The endpoint is
    the judge's (RAGSQL_JUDGE_BASE_URL / RAGSQL_JUDGE_API_KEY, or OPENAI_*); with none,
    or with --offline, a deterministic extractive generator quotes the best-matching
    sentences. Replies are cached in the database: generating again makes no call.
    Exit status 3: some queries failed (no answer was stored for them); 1: no answer
    was written (e.g. no query has a retrieved context).
    """
    from ragsql.generate import generate_answers, make_generator, prepare_run  # imports openai: only when generating

    settings = EndpointSettings.from_env(model=model)
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
        names.run_id(conn, run)
    client = make_generator(settings, offline=offline)
    console = stderr_console()
    label = (
        "offline extractive generator"
        if client.offline
        else f"generator {client.model} at {settings.base_url or 'api.openai.com'}"
    )

    async def go():
        try:
            await client.check()
            plan = await prepare_run(url, run, top_n=top_n, replace=replace)
            with progress(console, f"generating {run}", "answers") as on_progress:
                return await generate_answers(plan, client, workers=workers, on_progress=on_progress)
        finally:
            await client.aclose()

    result = asyncio.run(go())
    warnings = (
        [f"{result.no_context} queries had no retrieved context: no answer for them"] if result.no_context else []
    )
    if not result.answers and not result.failed:
        raise NothingDone(
            f'no answer written for run "{run}": '
            + (
                f"none of its {result.queries} queries has a retrieved context with text"
                if result.queries
                else "it has no query to answer"
            )
        )
    if fmt == "json":
        calls = result.calls
        report(
            {
                "run": run,
                "generator": label,
                "offline": client.offline,
                "top_n": top_n,
                "queries": result.queries,
                "answers": result.answers,
                "replaced": result.replaced,
                "no_context": result.no_context,
                "failed": len(result.failed),
                "errors": [{"qid": qid, "error": error} for qid, error in result.failed],
                "calls": len(calls.made),
                "cached": calls.cached,
                "failed_calls": calls.failed,
                "prompt_tokens": calls.tokens("prompt"),
                "completion_tokens": calls.tokens("completion"),
                "seconds": round(result.seconds, 3),
            },
            warnings,
        )
    else:
        for line in warnings:
            warn(line)
        _print_summary(run, label, top_n, result, client.offline)
    return 3 if result.failed else 0


def _print_summary(run: str, label: str, top_n: int, result, offline: bool) -> None:
    calls = result.calls
    rows = [
        {"item": "answers written", "value": result.answers},
        {"item": "queries failed", "value": len(result.failed)},
        {"item": "queries without retrieved context", "value": result.no_context},
    ]
    if result.replaced:
        rows.append({"item": "answers replaced", "value": result.replaced})
    if offline:  # computed here: no call, no token
        rows += [
            {"item": "offline answers", "value": len(calls.made)},
            {"item": "served from cache", "value": calls.cached},
        ]
    else:
        rows += [
            {"item": "chat calls", "value": len(calls.made)},
            {"item": "served from cache", "value": calls.cached},
            {"item": "failed calls", "value": calls.failed},
            {"item": f"prompt tokens ({tokenizer_name()})", "value": calls.tokens("prompt")},
            {"item": "completion tokens", "value": calls.tokens("completion")},
        ]
    rows.append({"item": "seconds", "value": f"{result.seconds:.2f}"})
    render(rows, ["item", "value"], "table", title=f"generated answers for run {run} with the {label} (top {top_n})")
    for qid, error in result.failed[:_SHOWN_FAILURES]:
        click.echo(f"failed: query {qid}: {error}", err=True)
    if len(result.failed) > _SHOWN_FAILURES:
        click.echo(f"… and {len(result.failed) - _SHOWN_FAILURES} more failed queries", err=True)
    if result.failed:
        click.echo(
            f"{len(result.failed)} queries failed and have no answer; "
            "run `ragsql generate --replace` to try again (stored replies are reused).",
            err=True,
        )
