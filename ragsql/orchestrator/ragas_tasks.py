"""The judge task kinds of RAGAS's later metrics: response_groundedness and nv_context_relevance (two 0/1/2 judge
passes), context_entity_recall (entities of the references and of the contexts), factual_correctness (claims of
each side checked against the other), noise_sensitivity (per-context support of the answer's and the references'
statements) and rubrics_score (a 1-5 score per stored rubric). Extractions other metrics make are reused: the
answer's statements come from the same answer_analysis call as faithfulness's, the references' from context_recall's
statements calls.

Calls per answer, over what the default metrics already make (one reference answer, n contexts):
response_groundedness 2, nv_context_relevance 2 (0 when the contexts are part of the question),
context_entity_recall 2 (one per reference answer, plus one for the contexts), factual_correctness 4 (claims of the
answer and of the reference, then each checked against the other), noise_sensitivity 3 (which contexts support the
answer's statements, which the reference's, and the answer's statements against the reference), rubrics_score 1 per
rubric (the two built-ins and each of `ragsql rubric add`'s; a rubric with reference skips a query without one)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ragsql.db import judging as db, verdict_rows as vr
from ragsql.judge import prompts as p
from ragsql.judge.kinds import attribution, claims, context_rating, entities, groundedness, rubric, verify
from ragsql.judge.language import detect_language
from ragsql.orchestrator.job import Job, Store, TaskFailed, together
from ragsql.orchestrator.service import CallFailed

__all__ = [
    "context_entity_recall",
    "factual_correctness",
    "noise_sensitivity",
    "nv_context_relevance",
    "response_groundedness",
    "rubrics_score",
]


def _joined(job: Job) -> list[str]:
    contexts = job.contexts()
    if not "\n".join(contexts).strip():
        raise TaskFailed("the contexts are empty")
    return contexts


async def _two_passes(job: Job, metric: str, build: Callable[[int], p.JudgeRequest]) -> list[Store]:
    """Both judge passes at once; a pass whose call fails is stored as a row with its error (RAGAS then uses the
    other pass alone); the task fails only when both do."""
    requests = [build(1), build(2)]
    got = await asyncio.gather(*(job.ask(r) for r in requests), return_exceptions=True)
    rows = []
    for n, answer in enumerate(got, 1):
        if isinstance(answer, CallFailed):
            rows.append((n, None, f"judge pass {n} failed: {answer}", None))
        elif isinstance(answer, BaseException):
            raise answer
        else:
            rows.append((n, answer.verdict.rating, None, answer.call_id))
    if all(score is None for _, score, _, _ in rows):
        raise TaskFailed("; ".join(reason or "" for _, _, reason, _ in rows))
    return _graded(job, metric, requests[0].prompt_version, rows)


def _graded(
    job: Job, metric: str, version: str, rows: list[tuple[int, int | None, str | None, int | None]]
) -> list[Store]:
    """(judge pass, 0/1/2 score or None, reason, call id) of a two-pass metric, as rows to store."""
    return [
        job.verdict(vr.GradedVerdict, version, metric=metric, judge_pass=n, score=score, reason=reason, call_id=call_id)
        for n, score, reason, call_id in rows
    ]


async def response_groundedness(job: Job) -> list[Store]:
    contexts = _joined(job)
    return await _two_passes(
        job,
        "response_groundedness",
        lambda n: groundedness.request(job.sample.answer, contexts, judge_pass=n, language=job.language),
    )


async def nv_context_relevance(job: Job) -> list[Store]:
    question = job.sample.question.strip()
    if not question:
        raise TaskFailed("the query has no question text")
    contexts = _joined(job)
    if "\n".join(contexts).strip() in question:  # RAGAS: contexts equal to or inside the question score 0
        version = p.load_prompt("context_rating", job.language or detect_language(question)).version
        why = "the contexts are the question or part of it: 0 without a call (RAGAS)"
        return _graded(job, "nv_context_relevance", version, [(1, 0, why, None), (2, 0, why, None)])
    return await _two_passes(
        job,
        "nv_context_relevance",
        lambda n: context_rating.request(question, contexts, judge_pass=n, language=job.language),
    )


async def context_entity_recall(job: Job) -> list[Store]:
    texts = [*job.references(), "\n".join(_joined(job))]  # RAGAS extracts from the contexts joined by newlines
    requests = [entities.request(text, language=job.language) for text in texts]
    got = await together(*(job.ask(r) for r in requests))
    return [
        vr.EntityExtraction(db.text_hash(text), job.model, r.prompt_version, list(g.verdict.entities), g.call_id)
        for text, r, g in zip(texts, requests, got)
    ]


async def factual_correctness(job: Job) -> list[Store]:
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


async def noise_sensitivity(job: Job) -> list[Store]:
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


async def rubrics_score(job: Job) -> list[Store]:
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
