"""context_recall: each reference answer's statements (a statements call each) verified against the contexts."""

from __future__ import annotations

from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    job.contexts()
    refs = await together(*(job.reference_statements(r) for r in job.references()))
    verified = await together(
        *(job.verify(statements, "context_recall", extraction) for statements, extraction in refs)
    )
    return [store for stores in verified for store in stores]
