"""answer_relevancy and answer_relevancy_cosine: the questions the answer answers (its answer_analysis call), then
the embeddings of the question, the answer and those questions."""

from __future__ import annotations

from ragsql.db import verdict_rows as vr
from ragsql.orchestrator.job import Job, Store, TaskFailed

__all__ = ["run"]


NONCOMMITTAL_PLACEHOLDER = "(none: the answer is non-committal)"


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    if not job.sample.question.strip():
        raise TaskFailed("the query has no question text")
    request, got, _ = await job.answer_analysis()
    questions = list(got.verdict.questions) or ([NONCOMMITTAL_PLACEHOLDER] if got.verdict.noncommittal else [])
    if not questions:
        raise TaskFailed("the judge wrote no question for the answer")
    await job.judging.embed([job.sample.question, job.sample.answer, *got.verdict.questions])
    return [
        job.verdict(
            vr.GeneratedQuestion,
            request.prompt_version,
            n=n,
            question=q,
            noncommittal=got.verdict.noncommittal,
            call_id=got.call_id,
        )
        for n, q in enumerate(questions, 1)
    ]
