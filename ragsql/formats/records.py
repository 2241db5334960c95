"""Eval-set records from JSONL or CSV, normalised across RAGAS (new and old), DeepEval and the seed's field names."""

from __future__ import annotations

import csv
import hashlib
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from ragsql.errors import InputError
from ragsql.formats.values import INT_MAX, UnstorableValue, check_storable, id_problem, loads, text_problem

__all__ = [
    "FORMATS",
    "Judgment",
    "Record",
    "Retrieved",
    "Span",
    "answer_contexts",
    "context_docno",
    "parse_records",
    "ranked",
    "retrieved_of",
]

FORMATS = ("jsonl", "csv")

# Canonical field -> accepted spellings (RAGAS new, DeepEval LLMTestCase, RAGAS old, the retrieval seed, ragsql's
# own). DeepEval's `context` is the ideal retrieval context (RAGAS reference_contexts); old RAGAS's `contexts` the
# retrieved one.
_ALIASES = {
    "qid": ("qid", "query_id", "id"),
    "query": ("user_input", "input", "question", "query"),
    "language": ("language", "lang"),
    "metadata": ("metadata",),
    "answer": ("response", "actual_output", "answer"),
    "references": ("reference", "expected_output", "ground_truth", "gold_answer", "ground_truths"),
    "gold": ("gold_evidence",),
    "gold_docs": ("gold_doc_ids",),
    "rel_map": ("rel_map",),
    "reference_contexts": ("reference_contexts", "context"),
    "reference_ids": ("reference_context_ids",),
    "contexts": ("retrieved_contexts", "retrieval_context", "contexts"),
    "ids": ("retrieved_ids", "retrieved_context_ids", "retrieved"),
    "scores": ("retrieved_scores",),
}
_KEPT = (
    # RAGAS SingleTurnSample (src/ragas/dataset_schema.py) fields ragsql reads no value from
    *("multi_responses", "rubrics", "persona_name", "query_style", "query_length"),
    # DeepEval LLMTestCase (deepeval/test_case/llm_test_case.py) fields ragsql reads no value from
    *("additional_metadata", "tools_called", "expected_tools", "comments", "token_cost", "completion_time"),
    *("flaky", "multimodal", "name", "tags", "custom_column_key_values", "source_file"),  # source_file: Golden
    *("mcp_servers", "mcp_tools_called", "mcp_resources_called", "mcp_prompts_called"),
)
"""Fields of RAGAS samples and DeepEval test cases that no metric reads: kept in the record's metadata, so their
records drop in whole; any other unknown field is an error."""
_KNOWN = {name for names in _ALIASES.values() for name in names}
_LISTS = {
    "ground_truths",
    "gold_evidence",
    "gold_doc_ids",
    "reference_contexts",
    "context",
    "reference_context_ids",
    "retrieved_contexts",
    "retrieval_context",
    "contexts",
    "retrieved_ids",
    "retrieved_context_ids",
    "retrieved",
    "retrieved_scores",
}
_OBJECTS = {"metadata", "rel_map"}
_ITEM_KEYS = {"id", "score", "text"}
_SPAN_KEYS = {"doc_id", "start", "end", "text", "relevance"}

T = TypeVar("T")


class Judgment(NamedTuple):
    """A gold label: a document or context id, its relevance grade and the context's text when given."""

    docno: str
    relevance: int
    text: str | None


class Span(NamedTuple):
    """Gold evidence inside a document: character offsets, or a quote to find, or both."""

    doc_id: str
    start: int | None
    end: int | None
    quote: str | None
    relevance: int


class Retrieved(NamedTuple):
    """One item a RAG system returned, in rank order: its id, score and text."""

    docno: str
    score: float | None
    text: str | None


@dataclass(frozen=True)
class Record:
    """One eval-set record: a query, its gold labels and (optionally) what a RAG system returned for it."""

    line: int
    qid: str
    query: str | None
    language: str | None = None
    metadata: dict = field(default_factory=dict)
    judgments: tuple[Judgment, ...] = ()
    spans: tuple[Span, ...] = ()  # gold evidence inside documents, mapped onto chunks per corpus version
    references: tuple[str, ...] = ()
    retrieved: tuple[Retrieved, ...] = ()  # rank order
    answer: str | None = None
    # RAGAS's retrieved_context_ids without texts: the contexts of an answer, stored even with no response (its
    # text then null) so that the id-based context metrics read them
    context_ids: bool = False


