"""Labelled judge pairs (JSONL): one question and two versions of what a judge sees, the better one known.

A line is an object: ``id`` (unique), ``metric`` (a judge metric), ``question``, optional ``language``,
``kind`` (a label to group results by), and ``answer``, ``contexts`` (list of strings), ``reference`` shared by
both sides unless ``better`` / ``worse`` (objects with ``answer`` and / or ``contexts``) override them. Each
side must carry what its metric reads, and the two sides must differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, overload

from ragsql import registry
from ragsql.errors import InputError
from ragsql.formats.values import id_problem, loads, text_problem

__all__ = ["NEEDS", "Pair", "Side", "parse_pairs"]

NEEDS = {name: kind.sides for name, kind in registry.KINDS.items() if kind.judge_check}
"""What each checkable metric reads from a side ("reference" is shared), from the metric registry."""
_SPELLED = {"reference": "a reference", "answer": "an answer"}
_FIELDS = {"id", "metric", "question", "language", "kind", "answer", "contexts", "reference", "better", "worse"}
_SIDE_FIELDS = {"answer", "contexts"}


@dataclass(frozen=True)
class Side:
    """What the judge sees on one side of a pair."""

    answer: str | None
    contexts: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    """One labelled pair: `better` must score strictly higher than `worse` on `metric`."""

    line: int
    id: str
    metric: str
    question: str
    language: str | None
    kind: str
    reference: str | None
    better: Side
    worse: Side


def parse_pairs(lines: Iterable[str], path: str = "<pairs>", metrics: Iterable[str] | None = None) -> list[Pair]:
    """Every pair of a JSONL file (of `metrics` only, when given); a bad line raises InputError with file:line."""
    wanted = set(metrics) if metrics is not None else None
    pairs: list[Pair] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            pair = _pair(loads(line), number)
        except ValueError as exc:
            raise InputError(str(exc), path, number) from None
        if pair.id in seen:
            raise InputError(f"duplicate pair id {pair.id!r} (first on line {seen[pair.id]})", path, number)
        seen[pair.id] = number
        if wanted is None or pair.metric in wanted:
            pairs.append(pair)
    if not seen:
        raise InputError("no pair in the file", path)
    return pairs


def _pair(obj: object, line: int) -> Pair:
    if not isinstance(obj, dict):
        raise ValueError(f"a pair must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} (expected {', '.join(sorted(_FIELDS))})")
    pid = _text(obj, "id", required=True)
    if id_problem(pid):
        raise ValueError(f"id {id_problem(pid)}")
    metric = _text(obj, "metric", required=True)
    if metric not in NEEDS:
        raise ValueError(f"unknown metric {metric!r} (expected one of {', '.join(NEEDS)})")
    question = _text(obj, "question", required=True)
    reference = _text(obj, "reference")
    shared = _side(obj, "the pair", None)
    sides = []
    for name in ("better", "worse"):
        given = obj.get(name)
        if not isinstance(given, dict):
            raise ValueError(f"{name!r} must be an object with answer and/or contexts")
        extra = sorted(set(given) - _SIDE_FIELDS)
        if extra:
            raise ValueError(f"unknown field {name}.{extra[0]} (expected answer, contexts)")
        side = _side(given, name, shared)
        present = {"reference": reference is not None, "answer": side.answer is not None}
        either = registry.kind(metric).needs_any
        for need in NEEDS[metric]:
            if need == "reference" and reference is None or (either and not any(present[n] for n in either)):
                raise ValueError(f"{metric} needs " + " or ".join(_SPELLED[n] for n in either or ("reference",)))
            if (need == "answer" and side.answer is None) or (need == "contexts" and not side.contexts):
                raise ValueError(f"{metric} needs {need} on the {name} side")
        sides.append(side)
    if sides[0] == sides[1]:
        raise ValueError("the better and worse sides are the same")
    return Pair(line, pid, metric, question, _text(obj, "language"), _text(obj, "kind") or "", reference, *sides)


def _side(obj: dict, name: str, shared: Side | None) -> Side:
    answer = _text(obj, "answer", where=name)
    contexts = obj.get("contexts")
    if contexts is not None:
        if not isinstance(contexts, list) or not all(isinstance(c, str) and c.strip() for c in contexts):
            raise ValueError(f"contexts of {name} must be a list of non-empty strings")
        for c in contexts:
            if problem := text_problem(c):
                raise ValueError(f"a context of {name} {problem[1]}")
    if shared is None:
        return Side(answer, tuple(contexts or ()))
    return Side(shared.answer if answer is None else answer, shared.contexts if contexts is None else tuple(contexts))


@overload
def _text(obj: dict, key: str, required: Literal[True], where: str = ...) -> str: ...
@overload
def _text(obj: dict, key: str, required: bool = ..., where: str = ...) -> str | None: ...
def _text(obj: dict, key: str, required: bool = False, where: str = "the pair") -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"missing field {key!r}")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(
            f"{key} of {where} must be a non-empty string" if required else f"{key} of {where} must be a string"
        )
    if problem := text_problem(value):
        raise ValueError(f"{key} of {where} {problem[1]}")
    return value
