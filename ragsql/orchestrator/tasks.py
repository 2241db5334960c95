"""One function per judge task kind: build the requests a metric needs, ask them, and return the verdict
rows to store. Requests several metrics share (the answer's statements, a reference's statements) are
built identically by each, so the cache and the in-flight map make them one call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from ragsql import registry
from ragsql.db import judging as db, verdict_rows as vr
from ragsql.judge import prompts as p
from ragsql.judge.kinds import citations as citation_check, classify, critique, rating, sentence_relevance, usefulness
from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.verdicts import CITATION, citation_id, context_citations
from ragsql.orchestrator import ragas_tasks
from ragsql.orchestrator.job import Job, NothingToJudge, Store, TaskFailed, together

__all__ = ["KINDS", "Job", "NothingToJudge", "TaskFailed", "run_task", "together"]

NONCOMMITTAL_PLACEHOLDER = "(none: the answer is non-committal)"


async def faithfulness(job: Job) -> list[Store]:
    job.contexts()
    _, got, extraction = await job.answer_analysis()
    return await job.verify(got.verdict.statements, "faithfulness", extraction)


async def answer_relevancy(job: Job) -> list[Store]:
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


async def answer_relevancy_rating(job: Job) -> list[Store]:
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


async def context_precision(job: Job) -> list[Store]:
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


async def context_relevance(job: Job) -> list[Store]:
    request = sentence_relevance.request(job.sample.question, job.contexts(), language=job.language)
    got = await job.ask(request)
    relevant = set(got.verdict.relevant)
    positions = [c.position for c in job.sample.contexts]
    numbers: dict[int, int] = {}
    rows: list[Store] = []
    for sid, (ci, sentence) in enumerate(request.items, 1):
        numbers[ci] = numbers.get(ci, 0) + 1
        rows.append(
            job.verdict(
                vr.SentenceVerdict,
                request.prompt_version,
                position=positions[ci - 1],
                sentence_no=numbers[ci],
                sentence=sentence,
                relevant=sid in relevant,
                call_id=got.call_id,
            )
        )
    return rows


async def context_recall(job: Job) -> list[Store]:
    job.contexts()
    refs = await together(*(job.reference_statements(r) for r in job.references()))
    verified = await together(
        *(job.verify(statements, "context_recall", extraction) for statements, extraction in refs)
    )
    return [store for stores in verified for store in stores]


async def answer_similarity(job: Job) -> list[Store]:
    await job.judging.embed([job.sample.answer, *job.references()])
    return []


async def answer_correctness(job: Job) -> list[Store]:
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


async def aspect_critique(job: Job) -> list[Store]:
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


async def yes_no(job: Job) -> list[Store]:
    """A yes/no metric of the registry: its own prompt, one call per answer."""
    if "contexts" in registry.kind(job.task.kind).needs:
        job.contexts()  # fails the task of an answer without contexts
    references = job.references()
    request = p.yes_no(
        job.task.kind,
        job.sample.question,
        job.sample.answer,
        contexts=[c.text for c in job.sample.contexts],
        reference=references[0] if references else None,
        language=job.language,
    )
    got = await job.ask(request)
    return [
        job.verdict(
            vr.YesNoVerdict,
            request.prompt_version,
            metric=job.task.kind,
            verdict=got.verdict.verdict,
            reason=got.verdict.reason,
            call_id=got.call_id,
        )
    ]


def cited_sentences(answer: str, ids: Collection[str]) -> list[tuple[str, list[str]]]:
    """The answer's sentences with the contexts each cites (`context_citations`: [c12], [3], [a, b] where these
    are the contexts' citation ids); a sentence of bracketed text alone joins the sentence before."""
    out: list[tuple[str, list[str]]] = []
    for sentence in split_sentences(answer):
        cited = context_citations(sentence, ids)
        if not CITATION.sub(" ", sentence).strip(" .。!！?？") and out:
            out[-1][1].extend(cited)
        else:
            out.append((sentence, cited))
    return out


def has_citations(answer: str, ids: Collection[str]) -> bool:
    """Whether the answer cites at least one of the contexts whose citation ids are `ids`."""
    return bool(context_citations(answer, ids))


async def citations(job: Job) -> list[Store]:
    by_id = {citation_id(c.docno, c.position): c for c in job.sample.contexts}
    sentences = cited_sentences(job.sample.answer, by_id)
    if not sentences:
        raise TaskFailed("the answer has no sentence")
    # (sentence no, citation no, sentence, docno): citation 0 with no docno marks a sentence without citation
    cited = [
        (sno, cno, sentence, by_id[cid].docno or str(by_id[cid].position))
        for sno, (sentence, ids) in enumerate(sentences, 1)
        for cno, cid in enumerate(ids, 1)
    ]
    prompt_version = p.load_prompt(
        "citations", job.language or detect_language(job.sample.question or job.sample.answer)
    ).version
    checked: dict[tuple[int, int], tuple[bool | None, str | None, int | None]] = {}
    if cited:
        request = citation_check.request(
            [(CITATION.sub(" ", sentence), [_context_text(job, docno)]) for _, _, sentence, docno in cited],
            language=job.language,
        )
        got = await job.ask(request)
        prompt_version = request.prompt_version
        checked = {
            (sno, cno): (v.supported, v.reason, got.call_id) for (sno, cno, _, _), v in zip(cited, got.verdict.verdicts)
        }
    uncited = [(sno, 0, sentence, None) for sno, (sentence, ids) in enumerate(sentences, 1) if not ids]
    return [
        job.verdict(
            vr.CitationVerdict,
            prompt_version,
            sentence_no=sno,
            citation_no=cno,
            sentence=sentence,
            docno=docno,
            supports=supports,
            reason=reason,
            call_id=call_id,
        )
        for sno, cno, sentence, docno in sorted([*cited, *uncited], key=lambda r: (r[0], r[1]))
        for supports, reason, call_id in [checked.get((sno, cno), (None, None, None))]
    ]


def _context_text(job: Job, docno: str) -> str:
    for c in job.sample.contexts:
        if (c.docno or str(c.position)) == docno:
            return c.text
    raise AssertionError(docno)


KINDS: dict[str, Callable[[Job], Awaitable[list[Store]]]] = {
    name: yes_no if name in registry.YES_NO else globals().get(name) or getattr(ragas_tasks, name)
    for name in registry.KINDS
}
"""The task function of each judge kind of the registry: `yes_no` for a yes/no metric, else the function named
after the kind (here or in ragas_tasks)."""


async def run_task(job: Job) -> list[Store]:
    """The rows a task stores; TaskFailed (or CallFailed) when it cannot be judged."""
    if not job.sample.answer.strip():
        raise TaskFailed("the answer is empty")
    if "reference" in registry.kind(job.task.kind).needs and not job.sample.references:
        return []
    return await KINDS[job.task.kind](job)
