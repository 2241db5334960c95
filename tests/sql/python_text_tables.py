"""Writes sql/functions/15_python_text.sql: Python's str.lower(), str.isspace() and re's \\w as explicit tables, so
the SQL text metrics read no server locale. Run: python tests/sql/python_text_tables.py > sql/functions/15_python_text.sql"""

from __future__ import annotations

import sys
import unicodedata

CODEPOINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def _ranges(chars: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for c in sorted(chars):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


def _escape(c: int) -> str:
    return f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"


def regex_class(chars: list[int]) -> str:
    """The body of a regex bracket expression naming exactly CHARS, every character escaped (\\uXXXX)."""
    return "".join(_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in _ranges(chars))


def tables() -> dict[str, list[int] | tuple[list[int], list[int]]]:
    """Python's character classes and its one-to-one lower-case mapping beyond ASCII."""
    lower = {c: chr(c).lower() for c in CODEPOINTS if c > 0x7F and chr(c).lower() != chr(c)}
    single = sorted(c for c, low in lower.items() if len(low) == 1)
    # cased and not case-ignorable: a capital sigma after it (case-ignorables between) is final
    cased = [c for c in CODEPOINTS if (chr(c) + "\u03a3").lower()[-1] == "\u03c2"]
    known = set(cased)
    ignorable = [c for c in CODEPOINTS if c not in known and ("A" + chr(c) + "\u03a3").lower()[-1] == "\u03c2"]
    return {
        "upper": list(lower),
        "single": (single, [ord(lower[c]) for c in single]),
        "word": [c for c in CODEPOINTS if chr(c).isalnum() or chr(c) == "_"],
        "space": [c for c in CODEPOINTS if chr(c).isspace()],
        "cased": cased,
        "ignorable": ignorable,
    }


def _literal(text: str, width: int = 104) -> str:
    """A long string as adjacent SQL literals (PostgreSQL joins literals separated by a newline)."""
    parts, line = [], ""
    for piece in text.split("\\")[1:]:
        piece = "\\" + piece
        if len(line) + len(piece) > width:
            parts.append(line)
            line = ""
        line += piece
    parts.append(line)
    return "\n".join(f"        '{p}'" for p in parts)


NAMES = (
    "upper_class",
    "upper_chars",
    "lower_chars",
    "word_class",
    "space_class",
    "cased_class",
    "case_ignorable_class",
)


def _entry(name: str, body: str, estring: bool) -> str:
    """One branch of ragsql._py_text's case: the name, then its text as adjacent literals."""
    literal = "    " + _literal(body).replace("\n", "\n    ")
    if estring:
        literal = "            E" + literal.lstrip()  # the lines after the first continue the escape string
    return f"        when '{name}' then\n{literal}\n"


def main() -> None:
    t = tables()
    upper, lowered = t["single"]
    v = sys.version_info
    bodies = {
        "upper_class": (regex_class(t["upper"]), False),
        "upper_chars": ("".join(_escape(c) for c in upper), True),
        "lower_chars": ("".join(_escape(c) for c in lowered), True),
        "word_class": (regex_class(t["word"]), False),
        "space_class": (regex_class(t["space"]), False),
        "cased_class": (regex_class(t["cased"]), False),
        "case_ignorable_class": (regex_class(t["ignorable"]), False),
    }
    # one function holding every table, so the file states each once (the former one-table functions go)
    drops = "".join(f"drop function if exists ragsql._py_{name}();\n" for name in NAMES)
    entries = "".join(_entry(name, *bodies[name]) for name in NAMES)
    print(f"""-- Python's text rules as explicit tables, so that the text metrics (26_text_metrics.sql) give the same values
-- under every server collation and version: PostgreSQL's lower(), \\s and \\w follow the database's collation
-- (under "C" they know ASCII only; under ICU or glibc they differ from Python on some characters).
-- Generated from Python {v.major}.{v.minor} (Unicode {unicodedata.unidata_version}) by tests/sql/python_text_tables.py; do not edit.
-- Regex classes are bracket-expression bodies with every character escaped, for '[' || class || ']'.

{drops}
create or replace function ragsql._py_text(name text)
returns text
language sql immutable parallel safe
as $$
    -- a single select on its argument: inlined and folded to the literal wherever the name is a constant
    select case _py_text.name
{entries}    end
$$;
comment on function ragsql._py_text(text) is
    'Python''s text tables by name: upper_class, the regex class of the characters beyond ASCII that str.lower() '
    'changes; upper_chars and lower_chars, those it maps to one character (all but U+0130) and what it maps each '
    'to (capital sigma: the non-final sigma), for translate(); word_class, Python''s \\w (str.isalnum() or _), as '
    're reads \\b; space_class, the characters str.isspace() is true for (those str.split() and str.strip() cut '
    'at); cased_class and case_ignorable_class, Unicode''s Final_Sigma rule as Python applies it. Null for another '
    'name.';""")


if __name__ == "__main__":
    main()
