"""context_entity_recall (RAGAS): the entities of each reference answer and of the contexts joined by newlines (one
entities call each: 2 per answer with one reference)."""

from __future__ import annotations

from ragsql.db import judging as db, verdict_rows as vr
from ragsql.judge.kinds import entities
from ragsql.orchestrator.job import Job, Store, together

__all__ = ["run"]


async def run(job: Job) -> list[Store]:
    """The verdict rows this kind stores for the job's answer."""
    # RAGAS extracts from the contexts joined by newlines
    texts = [*job.references(), "\n".join(job.nonblank_contexts())]
    requests = [entities.request(text, language=job.language) for text in texts]
    got = await together(*(job.ask(r) for r in requests))
    return [
        vr.EntityExtraction(db.text_hash(text), job.model, r.prompt_version, list(g.verdict.entities), g.call_id)
        for text, r, g in zip(texts, requests, got)
    ]
