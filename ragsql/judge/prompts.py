"""Judge prompts: versioned files in ``prompts/``, one per task and language, built into typed requests.

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

from ragsql import registry
from ragsql.judge import verdicts as v
from ragsql.judge.language import LANGUAGES, detect_language, split_sentences
from ragsql.llm.calls import CallRecord

__all__ = [
    "BUILTIN_ASPECTS",
    "GENERATION_PROMPTS",
    "PROMPT_NAMES",
    "SYNTH_KINDS",
    "JudgeRequest",
    "Prompt",
    "CLAIM_SETTINGS",
    "answer_analysis",
    "attribution",
    "citations",
    "claims",
    "classify",
    "context_rating",
    "critique",
    "entities",
    "escape",
    "generate",
    "groundedness",
    "load_prompt",
    "questions",
    "rating",
    "rubric",
    "sentence_relevance",
    "statements",
    "synthesize",
    "usefulness",
    "verify",
    "yes_no",
]

PROMPT_NAMES = (
    "statements",
    "answer_analysis",
    "questions",
    "verify",
    "classify",
    "usefulness",
    "sentence_relevance",
    "rating",
    "critique",
    "citations",
    "entities",
    "claims",
    "attribution",
    "groundedness",
    "context_rating",
    "rubric",
)
CLAIM_SETTINGS = ("low", "high")
"""RAGAS's atomicity and coverage levels of claim decomposition (factual correctness); its default is low, low."""
GENERATION_PROMPTS = ("generate", "synthesize")
"""Prompts that write rather than judge: answers (`ragsql generate`) and eval questions (`ragsql synth`)."""
BUILTIN_ASPECTS = ("harmfulness", "maliciousness", "coherence", "correctness", "conciseness")

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
_LANG_WORDS = {"en": {"en": "English", "zh": "Chinese"}, "zh": {"en": "英文", "zh": "中文"}}
_TARGETS = {
    "en": {"reference": "reference answer", "answer": "answer"},
    "zh": {"reference": "标准答案", "answer": "回答"},
}

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
    """Read ``prompts/<name>.<language>.txt``: a ``version:`` line, then ``=== section`` blocks."""
    if name not in (*PROMPT_NAMES, *GENERATION_PROMPTS, *registry.YES_NO) or language not in LANGUAGES:
        raise ValueError(f"no prompt {name!r} in language {language!r}")
    raw = resources.files("ragsql.judge").joinpath("prompts").joinpath(f"{name}.{language}.txt").read_text("utf-8")
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


def _one_line(text: str) -> str:
    return " ".join(escape(text).split())


def _block(tag: str, text: str) -> str:
    return f"<{tag}>\n{escape(text.strip())}\n</{tag}>"


def _numbered(items: Sequence[str], start: int = 1) -> str:
    return "\n".join(f"{i}. {_one_line(s)}" for i, s in enumerate(items, start))


def _contexts(contexts: Sequence[str], ids: Sequence[str] | None = None) -> str:
    """Tagged contexts with their ids (default 1..n)."""
    labels = ids if ids is not None else [str(i) for i in range(1, len(contexts) + 1)]
    return "\n".join(f'<context id="{i}">\n{escape(c.strip())}\n</context>' for i, c in zip(labels, contexts))


def _language(language: str | None, *texts: str | None) -> str:
    if language is None:
        return detect_language(" ".join(t for t in texts if t))
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return language


def _nonempty(items: Sequence[Any], what: str) -> None:
    if not items:
        raise ValueError(f"nothing to judge: no {what}")


def _request(
    name: str,
    lang: str,
    schema: type[T],
    context: dict[str, Any] | None = None,
    items: tuple[Any, ...] = (),
    inputs: dict[str, Any] | None = None,
    **values: object,
) -> JudgeRequest[T]:
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


