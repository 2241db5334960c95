"""One answer per query, from its top retrieved contexts, with ``[docno]`` citations.

The generator is the judge's own client: `JudgeClient` for an OpenAI-compatible endpoint, or `OfflineJudge`,
whose ``generate`` task writes an extractive answer. Either way the request is the ``generate`` prompt, and
its reply comes through the call service (`ragsql.calls`): read from or stored in ``ragsql.judge_call`` by
request hash, so generating the same contexts again makes no call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragsql.calls import CallService
from ragsql.db.answers import NewAnswer, QueryContexts
from ragsql.judge import prompts as p
from ragsql.judge.client import JudgeClient
from ragsql.judge.heuristics import GENERATOR
from ragsql.judge.language import LANGUAGES
from ragsql.judge.offline import OfflineJudge
from ragsql.judge.verdicts import CITATION_ID, GeneratedAnswer
from ragsql.llm.calls import CallFailed, CallRecord
from ragsql.llm.settings import EndpointSettings

__all__ = ["Calls", "GenerationFailed", "answer_query", "generator_name", "make_generator"]


class GenerationFailed(CallFailed):
    """No answer could be had for a query; it gets no answer row, and this is the reason."""


@dataclass
class Calls:
    """The calls generating made (failed ones too) and how many replies came from the cache instead."""

    made: list[CallRecord] = field(default_factory=list)
    cached: int = 0

    @property
    def failed(self) -> int:
        return sum(not rec.ok for rec in self.made)

    def tokens(self, which: str) -> int:
        """Sum of ``prompt`` or ``completion`` tokens over the calls made."""
        return sum(getattr(rec, f"{which}_tokens") or 0 for rec in self.made)


def make_generator(settings: EndpointSettings, *, offline: bool = False) -> JudgeClient | OfflineJudge:
    """The endpoint's client, or the offline extractive generator (with `offline` or no endpoint configured)."""
    return OfflineJudge() if offline or not settings.configured else JudgeClient(settings)


def generator_name(client: Any) -> str:
    """What wrote the answers: ``offline-extractive-v1`` or the endpoint's model."""
    return GENERATOR if client.offline else client.model


def citation_id(docno: str, position: int) -> str:
    """The id a context is cited by: its docno, or its position when the docno cannot be written in brackets
    (the citations metric resolves a number to the context at that position)."""
    return docno if CITATION_ID.fullmatch(docno) else str(position)


async def ask(client: Any, request: p.JudgeRequest[GeneratedAnswer], calls_service: CallService,
              calls: Calls) -> tuple[GeneratedAnswer, int]:
    """The validated answer and its call id: the cached reply of this request, else one call, stored at once."""
    try:
        stored = await calls_service.get(client.request_hash(request), lambda: _judged(client, request, calls))
    except CallFailed as exc:
        raise GenerationFailed(str(exc)) from None
    if stored.cached:
        calls.cached += 1
        return request.schema.model_validate(stored.response, context=request.context), stored.call_id
    return stored.value, stored.call_id


async def _judged(client: Any, request: p.JudgeRequest[GeneratedAnswer], calls: Calls):
    verdict, rec = await client.judge(request)
    calls.made.append(rec)
    return verdict, rec


async def answer_query(client: Any, query: QueryContexts, service: CallService, calls: Calls,
                       top_n: int) -> NewAnswer:
    """The answer to one query from its contexts (already its top `top_n` results), ready to store."""
    if not query.question.strip():
        raise GenerationFailed("the query has no question text")
    language = (query.language or "").lower()[:2]
    ids = [citation_id(docno, i) for i, (docno, _) in enumerate(query.contexts, 1)]
    request = p.generate(query.question, list(zip(ids, (text for _, text in query.contexts))),
                         language=language if language in LANGUAGES else None)
    got, call_id = await ask(client, request, service, calls)
    metadata = {"generator": generator_name(client), "model": client.model, "prompt_version": request.prompt_version,
                "top_n": top_n, "language": request.language, "call_id": call_id}
    return NewAnswer(query.query_id, got.answer, metadata, list(query.contexts))
