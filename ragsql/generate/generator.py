"""One answer per query, from its top retrieved contexts, with ``[docno]`` citations.

The generator is the judge's own client: `JudgeClient` for an OpenAI-compatible endpoint, or `OfflineJudge`,
whose ``generate`` task writes an extractive answer. Either way the request is the ``generate`` prompt, and
its reply comes through the call service (`ragsql.calls`): read from or stored in ``ragsql.judge_call`` by
request hash, so generating the same contexts again makes no call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragsql.calls import CallService
from ragsql.calls.requests import Calls, ask as cached_ask
from ragsql.db.answers import NewAnswer, QueryContexts
from ragsql.judge.kinds import generate
from ragsql.judge.kinds.generate import GENERATOR, GeneratedAnswer
from ragsql.judge.language import LANGUAGES
from ragsql.judge.offline import OfflineJudge
from ragsql.judge.prompts import JudgeRequest
from ragsql.judge.verdicts import citation_id
from ragsql.llm.calls import CallFailed
from ragsql.llm.settings import EndpointSettings

if TYPE_CHECKING:
    from ragsql.judge.client import JudgeClient

__all__ = ["Calls", "GenerationFailed", "answer_query", "generator_name", "make_generator"]


class GenerationFailed(CallFailed):
    """No answer could be had for a query; it gets no answer row, and this is the reason."""


def make_generator(settings: EndpointSettings, *, offline: bool = False) -> JudgeClient | OfflineJudge:
    """The endpoint's client, or the offline extractive generator (with `offline` or no endpoint configured)."""
    if offline or not settings.configured:
        return OfflineJudge()
    from ragsql.judge.client import JudgeClient  # openai loads only for an endpoint (~0.5 s)

    return JudgeClient(settings)


def generator_name(client: Any) -> str:
    """What wrote the answers: ``offline-extractive-v1`` or the endpoint's model."""
    return GENERATOR if client.offline else client.model


async def ask(
    client: Any, request: JudgeRequest[GeneratedAnswer], calls_service: CallService, calls: Calls
) -> tuple[GeneratedAnswer, int]:
    """The validated answer and its call id (`ragsql.calls.requests.ask`); a failed call is GenerationFailed."""
    try:
        return await cached_ask(client, request, calls_service, calls)
    except CallFailed as exc:
        raise GenerationFailed(str(exc)) from None


async def answer_query(client: Any, query: QueryContexts, service: CallService, calls: Calls, top_n: int) -> NewAnswer:
    """The answer to one query from its contexts (already its top `top_n` results), ready to store."""
    if not query.question.strip():
        raise GenerationFailed("the query has no question text")
    language = (query.language or "").lower()[:2]
    ids = [citation_id(docno, i) for i, (docno, _) in enumerate(query.contexts, 1)]
    request = generate.request(
        query.question,
        list(zip(ids, (text for _, text in query.contexts))),
        language=language if language in LANGUAGES else None,
    )
    got, call_id = await ask(client, request, service, calls)
    metadata = {
        "generator": generator_name(client),
        "model": client.model,
        "prompt_version": request.prompt_version,
        "top_n": top_n,
        "language": request.language,
        "call_id": call_id,
    }
    return NewAnswer(query.query_id, got.answer, metadata, list(query.contexts))
