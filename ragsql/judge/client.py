"""The LLM judge over an OpenAI-compatible endpoint: one typed verdict and one CallRecord per request.

Calls go through `ragsql.llm.send.Sender`: bounded (``settings.concurrency``), rate limited (rpm/tpm
buckets reserving the prompt plus ``max_tokens`` and settled with the reported usage) and retried on
transient errors (the openai client's own retries are off, so every HTTP attempt is counted). A reply that is not JSON
or does not fit the verdict model gets one repair request; a reply cut off at ``max_tokens`` gets one retry with twice
the room. Endpoint and reply problems never raise from `judge`: they come back as a failed record.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import openai
from pydantic import BaseModel, ValidationError

from ragsql.errors import JudgeError
from ragsql.judge.prompts import JudgeRequest
from ragsql.llm.calls import CallRecord, request_hash
from ragsql.llm.limiter import RateLimiter
from ragsql.llm.retry import describe
from ragsql.llm.send import EndpointClient, SendFailed
from ragsql.llm.settings import EndpointSettings
from ragsql.llm.tokens import count_message_tokens, count_tokens

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.shared_params import ResponseFormatJSONObject

__all__ = ["JudgeClient"]

T = TypeVar("T", bound=BaseModel)

_RESPONSE_FORMAT: ResponseFormatJSONObject = {"type": "json_object"}
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)
_REPAIR = {
    "en": "Your reply is not valid: {error}. Reply with only the corrected JSON object.",
    "zh": "你的回复无效：{error}。只回复修正后的 JSON 对象。",
}


class _Failed(Exception):
    """A call that is over: the message becomes the record's error."""


@dataclass
class _Tally:
    attempts: int = 0
    reached: bool = False  # a send reached the endpoint (False: nothing bought)
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Reply:
    content: str
    finish_reason: str | None


class JudgeClient(EndpointClient):
    """Judge requests sent to ``settings.base_url`` with the configured temperature (0 by default), a seed and
    JSON replies."""

    offline = False

    def __init__(self, settings: EndpointSettings, *, limiter: RateLimiter | None = None):
        self.settings = settings
        self.model = settings.model
        super().__init__(settings, limiter)

    def request_hash(self, request: JudgeRequest[Any]) -> str:
        """Cache key of a request: model, prompt version, messages and sampling settings (not inputs, items or
        retries); the version is in it so that bumping a prompt's version invalidates its cached replies (a
        temperature of 0 hashes as the integer 0, as before temperature could be set)."""
        return request_hash(
            self.model,
            {
                "prompt_version": request.prompt_version,
                "messages": request.messages,
                "temperature": self.settings.temperature or 0,
                "seed": self.settings.seed,
                "response_format": _RESPONSE_FORMAT,
                "max_tokens": self.settings.max_tokens,
            },
        )

    async def check(self) -> None:
        """Raise JudgeError (one line) if the endpoint is unreachable, rejects the key or lacks the model."""
        where = self.settings.base_url or "https://api.openai.com/v1"
        try:
            try:
                await self._client.models.retrieve(self.model)
            except openai.NotFoundError:
                # No /models route, or no such model: a one-token chat call tells the two apart.
                await self._client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "user", "content": "Reply with the JSON object {}"}],
                    max_tokens=1,
                    temperature=0,
                )
        except openai.NotFoundError:
            raise JudgeError(f"the judge endpoint {where} does not know the model {self.model!r}") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise JudgeError(f"the judge endpoint {where} rejected the API key ({describe(exc)})") from None
        except openai.APIStatusError as exc:
            raise JudgeError(f"the judge endpoint {where} failed: {describe(exc)}") from None
        except openai.APIConnectionError as exc:
            raise JudgeError(f"cannot reach the judge endpoint {where}: {describe(exc)}") from None

    async def judge(self, request: JudgeRequest[T]) -> tuple[T | None, CallRecord]:
        """Send `request`; return its validated verdict and the call record, or (None, failed record)."""
        start = time.perf_counter()
        tally = _Tally()
        messages = list(request.messages)
        max_tokens = self.settings.max_tokens
        repaired = lengthened = False
        verdict: T | None = None
        error: str | None = None
        try:
            while verdict is None:
                reply = await self._complete(messages, max_tokens, tally)
                if reply.finish_reason == "length":
                    if lengthened:
                        raise _Failed(f"reply cut off at max_tokens={max_tokens} (finish_reason length)")
                    lengthened, max_tokens = True, max_tokens * 2
                    continue
                try:
                    verdict = request.schema.model_validate_json(_unfence(reply.content), context=request.context)
                except ValidationError as exc:
                    problem = _summary(exc)
                    if repaired:
                        raise _Failed(f"invalid reply after one repair: {problem}") from None
                    repaired = True
                    repair = _REPAIR.get(request.language, _REPAIR["en"]).format(error=problem)
                    messages = [
                        *request.messages,
                        {"role": "assistant", "content": reply.content},
                        {"role": "user", "content": repair},
                    ]
        except _Failed as exc:
            error = str(exc)
        record = request.record(
            self.request_hash(request),
            self.model,
            verdict,
            error,
            started=start,
            prompt_tokens=tally.prompt_tokens,
            completion_tokens=tally.completion_tokens,
            attempts=tally.attempts,
            sent=tally.reached,
        )
        return verdict, record

    async def _complete(self, messages: list[dict[str, str]], max_tokens: int, tally: _Tally) -> _Reply:
        """One chat completion with retries; raises _Failed with a one-line reason when it cannot be had."""
        reserve = count_message_tokens(messages) + max_tokens
        try:
            sent = await self._sender.send(
                lambda: self._client.chat.completions.create(
                    model=self.model,
                    # the prompts' messages: {"role": "system" | "user" | "assistant", "content": text}
                    messages=cast("list[ChatCompletionMessageParam]", messages),
                    temperature=self.settings.temperature,
                    seed=self.settings.seed,
                    response_format=_RESPONSE_FORMAT,
                    max_tokens=max_tokens,
                ),
                reserve=reserve,
                check=_check_completion,
            )
        except SendFailed as exc:
            tally.attempts += exc.attempts
            tally.reached = tally.reached or exc.reached
            raise _Failed(exc.reason) from None
        tally.attempts += sent.attempts
        tally.reached = True
        response = sent.reply
        choice = response.choices[0]
        content = choice.message.content or ""
        usage = response.usage
        prompt = usage.prompt_tokens if usage and usage.prompt_tokens is not None else count_message_tokens(messages)
        completion = usage.completion_tokens if usage and usage.completion_tokens is not None else count_tokens(content)
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        self._sender.limiter.settle(reserve, prompt + completion)
        return _Reply(content, choice.finish_reason)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()


def _check_completion(response: Any) -> None:
    """A chat completion with one choice whose content is text (or empty)."""
    choices = response.choices
    if not choices:
        raise ValueError("the reply has no choices")
    content = choices[0].message.content
    if content is not None and not isinstance(content, str):
        raise TypeError(f"the reply's content is {type(content).__name__}, not text")


def _unfence(content: str) -> str:
    """The JSON inside a Markdown code fence, which some models add even in JSON mode."""
    match = _FENCE.match(content)
    return match.group(1) if match else content


def _summary(exc: ValidationError) -> str:
    """The first problems of a validation error, on one line."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return " ".join("; ".join(parts).split())[:300]
