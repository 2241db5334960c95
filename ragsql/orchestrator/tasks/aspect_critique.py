"""aspect:<name>: every aspect of `ragsql aspect add` asked of the answer in one critique call."""

from __future__ import annotations

from ragsql.db import judging as db, verdict_rows as vr
from ragsql.judge.kinds import critique
from ragsql.orchestrator.job import Job, Store

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    aspects = await job.judging.calls.run(db.aspects)
    judged = await job.judging.calls.run(db.judged_aspects, job.task, job.model)
    # only the aspects added or redefined since the answer was judged; all of them (from the cache) when none is
    # new: a repeat with --again asks what the first judging asked
    aspects = [(n, d) for n, d in aspects if (n, db.text_hash(d)) not in judged] or aspects
    contexts = [c.text for c in job.sample.contexts] or None  # as RAGAS's AspectCritic: contexts when present
    request = critique.request(
        job.sample.question, job.sample.answer, aspects, contexts=contexts, language=job.language
    )
    got = await job.ask(request)
    definitions = dict(aspects)
    return [
        job.verdict(
            vr.AspectVerdict,
            request.prompt_version,
            aspect=v.aspect.strip(),
            definition_hash=db.text_hash(definitions[v.aspect.strip()]),
            verdict=v.verdict,
            reason=v.reason,
            call_id=got.call_id,
        )
        for v in got.verdict.verdicts
    ]
