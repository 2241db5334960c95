"""noise_sensitivity (RAGAS): which contexts support the answer's and the references' statements (reused from
answer_analysis and context_recall's statements calls), and the answer's statements against the references (3 calls
per answer with one reference)."""

from __future__ import annotations

from ragsql.db import verdict_rows as vr
from ragsql.judge.kinds import attribution, verify
from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    contexts = job.contexts()
    (_, analysis, answer_extraction), *refs = await together(
        job.answer_analysis(), *(job.reference_statements(r) for r in job.references())
    )
    statements = list(analysis.verdict.statements)
    if not statements:
        return []  # nothing to check: the metric says the answer has no statements
    texts = [(statements, answer_extraction), *((s, e) for s, e in refs if s)]
    attribute = [attribution.request(s, contexts, language=job.language) for s, _ in texts]
    check = verify.request(statements, job.references(), language=job.language)
    *attributed, checked = await together(*(job.ask(r) for r in attribute), job.ask(check))
    version = f"{attribute[0].prompt_version}+{check.prompt_version}"
    positions = [c.position for c in job.sample.contexts]
    stores: list[Store] = [
        job.verdict(
            vr.StatementAttribution,
            version,
            extraction_id=extraction,
            statement_no=v.id,
            position=positions[ci - 1],
            supported=ci in v.contexts,
            call_id=g.call_id,
        )
        for (_, extraction), g in zip(texts, attributed)
        for v in g.verdict.verdicts
        for ci in range(1, len(positions) + 1)
    ]
    rows = [(v.id, v.verdict, v.reason) for v in checked.verdict.verdicts]
    return stores + job.statement_verdicts("noise_sensitivity", version, answer_extraction, rows, checked.call_id)
