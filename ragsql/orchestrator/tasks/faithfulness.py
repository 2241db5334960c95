"""faithfulness and contradiction_rate: the answer's statements (its answer_analysis call) verified against the
contexts (one verify call)."""

from __future__ import annotations

from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    job.contexts()
    _, got, extraction = await job.answer_analysis()
    return await job.verify(got.verdict.statements, "faithfulness", extraction)
