"""The judge task of each kind of the registry, one module per kind named after it (``tasks/<kind>.py``, its ``run``;
every yes/no metric's kind: ``yes_no.py``): it builds the requests its metrics need (the calls of
``ragsql/judge/kinds/``), asks them, and returns the verdict rows to store. Requests several kinds share (the
answer's statements, a reference's statements) are built identically by each, so the cache and the in-flight map
make them one call."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable

from ragsql import registry
from ragsql.orchestrator.job import Job, NothingToJudge, Store, TaskFailed, together

__all__ = ["KINDS", "Job", "NothingToJudge", "TaskFailed", "run_task", "together"]

KINDS: dict[str, Callable[[Job], Awaitable[list[Store]]]] = {
    name: importlib.import_module(f"{__name__}.{'yes_no' if name in registry.YES_NO else name}").run
    for name in registry.KINDS
}
"""The task of each judge kind of the registry: the `run` of the module named after it (`yes_no` for a yes/no
metric)."""


async def run_task(job: Job) -> list[Store]:
    """The rows a task stores; TaskFailed (or CallFailed) when it cannot be judged."""
    if not job.sample.answer.strip():
        raise TaskFailed("the answer is empty")
    if "reference" in registry.kind(job.task.kind).needs and not job.sample.references:
        return []
    return await KINDS[job.task.kind](job)
