"""The offline judge: the embedded default when no endpoint is configured, and the dry-run stand-in.

It answers every task at once, deterministically, from lexical overlap (each call's rule is the ``offline`` of its
folder, ``ragsql/judge/kinds/<name>/``, built on the shared rules of `ragsql.judge.heuristics`); it never calls out,
costs nothing and needs no model. Its verdicts are rough — good enough to run the pipeline end to end and to rank
clearly good against clearly bad answers, not to replace an LLM judge. It also writes the offline generator's
extractive answers (task ``generate``), so `ragsql generate` caches and counts them exactly as it does an endpoint's.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ragsql.judge import kinds
from ragsql.judge.kinds import rating, sentence_relevance
from ragsql.judge.lexical import coverage
from ragsql.judge.prompts import JudgeRequest
from ragsql.llm.aio import Batched, off_loop
from ragsql.llm.calls import CallRecord, request_hash

__all__ = ["OfflineJudge"]

T = TypeVar("T", bound=BaseModel)
_CACHED = 20_000  # relevance-model vectors kept (float32: about 30 MB for e5's 384 dimensions)


class _Embedder(Protocol):
    async def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[Any]]: ...


class _QueryEmbedder(_Embedder, Protocol):
    name: str

    async def embed_queries(self, texts: Sequence[str]) -> tuple[list[list[float]], list[Any]]: ...

    async def aclose(self) -> None: ...


def _worth_weighing(request: JudgeRequest[Any]) -> tuple[list[tuple[int, str]], list[str]]:
    """The (context number, sentence) items of a sentence-relevance request, and the sentences worth weighing by the
    model."""
    text = request.inputs["question"]
    items = list(sentence_relevance.relevance_items(request))
    return items, [s for _, s in items if text.strip() and sentence_relevance.worth_weighing(s, text)]


def _context_to_weigh(request: JudgeRequest[Any], items: list[tuple[int, str]], cosine: dict[str, float]) -> list[str]:
    """The sentences not weighed yet of each context holding one whose relevance hangs on how far it stands apart
    from the others (`sentence_relevance.weighs_context`)."""
    text = request.inputs["question"]
    contexts = {c for c, s in items if sentence_relevance.weighs_context(s, text, cosine.get(s))}
    return [s for c, s in items if c in contexts and s not in cosine]


def _validated(request: JudgeRequest[T], heuristic: Callable[..., Any], *args: Any) -> T:
    """`heuristic(*args)`, the reply to `request`, validated by its schema."""
    return request.schema.model_validate(heuristic(*args), context=request.context)


class OfflineJudge:
    """Judge requests answered by lexical heuristics, with the same interface as `JudgeClient`.

    With an `embedder` (any object with ``async embed(texts)``, e.g. ``ragsql.embed.HashingEmbedder``) the
    1-5 rating uses the cosine of the question's and the answer's embeddings; without one it uses the share
    of the question's content tokens found in the answer. With a `relevance` model (unit vectors from
    ``embed_queries`` / ``embed``, e.g. ``ragsql.embed.E5Embedder``) context sentence relevance weighs meaning
    as well as words (`kinds.sentence_relevance.offline`), and the judge's model name says so
    (``offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2``: the heuristics' version and the model's
    whole name, build included): its verdicts never mix with the words-only judge's, nor another model's.
    """

    offline = True
    version = "offline-heuristic-v7"

    def __init__(self, embedder: _Embedder | None = None, relevance: _QueryEmbedder | None = None):
        self._embedder = embedder
        self._relevance = relevance
        self._cache: OrderedDict[tuple[bool, str], array] = OrderedDict()
        self._pending: dict[tuple[bool, str], asyncio.Task[array]] = {}  # queued or being embedded
        # texts concurrent requests ask for while the model is busy go together in its next call, per kind
        self._batches = {query: Batched(functools.partial(self._embed, query=query)) for query in (True, False)}
        self.model = self.version if relevance is None else f"{self.version}+{relevance.name}"

    def request_hash(self, request: JudgeRequest[Any]) -> str:
        """Cache key of a request: this judge's model, the task, the messages and every raw input the heuristics
        read (the question of an answer-relevancy request is not in its messages, but decides its reply)."""
        return request_hash(
            self.model,
            {
                "messages": request.messages,
                "kind": request.kind,
                "inputs": request.inputs,
                "items": request.items,
                "language": request.language,
                "embedder": getattr(self._embedder, "name", None),
            },
        )

    @property
    def relevance(self) -> _QueryEmbedder | None:
        """The model that weighs context sentences' meaning (None: words alone)."""
        return self._relevance

    async def check(self) -> None:
        """Nothing to check: the offline judge is always there."""

    async def judge(self, request: JudgeRequest[T]) -> tuple[T | None, CallRecord]:
        """The heuristic verdict of `request`, validated by its schema, and an ok call record (failed if the
        verdict does not validate or the task is unknown — which would be a bug here)."""
        start = time.perf_counter()
        verdict: T | None = None
        error: str | None = None
        try:
            verdict = await self._verdict(request)
        except (ValidationError, ValueError, KeyError) as exc:
            error = "offline: " + " ".join(str(exc).split())[:300]
        return verdict, request.record(self.request_hash(request), self.model, verdict, error, started=start)

    async def _verdict(self, request: JudgeRequest[T]) -> T:
        """The heuristic reply to `request`, validated. The heuristics (jieba's tagger, for one) and the validation (a
        verdict of many statements takes a while) run in the compute pool, never on the event loop, in one hand-over
        per request: a judge run's database connections wait on the loop (`ragsql.llm.aio`)."""
        if request.kind == "rating":
            similarity = await self._similarity(request.inputs["question"], request.inputs["answer"])
            return await off_loop(_validated, request, rating.offline, similarity)
        if request.kind == "sentence_relevance" and self._relevance is not None:
            try:
                cosines = await self._cosines(request)
            except Exception as exc:  # the local model's engine (a C library): the task fails with its reason
                raise ValueError(f"relevance model {self._relevance.name} failed: {exc}") from None
            return await off_loop(_validated, request, sentence_relevance.offline, request, cosines)
        call = kinds.module(request.kind)
        if call is None:
            raise ValueError(f"the offline judge has no task {request.kind!r}")
        return await off_loop(_validated, request, call.offline, request)

    async def _similarity(self, question: str, answer: str) -> float:
        """Embedding cosine (clipped at 0) when there is an embedder, else lexical coverage of the question."""
        if self._embedder is None or not question.strip() or not answer.strip():
            return await off_loop(coverage, question, answer)
        (q, a), _ = await self._embedder.embed([question, answer])
        norm = math.sqrt(sum(x * x for x in q) * sum(x * x for x in a))
        return max(0.0, sum(x * y for x, y in zip(q, a)) / norm) if norm else 0.0

    async def _cosines(self, request: JudgeRequest[Any]) -> list[float | None]:
        """The relevance model's cosine between the question and each context sentence of `request` that is worth
        weighing (`sentence_relevance.worth_weighing`), and each other sentence of a context where one of them
        stands apart or not (`sentence_relevance.weighs_context`); None for the others."""
        text = request.inputs["question"]
        items, weighed = await off_loop(_worth_weighing, request)
        if not weighed:
            return [None] * len(items)
        (question,) = await self._vectors([text], query=True)

        async def cosines(texts: list[str]) -> dict[str, float]:
            return {
                s: sum(q * v for q, v in zip(question, vector)) for s, vector in zip(texts, await self._vectors(texts))
            }

        cosine = await cosines(weighed)
        more = await off_loop(_context_to_weigh, request, items, cosine)
        if more:  # a second round: those contexts' other sentences, once the first round said which
            cosine |= await cosines(more)
        return [cosine.get(s) for _, s in items]

    async def _vectors(self, texts: list[str], query: bool = False) -> list[array]:
        """The relevance model's unit vectors of `texts`, the last _CACHED of them kept: the runs of one dataset
        share most of their context sentences, and each is embedded once. Texts that concurrent requests ask for
        while the model is busy are embedded together in its next call (one batch of many texts runs ~3x faster
        than as many calls of a few; a text's vector does not depend on its batch)."""
        keys = [(query, t) for t in texts]
        for key in dict.fromkeys(keys):
            if key not in self._cache and key not in self._pending:
                self._pending[key] = task = asyncio.ensure_future(self._vector(key))
                task.add_done_callback(functools.partial(self._settled, key))
        known = {key: self._cache[key] for key in keys if key in self._cache}  # read now: others may evict them
        for key in known:
            self._cache.move_to_end(key)
        waiting = {key: self._pending[key] for key in keys if key not in known}
        if waiting:
            await asyncio.wait(set(waiting.values()))
        return [known[key] if key in known else waiting[key].result() for key in keys]

    async def _vector(self, key: tuple[bool, str]) -> array:
        """One text's vector, embedded in the next batch of its kind and kept; the batch's error if it fails."""
        query, text = key
        vector = array("f", await self._batches[query](text))
        self._cache[key] = vector
        while len(self._cache) > _CACHED:
            self._cache.popitem(last=False)
        return vector

    def _settled(self, key: tuple[bool, str], task: asyncio.Task[array]) -> None:
        """A vector's task ended (embedded, failed or cancelled with its loop): no longer pending, its error read (a
        waiter cancelled meanwhile must not leave it logged at exit)."""
        if self._pending.get(key) is task:
            del self._pending[key]
        if not task.cancelled():
            task.exception()

    async def _embed(self, texts: list[str], query: bool) -> list[list[float]]:
        """One call of the relevance model on texts of one kind (queries or passages)."""
        assert self._relevance is not None
        embed = self._relevance.embed_queries if query else self._relevance.embed
        return (await embed(texts))[0]

    async def aclose(self) -> None:
        """Close the relevance model, if any."""
        for batches in self._batches.values():
            await batches.aclose()
        if self._relevance is not None:
            await self._relevance.aclose()
