"""The two judge passes of RAGAS's NVIDIA metrics (response_groundedness, nv_context_relevance), stored as graded
verdict rows."""

from __future__ import annotations

from collections.abc import Callable

from ragsql.db import verdict_rows as vr
from ragsql.judge import prompts as p
from ragsql.llm.aio import settle_together
from ragsql.orchestrator.job import Job, Store, TaskFailed
from ragsql.orchestrator.service import CallFailed

__all__ = ["graded", "two_passes"]


async def two_passes(job: Job, metric: str, build: Callable[[int], p.JudgeRequest]) -> list[Store]:
    """Both judge passes at once; a pass whose call fails is stored as a row with its error (RAGAS then uses the
    other pass alone); the task fails only when both do."""
    requests = [build(1), build(2)]
    got = await settle_together(job.ask(r) for r in requests)
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
    return graded(job, metric, requests[0].prompt_version, rows)


def graded(
    job: Job, metric: str, version: str, rows: list[tuple[int, int | None, str | None, int | None]]
) -> list[Store]:
    """(judge pass, 0/1/2 score or None, reason, call id) of a two-pass metric, as rows to store."""
    return [
        job.verdict(vr.GradedVerdict, version, metric=metric, judge_pass=n, score=score, reason=reason, call_id=call_id)
        for n, score, reason, call_id in rows
    ]
