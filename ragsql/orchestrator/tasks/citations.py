"""citation_coverage and citation_validity: the answer's sentences with what each cites, and each cited sentence
checked against the contexts it cites (one citations call)."""

from __future__ import annotations

from collections.abc import Collection

from ragsql.db import verdict_rows as vr
from ragsql.judge import prompts as p
from ragsql.judge.kinds import citations
from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.verdicts import CITATION, citation_id, context_citations
from ragsql.orchestrator.job import Job, Store, TaskFailed

__all__ = ["cited_sentences", "has_citations", "run"]


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


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
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
        request = citations.request(
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
