"""context_precision: every context judged useful or not for the reference, else the answer (one usefulness call)."""

from __future__ import annotations

from ragsql.db import verdict_rows as vr
from ragsql.judge.kinds import usefulness
from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    contexts = job.contexts()
    reference = job.references()[0] if job.references() else None
    request = usefulness.request(
        job.sample.question,
        contexts,
        reference=reference,
        answer=None if reference is not None else job.sample.answer,
        language=job.language,
    )
    got = await job.ask(request)
    positions = [c.position for c in job.sample.contexts]
    return [
        job.verdict(
            vr.ContextVerdict,
            request.prompt_version,
            position=positions[v.id - 1],
            useful=v.useful,
            reason=v.reason,
            call_id=got.call_id,
        )
        for v in got.verdict.verdicts
    ]
