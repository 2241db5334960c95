"""What PostgreSQL cannot store: JSON parsed safely, and values checked before they reach a text or jsonb column."""

from __future__ import annotations

import json
import math
import re

__all__ = [
    "INT_MAX",
    "MAX_DEPTH",
    "MAX_ID_BYTES",
    "UnstorableValue",
    "check_storable",
    "id_problem",
    "loads",
    "text_problem",
]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a record (JSON parsers and jsonb have limits of their own)."""
INT_MAX = 2**31 - 1
"""Largest value of a PostgreSQL integer column (relevance, character offsets)."""

MAX_ID_BYTES = 1000
"""Longest id (qid, docno, doc_id) in UTF-8 bytes: ids are btree-indexed, and an index entry holds ~2,700 bytes."""

_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class UnstorableValue(ValueError):
    """A value PostgreSQL cannot hold; the message names the field and the problem."""


def text_problem(text: str) -> tuple[int, str] | None:
    """(index, reason) of the first character a PostgreSQL text cannot hold (NUL, a lone surrogate), else None."""
    bad = _BAD_CHAR.search(text)
    if bad is None:
        return None
    if bad.group() == "\x00":
        return bad.start(), "contains a NUL character (\\u0000), which PostgreSQL text cannot hold"
    return bad.start(), f"contains a lone surrogate (\\u{ord(bad.group()):04x}), which is not valid Unicode"


def id_problem(text: str) -> str | None:
    """Why `text` cannot be an id (a character text cannot hold, a control character, longer than MAX_ID_BYTES),
    else None."""
    problem = text_problem(text)
    if problem:
        return problem[1]
    control = _CONTROL.search(text)
    if control:
        return f"contains a control character (\\u{ord(control.group()):04x})"
    if len(text) > MAX_ID_BYTES // 4 and len(text.encode("utf-8")) > MAX_ID_BYTES:
        return f"is longer than {MAX_ID_BYTES} bytes ({len(text.encode('utf-8'))})"
    return None


def loads(text: str) -> object:
    """json.loads, with every way it can fail (syntax, nesting too deep, a number too long) a ValueError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ValueError(f"invalid JSON: {exc}") from None


def check_storable(value: object, name: str) -> None:
    """Raise UnstorableValue naming the first string (or key) PostgreSQL cannot hold, the first number jsonb
    cannot hold (NaN, Infinity), or nesting deeper than MAX_DEPTH; `name` names the value in the message."""
    stack: list[tuple[str, object, int]] = [(name, value, 0)]
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                raise UnstorableValue(f"{where} {problem[1]}")
        elif isinstance(item, float) and not math.isfinite(item):
            raise UnstorableValue(f"{where} is {item!r}, which JSON and jsonb cannot hold")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise UnstorableValue(f"{where} is nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, child in reversed(list(item.items())):
                    key_where = f"{where}[{_cut(repr(key))}]"
                    problem = text_problem(key)
                    if problem:
                        raise UnstorableValue(f"a key of {where} {problem[1]}")
                    stack.append((key_where, child, depth + 1))
            else:
                stack.extend((f"{where}[{i}]", child, depth + 1) for i, child in reversed(list(enumerate(item))))


def _cut(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
