"""A judge-client request answered through the call service: the cached reply, else one call, stored at once.
The generator and the test-set synthesizer ask their prompts this way (the judge's workers batch their own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragsql.calls.service import CallService
from ragsql.llm.calls import CallRecord

__all__ = ["Calls", "ask"]


@dataclass
class Calls:
    """The calls made (failed ones too) and how many replies came from the cache instead."""

    made: list[CallRecord] = field(default_factory=list)
    cached: int = 0

    @property
    def failed(self) -> int:
        return sum(not rec.ok for rec in self.made)

    def tokens(self, which: str) -> int:
        """Sum of ``prompt`` or ``completion`` tokens over the calls made."""
        return sum(getattr(rec, f"{which}_tokens") or 0 for rec in self.made)


async def ask(client: Any, request: Any, service: CallService, calls: Calls) -> tuple[Any, int]:
    """The validated reply to `request` (a JudgeRequest) and its call id: the cached reply of this request, else
    one call by `client` (JudgeClient or OfflineJudge), stored at once. A call that fails raises CallFailed."""
    stored = await service.get(client.request_hash(request), lambda: _called(client, request, calls))
    if stored.cached:
        calls.cached += 1
        return request.schema.model_validate(stored.response, context=request.context), stored.call_id
    return stored.value, stored.call_id


async def _called(client: Any, request: Any, calls: Calls):
    verdict, rec = await client.judge(request)
    calls.made.append(rec)
    return verdict, rec
