"""The bundled demo corpus and eval set (ragsql/data/demo) are well formed; no database needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "ragsql" / "data" / "demo"
CORPUS = DEMO / "corpus.jsonl"
EVALSET = DEMO / "evalset.jsonl"
LANGUAGES = {"zh", "en"}


def _load(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a bad line fails the test naming it."""
    rows = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                pytest.fail(f"{path.name} line {number}: invalid JSON: {exc}")
            assert isinstance(obj, dict), f"{path.name} line {number}: expected a JSON object, got {type(obj).__name__}"
            rows.append((number, obj))
    return rows


@pytest.fixture(scope="module")
def corpus() -> list[tuple[int, dict]]:
    return _load(CORPUS)


@pytest.fixture(scope="module")
def evalset() -> list[tuple[int, dict]]:
    return _load(EVALSET)


@pytest.fixture(scope="module")
def docs(corpus) -> dict[str, dict]:
    return {doc["id"]: doc for _, doc in corpus}


def test_files_are_utf8_without_bom():
    for path in (CORPUS, EVALSET):
        raw = path.read_bytes()
        assert not raw.startswith(b"\xef\xbb\xbf"), f"{path.name} starts with a byte-order mark"
        raw.decode("utf-8")


def _records(rows: list[tuple[int, dict]], name: str, keys: tuple[str, ...], lang: str) -> Iterator[tuple[str, dict]]:
    """Each record of file `name` with every field of `keys`, a unique non-empty id (the first key) and a known
    language (field `lang`), with where it is ("<name> line N")."""
    id_key = keys[0]
    seen: dict[str, int] = {}
    for line, rec in rows:
        where = f"{name} line {line}"
        for key in keys:
            assert key in rec, f"{where}: missing field {key!r}"
        rid = rec[id_key]
        assert isinstance(rid, str) and rid.strip(), f"{where}: {id_key} must be a non-empty string"
        assert rid not in seen, f"{where}: {id_key} {rid!r} already used on line {seen.get(rid)}"
        seen[rid] = line
        assert rec[lang] in LANGUAGES, f"{where} ({rid}): {lang} {rec[lang]!r} not in {sorted(LANGUAGES)}"
        yield where, rec


def test_corpus_records(corpus):
    for where, doc in _records(corpus, "corpus.jsonl", ("id", "title", "text", "lang", "tags"), "lang"):
        assert isinstance(doc["title"], str) and doc["title"].strip(), f"{where} ({doc['id']}): empty title"
        assert isinstance(doc["tags"], list) and all(isinstance(t, str) for t in doc["tags"]), (
            f"{where} ({doc['id']}): tags must be a list of strings"
        )
        assert isinstance(doc["text"], str), f"{where} ({doc['id']}): text must be a string"
        assert 300 <= len(doc["text"]) <= 1500, (
            f"{where} ({doc['id']}): text has {len(doc['text'])} characters, expected 300-1500"
        )
    assert 48 <= len(corpus) <= 60, f"corpus.jsonl has {len(corpus)} documents, expected 48-60"


def test_some_documents_span_several_chunks(corpus):
    long_docs = {lang: [d["id"] for _, d in corpus if d["lang"] == lang and len(d["text"]) > 500] for lang in LANGUAGES}
    for lang, ids in long_docs.items():
        assert len(ids) >= 3, f"only {len(ids)} {lang} documents are longer than 500 characters: {ids}"


def test_evalset_records(evalset):
    keys = ("qid", "query", "language", "gold_evidence", "gold_answer")
    for where, q in _records(evalset, "evalset.jsonl", keys, "language"):
        assert isinstance(q["query"], str) and q["query"].strip(), f"{where} ({q['qid']}): empty query"
        assert isinstance(q["gold_answer"], str) and q["gold_answer"].strip(), (
            f"{where} ({q['qid']}): empty gold_answer"
        )
        assert isinstance(q["gold_evidence"], list), f"{where} ({q['qid']}): gold_evidence must be a list"
        answerable = q.get("metadata", {}).get("answerable", True)
        assert isinstance(answerable, bool), f"{where} ({q['qid']}): answerable must be true or false"
    assert len(evalset) >= 44, f"evalset.jsonl has {len(evalset)} questions, expected at least 44"


@pytest.mark.parametrize("name", ["corpus", "evalset"])
def test_both_languages_well_represented(name, request):
    rows = request.getfixturevalue(name)
    key = "lang" if name == "corpus" else "language"
    for lang in sorted(LANGUAGES):
        n = sum(1 for _, r in rows if r.get(key) == lang)
        assert n / len(rows) >= 0.4, (
            f"{name}: {n} of {len(rows)} records are {lang} ({n / len(rows):.0%}), expected >= 40%"
        )


def test_gold_evidence_is_an_exact_span_of_an_existing_document(evalset, docs):
    for line, q in evalset:
        where = f"evalset.jsonl line {line} ({q['qid']})"
        cited = []
        for i, ev in enumerate(q["gold_evidence"]):
            assert isinstance(ev, dict) and set(ev) >= {"doc_id", "text"}, (
                f"{where}: gold_evidence[{i}] must be an object with doc_id and text, got {ev!r}"
            )
            assert ev["doc_id"] in docs, f"{where}: gold_evidence[{i}] names unknown document {ev['doc_id']!r}"
            assert ev["text"] in docs[ev["doc_id"]]["text"], (
                f"{where}: gold_evidence[{i}] text is not an exact substring of {ev['doc_id']}: {ev['text']!r}"
            )
            assert 20 <= len(ev["text"]) <= 200, (
                f"{where}: gold_evidence[{i}] text has {len(ev['text'])} characters, expected 20-200"
            )
            cited.append(ev["doc_id"])
        assert len(cited) == len(set(cited)), f"{where}: a document is cited twice in gold_evidence: {cited}"


def test_answerable_and_unanswerable_questions(evalset):
    unanswerable = []
    for line, q in evalset:
        where = f"evalset.jsonl line {line} ({q['qid']})"
        if q.get("metadata", {}).get("answerable", True) is False:
            unanswerable.append(q["qid"])
            assert q["gold_evidence"] == [], f"{where}: unanswerable question must have no gold evidence"
        else:
            assert q["gold_evidence"], (
                f"{where}: answerable question has no gold evidence (mark it metadata.answerable: false)"
            )
    assert 3 <= len(unanswerable) <= 4, f"expected 3-4 unanswerable questions, found {unanswerable}"


def test_multi_document_questions_exist(evalset):
    multi = [q["qid"] for _, q in evalset if len({ev["doc_id"] for ev in q["gold_evidence"]}) >= 2]
    assert len(multi) >= 4, f"expected at least 4 questions needing two documents, found {multi}"


@pytest.mark.parametrize("markers", [("地球自转",), ("张伟",), ("向量数据库",), ("Einstein", "爱因斯坦")])
def test_seed_examples_present(markers, corpus, evalset):
    in_queries = [q["qid"] for _, q in evalset if any(m in q["query"] for m in markers)]
    in_docs = [d["id"] for _, d in corpus if any(m in d["text"] for m in markers)]
    assert in_queries, f"no question mentions {' / '.join(markers)}"
    assert in_docs, f"no document mentions {' / '.join(markers)}"
