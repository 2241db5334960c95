"""answer_relevancy_rating: the seed's 1-5 rating of the answer (one rating call)."""

from __future__ import annotations

from ragsql.db import verdict_rows as vr
from ragsql.judge.kinds import rating
from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    request = rating.request(job.sample.question, job.sample.answer, language=job.language)
    got = await job.ask(request)
    return [
        job.verdict(
            vr.Rating,
            request.prompt_version,
            criterion="answer_relevancy",
            score=got.verdict.score,
            reason=got.verdict.reason,
            call_id=got.call_id,
        )
    ]
