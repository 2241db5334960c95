"""Property tests (hypothesis): any bytes as a JSONL, CSV, qrels or TREC run file is either stored or refused
with one InputError naming the file (and the line, for a bad record) — never another exception."""

from __future__ import annotations

import csv
import io
import json
import uuid
from functools import partial

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ragsql.errors import InputError
from ragsql.importer import import_records, import_trec

FIELDS = [
    "qid",
    "query",
    "user_input",
    "question",
    "response",
    "answer",
    "reference",
    "ground_truths",
    "gold_evidence",
    "rel_map",
    "reference_contexts",
    "reference_context_ids",
    "retrieved_contexts",
    "retrieved_ids",
    "retrieved_scores",
    "retrieved",
    "metadata",
    "language",
    "gold_doc_ids",
    "extra",
]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# hostile characters and numbers are drawn often, not left to chance
_text = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\x00", "\ud800", "\u0007", "中", "\n", '"', ","]), min_size=1, max_size=8
) | st.text(max_size=8)
_number = st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.sampled_from([2**31, -(2**31), 10**400])
_json = st.recursive(
    st.none() | st.booleans() | _number | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_id = st.sampled_from(["q1", "q2", "d1", "d2"]) | st.integers(-5, 5) | _text
_span = st.fixed_dictionaries(
    {"doc_id": _id}, optional={"start": _number, "end": _number, "text": _text, "relevance": _number}
)
# mostly well-formed records whose values are hostile, plus any field holding any JSON value
_record = st.fixed_dictionaries(
    {"qid": _id, "query": _text},
    optional={
        "rel_map": st.dictionaries(_id.map(str), _number | st.integers(-3, 3), max_size=3),
        "gold_evidence": st.lists(_span | _id, max_size=3),
        "retrieved_ids": st.lists(_id, max_size=3),
        "retrieved_scores": st.lists(_number, max_size=3),
        "retrieved_contexts": st.lists(_text, max_size=3),
        "reference": _text,
        "response": _text,
        "metadata": _json,
        "language": _text,
        "reference_contexts": st.lists(_text, max_size=2),
    },
) | st.dictionaries(st.sampled_from(FIELDS) | _text, _json, max_size=6)


@pytest.fixture(scope="module")
def conn(shared_db_url):
    """One connection for the module, its transaction rolled back at the end; each example runs in a savepoint."""
    with psycopg.connect(shared_db_url) as connection:
        connection.execute("select 1")
        yield connection
        connection.rollback()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def _outcome(conn, path: str, call) -> None:
    """Run an import in a savepoint that is always rolled back; allow only success or a one-line InputError."""
    try:
        with conn.transaction(force_rollback=True):
            call()
    except InputError as exc:
        assert exc.path is not None and exc.path.startswith(path), exc
        assert "\n" not in str(exc) and "\r" not in str(exc), repr(str(exc))


def _file(folder, suffix: str, data: bytes) -> str:
    path = folder / f"{uuid.uuid4().hex}{suffix}"
    path.write_bytes(data)
    return str(path)


def _jsonl(records: list, garbage: bytes, at: int) -> bytes:
    lines = [json.dumps(r, ensure_ascii=True, allow_nan=True).encode("ascii") for r in records]
    data = b"\n".join(lines) + b"\n"
    at = at % (len(data) + 1)
    return data[:at] + garbage + data[at:]


@PROPERTY
@given(
    records=st.lists(_record, max_size=4),
    garbage=st.just(b"") | st.binary(max_size=6),
    at=st.integers(0, 10**6),
    skip_bad=st.booleans(),
    run=st.booleans(),
)
def test_any_jsonl_is_stored_or_one_input_error(conn, folder, records, garbage, at, skip_bad, run):
    """JSONL built from hostile JSON values, with random bytes spliced in."""
    path = _file(folder, ".jsonl", _jsonl(records, garbage, at))
    _outcome(conn, path, lambda: import_records(conn, path, "jsonl", "ds", "r" if run else None, skip_bad=skip_bad))


@PROPERTY
@given(data=st.binary(max_size=300), skip_bad=st.booleans())
def test_any_bytes_as_jsonl_or_csv_is_stored_or_one_input_error(conn, folder, data, skip_bad):
    """Raw random bytes, read as JSONL and as CSV."""
    for fmt in ("jsonl", "csv"):
        path = _file(folder, "." + fmt, data)
        _outcome(conn, path, partial(import_records, conn, path, fmt, "ds", skip_bad=skip_bad))


@PROPERTY
@given(
    header=st.lists(st.sampled_from(FIELDS) | _text, min_size=1, max_size=5),
    rows=st.lists(st.lists(_text | _json.map(json.dumps), max_size=6), max_size=4),
    skip_bad=st.booleans(),
)
def test_any_csv_is_stored_or_one_input_error(conn, folder, header, rows, skip_bad):
    """CSV with known and hostile column names, cells of hostile text or JSON, ragged rows."""
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    path = _file(folder, ".csv", out.getvalue().encode("utf-8", "surrogatepass"))
    _outcome(conn, path, lambda: import_records(conn, path, "csv", "ds", skip_bad=skip_bad))


_token = _text.filter(lambda t: t.strip() and not any(c.isspace() for c in t))
_field = (
    st.sampled_from(
        ["q1", "d1", "0", "Q0", "1", "-3", "0.5", "99999999999", "nan", "1e999", "#", "d\x00", "\u0007", "中"]
    )
    | _token
)
_qrels_row = st.tuples(
    st.sampled_from(["q1", "q2"]) | _token,
    st.just("0"),
    st.sampled_from(["d1", "d2"]) | _token,
    st.integers(-(2**40), 2**40).map(str) | _field,
).map(list) | st.lists(_field, min_size=3, max_size=5)
_run_row = st.tuples(
    st.sampled_from(["q1", "q3"]) | _token,
    st.just("Q0"),
    st.sampled_from(["d1", "d2"]) | _token,
    st.just("1"),
    _number.map(str) | _field,
    st.just("r") | _token,
).map(list) | st.lists(_field, min_size=5, max_size=7)


@PROPERTY
@given(
    qrels=st.lists(_qrels_row, max_size=5),
    run=st.one_of(st.none(), st.lists(_run_row, max_size=5)),
    garbage=st.just(b"") | st.binary(max_size=4),
)
def test_any_trec_files_are_stored_or_one_input_error(conn, folder, qrels, run, garbage):
    """qrels and run lines of hostile fields (NUL, huge relevance, NaN scores), random bytes appended to the run."""

    def lines(rows: list[list[str]]) -> bytes:
        return "".join(" ".join(row) + "\n" for row in rows).encode("utf-8", "surrogatepass")

    qrels_path = _file(folder, ".qrels", lines(qrels))
    run_path = None if run is None else _file(folder, ".run", lines(run) + garbage)
    _outcome(conn, str(folder), lambda: import_trec(conn, "ds", qrels_path, run_path, run_name="r"))
