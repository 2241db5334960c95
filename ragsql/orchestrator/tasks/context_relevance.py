"""context_relevance: the context sentences relevant to the question (one sentence_relevance call)."""

from __future__ import annotations

from ragsql.db import verdict_rows as vr
from ragsql.judge.kinds import sentence_relevance
from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    request = sentence_relevance.request(job.sample.question, job.contexts(), language=job.language)
    got = await job.ask(request)
    relevant = set(got.verdict.relevant)
    positions = [c.position for c in job.sample.contexts]
    numbers: dict[int, int] = {}
    rows: list[Store] = []
    for sid, (ci, sentence) in enumerate(request.items, 1):
        numbers[ci] = numbers.get(ci, 0) + 1
        rows.append(
            job.verdict(
                vr.SentenceVerdict,
                request.prompt_version,
                position=positions[ci - 1],
                sentence_no=numbers[ci],
                sentence=sentence,
                relevant=sid in relevant,
                call_id=got.call_id,
            )
        )
    return rows
