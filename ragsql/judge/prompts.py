"""Judge prompts: versioned files in ``kinds/<name>/``, one per call kind and language, built into typed requests.

Every text under judgement goes inside a tag (``<answer>…</answer>``, ``<context id="2">…</context>``) and the
system message says that tagged text is data, never instructions. Anything in the data that looks like one of
these tags is escaped (``<`` becomes ``&lt;``), so an answer cannot close its own tag and speak to the judge.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ragsql.judge.language import LANGUAGES, detect_language
from ragsql.judge.verdicts import GradedRating, YesNo
from ragsql.llm.calls import CallRecord

__all__ = [
    "LANG_WORDS",
    "JudgeRequest",
    "Prompt",
    "against_contexts",
    "build",
    "build_numbered",
    "escape",
    "load_prompt",
    "nonempty",
    "numbered",
    "one_line",
    "request_language",
    "tagged",
    "tagged_contexts",
    "two_pass",
    "yes_no",
]

_TAGS = (
    "question",
    "answer",
    "reference",
    "text",
    "contexts",
    "context",
    "statements",
    "answer_statements",
    "reference_statements",
    "sentences",
    "claims",
    "claim",
    "sentence",
    "cited",
    "rubric",
    "references",
)
_TAG_RE = re.compile(r"<(/?\s*)(" + "|".join(sorted(_TAGS, key=len, reverse=True)) + r")(?![\w-])", re.I)
LANG_WORDS = {"en": {"en": "English", "zh": "Chinese"}, "zh": {"en": "英文", "zh": "中文"}}

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Prompt:
    """One prompt file: task name, language, declared version and its sections (system, user, …)."""

    name: str
    language: str
    version: str
    sections: Mapping[str, str]
    digest: str

    def render(self, **values: object) -> list[dict[str, str]]:
        """The chat messages with `values` substituted into the user template."""
        return self._render("", values)

    def render_second(self, **values: object) -> list[dict[str, str]]:
        """The messages of the second judge pass (sections ``system2`` and ``user2``) of a two-pass prompt."""
        return self._render("2", values)

    def _render(self, suffix: str, values: Mapping[str, object]) -> list[dict[str, str]]:
        user = Template(self.sections["user" + suffix]).substitute({k: str(val) for k, val in values.items()})
        return [{"role": "system", "content": self.sections["system" + suffix]}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class JudgeRequest(Generic[T]):
    """A built judge call: messages, the verdict model its reply must fit, and what the prompt numbered."""

    kind: str
    prompt_version: str
    language: str
    messages: list[dict[str, str]]
    schema: type[T]
    context: dict[str, Any] = field(default_factory=dict)
    items: tuple[Any, ...] = ()
    inputs: dict[str, Any] = field(default_factory=dict)
    """The raw inputs the prompt was built from, for the offline judge (part of its request hash, not of an LLM
    judge's: an LLM sees only the messages)."""

    def record(
        self,
        request_hash: str,
        model: str,
        verdict: T | None,
        error: str | None,
        *,
        started: float,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        attempts: int = 1,
        sent: bool = True,
    ) -> CallRecord:
        """The record of a judge call on this request begun at `started` (``time.perf_counter()``): ok with the
        verdict as JSON, or failed with `error`."""
        return CallRecord(
            request_hash=request_hash,
            kind="chat",
            model=model,
            prompt_name=self.kind,
            prompt_version=self.prompt_version,
            status="failed" if verdict is None else "ok",
            response=None if verdict is None else verdict.model_dump(mode="json"),
            error=error,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=round((time.perf_counter() - started) * 1000),
            attempts=attempts,
            sent=sent,
        )


@functools.cache
def load_prompt(name: str, language: str) -> Prompt:
    """Read ``kinds/<name>/<language>.txt``: a ``version:`` line, then ``=== section`` blocks."""
    file = resources.files("ragsql.judge.kinds").joinpath(name).joinpath(f"{language}.txt")
    if not re.fullmatch(r"\w+", name) or language not in LANGUAGES or not file.is_file():
        raise ValueError(f"no prompt {name!r} in language {language!r}")
    raw = file.read_text("utf-8")
    head, *blocks = re.split(r"^=== (\w+)\n", raw, flags=re.M)
    version = re.search(r"^version:\s*(\S+)", head, re.M)
    if version is None or len(blocks) % 2:
        raise ValueError(f"prompt file {name}.{language}.txt has no version line or a broken section")
    sections = {blocks[i]: blocks[i + 1].strip("\n") for i in range(0, len(blocks), 2)}
    return Prompt(
        name=name,
        language=language,
        version=f"{name}.v{version.group(1)}",
        sections=sections,
        digest=hashlib.sha256(raw.encode()).hexdigest()[:12],
    )


def escape(text: str) -> str:
    """Neutralise anything in judged text that could open or close one of the prompt's tags."""
    return _TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def one_line(text: str) -> str:
    """`text` escaped, its whitespace collapsed to single spaces."""
    return " ".join(escape(text).split())


def tagged(tag: str, text: str) -> str:
    """`text` escaped inside ``<tag>…</tag>``."""
    return f"<{tag}>\n{escape(text.strip())}\n</{tag}>"


def numbered(items: Sequence[str], start: int = 1) -> str:
    """One escaped line per item, numbered from `start` (``1. …``)."""
    return "\n".join(f"{i}. {one_line(s)}" for i, s in enumerate(items, start))


def tagged_contexts(contexts: Sequence[str], ids: Sequence[str] | None = None) -> str:
    """Tagged contexts with their ids (default 1..n)."""
    labels = ids if ids is not None else [str(i) for i in range(1, len(contexts) + 1)]
    return "\n".join(f'<context id="{i}">\n{escape(c.strip())}\n</context>' for i, c in zip(labels, contexts))


def request_language(language: str | None, *texts: str | None) -> str:
    """The prompt language: `language` when given (en | zh), else the one `texts` are written in."""
    if language is None:
        return detect_language(" ".join(t for t in texts if t))
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return language


def nonempty(items: Sequence[Any], what: str) -> None:
    """Refuse a request with nothing to judge."""
    if not items:
        raise ValueError(f"nothing to judge: no {what}")


def build(
    name: str,
    lang: str,
    schema: type[T],
    context: dict[str, Any] | None = None,
    items: tuple[Any, ...] = (),
    inputs: dict[str, Any] | None = None,
    **values: object,
) -> JudgeRequest[T]:
    """The request of prompt `name` in `lang`, its user template filled with `values`."""
    prompt = load_prompt(name, lang)
    return JudgeRequest(
        kind=name,
        prompt_version=prompt.version,
        language=lang,
        messages=prompt.render(**values),
        schema=schema,
        context=context or {},
        items=items,
        inputs=inputs or {},
    )


def build_numbered(
    name: str,
    lang: str,
    schema: type[T],
    items: Sequence[Any],
    inputs: dict[str, Any],
    context: dict[str, Any] | None = None,
    **values: object,
) -> JudgeRequest[T]:
    """A request on items the prompt numbers 1..n: they are its items, and its context says how many (``ids``)."""
    return build(name, lang, schema, {"ids": len(items), **(context or {})}, tuple(items), inputs, **values)


def against_contexts(
    name: str,
    schema: type[T],
    statement_list: Sequence[str],
    contexts: Sequence[str],
    language: str | None,
    *,
    number_contexts: bool = False,
) -> JudgeRequest[T]:
    """A request on numbered statements against tagged contexts; with `number_contexts` the reply names contexts
    by id, so there must be some and the context says how many (``contexts``)."""
    nonempty(statement_list, "statements")
    if number_contexts:
        nonempty(contexts, "contexts")
    lang = request_language(language, " ".join(statement_list))
    return build_numbered(
        name,
        lang,
        schema,
        statement_list,
        {"statements": list(statement_list), "contexts": list(contexts)},
        {"contexts": len(contexts)} if number_contexts else None,
        contexts=tagged_contexts(contexts) or "(none)",
        statements=numbered(statement_list),
    )


def two_pass(
    name: str, tag: str, text: str, contexts: Sequence[str], judge_pass: int, language: str | None
) -> JudgeRequest[GradedRating]:
    """Pass `judge_pass` of a 0/1/2 rating of `text` (shown as ``$tag``) against the contexts."""
    nonempty(contexts, "contexts")
    lang = request_language(language, text)
    if judge_pass not in (1, 2):
        raise ValueError(f"judge_pass must be 1 or 2, got {judge_pass!r}")
    values = {tag: escape(text.strip()), "contexts": tagged_contexts(contexts)}
    inputs = {tag: text, "contexts": list(contexts), "judge_pass": judge_pass}
    request = build(name, lang, GradedRating, {"judge_pass": judge_pass}, (), inputs, **values)
    if judge_pass == 2:
        request = dataclasses.replace(request, messages=load_prompt(name, lang).render_second(**values))
    return request


def yes_no(
    metric: str,
    question: str,
    answer: str,
    *,
    contexts: Sequence[str] = (),
    reference: str | None = None,
    language: str | None = None,
) -> JudgeRequest[YesNo]:
    """The question of a yes/no metric of the registry about one answer, from the metric's own prompt files; its
    user section may use $question, $answer, $contexts_block and $reference_block (empty when absent)."""
    lang = request_language(language, question)
    return build(
        metric,
        lang,
        YesNo,
        inputs={"question": question, "answer": answer, "contexts": list(contexts), "reference": reference},
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        contexts_block=f"<contexts>\n{tagged_contexts(contexts)}\n</contexts>" if contexts else "",
        reference_block=tagged("reference", reference) if reference else "",
    )
