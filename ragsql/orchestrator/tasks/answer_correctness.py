"""answer_correctness and answer_correctness_f1: the answer's and the references' statements classified against
each other (one classify call), and their embeddings."""

from __future__ import annotations

from ragsql.judge.kinds import classify
from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    # independent calls at once: the critical path is one extraction then one classification
    (_, analysis, answer_extraction), _, *refs = await together(
        job.answer_analysis(),
        job.judging.embed([job.sample.answer, *job.references()]),
        *(job.reference_statements(r) for r in job.references()),
    )
    answer_statements = list(analysis.verdict.statements)
    reference_statements = [s for statements, _ in refs for s in statements]
    if not answer_statements and not reference_statements:
        return []
    request = classify.request(job.sample.question, answer_statements, reference_statements, language=job.language)
    got = await job.ask(request)
    version = request.prompt_version
    answer_rows = [(a.id, "supported" if a.label == "TP" else "unsupported", None) for a in got.verdict.answer]
    stores = job.statement_verdicts("correctness_answer", version, answer_extraction, answer_rows, got.call_id)
    labels = iter(got.verdict.reference)
    for statements, extraction in refs:
        rows = [
            (no, "supported" if next(labels).label == "TP" else "unsupported", None)
            for no in range(1, len(statements) + 1)
        ]
        stores += job.statement_verdicts("correctness_reference", version, extraction, rows, got.call_id)
    return stores
