"""One record per call to an LLM or embedding endpoint (a row of ragsql.judge_call) and the request hash keying the
cache."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragsql.errors import JudgeError

__all__ = ["CallFailed", "CallRecord", "request_hash"]


def request_hash(model: str, payload: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of (model, payload): equal requests get equal hashes on any machine."""
    canonical = json.dumps({"model": model, **payload}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CallRecord:
    """What one call cost and returned; `response` is the validated reply (JSON-ready), None when it failed."""

    request_hash: str
    kind: Literal["chat", "embedding", "rerank"]
    model: str
    prompt_name: str
    prompt_version: str | None
    status: Literal["ok", "failed"]
    response: Any = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int = 0
    attempts: int = 1
    sent: bool = True  # False when no attempt reached the endpoint: nothing was bought (a budget gives its place back)

    @property
    def ok(self) -> bool:
        """True when the call returned a usable reply."""
        return self.status == "ok"


class CallFailed(JudgeError):
    """A judge, generation, embedding or rerank call failed for good: one line saying why; `records` are the
    calls made (failed ones included), `record` the last of them. Whatever went wrong (HTTP status, timeout,
    a body that is not JSON, a reply of the wrong shape) ends as this one exception, never another."""

    def __init__(self, message: str, records: CallRecord | Sequence[CallRecord] | None = None):
        super().__init__(" ".join(message.split()))
        if isinstance(records, CallRecord):
            records = [records]
        self.records: list[CallRecord] = list(records or [])

    @property
    def record(self) -> CallRecord | None:
        """The last call made, if any."""
        return self.records[-1] if self.records else None
