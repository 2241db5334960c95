"""nv_context_relevance (RAGAS ContextRelevance, NVIDIA): two judge passes rating 0/1/2 how relevant the contexts
are to the question (2 calls per answer, 0 when the contexts are part of the question)."""

from __future__ import annotations

from ragsql.judge import prompts as p
from ragsql.judge.kinds import context_rating
from ragsql.judge.language import detect_language
from ragsql.orchestrator.job import Job, Store, TaskFailed
from ragsql.orchestrator.tasks._two_passes import graded, two_passes

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    question = job.sample.question.strip()
    if not question:
        raise TaskFailed("the query has no question text")
    contexts = job.nonblank_contexts()
    if "\n".join(contexts).strip() in question:  # RAGAS: contexts equal to or inside the question score 0
        version = p.load_prompt("context_rating", job.language or detect_language(question)).version
        why = "the contexts are the question or part of it: 0 without a call (RAGAS)"
        return graded(job, "nv_context_relevance", version, [(1, 0, why, None), (2, 0, why, None)])
    return await two_passes(
        job,
        "nv_context_relevance",
        lambda n: context_rating.request(question, contexts, judge_pass=n, language=job.language),
    )
