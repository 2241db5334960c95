"""Each yes/no metric of the registry (a judge kind of its own): its own prompt folder, one call per answer."""

from __future__ import annotations

from ragsql import registry
from ragsql.db import verdict_rows as vr
from ragsql.judge import prompts as p
from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """A yes/no metric of the registry: its own prompt, one call per answer."""
    if "contexts" in registry.kind(job.task.kind).needs:
        job.contexts()  # fails the task of an answer without contexts
    references = job.references()
    request = p.yes_no(
        job.task.kind,
        job.sample.question,
        job.sample.answer,
        contexts=[c.text for c in job.sample.contexts],
        reference=references[0] if references else None,
        language=job.language,
    )
    got = await job.ask(request)
    return [
        job.verdict(
            vr.YesNoVerdict,
            request.prompt_version,
            metric=job.task.kind,
            verdict=got.verdict.verdict,
            reason=got.verdict.reason,
            call_id=got.call_id,
        )
    ]