class _Invalid(ValueError):
    """A record-level problem; becomes an InputError with file and line, or a skipped line."""


def context_docno(text: str) -> str:
    """Id of a context given only as text: 'ctx:' + 16 hex of sha256 of its whitespace-normalised text."""
    return "ctx:" + hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def parse_records(
    lines: Iterable[str],
    fmt: str,
    path: str = "<records>",
    on_error: Callable[[int, str], None] | None = None,
) -> Iterator[Record]:
    """Yield a Record per JSONL line or CSV row; a bad record raises InputError, or goes to on_error(line, message)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown record format {fmt!r} (expected one of {', '.join(FORMATS)})", path)
    first_line: dict[str, int] = {}
    for line, obj in _jsonl_objects(lines) if fmt == "jsonl" else _csv_objects(lines, path):
        try:
            if isinstance(obj, _Invalid):
                raise obj
            record = _record(obj, line)
            if record.qid in first_line:
                raise _Invalid(f"qid {record.qid!r} appears twice (first on line {first_line[record.qid]})")
        except _Invalid as exc:
            if on_error is None:
                raise InputError(str(exc), path, line) from None
            on_error(line, str(exc))
            continue
        first_line[record.qid] = line
        yield record


def retrieved_of(contexts: list[str], ids: list[str]) -> tuple[tuple[Retrieved, ...], bool]:
    """The retrieved items of a record whose retrieved_contexts and retrieved_context_ids are these lists (an empty
    list: the field is absent), and whether they are ids alone; a ValueError (one line) where import refuses it."""
    given = {"retrieved_contexts": contexts, "retrieved_context_ids": ids}
    items = _retrieved({key: values for key, values in given.items() if values})
    return items, bool(ids) and all(item.text is None for item in items)


def ranked(record: Record) -> Iterator[tuple]:
    """(rank, docno, score, text) of a record's retrieved items; an id repeated in a list of ids alone counts at
    its first rank (a ranking holds an item once)."""
    first: dict[str, Retrieved] = {}
    for item in record.retrieved:
        first.setdefault(item.docno, item)
    yield from ((rank, *item) for rank, item in enumerate(first.values(), start=1))


def answer_contexts(record: Record) -> Iterator[tuple]:
    """(qid, position, docno, text) of the contexts of a record stored as an answer: its retrieved items with text;
    when they all come without text (RAGAS retrieved_context_ids alone), its ids with a null text."""
    texts = [(docno, text) for docno, _, text in record.retrieved if text is not None]
    if not texts:  # ids alone: the id-based context metrics read them
        texts = [(docno, None) for docno, _, _ in record.retrieved]
    yield from ((record.qid, position, docno, text) for position, (docno, text) in enumerate(texts, start=1))


def _jsonl_objects(lines: Iterable[str]) -> Iterator[tuple[int, object]]:
    for number, text in enumerate(lines, start=1):
        text = text.lstrip("\ufeff") if number == 1 else text
        if not text.strip():
            continue
        try:
            yield number, loads(text)
        except ValueError as exc:
            yield number, _Invalid(str(exc))


def _csv_objects(lines: Iterable[str], path: str) -> Iterator[tuple[int, object]]:
    # Cells holding many contexts easily pass csv's default 128 KiB cell limit.
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
        if header is None:
            return
        if not header:
            raise InputError("the first line, the CSV header, is empty", path, 1)
        header = [h.strip() for h in header]
        header[0] = header[0].lstrip("\ufeff")
        if len(set(header)) != len(header) or "" in header:
            raise InputError("the CSV header has an empty or repeated column name", path, 1)
        for name in header:
            if problem := text_problem(name):
                raise InputError(f"the CSV header's column {name!r} {problem[1]}", path, 1)
            if not name.isprintable():
                raise InputError(f"the CSV header's column {name!r} holds a control character", path, 1)
        start = reader.line_num + 1
        for row in reader:
            line, start = start, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                yield line, _Invalid(f"row has {len(row)} cells but the header has {len(header)}")
                continue
            try:
                yield line, {k: v for k, cell in zip(header, row) if (v := _csv_value(k, cell)) is not None}
            except _Invalid as exc:
                yield line, exc
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path, reader.line_num) from None


def _csv_value(name: str, cell: str) -> object:
    """A CSV cell as the JSON value it stands for; blank cells are absent, except an answer's."""
    text = cell.strip()
    if name in _ALIASES["answer"]:
        return cell
    if not text:
        return None
    if name in _LISTS:
        if text.startswith("[") and text.endswith("]"):
            return _json(name, text)
        if name == "retrieved_scores":
            return [_json(name, text)]
        return [cell]
    if name in _OBJECTS:
        return _json(name, text)
    return cell