def _numbered_request(
    name: str,
    lang: str,
    schema: type[T],
    items: Sequence[Any],
    inputs: dict[str, Any],
    context: dict[str, Any] | None = None,
    **values: object,
) -> JudgeRequest[T]:
    """A request on items the prompt numbers 1..n: they are its items, and its context says how many (``ids``)."""
    return _request(name, lang, schema, {"ids": len(items), **(context or {})}, tuple(items), inputs, **values)


def statements(text: str, *, question: str | None = None, language: str | None = None) -> JudgeRequest[v.Statements]:
    """Extract the factual statements of one text (an answer or a reference); one call per text."""
    lang = _language(language, question or text)
    block = _block("question", question) + "\n" if question else ""
    return _request(
        "statements",
        lang,
        v.Statements,
        inputs={"text": text, "question": question},
        question_block=block,
        text=escape(text.strip()),
    )


def answer_analysis(
    answer: str, *, question: str, n: int = 3, language: str | None = None
) -> JudgeRequest[v.AnswerAnalysis]:
    """One call on an answer: its statements, `n` questions in the question's language, the non-committal flag.

    The question itself is not shown, so the generated questions cannot copy it (answer relevance would be
    inflated); only its language is used.
    """
    return _asked_back("answer_analysis", v.AnswerAnalysis, answer, question, n, language)


def questions(
    answer: str, *, question: str, n: int = 3, language: str | None = None
) -> JudgeRequest[v.GeneratedQuestions]:
    """RAGAS answer relevance: `n` questions the answer answers, written in the question's language."""
    return _asked_back("questions", v.GeneratedQuestions, answer, question, n, language)


def _asked_back(
    name: str, schema: type[T], answer: str, question: str, n: int, language: str | None
) -> JudgeRequest[T]:
    """A request for `n` questions `answer` answers, in the language of `question` (which is not shown)."""
    lang = _language(language, question)
    return _request(
        name,
        lang,
        schema,
        {"n_questions": n},
        n=n,
        inputs={"answer": answer, "question": question, "n": n},
        language=_LANG_WORDS[lang][detect_language(question, lang)],
        answer=escape(answer.strip()),
    )


def verify(
    statement_list: Sequence[str], contexts: Sequence[str], *, language: str | None = None
) -> JudgeRequest[v.StatementVerdicts]:
    """All of a text's statements against all of a sample's contexts, in one call (faithfulness, recall)."""
    return _against_contexts("verify", v.StatementVerdicts, statement_list, contexts, language)


