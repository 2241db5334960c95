"""response_groundedness (RAGAS, NVIDIA): two judge passes rating 0/1/2 how far the contexts support the answer
(2 calls per answer)."""

from __future__ import annotations

from ragsql.judge.kinds import groundedness
from ragsql.orchestrator.job import Job, Store
from ragsql.orchestrator.tasks._two_passes import two_passes

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    contexts = job.nonblank_contexts()
    return await two_passes(
        job,
        "response_groundedness",
        lambda n: groundedness.request(job.sample.answer, contexts, judge_pass=n, language=job.language),
    )