def _json(name: str, text: str) -> object:
    try:
        return loads(text)
    except ValueError as exc:
        raise _Invalid(f"{name}: {exc}") from None


def _record(obj: object, line: int) -> Record:
    if not isinstance(obj, dict):
        raise _Invalid(f"a record must be a JSON object, found {_kind(obj)}")
    for name, value in obj.items():
        try:
            check_storable(name, "a field name")
            check_storable(value, name if name.isprintable() and len(name) <= 60 else _short(name))
        except UnstorableValue as exc:
            raise _Invalid(str(exc)) from None
    unknown = sorted(obj.keys() - _KNOWN - set(_KEPT))
    if unknown:
        raise _Invalid(
            f"unknown field {_short(unknown[0])} (accepted: {', '.join(n for ns in _ALIASES.values() for n in ns)}; "
            "RAGAS's and DeepEval's other fields are kept in metadata; put your own data under metadata)"
        )
    qid, query = _get(obj, "qid", _id), _get(obj, "query", _text)
    key, meta = _pick(obj, "metadata")
    if key and not isinstance(meta, dict):
        raise _Invalid(f"metadata must be an object, found {_kind(meta)}")
    metadata = dict(meta) if isinstance(meta, dict) else {}
    for name in obj.keys() & set(_KEPT):
        if name in metadata:
            raise _Invalid(f"field {name!r} is also a key of metadata")
        metadata[name] = obj[name]
    record = Record(
        line=line,
        # no qid: q<line>, the record's line in the file (a list given to ragsql.evaluate: its position from 1)
        qid=qid if qid is not None else f"q{line}",
        query=query,
        language=_get(obj, "language", _text),
        metadata=metadata,
        judgments=_judgments(obj),
        spans=_spans(obj),
        references=_references(obj),
        retrieved=(retrieved := _retrieved(obj)),
        answer=_answer(obj),
        context_ids=obj.get("retrieved_context_ids") is not None and all(r.text is None for r in retrieved),
    )
    # a record with no qid and no question is kept when it gives something to evaluate (RAGAS's id-based samples
    # give only ids; an empty retrieved_context_ids too: NULL with a reason where RAGAS gives NaN or 0)
    given = record.judgments or record.spans or record.references or record.retrieved or record.context_ids
    if qid is None and query is None and not (given or record.answer is not None):
        raise _Invalid(f"record has no query text ({_spellings('query')}), no qid and nothing to evaluate")
    return record


def _spellings(name: str) -> str:
    """'user_input, input, question or query': the spellings of a field, for a message."""
    *first, last = _ALIASES[name]
    return f"{', '.join(first)} or {last}" if first else last


def _pick(obj: dict, name: str) -> tuple[str | None, object]:
    """(spelling, value) of the one non-null spelling of a field; two spellings of it in one record are an error."""
    present = [(k, obj[k]) for k in _ALIASES[name] if obj.get(k) is not None]
    if len(present) > 1:
        raise _Invalid(f"fields {present[0][0]} and {present[1][0]} are two spellings of one field: give one")
    return present[0] if present else (None, None)


def _pick_list(obj: dict, name: str) -> tuple[str, list]:
    """(spelling, items) of a list field; ("", []) when it is absent."""
    key, value = _pick(obj, name)
    return (key, _list(key, value)) if key else ("", [])


def _get(obj: dict, name: str, check: Callable[[str, object], T]) -> T | None:
    key, value = _pick(obj, name)
    return check(key, value) if key else None


def _answer(obj: dict) -> str | None:
    for key in _ALIASES["answer"]:
        if key in obj and (obj[key] is None or (isinstance(obj[key], str) and not obj[key].strip())):
            raise _Invalid(f"{key} is empty (an answer that is given must have text)")
    return _get(obj, "answer", _text)