def _against_contexts(
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
    _nonempty(statement_list, "statements")
    if number_contexts:
        _nonempty(contexts, "contexts")
    lang = _language(language, " ".join(statement_list))
    return _numbered_request(
        name,
        lang,
        schema,
        statement_list,
        {"statements": list(statement_list), "contexts": list(contexts)},
        {"contexts": len(contexts)} if number_contexts else None,
        contexts=_contexts(contexts) or "(none)",
        statements=_numbered(statement_list),
    )


def classify(
    question: str, answer_statements: Sequence[str], reference_statements: Sequence[str], *, language: str | None = None
) -> JudgeRequest[v.Classification]:
    """Answer statements TP/FP against the reference, reference statements TP/FN against the answer."""
    _nonempty([*answer_statements, *reference_statements], "statements")
    lang = _language(language, question)
    context = {"answer_ids": len(answer_statements), "reference_ids": len(reference_statements)}
    return _request(
        "classify",
        lang,
        v.Classification,
        context,
        inputs={
            "question": question,
            "answer_statements": list(answer_statements),
            "reference_statements": list(reference_statements),
        },
        question=escape(question.strip()),
        answer_statements=_numbered(answer_statements) or "(none)",
        reference_statements=_numbered(reference_statements) or "(none)",
    )


def usefulness(
    question: str,
    contexts: Sequence[str],
    *,
    reference: str | None = None,
    answer: str | None = None,
    language: str | None = None,
) -> JudgeRequest[v.ContextVerdicts]:
    """Every context of a sample judged useful or not for the reference (else the answer), in one call."""
    _nonempty(contexts, "contexts")
    if reference is None and answer is None:
        raise ValueError("usefulness needs a reference or an answer")
    lang = _language(language, question)
    tag, target_text = ("reference", reference) if reference is not None else ("answer", answer or "")
    return _numbered_request(
        "usefulness",
        lang,
        v.ContextVerdicts,
        contexts,
        inputs={"question": question, "contexts": list(contexts), "reference": reference, "answer": answer},
        question=escape(question.strip()),
        target=_TARGETS[lang][tag],
        target_block=_block(tag, target_text),
        contexts=_contexts(contexts),
    )


def sentence_relevance(
    question: str, contexts: Sequence[str], *, language: str | None = None
) -> JudgeRequest[v.SentenceRelevance]:
    """Context sentences (split here, numbered across contexts) judged relevant to the question or not.

    `items` holds ``(context_index, sentence)`` for each sentence id in order (id = position + 1).
    """
    lang = _language(language, question)
    items: list[tuple[int, str]] = []
    groups = []
    for ci, ctx in enumerate(contexts, 1):
        sents = split_sentences(ctx)
        groups.append(f'<context id="{ci}">\n{_numbered(sents, len(items) + 1)}\n</context>')
        items.extend((ci, s) for s in sents)
    _nonempty(items, "context sentences")
    return _numbered_request(
        "sentence_relevance",
        lang,
        v.SentenceRelevance,
        items,
        inputs={"question": question, "contexts": list(contexts)},
        question=escape(question.strip()),
        sentences="\n".join(groups),
    )


def rating(question: str, answer: str, *, language: str | None = None) -> JudgeRequest[v.Rating]:
    """The seed's 1-5 answer relevance rating."""
    lang = _language(language, question)
    return _request(
        "rating",
        lang,
        v.Rating,
        inputs={"question": question, "answer": answer},
        question=escape(question.strip()),
        answer=escape(answer.strip()),
    )


def yes_no(
    metric: str,
    question: str,
    answer: str,
    *,
    contexts: Sequence[str] = (),
    reference: str | None = None,
    language: str | None = None,
) -> JudgeRequest[v.YesNo]:
    """The question of a yes/no metric of the registry about one answer, from the metric's own prompt files; its
    user section may use $question, $answer, $contexts_block and $reference_block (empty when absent)."""
    lang = _language(language, question)
    return _request(
        metric,
        lang,
        v.YesNo,
        inputs={"question": question, "answer": answer, "contexts": list(contexts), "reference": reference},
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        contexts_block=f"<contexts>\n{_contexts(contexts)}\n</contexts>" if contexts else "",
        reference_block=_block("reference", reference) if reference else "",
    )


def critique(
    question: str,
    answer: str,
    aspects: Sequence[str | tuple[str, str]],
    *,
    contexts: Sequence[str] | None = None,
    language: str | None = None,
) -> JudgeRequest[v.AspectVerdicts]:
    """Yes/no verdicts on several aspects in one call: built-in names, or ``(name, definition)`` pairs."""
    _nonempty(aspects, "aspects")
    lang = _language(language, question)
    builtin = dict(line.split(": ", 1) for line in load_prompt("critique", lang).sections["aspects"].splitlines())
    pairs: list[tuple[str, str]] = []
    for aspect in aspects:
        name, definition = (aspect, builtin.get(aspect)) if isinstance(aspect, str) else aspect
        if not definition:
            raise ValueError(f"aspect {name!r} is not built in ({', '.join(BUILTIN_ASPECTS)}): give a definition")
        pairs.append((_one_line(name), _one_line(definition)))
    names = [n for n, _ in pairs]
    ctx_block = f"<contexts>\n{_contexts(contexts)}\n</contexts>\n" if contexts else ""
    return _request(
        "critique",
        lang,
        v.AspectVerdicts,
        {"aspects": names},
        tuple(names),
        inputs={"question": question, "answer": answer, "aspects": pairs, "contexts": list(contexts or [])},
        aspects="\n".join(f"- {n}: {d}" for n, d in pairs),
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        contexts_block=ctx_block,
    )


def citations(
    claims: Sequence[tuple[str, Sequence[str]]], *, language: str | None = None
) -> JudgeRequest[v.CitationVerdicts]:
    """Each cited answer sentence against the text of the contexts it cites, all in one call."""
    _nonempty(claims, "citations")
    lang = _language(language, " ".join(s for s, _ in claims))
    rendered = "\n".join(
        f'<claim id="{i}">\n<sentence>{_one_line(sentence)}</sentence>\n'
        + "\n".join(f"<cited>\n{escape(c.strip())}\n</cited>" for c in cited)
        + "\n</claim>"
        for i, (sentence, cited) in enumerate(claims, 1)
    )
    return _numbered_request(
        "citations",
        lang,
        v.CitationVerdicts,
        claims,
        inputs={"claims": [(s, list(c)) for s, c in claims]},
        claims=rendered,
    )


def entities(text: str, *, language: str | None = None) -> JudgeRequest[v.Entities]:
    """The named entities of one text (a reference answer, or an answer's contexts joined by newlines)."""
    lang = _language(language, text)
    return _request("entities", lang, v.Entities, inputs={"text": text}, text=escape(text.strip()))


def claims(
    text: str, *, atomicity: str = "low", coverage: str = "low", language: str | None = None
) -> JudgeRequest[v.Claims]:
    """RAGAS's claim decomposition of one text; the settings are part of the prompt version the claims are
    stored under (``claims.v1[atomicity=low,coverage=low]``), so claims of two settings live side by side."""
    if atomicity not in CLAIM_SETTINGS or coverage not in CLAIM_SETTINGS:
        raise ValueError(f"atomicity and coverage must be low or high, got {atomicity!r} and {coverage!r}")
    lang = _language(language, text)
    request = _request(
        "claims",
        lang,
        v.Claims,
        inputs={"text": text, "atomicity": atomicity, "coverage": coverage},
        atomicity=atomicity,
        coverage=coverage,
        text=escape(text.strip()),
    )
    return dataclasses.replace(
        request, prompt_version=f"{request.prompt_version}[atomicity={atomicity},coverage={coverage}]"
    )


def attribution(
    statement_list: Sequence[str], contexts: Sequence[str], *, language: str | None = None
) -> JudgeRequest[v.Attributions]:
    """Which contexts, each on its own, support each statement: one call per text (noise sensitivity)."""
    return _against_contexts("attribution", v.Attributions, statement_list, contexts, language, number_contexts=True)


def _two_pass(
    name: str, tag: str, text: str, contexts: Sequence[str], judge_pass: int, language: str | None
) -> JudgeRequest[v.GradedRating]:
    """Pass `judge_pass` of a 0/1/2 rating of `text` (shown as ``$tag``) against the contexts."""
    _nonempty(contexts, "contexts")
    lang = _language(language, text)
    if judge_pass not in (1, 2):
        raise ValueError(f"judge_pass must be 1 or 2, got {judge_pass!r}")
    values = {tag: escape(text.strip()), "contexts": _contexts(contexts)}
    inputs = {tag: text, "contexts": list(contexts), "judge_pass": judge_pass}
    request = _request(name, lang, v.GradedRating, {"judge_pass": judge_pass}, (), inputs, **values)
    if judge_pass == 2:
        request = dataclasses.replace(request, messages=load_prompt(name, lang).render_second(**values))
    return request


def groundedness(
    answer: str, contexts: Sequence[str], *, judge_pass: int, language: str | None = None
) -> JudgeRequest[v.GradedRating]:
    """One of RAGAS's two judge passes rating 0/1/2 how far the contexts support the answer."""
    return _two_pass("groundedness", "answer", answer, contexts, judge_pass, language)


def context_rating(
    question: str, contexts: Sequence[str], *, judge_pass: int, language: str | None = None
) -> JudgeRequest[v.GradedRating]:
    """One of RAGAS's two judge passes rating 0/1/2 how relevant the contexts are to the question."""
    return _two_pass("context_rating", "question", question, contexts, judge_pass, language)


def rubric(
    question: str,
    answer: str,
    descriptions: Sequence[str],
    *,
    references: Sequence[str] = (),
    contexts: Sequence[str] = (),
    language: str | None = None,
) -> JudgeRequest[v.Rating]:
    """RAGAS's rubrics score: the answer scored 1-5 by five score descriptions, with the reference answers and
    contexts to judge it by when given."""
    if len(descriptions) != 5 or not all(d.strip() for d in descriptions):
        raise ValueError("a rubric has five non-empty score descriptions, for scores 1 to 5")
    lang = _language(language, question)
    extra = "".join(
        [
            *(_block("reference", r) + "\n" for r in references),
            f"<contexts>\n{_contexts(contexts)}\n</contexts>\n" if contexts else "",
        ]
    )
    return _request(
        "rubric",
        lang,
        v.Rating,
        inputs={
            "question": question,
            "answer": answer,
            "descriptions": list(descriptions),
            "references": list(references),
            "contexts": list(contexts),
        },
        rubric="\n".join(f"score{i}_description: {_one_line(d)}" for i, d in enumerate(descriptions, 1)),
        question=escape(question.strip()),
        answer=escape(answer.strip()),
        extra_block=extra,
    )


def generate(
    question: str, contexts: Sequence[tuple[str, str]], *, language: str | None = None
) -> JudgeRequest[v.GeneratedAnswer]:
    """An answer to `question` from `(id, text)` contexts only, in the question's language, citing ``[id]``.

    Ids must be unique and plain (a docno such as ``c12``: letters, digits and ``. : # / - _``); the reply may
    cite no other id.
    """
    _nonempty(contexts, "contexts")
    ids = [str(i) for i, _ in contexts]
    texts = [t for _, t in contexts]
    if len(set(ids)) != len(ids) or not all(v.CITATION_ID.fullmatch(i) for i in ids):
        raise ValueError(f"context ids must be unique and plain (letters, digits, . : # / - _): {ids}")
    lang = _language(language, question)
    return _request(
        "generate",
        lang,
        v.GeneratedAnswer,
        {"context_ids": ids},
        tuple(ids),
        inputs={"question": question, "contexts": list(zip(ids, texts))},
        language=_LANG_WORDS[lang][detect_language(question, lang)],
        question=escape(question.strip()),
        contexts=_contexts(texts, ids),
    )


SYNTH_KINDS = ("single", "multi", "comparison")
_SYNTH_LANGUAGE = {"en": "English", "zh": "Chinese (中文)"}


def synthesize(
    passages: Sequence[tuple[str, str]],
    kind: str,
    *,
    language: str,
    style: str = "plain",
) -> JudgeRequest[v.SynthQuestion]:
    """One eval question of `kind` (single | multi | comparison) from `(id, text)` passages, in `language`
    (en | zh) and `style`, with its answer and exact quotes as evidence."""
    _nonempty(passages, "passages")
    if kind not in SYNTH_KINDS:
        raise ValueError(f"kind must be one of {SYNTH_KINDS}, got {kind!r}")
    ids = [str(i) for i, _ in passages]
    lang = _language(language)
    return _request(
        "synthesize",
        lang,
        v.SynthQuestion,
        {"passage_ids": ids, "kind": kind},
        tuple(ids),
        inputs={"passages": [(i, t) for i, (_, t) in zip(ids, passages)], "kind": kind, "style": style},
        kind=kind,
        language=_SYNTH_LANGUAGE[lang],
        style=escape(style),
        passages=_contexts([t for _, t in passages], ids),
    )
