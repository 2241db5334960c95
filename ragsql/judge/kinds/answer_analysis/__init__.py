"""The answer_analysis call: one call on an answer for its statements, `n` questions in the question's language and the
non-committal flag (faithfulness and answer relevancy share it).

Offline: the statements call's statements and the questions call's questions (`questions.offline`)."""

from __future__ import annotations

from collections.abc import Sequence

from ragsql.judge.kinds.questions import GeneratedQuestions, asked_back, offline
from ragsql.judge.prompts import JudgeRequest
from ragsql.judge.verdicts import Texts

__all__ = ["AnswerAnalysis", "offline", "request"]


class AnswerAnalysis(GeneratedQuestions):
    """One call on an answer: its statements, n generated questions, and the non-committal flag."""

    statements: Texts


def request(
    answer: str, *, question: str, n: int = 3, language: str | None = None, contexts: Sequence[str] = ()
) -> JudgeRequest[AnswerAnalysis]:
    """One call on an answer: its statements, `n` questions in the question's language, the non-committal flag.

    The question itself is not shown, so the generated questions cannot copy it (answer relevance would be
    inflated); only its language is used. The `contexts` are not shown either: the offline judge reads them.
    """
    return asked_back("answer_analysis", AnswerAnalysis, answer, question, n, language, contexts)