def _references(obj: dict) -> tuple[str, ...]:
    found: list[tuple[str, list[str]]] = []
    for key in _ALIASES["references"]:
        if obj.get(key) is None:
            continue
        if key in _LISTS:
            found.append((key, [_text(key, v, i) for i, v in enumerate(_list(key, obj[key]))]))
        else:
            found.append((key, [_text(key, obj[key])]))
    if len(found) > 1:
        raise _Invalid(f"fields {found[0][0]} and {found[1][0]} are two spellings of one field: give one")
    return tuple(found[0][1]) if found else ()


def _judgments(obj: dict) -> tuple[Judgment, ...]:
    labels: dict[str, list] = {}  # docno -> [relevance, text]
    key, gold = _pick_list(obj, "gold")
    docs_key, docs = _pick_list(obj, "gold_docs")
    items = [(key, i, item) for i, item in enumerate(gold)]
    items += [(docs_key, i, item) for i, item in enumerate(docs)]
    for where, i, item in items:
        if isinstance(item, dict):  # a document span or quote (see _spans); a bare doc_id is a document label
            span = _span(where, i, item)
            if span.start is not None or span.quote is not None:
                continue
            docno, grade = span.doc_id, span.relevance
        else:
            docno, grade = _id(where, item, i), 1
        if docno in labels:
            raise _Invalid(f"{where} lists {docno!r} twice")
        labels[docno] = [grade, None]
    key, rel_map = _pick(obj, "rel_map")
    if key and not isinstance(rel_map, dict):
        raise _Invalid(f"rel_map must be an object of id -> relevance, found {_kind(rel_map)}")
    for docno, grade in (rel_map if isinstance(rel_map, dict) else {}).items():
        labels.setdefault(_id("rel_map key", docno), [1, None])[0] = _grade(f"rel_map[{docno!r}]", grade)
    key, texts = _pick_list(obj, "reference_contexts")
    id_key, ids = _pick_list(obj, "reference_ids")
    if key and id_key and len(ids) != len(texts):
        raise _Invalid(f"{id_key} has {len(ids)} items but {key} has {len(texts)}")
    if not key:  # ids without texts: the gold ids RAGAS's id-based context metrics read
        given = [_id(id_key, item, i) for i, item in enumerate(ids)]
        if len(set(given)) < len(given):
            raise _Invalid(f"{id_key} lists {next(d for d in given if given.count(d) > 1)!r} twice")
        for docno in given:
            labels.setdefault(docno, [1, None])
    for i, text in enumerate(texts):
        text = _text(key, text, i)
        docno = _id(id_key, ids[i], i) if ids else context_docno(text)
        label = labels.setdefault(docno, [1, None])
        if label[1] is not None:
            raise _Invalid(f"{key} holds the same context twice ({docno})")
        label[1] = text
    return tuple(Judgment(docno, rel, text) for docno, (rel, text) in labels.items())


def _spans(obj: dict) -> tuple[Span, ...]:
    """gold_evidence entries {"doc_id", "start", "end"} or {"doc_id", "text"} (optional "relevance")."""
    key, gold = _pick_list(obj, "gold")
    spans = [_span(key, i, item) for i, item in enumerate(gold) if isinstance(item, dict)]
    return tuple(s for s in spans if s.start is not None or s.quote is not None)


def _span(key: str, i: int, item: dict) -> Span:
    unknown = sorted(item.keys() - _SPAN_KEYS)
    if unknown:
        raise _Invalid(
            f"{key}[{i}] has unknown key(s) {', '.join(unknown)} (expected doc_id, start, end, text, relevance)"
        )
    if item.get("doc_id") is None:
        raise _Invalid(f"{key}[{i}] has no doc_id")
    doc_id = _id(f"{key}[{i}].doc_id", item["doc_id"])
    start, end = item.get("start"), item.get("end")
    if (start is None) != (end is None):
        raise _Invalid(f"{key}[{i}] needs both start and end (character offsets)")
    if start is not None:
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT_MAX:
                raise _Invalid(
                    f"{key}[{i}].{name} must be a character offset (integer 0 to {INT_MAX}), found {_short(value)}"
                )
        if end <= start:
            raise _Invalid(f"{key}[{i}]: end ({end}) must be greater than start ({start})")
    quote = None if item.get("text") is None else _text(f"{key}[{i}].text", item["text"])
    relevance = 1 if item.get("relevance") is None else _grade(f"{key}[{i}].relevance", item["relevance"])
    return Span(doc_id, start, end, quote, relevance)


