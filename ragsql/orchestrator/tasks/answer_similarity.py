"""answer_similarity: no call, the embeddings of the answer and its references."""

from __future__ import annotations

from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    await job.judging.embed([job.sample.answer, *job.references()])
    return []
