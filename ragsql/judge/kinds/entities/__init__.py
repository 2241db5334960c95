"""The entities call (RAGAS context entity recall): the named entities of one text (a reference answer, or an answer's
contexts joined by newlines).

Offline: numbers (with a unit word that follows) and names — runs of capitalised words outside a leading
article, pronoun or question word in English; in Chinese the strict key terms of `lexical.key_terms` (jieba's
person, place, organisation and other proper-noun words, Latin words, numerals) — each once, as in the text."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel

from ragsql.judge.lexical import key_terms
from ragsql.judge.prompts import JudgeRequest, build, escape, request_language
from ragsql.judge.verdicts import Texts

__all__ = ["Entities", "entities_of", "offline", "request"]


class Entities(BaseModel):
    """Named entities of one text, each once in first-seen order (RAGAS context entity recall)."""

    entities: Annotated[Texts, AfterValidator(lambda texts: list(dict.fromkeys(texts)))]


def request(text: str, *, language: str | None = None) -> JudgeRequest[Entities]:
    """The named entities of one text (a reference answer, or an answer's contexts joined by newlines)."""
    lang = request_language(language, text)
    return build("entities", lang, Entities, inputs={"text": text}, text=escape(text.strip()))


_NAME = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:of|de|da|von|van|the|and)\s+[A-Z][\w'’-]*|\s+[A-Z][\w'’-]*)*")

_NUMBER = re.compile(r"\d(?:[\d,.]*\d)?(?:\s?%|\s+(?:[A-Za-z]+))?")

_UNITS = re.compile(
    r"\s+(?:km|m|kg|g|mb|gb|tb|ms|s|years?|months?|days?|hours?|minutes?|percent|million|billion|"
    r"thousand|metres?|meters?|miles?|dollars?|euros?|people|bc|ad)$",
    re.I,
)

_LEADING = frozenset(
    "the a an in on at it its this that these those he she they we you i what which who when where "
    "why how is are was were does do did but and or if as for by from with".split()
)


def entities_of(text: str) -> list[str]:
    """The offline named entities of a text, in order of first appearance, each once."""
    found: list[tuple[int, str]] = []
    for m in _NUMBER.finditer(text):
        number = m.group(0)
        if re.search(r"\s[A-Za-z]+$", number) and not _UNITS.search(number):
            number = number.rsplit(None, 1)[0]
        found.append((m.start(), number.strip()))
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower() in _LEADING:
            words = words[1:]
        if words:
            found.append((m.start(), " ".join(words)))
    if re.search(r"[\u3400-\u9fff]", text):  # Chinese: the strict key terms (jieba's names, numerals, Latin words)
        for term, strict in key_terms(text).items():
            at = text.lower().find(term)
            if strict and at >= 0 and not any(term in f.lower() for _, f in found):
                found.append((at, text[at : at + len(term)]))
    return list(dict.fromkeys(e for _, e in sorted(found, key=lambda f: f[0]) if e))


def offline(request: JudgeRequest[Any]) -> dict[str, Any]:
    """The offline judge's reply: the rule in this module's docstring."""
    return {"entities": entities_of(request.inputs["text"])}
