"""Gold evidence that matches nothing is reported (ragsql.run_unmatched_gold, ragsql.dataset_unmatched_gold and the
warnings of import, retrieve and metrics), never dropped silently; .txt/.md documents are named without extension."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from ragsql.cli import main
from ragsql.importer import import_records
from ragsql.ingest import ingest
from ragsql.llm.settings import EndpointSettings
from ragsql.retrieve import RunSpec, retrieve_run

OFFLINE = EndpointSettings(embedder="offline")  # no endpoint; ingests with the hashed n-grams unless told
SPEC = RunSpec(mode="bm25", k=10, candidates=50, weights={"bm25": 1}, rrf_k=60, expand=0)
MOON = "The Moon orbits the Earth every 27.3 days. Its far side never faces us."
EARTH = "Earth turns on its axis once a day, which gives day and night."


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def records(path: Path, rows: list[dict]) -> str:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def conn(db):
    db.execute("select 1")  # an open transaction: every step below runs in a savepoint, all rolled back
    return db


@pytest.fixture
def folder(tmp_path) -> Path:
    write(tmp_path / "docs" / "zh-moon.md", "# Moon\n\n" + MOON)
    write(tmp_path / "docs" / "en" / "earth.txt", EARTH)
    return tmp_path / "docs"


def test_gold_naming_a_file_without_its_extension_matches(conn, folder, tmp_path):
    """Gold evidence names zh-moon and en/earth (files zh-moon.md, en/earth.txt): both queries are judged, and
    nothing is reported unmatched."""
    ingest(conn, [folder], "docs", embedder="offline:16", settings=OFFLINE)
    evalset = records(tmp_path / "q.jsonl", [
        {"qid": "q1", "query": "How long is the Moon's orbit?",
         "gold_evidence": [{"doc_id": "zh-moon", "text": "every 27.3 days"}]},
        {"qid": "q2", "query": "Why is there day and night?", "gold_evidence": ["en/earth"]},
    ])
    summary = import_records(conn, evalset, "jsonl", "qa", corpus="docs")
    assert not summary.unmatched and summary.unmatched.line() == ""
    retrieve_run(conn, dataset="qa", corpus="docs", run="r", spec=SPEC, settings=OFFLINE)
    assert conn.execute("select count(*) from ragsql.run_unmatched_gold('r')").fetchone()[0] == 0
    assert conn.execute("select qid from ragsql.measure('r', 'Success@5') order by 1").fetchall() == [("q1",), ("q2",)]


def test_every_kind_of_unmatched_gold_is_listed_with_its_reason(conn, folder, tmp_path):
    """A missing document, a quote not found, a span past the end, an external docno and a chunk of another
    version each match nothing; a query left with no gold is flagged dropped, one with some gold left is not."""
    ingest(conn, [folder], "docs", embedder="offline:16", settings=OFFLINE)
    ingest(conn, [folder], "docs", embedder="offline:16", settings=OFFLINE, chunk_size=40, overlap=0)
    other_chunk = conn.execute(
        "select 'c' || min(c.id) from ragsql.chunk c join ragsql.corpus_version v on v.id = c.version_id "
        "where v.chunk_size = 40").fetchone()[0]
    evalset = records(tmp_path / "q.jsonl", [
        {"qid": "q1", "query": "moon", "gold_evidence": [{"doc_id": "zh-moon.md", "text": "every 27.3 days"}]},
        {"qid": "q2", "query": "moon", "gold_evidence": [{"doc_id": "zh-moon", "text": "no such sentence"},
                                                          {"doc_id": "zh-moon", "start": 5000, "end": 5010},
                                                          {"doc_id": "zh-moon", "text": "far side"}]},
        {"qid": "q3", "query": "earth", "gold_evidence": ["extdoc", other_chunk]},
        {"qid": "q4", "query": "earth", "gold_evidence": ["en/earth"]},
    ])
    import_records(conn, evalset, "jsonl", "qa")
    retrieve_run(conn, dataset="qa", corpus="docs", run="r", spec=SPEC, settings=OFFLINE, chunking="recursive:500:100")
    rows = conn.execute("select qid, kind, evidence, reason, dropped from ragsql.run_unmatched_gold('r')").fetchall()
    version = conn.execute("select version_id from ragsql.retrieval_run").fetchone()[0]
    assert rows == [
        ("q1", "span", "zh-moon.md", 'no document "zh-moon.md" in corpus "docs"', True),
        ("q2", "span", "zh-moon", 'quote "no such sentence" not found in document "zh-moon"', False),
        ("q2", "span", "zh-moon", 'span [5000, 5010) lies beyond the end of document "zh-moon"', False),
        ("q3", "judgment", other_chunk, f"chunk {other_chunk} is not in corpus version {version}", False),
        ("q3", "judgment", "extdoc", 'no document or chunk "extdoc" in corpus "docs"', False),
    ]
    # version-independent: the other version's chunk is a chunk of the corpus; without a corpus only spans and
    # chunk ids are checked, against every corpus
    by_corpus = conn.execute("select qid, evidence from ragsql.dataset_unmatched_gold('qa', 'docs')").fetchall()
    assert by_corpus == [("q1", "zh-moon.md"), ("q2", "zh-moon"), ("q2", "zh-moon"), ("q3", "extdoc")]
    anywhere = conn.execute("select qid, reason from ragsql.dataset_unmatched_gold('qa')").fetchall()
    assert anywhere[0] == ("q1", 'no document "zh-moon.md" in any corpus') and len(anywhere) == 3


def test_an_imported_run_reports_the_spans_it_cannot_use(conn, tmp_path):
    """An imported run is judged on judgments only: its dataset's gold spans are listed, and a query with
    only spans is dropped."""
    evalset = records(tmp_path / "q.jsonl", [
        {"qid": "q1", "query": "moon", "gold_evidence": [{"doc_id": "m", "text": "far side"}],
         "retrieved_ids": ["m"], "retrieved_contexts": ["The far side."]},
        {"qid": "q2", "query": "earth", "gold_evidence": ["e", {"doc_id": "e", "text": "axis"}],
         "retrieved_ids": ["e"], "retrieved_contexts": ["Earth turns."]},
    ])
    import_records(conn, evalset, "jsonl", "qa", run="imp")
    rows = conn.execute("select qid, kind, evidence, dropped from ragsql.run_unmatched_gold('imp')").fetchall()
    assert rows == [("q1", "span", "m", True), ("q2", "span", "e", False)]


def test_unknown_names_raise(conn):
    for sql in ("select * from ragsql.run_unmatched_gold('nope')",
                "select * from ragsql.dataset_unmatched_gold('nope')"):
        with pytest.raises(psycopg.errors.NoDataFound, match='unknown (run|dataset) "nope"'):
            with conn.transaction():
                conn.execute(sql)


def test_import_retrieve_and_metrics_warn_in_one_line(fresh_db, folder, tmp_path, capsys):
    """The CLI says how many gold items of how many queries match nothing, names the first and the SQL that
    lists them all, on one stderr line; retrieve's JSON carries the numbers."""
    assert main(["ingest", str(folder), "--corpus", "docs", "--embedder", "offline:16"]) == 0
    evalset = records(tmp_path / "q.jsonl", [
        {"qid": "q1", "query": "moon orbit", "gold_evidence": [{"doc_id": "zh-moon.md", "text": "every 27.3 days"}]},
        {"qid": "q2", "query": "day and night", "gold_evidence": [{"doc_id": "en/earth", "text": "day and night"}]},
    ])
    capsys.readouterr()
    assert main(["import", "jsonl", evalset, "--dataset", "qa"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['warning: 1 gold evidence item of 1 query matches nothing (q1: no document "zh-moon.md" in any '
                   "corpus); all: select * from ragsql.dataset_unmatched_gold('qa')"]
    assert main(["retrieve", "--dataset", "qa", "--corpus", "docs", "--run", "r", "--mode", "bm25",
                 "--format", "json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["unmatched_gold"] == {
        "items": 1, "queries": 1, "dropped_queries": 1, "sql": "select * from ragsql.run_unmatched_gold('r')",
        "first": [{"qid": "q1", "evidence": "zh-moon.md", "reason": 'no document "zh-moon.md" in corpus "docs"'}]}
    assert "1 of these queries have no gold left and are left out of every measure" in report["warnings"][0]
    assert main(["metrics", "--run", "r", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert {row["queries"] for row in json.loads(out)} == {1}
    assert len(err.strip().splitlines()) == 1 and err.startswith("warning: 1 gold evidence item of 1 query")
