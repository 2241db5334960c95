"""Test-set generation: eval questions written from a corpus's documents, each stored with its reference answer
and its gold evidence as document spans (so it serves every chunking), ready for retrieve, generate and judge.

A seeded plan picks passages (paragraphs): one for a single-hop question, two of related documents (sharing the
most content words; else two paragraphs of one document) for multi-hop and comparison questions. Each planned
question is one ``synthesize`` request to the judge's client — an LLM, or the offline judge's deterministic
cloze — asked through the call cache, so the same seed asks nothing twice. A reply whose quotes cannot be found
in its documents, or whose question nearly repeats a kept one, is dropped (with the count of each reason); the
plan goes on, up to three attempts per wanted question.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ragsql.calls import CallService
from ragsql.calls.requests import Calls, ask
from ragsql.db import connect, corpus as corpus_db, load, names
from ragsql.errors import InputError
from ragsql.judge.kinds.synthesize import request as synth_request
from ragsql.judge.language import LANGUAGES, detect_language
from ragsql.judge.lexical import content_tokens, similarity
from ragsql.llm.aio import off_loop
from ragsql.llm.calls import CallFailed

__all__ = ["ATTEMPTS", "DUPLICATE", "Question", "SynthResult", "cached_requests", "plan", "synthesize"]

DUPLICATE = 0.85
"""Questions whose content-token cosine with a kept one reaches this are near-duplicates, dropped."""
ATTEMPTS = 3
_MAX_PASSAGE = 1500


@dataclass(frozen=True)
class Doc:
    doc_id: str
    text: str
    language: str


@dataclass(frozen=True)
class Planned:
    """One question to write: its kind and language, and the (doc_id, passage) it is written from."""

    kind: str
    language: str
    passages: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Question:
    """A kept question: qid, kind, language, text, reference answer and gold spans (doc_id, start, end, quote)."""

    qid: str
    kind: str
    language: str
    question: str
    answer: str
    spans: tuple[tuple[str, int, int, str], ...]
    model: str
    call_id: int


@dataclass
class SynthResult:
    """What a synth run wrote, dropped and cost."""

    dataset: str
    questions: list[Question] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    attempts: int = 0
    calls: Calls = field(default_factory=Calls)
    seconds: float = 0.0


def _passages(doc: Doc) -> list[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", doc.text) if len(p.strip()) >= 40]
    return [p[:_MAX_PASSAGE] for p in paragraphs] or [doc.text.strip()[:_MAX_PASSAGE]]


def plan(docs: Sequence[Doc], n: int, kinds: Sequence[str], seed: int) -> Iterator[Planned]:
    """The seeded sequence of questions to write (at most ATTEMPTS × n): kinds in turn, documents at random;
    a second passage from the related document sharing the most content tokens, else from the same one."""
    rng = random.Random(seed)
    tokens = {d.doc_id: set(content_tokens(d.text)) for d in docs}
    for i in range(ATTEMPTS * n):
        kind = kinds[i % len(kinds)]
        doc = docs[rng.randrange(len(docs))]
        first = rng.choice(_passages(doc))
        if kind == "single":
            yield Planned(kind, doc.language, ((doc.doc_id, first),))
            continue
        others = [d for d in docs if d.doc_id != doc.doc_id and d.language == doc.language]
        related = max(others, key=lambda d: (len(tokens[d.doc_id] & tokens[doc.doc_id]), d.doc_id), default=None)
        if related is not None and len(tokens[related.doc_id] & tokens[doc.doc_id]) >= 3:
            second = (related.doc_id, rng.choice(_passages(related)))
        else:
            rest = [q for q in _passages(doc) if q != first]
            if not rest:
                continue
            second = (doc.doc_id, rng.choice(rest))
        yield Planned(kind, doc.language, ((doc.doc_id, first), second))


def locate(text: str, quote: str) -> tuple[int, int] | None:
    """Where `quote` is in `text`: exactly, else with any run of whitespace in it matching any other."""
    at = text.find(quote)
    if at >= 0:
        return at, at + len(quote)
    words = quote.split()
    if not words:
        return None
    found = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return (found.start(), found.end()) if found else None


async def synthesize(
    url: str,
    corpus: str,
    dataset: str,
    client,
    *,
    n: int = 100,
    kinds: Sequence[str] = ("single",),
    language: str = "auto",
    seed: int = 0,
    style: str = "plain",
    on_progress: Callable[[int, int], None] | None = None,
) -> SynthResult:
    """Write `n` questions from `corpus` into `dataset` (replacing the questions an earlier call with this seed
    stored); returns what was kept and dropped. `client`: JudgeClient or OfflineJudge."""
    docs = _documents(url, corpus, language)
    if client.offline and "comparison" in kinds:
        raise InputError(
            "comparison questions need an LLM (set RAGSQL_JUDGE_BASE_URL and RAGSQL_JUDGE_API_KEY); "
            "the offline synthesizer writes single and multi"
        )
    started = time.perf_counter()
    result = SynthResult(dataset)
    async with CallService(url, purpose="synth") as service:
        for planned in plan(docs, n, list(kinds), seed):
            if len(result.questions) >= n:
                break
            result.attempts += 1
            await _write(planned, docs, client, service, result, f"synth-{seed}-{len(result.questions) + 1:04d}", style)
            if on_progress:
                on_progress(len(result.questions), n)
    _store(url, dataset, result.questions, seed)
    result.seconds = time.perf_counter() - started
    return result


async def cached_requests(
    url: str,
    corpus: str,
    client,
    *,
    n: int,
    kinds: Sequence[str],
    language: str = "auto",
    seed: int = 0,
    style: str = "plain",
) -> int:
    """How many of the plan's first `n` requests the call cache already answers (for a dry run)."""
    docs = _documents(url, corpus, language)
    async with CallService(url, purpose="synth") as service:
        found = 0
        for i, planned in enumerate(plan(docs, n, list(kinds), seed)):
            if i >= n:
                break
            request = synth_request(list(planned.passages), planned.kind, language=planned.language, style=style)
            found += await service.lookup(client.request_hash(request)) is not None
    return found