def _retrieved(obj: dict) -> tuple[Retrieved, ...]:
    given = [
        (role, key, _list(key, value))
        for role in ("contexts", "ids", "scores")
        for key, value in [_pick(obj, role)]
        if key
    ]
    for _, key, values in given[1:]:
        if len(values) != len(given[0][2]):
            raise _Invalid(f"{key} has {len(values)} items but {given[0][1]} has {len(given[0][2])}")
    items: list[Retrieved] = []
    rank_of: dict[str, int] = {}
    repeated: str | None = None
    for i in range(len(given[0][2]) if given else 0):
        slot: list = [None, None, None]  # id, score, text
        for role, key, values in given:
            value = values[i]
            if value is None:
                continue
            if isinstance(value, dict):
                for n, v in enumerate(_item(key, i, value)):
                    if v is not None and slot[n] is not None and v != slot[n]:
                        raise _Invalid(f"{key}[{i}] disagrees with another list about item {i + 1}")
                    slot[n] = slot[n] if v is None else v
            elif role == "contexts":
                slot[2] = _text(key, value, i)
            elif role == "ids":
                slot[0] = _id(key, value, i)
            else:
                slot[1] = _score(key, value, i)
        docno, score, text = slot
        if docno is None and text is None:
            raise _Invalid(f"retrieved item {i + 1} has neither an id nor a text")
        docno = docno or context_docno(text)
        if docno in rank_of:
            repeated = repeated or f"retrieved item {docno!r} appears twice (positions {rank_of[docno]} and {i + 1})"
        rank_of.setdefault(docno, i + 1)
        items.append(Retrieved(docno, score, text))
    # RAGAS's ids alone may repeat (two chunks of one document): its id-based context metrics read them as a set
    as_set = any(key == "retrieved_context_ids" for _, key, _ in given) and all(item.text is None for item in items)
    if repeated and not as_set:
        raise _Invalid(repeated)
    return tuple(items)


def _item(key: str, i: int, value: dict) -> tuple:
    """(id, score, text) of a retrieved item given as an object."""
    unknown = sorted(value.keys() - _ITEM_KEYS)
    if unknown:
        raise _Invalid(f"{key}[{i}] has unknown key(s) {', '.join(unknown)} (expected id, score, text)")
    docno, score, text = value.get("id"), value.get("score"), value.get("text")
    return (
        None if docno is None else _id(f"{key}[{i}].id", docno),
        _score(f"{key}[{i}].score", score),
        None if text is None else _text(f"{key}[{i}].text", text),
    )


def _list(key: str, value: object) -> list:
    if not isinstance(value, list):
        raise _Invalid(f"{key} must be a list, found {_kind(value)}")
    return value


def _text(key: str, value: object, i: int | None = None) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"{_at(key, i)} must be a string, found {_kind(value)}")
    if not value.strip():
        raise _Invalid(f"{_at(key, i)} is empty")
    return value


def _id(key: str, value: object, i: int | None = None) -> str:
    if isinstance(value, str) and value.strip():
        if problem := id_problem(value):
            raise _Invalid(f"{_at(key, i)} {problem}")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return _id(key, str(value), i)
    raise _Invalid(f"{_at(key, i)} must be a non-empty string or integer id, found {_kind(value)} {_short(value)}")


def _score(key: str, value: object, i: int | None = None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an integer beyond float8's range
        number = math.nan
    if not math.isfinite(number):
        raise _Invalid(f"{_at(key, i)} must be a finite number, found {_kind(value)} {_short(value)}")
    return number


def _grade(key: str, value: object) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise _Invalid(f"{key}: relevance {_short(value)} is not an integer")
    if abs(value) > INT_MAX:
        raise _Invalid(f"{key}: relevance {_short(value)} is out of range (-{INT_MAX} to {INT_MAX})")
    return int(value)


def _short(value: object) -> str:
    """repr of a value for a message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _at(key: str, i: int | None) -> str:
    return key if i is None else f"{key}[{i}]"


def _kind(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
