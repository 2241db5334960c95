"""The generate call (`ragsql generate`): an answer to a question from its contexts only, citing ``[id]``.

Offline (extractive, ``GENERATOR``): every sentence of the contexts scored by the share of the question's content
tokens it holds; the best ones (up to 3) scoring ≥ 0.25 and more than half the best score, in context order, each
cited ``[id]`` before its end punctuation; none: "I don't know based on the retrieved context." /
"根据检索到的内容无法回答。" (by the question's language)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ValidationInfo, model_validator

from ragsql.judge.heuristics import ANSWERS
from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.lexical import coverage, similarity
from ragsql.judge.prompts import LANG_WORDS, JudgeRequest, build, escape, nonempty, request_language, tagged_contexts
from ragsql.judge.verdicts import CITATION, CITATION_ID, cited_ids, nonblank

__all__ = ["DONT_KNOW", "GENERATOR", "GeneratedAnswer", "offline", "request"]


GENERATOR = "offline-extractive-v1"
"""The name of the offline answer generator, recorded in the metadata of the answers it writes."""

DONT_KNOW = {"en": "I don't know based on the retrieved context.", "zh": "根据检索到的内容无法回答。"}

_MAX_ANSWER_SENTENCES = 3

_SENTENCE_END = re.compile(r"[。！？.!?]+[\u201d\u2019\"\u300d\u300f\uff09)]*$")


class GeneratedAnswer(BaseModel):
    """A generated answer with inline ``[id]`` citations; `citations` ends up as every id it cites, in order,
    and each must be one of the contexts given (``context_ids``)."""

    answer: Annotated[str, nonblank("the answer is empty")]
    citations: list[str] = []

    @model_validator(mode="after")
    def _cited(self, info: ValidationInfo) -> GeneratedAnswer:
        cited = list(dict.fromkeys([*cited_ids(self.answer), *(c.strip() for c in self.citations if c.strip())]))
        given = (info.context or {}).get("context_ids")
        if given is not None and (unknown := [c for c in cited if c not in given]):
            raise ValueError(f"citations {unknown} name no given context; cite only {list(given)}")
        self.citations = cited
        return self


def request(
    question: str, contexts: Sequence[tuple[str, str]], *, language: str | None = None
) -> JudgeRequest[GeneratedAnswer]:
    """An answer to `question` from `(id, text)` contexts only, in the question's language, citing ``[id]``.

    Ids must be unique and plain (a docno such as ``c12``: letters, digits and ``. : # / - _``); the reply may
    cite no other id.
    """
    nonempty(contexts, "contexts")
    ids = [str(i) for i, _ in contexts]
    texts = [t for _, t in contexts]
    if len(set(ids)) != len(ids) or not all(CITATION_ID.fullmatch(i) for i in ids):
        raise ValueError(f"context ids must be unique and plain (letters, digits, . : # / - _): {ids}")
    lang = request_language(language, question)
    return build(
        "generate",
        lang,
        GeneratedAnswer,
        {"context_ids": ids},
        tuple(ids),
        inputs={"question": question, "contexts": list(zip(ids, texts))},
        language=LANG_WORDS[lang][detect_language(question, lang)],
        question=escape(question.strip()),
        contexts=tagged_contexts(texts, ids),
    )


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    question = request.inputs["question"]
    found = []  # (score, tie-break, order, sentence, id)
    for cid, text in request.inputs["contexts"]:
        for sentence in split_sentences(CITATION.sub(" ", text)):  # a bracketed "[1]" in a context is no citation
            score = coverage(question, sentence)
            if score >= ANSWERS:
                found.append((score, similarity(question, sentence), len(found), sentence, cid))
    ranked = sorted(found, key=lambda f: (-f[0], -f[1], f[2]))[:_MAX_ANSWER_SENTENCES]
    chosen = sorted((f for f in ranked if f[0] > ranked[0][0] / 2), key=lambda f: f[2])
    if not chosen:
        return {"answer": DONT_KNOW[request.language], "citations": []}
    parts = [_cite(sentence, cid) for *_, sentence, cid in chosen]
    joined = "".join(p if i == 0 or detect_language(p) == "zh" else " " + p for i, p in enumerate(parts))
    return {"answer": joined, "citations": list(dict.fromkeys(cid for *_, cid in chosen))}


def _cite(sentence: str, cid: str) -> str:
    """`sentence` with ``[cid]`` before its end punctuation (added when missing), so the citation stays in it."""
    zh = detect_language(sentence) == "zh"
    end = _SENTENCE_END.search(sentence)
    core, punct = (sentence[: end.start()], end.group(0)) if end else (sentence, "。" if zh else ".")
    return f"{core.rstrip()}{'' if zh else ' '}[{cid}]{punct}"
