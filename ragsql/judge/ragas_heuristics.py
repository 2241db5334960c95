"""Offline stand-ins for the judge tasks of RAGAS's later metrics, built on the rules of `ragsql.judge.heuristics`
(the values they give are labelled OFFLINE like the others'):

* entities: numbers (with a unit word that follows) and names — runs of capitalised words outside a leading
  article, pronoun or question word in English; in Chinese the strict key terms of `lexical.key_terms` (jieba's
  person, place, organisation and other proper-noun words, Latin words, numerals) — each once, as in the text.
* claims: atomicity high gives the offline statements (clauses), low the content sentences; coverage low keeps
  only the pieces that hold a number or a name (all of them when none does), high keeps every piece.
* attribution: a statement is supported by each context that on its own makes `heuristics.support` say
  supported.
* groundedness: pass 1 rates by the answer's statements against all contexts (all supported 2, some supported or
  partial 1, else 0); pass 2 by the share of the answer's content tokens the contexts hold (≥ 0.6: 2, ≥ 0.35: 1).
* context_rating: pass 1 rates 2 when a context sentence is relevant to the question (`heuristics.relevant`), 1
  when one shares a content token with the question, else 0; pass 2 by the share of the question's content tokens
  the contexts hold (≥ 0.5: 2, ≥ 0.25: 1).
* rubric: the rubric's text cannot be read; the score is 1 + round(4 q), q the share of the reference's content
  tokens the answer holds (a rubric with reference), else the share of the answer's statements the contexts
  support, else the share of the question's content tokens in the answer — and the reason says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ragsql.judge import heuristics as h
from ragsql.judge.language import split_sentences
from ragsql.judge.lexical import content_tokens, coverage, key_terms
from ragsql.judge.prompts import JudgeRequest

__all__ = ["TASKS", "entities_of"]

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


def _entities(request: JudgeRequest[Any]) -> dict[str, Any]:
    return {"entities": entities_of(request.inputs["text"])}


def _claims(request: JudgeRequest[Any]) -> dict[str, Any]:
    text = request.inputs["text"]
    if request.inputs["atomicity"] == "high":
        pieces = h.statements_of(text)
    else:
        pieces = [
            h.strip_filler(s)
            for s in split_sentences(text)
            if not s.rstrip().endswith(("?", "？")) and content_tokens(h.strip_filler(s))
        ]
    if request.inputs["coverage"] == "low":
        factual = [p for p in pieces if any(strict for strict in key_terms(p).values())]
        pieces = factual or pieces
    return {"claims": pieces}


def _attribution(request: JudgeRequest[Any]) -> dict[str, Any]:
    contexts = request.inputs["contexts"]
    return {
        "verdicts": [
            {"id": i, "contexts": [c for c, ctx in enumerate(contexts, 1) if h.support(s, [ctx])[0] == "supported"]}
            for i, s in enumerate(request.inputs["statements"], 1)
        ]
    }


def _groundedness(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, contexts = request.inputs["answer"], request.inputs["contexts"]
    if request.inputs["judge_pass"] == 2:
        share = coverage(answer, {t for c in contexts for t in content_tokens(c)})
        return {"rating": 2 if share >= h.SUPPORTED else 1 if share >= h.PARTIAL else 0}
    verdicts = [h.support(s, contexts)[0] for s in h.statements_of(answer)]
    if verdicts and all(v == "supported" for v in verdicts):
        return {"rating": 2}
    return {"rating": 1 if any(v in ("supported", "partial") for v in verdicts) else 0}


def _context_rating(request: JudgeRequest[Any]) -> dict[str, Any]:
    question, contexts = request.inputs["question"], request.inputs["contexts"]
    if request.inputs["judge_pass"] == 2:
        share = coverage(question, {t for c in contexts for t in content_tokens(c)})
        return {"rating": 2 if share >= h.RELEVANT else 1 if share >= h.ANSWERS else 0}
    sentences = [s for c in contexts for s in split_sentences(c)]
    if any(h.relevant(s, question) for s in sentences):
        return {"rating": 2}
    asked = set(content_tokens(question))
    return {"rating": 1 if any(asked & set(content_tokens(s)) for s in sentences) else 0}


def _rubric(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, references, contexts = request.inputs["answer"], request.inputs["references"], request.inputs["contexts"]
    if references:
        share, basis = max(coverage(r, set(content_tokens(answer))) for r in references), "reference tokens in it"
    elif contexts and h.statements_of(answer):
        found = h.statements_of(answer)
        share = sum(h.support(s, contexts)[0] == "supported" for s in found) / len(found)
        basis = "its statements the contexts support"
    else:
        share, basis = coverage(request.inputs["question"], set(content_tokens(answer))), "question tokens in it"
    return {"score": 1 + round(4 * share), "reason": f"offline: the rubric is not read; {share:.2f} of {basis}"}


TASKS: dict[str, Callable[[JudgeRequest[Any]], dict[str, Any]]] = {
    "entities": _entities,
    "claims": _claims,
    "attribution": _attribution,
    "groundedness": _groundedness,
    "context_rating": _context_rating,
    "rubric": _rubric,
}
"""The reply builder of each of these tasks, as `heuristics.TASKS` holds those of the first ten."""
