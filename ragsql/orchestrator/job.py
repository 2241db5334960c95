"""A judge task being worked on (`Job`) and what every task kind shares: the answer's analysis (statements and
questions in one call), a reference's statements, their stored extractions, and statement verification."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ragsql.db import judging as db, verdict_rows as vr
from ragsql.db.judging import Sample, Task
from ragsql.judge.kinds import answer_analysis, statements, verify
from ragsql.judge.language import LANGUAGES
from ragsql.llm.aio import settle_together
from ragsql.orchestrator.service import Judging

__all__ = ["QUESTIONS_PER_ANSWER", "Job", "NothingToJudge", "Store", "TaskFailed", "together"]

QUESTIONS_PER_ANSWER = 3
Store = vr.Row  # what a task stores, inside the transaction that closes it
T = TypeVar("T")
V = TypeVar("V", bound=vr.Verdict)


class TaskFailed(Exception):
    """The task cannot be judged; its metrics are null with this reason."""


class NothingToJudge(TaskFailed):
    """The answer holds nothing the task could judge (its contexts are known by id alone): the task closes done
    with no verdict and no call, and its metrics say why (ragsql._scope_rows); judging again would not change it."""


async def together(*aws: Coroutine[Any, Any, Any]) -> list[Any]:
    """Every call run to its end before a failure is raised: a task is never closed while one of its own calls is
    still in flight (the first failure is raised once all are over; ragsql.llm.aio.settle_together)."""
    results = await settle_together(aws)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


@dataclass
class Job:
    """A task being judged: the sample and the shared service (calls and reads go through its own connections)."""

    task: Task
    sample: Sample
    judging: Judging

    @property
    def language(self) -> str | None:
        lang = (self.sample.language or "").lower()[:2]
        return lang if lang in LANGUAGES else None

    @property
    def model(self) -> str:
        return self.judging.model

    async def ask(self, request):
        return await self.judging.ask(request)

    def verdict(self, kind: type[V], prompt_version: str, **values: Any) -> V:
        """A verdict row on this task's answer by this judge model."""
        return kind(
            run_id=self.task.run_id,
            query_id=self.task.query_id,
            model=self.model,
            prompt_version=prompt_version,
            **values,
        )

    def contexts(self) -> list[str]:
        if not self.sample.contexts:
            if self.sample.context_ids:
                raise NothingToJudge(db.NO_CONTEXT_TEXTS)
            raise TaskFailed("the answer has no contexts")
        return [c.text for c in self.sample.contexts]

    def nonblank_contexts(self) -> list[str]:
        """The contexts' texts, TaskFailed when they are all blank (as `contexts` when there are none)."""
        contexts = self.contexts()
        if not "\n".join(contexts).strip():
            raise TaskFailed("the contexts are empty")
        return contexts

    def references(self) -> list[str]:
        return self.sample.references

    async def answer_analysis(self):
        """The answer's statements and generated questions, one call shared by three metrics."""
        request = answer_analysis.request(
            self.sample.answer,
            question=self.sample.question or self.sample.answer,
            n=QUESTIONS_PER_ANSWER,
            language=self.language,
            contexts=[c.text for c in self.sample.contexts or ()],  # read by the offline judge alone
        )
        got = await self.ask(request)
        extraction = await self.extraction(
            self.sample.answer, request.prompt_version, got.call_id, got.verdict.statements
        )
        return request, got, extraction

    async def reference_statements(self, reference: str):
        request = statements.request(reference, question=self.sample.question or None, language=self.language)
        got = await self.ask(request)
        return got.verdict.statements, await self.extraction(
            reference, request.prompt_version, got.call_id, got.verdict.statements
        )

    async def extraction(self, text: str, prompt_version: str, call_id: int | None, statements: Sequence[str]) -> int:
        """Store the statements (or claims) extracted from a text once, shared by every metric; its id (0 in a
        dry run)."""
        if self.judging.dry_run:
            return 0
        return await self.judging.store_extraction(text, self.model, prompt_version, call_id, statements)

    async def verify(self, statements: list[str], purpose: str, extraction: int) -> list[Store]:
        """Statements against every context, one call; verdict rows for `purpose`."""
        if not statements:
            return []
        request = verify.request(statements, self.contexts(), language=self.language)
        got = await self.ask(request)
        rows = [(v.id, v.verdict, v.reason) for v in got.verdict.verdicts]
        return self.statement_verdicts(purpose, request.prompt_version, extraction, rows, got.call_id)

    def statement_verdicts(
        self,
        purpose: str,
        prompt_version: str,
        extraction: int,
        rows: Sequence[tuple[int, str, str | None]],
        call_id: int,
    ) -> list[Store]:
        """(statement no, verdict, reason) of one extraction's statements for `purpose`, as rows to store."""
        return [
            self.verdict(
                vr.StatementVerdict,
                prompt_version,
                purpose=purpose,
                extraction_id=extraction,
                statement_no=no,
                verdict=verdict,
                reason=reason,
                call_id=call_id,
            )
            for no, verdict, reason in rows
        ]
