"""factual_correctness (RAGAS): the claims of the answer and of each reference, then each side's claims checked
against the other (4 calls per answer with one reference)."""

from __future__ import annotations

from ragsql.judge.kinds import claims, verify
from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    atomicity, coverage = job.judging.claim_settings
    texts = [job.sample.answer, *job.references()]
    requests = [claims.request(text, atomicity=atomicity, coverage=coverage, language=job.language) for text in texts]
    got = await together(*(job.ask(r) for r in requests))
    claims_version = requests[0].prompt_version
    extractions = await together(
        *(job.extraction(text, claims_version, g.call_id, g.verdict.claims) for text, g in zip(texts, got))
    )
    answer_claims, (answer_extraction, *reference_extractions) = got[0].verdict.claims, extractions
    checks = []  # (purpose, extraction, claims, evidence)
    if answer_claims:
        checks.append(("factual_precision", answer_extraction, answer_claims, job.references()))
    checks += [
        ("factual_recall", extraction, g.verdict.claims, [job.sample.answer])
        for extraction, g in zip(reference_extractions, got[1:])
        if g.verdict.claims
    ]
    checking = [verify.request(found, evidence, language=job.language) for _, _, found, evidence in checks]
    verdicts = await together(*(job.ask(r) for r in checking))
    stores: list[Store] = []
    for (purpose, extraction, _, _), r, g in zip(checks, checking, verdicts):
        rows = [(v.id, v.verdict, v.reason) for v in g.verdict.verdicts]
        stores += job.statement_verdicts(purpose, f"{r.prompt_version}+{claims_version}", extraction, rows, g.call_id)
    return stores