async def _write(
    planned: Planned, docs: Sequence[Doc], client, service: CallService, result: SynthResult, qid: str, style: str
) -> None:
    request = synth_request(list(planned.passages), planned.kind, language=planned.language, style=style)
    try:
        got, call_id = await ask(client, request, service, result.calls)
    except CallFailed as exc:
        result.dropped["no valid reply (" + str(exc).split(": ")[-1][:60] + ")"] += 1
        return
    texts = {d.doc_id: d.text for d in docs if d.doc_id in {e.id for e in got.evidence}}
    spans = []
    for evidence in got.evidence:
        where = locate(texts[evidence.id], evidence.quote)
        if where is None:
            result.dropped["a quote is not in its document"] += 1
            return
        spans.append((evidence.id, where[0], where[1], texts[evidence.id][where[0] : where[1]]))
    # every question so far, lexically: off the event loop, where the call cache's connections wait
    if await off_loop(_near_duplicate, got.question, [q.question for q in result.questions]):
        result.dropped["near-duplicate question"] += 1
        return
    result.questions.append(
        Question(
            qid,
            planned.kind,
            planned.language,
            got.question,
            got.answer,
            tuple(dict.fromkeys(spans)),
            client.model,
            call_id,
        )
    )


def _near_duplicate(question: str, others: Sequence[str]) -> bool:
    return any(similarity(question, other) >= DUPLICATE for other in others)


def _documents(url: str, corpus: str, language: str) -> list[Doc]:
    if language != "auto" and language not in LANGUAGES:
        raise InputError(f"--lang must be auto or one of {', '.join(LANGUAGES)}, got {language!r}")
    with connect(url) as conn:
        docs = [
            Doc(d, t, (lang or "en")[:2])
            for d, t, lang in corpus_db.corpus_documents(conn, names.corpus_id(conn, corpus))
        ]
    docs = [d for d in docs if d.text.strip() and (language == "auto" or d.language == language)]
    if not docs:
        raise InputError(f'corpus "{corpus}" has no document' + ("" if language == "auto" else f" in {language}"))
    return [Doc(d.doc_id, d.text, d.language if d.language in LANGUAGES else detect_language(d.text)) for d in docs]


def _store(url: str, dataset: str, questions: Sequence[Question], seed: int) -> None:
    """The questions as queries (metadata: synth kind, seed, model, call, documents), gold spans and reference
    answers, in one transaction. What an earlier call with this seed stored stays when it is the same (runs on
    it keep their answers), and is replaced otherwise."""
    with connect(url) as conn, conn.transaction():
        dataset_id = load.ensure_dataset(conn, dataset)
        if load.synthesized(conn, dataset_id, str(seed)) == {q.qid: q.question for q in questions}:
            return
        load.delete_synthesized(conn, dataset_id, str(seed))
        load.add_queries(
            conn,
            dataset_id,
            (
                (
                    q.qid,
                    q.question,
                    q.language,
                    {
                        "synth": q.kind,
                        "synth_seed": str(seed),
                        "synth_model": q.model,
                        "synth_call": q.call_id,
                        "documents": sorted({s[0] for s in q.spans}),
                    },
                )
                for q in questions
            ),
        )
        load.add_gold_spans(
            conn,
            dataset_id,
            ((q.qid, doc, start, end, quote, 1) for q in questions for doc, start, end, quote in q.spans),
        )
        load.add_reference_answers(conn, dataset_id, ((q.qid, q.answer) for q in questions))
    with connect(url) as conn:
        load.analyze(conn)
        conn.commit()
