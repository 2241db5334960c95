"""`ragsql synth`: an eval set written from a corpus's documents — questions, reference answers, gold spans."""

from __future__ import annotations

import asyncio

import click

from ragsql import db
from ragsql.cli.options import model_option
from ragsql.cli.output import format_option, progress, render, report, stderr_console
from ragsql.cli.specs import int4, split_names
from ragsql.llm.settings import EndpointSettings

__all__ = ["synth_command"]

KINDS = ("single", "multi", "comparison")


def _kinds(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    kinds = list(dict.fromkeys(split_names(value) or []))
    wrong = [k for k in kinds if k not in KINDS]
    if wrong or not kinds:
        raise click.BadParameter(f"choose from {', '.join(KINDS)}" + (f", not {wrong[0]!r}" if wrong else ""))
    return kinds


@click.command("synth")
@click.option("--corpus", required=True, help="The ingested corpus whose documents the questions come from.")
@click.option("--dataset", required=True, help="The dataset to write the questions into (created when new).")
@click.option("--n", "n", default=100, show_default=True, type=int4(1), help="Questions to write.")
@click.option(
    "--kinds",
    default="single",
    show_default=True,
    callback=_kinds,
    metavar="single,multi,comparison",
    help="Kinds in turn: single-hop (one passage), multi-hop (two related passages), comparison.",
)
@click.option(
    "--lang",
    "language",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "en", "zh"]),
    help="auto: each question in its document's language; en / zh: only documents in that language.",
)
@click.option(
    "--style",
    default="plain",
    show_default=True,
    help='How the questions read, told to the LLM (a persona or style, e.g. "a new employee, informal").',
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="Seed of the plan; the same seed asks the same requests (answered from the cache).",
)
@model_option("writer")
@click.option(
    "--offline", is_flag=True, help="Deterministic extractive questions (a cloze of a fact sentence), no endpoint."
)
@click.option("--dry-run", is_flag=True, help="Say how many requests the plan holds and how many are cached.")
@format_option()
def synth_command(
    corpus: str,
    dataset: str,
    n: int,
    kinds: list[str],
    language: str,
    style: str,
    seed: int,
    model: str | None,
    offline: bool,
    dry_run: bool,
    fmt: str,
) -> int:
    """Write an eval set from a corpus: questions with reference answers and gold evidence.

    Each question is written from passages of the corpus's documents by the judge's LLM (or,
    offline, as a cloze of a fact sentence), with exact quotes that are stored as document
    spans, so the eval set serves every chunking. Quotes that are not in their document and
    near-duplicate questions are dropped. The result is ready for `ragsql retrieve`, `generate`,
    `judge` and `metrics`; the same seed again sends no request (the call cache).

    Exit status 3: calls to the endpoint failed or gave no usable reply (a quote its document
    does not hold), so fewer questions may have been written (what was written is stored; the
    same seed again retries only those requests).
    """
    from ragsql.generate import make_generator  # imports openai: only when writing
    from ragsql.synthesis import synthesize
    from ragsql.synthesis.synthesizer import ATTEMPTS, cached_requests

    settings = EndpointSettings.from_env(model=model)
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
    client = make_generator(settings, offline=offline)
    writer = (
        "offline cloze writer (OFFLINE)"
        if client.offline
        else f"{client.model} at {settings.base_url or 'api.openai.com'}"
    )
    if dry_run:
        cached = asyncio.run(
            cached_requests(url, corpus, client, n=n, kinds=kinds, language=language, seed=seed, style=style)
        )
        if fmt == "json":
            report(
                {
                    "corpus": corpus,
                    "dataset": dataset,
                    "dry_run": True,
                    "questions": n,
                    "requests": n,
                    "max_requests": ATTEMPTS * n,
                    "cached": cached,
                    "writer": writer,
                }
            )
        else:
            click.echo(
                f"{n} {'/'.join(kinds)} question(s) from corpus {corpus} with the {writer}, seed {seed}: "
                f"{n} requests, up to {ATTEMPTS * n} when replies are dropped; {cached} of the first {n} "
                "are in the call cache. Nothing was sent."
            )
        return 0
    console = stderr_console()

    async def written():
        try:
            with progress(console, f"writing questions from {corpus}", "questions") as on_progress:
                return await synthesize(
                    url,
                    corpus,
                    dataset,
                    client,
                    n=n,
                    kinds=kinds,
                    language=language,
                    seed=seed,
                    style=style,
                    on_progress=on_progress,
                )
        finally:
            await client.aclose()

    result = asyncio.run(written())
    by_kind = {k: sum(q.kind == k for q in result.questions) for k in kinds}
    if fmt == "json":
        report(
            {
                "corpus": corpus,
                "dataset": dataset,
                "dry_run": False,
                "questions": len(result.questions),
                "by_kind": by_kind,
                "languages": sorted({q.language for q in result.questions}),
                "attempts": result.attempts,
                "dropped": dict(result.dropped),
                "calls": len(result.calls.made),
                "cached": result.calls.cached,
                "failed_calls": result.calls.failed,
                "writer": writer,
                "seconds": round(result.seconds, 3),
            }
        )
    else:
        rows = [
            {"item": "questions written", "value": len(result.questions)},
            *({"item": f"  {k}", "value": v} for k, v in by_kind.items()),
            {"item": "requests", "value": result.attempts},
            {"item": "served from cache", "value": result.calls.cached},
            *({"item": f"dropped: {why}", "value": count} for why, count in result.dropped.items()),
        ]
        render(rows, ["item", "value"], "table", title=f"dataset {dataset} from corpus {corpus} with the {writer}")
        if len(result.questions) < n:
            click.echo(
                f"only {len(result.questions)} of {n} questions: the plan's {result.attempts} requests are "
                "spent (see dropped)",
                err=True,
            )
    if result.calls.failed:
        click.echo(
            f"{result.calls.failed} of {result.attempts} calls failed or gave no usable reply (exit 3): run "
            "again with the same seed to retry them",
            err=True,
        )
        return 3
    return 0
