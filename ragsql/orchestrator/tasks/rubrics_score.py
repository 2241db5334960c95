"""rubrics_score:<name> (RAGAS): a 1-5 score by each rubric, the two built-ins and each of `ragsql rubric add`'s, one
call each; a rubric with reference skips a query without one."""

from __future__ import annotations

from ragsql.db import judging as db, verdict_rows as vr
from ragsql.judge.kinds import rubric
from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    rubrics = [
        r for r in await job.judging.calls.run(db.rubrics) if job.references() or not r[2]
    ]  # a rubric with reference skips a query without one
    contexts = [c.text for c in job.sample.contexts]
    requests = [
        rubric.request(
            job.sample.question,
            job.sample.answer,
            descriptions,
            contexts=contexts,
            references=job.references() if with_reference else (),
            language=job.language,
        )
        for _, descriptions, with_reference, _ in rubrics
    ]
    if not requests:
        return []
    got = await together(*(job.ask(r) for r in requests))
    return [
        job.verdict(
            vr.RubricVerdict,
            requests[0].prompt_version,
            rubric=name,
            definition_hash=digest,
            score=g.verdict.score,
            reason=g.verdict.reason,
            call_id=g.call_id,
        )
        for (name, _, _, digest), g in zip(rubrics, got)
    ]
