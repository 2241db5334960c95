"""`ragsql ingest` into a real PostgreSQL: documents, corpus versions, chunks with exact spans, BM25 postings
(jieba for Chinese, text search lexemes otherwise), embeddings and the per-version HNSW index."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragsql.cli import main
from ragsql.corpus import SEGMENTERS, Chunker, content_hash, read_documents, zh_terms
from ragsql.db import connect
from ragsql.db.corpus import hnsw_index_name, query_terms
from ragsql.errors import InputError
from ragsql.ingest import ingest
from ragsql.llm.settings import EndpointSettings

DEMO = Path(__file__).resolve().parents[1] / "ragsql" / "data" / "demo" / "corpus.jsonl"
OFFLINE = EndpointSettings(embedder="offline")  # no endpoint; ingests with the hashed n-grams unless told


@pytest.fixture
def conn(db):
    """The rolled-back test connection with its transaction open, so each ingest runs in a savepoint."""
    db.execute("select 1")
    return db


def run(conn, paths, corpus="demo", **options):
    return ingest(conn, paths, corpus, settings=OFFLINE, **options)


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def snapshot(conn, corpus="demo") -> dict[str, list]:
    """Every row an ingest writes, with its ctid, so any update shows."""
    queries = {
        "document": "select d.ctid::text, d.* from ragsql.document d",
        "version": "select v.ctid::text, v.* from ragsql.corpus_version v",
        "chunk": "select c.ctid::text, c.id, c.version_id, c.document_id, c.position, c.start_char, c.end_char, "
        "c.length, c.embedding::text from ragsql.chunk c",
        "chunk_term": "select t.ctid::text, t.* from ragsql.chunk_term t",
    }
    return {name: sorted(conn.execute(q).fetchall(), key=str) for name, q in queries.items()}


def test_demo_corpus_is_chunked_tokenised_and_embedded(conn):
    summary = run(conn, [DEMO])
    assert (summary.added, summary.changed, summary.unchanged, summary.bad_files) == (57, 0, 0, 0)
    assert summary.embedder == "offline:hash-ngram-v1:384" and summary.dimensions == 384
    docs, languages = conn.execute(
        "select count(*), array_agg(distinct language order by language) from ragsql.document"
    ).fetchone()
    assert (docs, languages) == (57, ["en", "zh"])
    assert conn.execute("select count(*) from ragsql.chunk").fetchone()[0] == summary.chunks > 57
    # spans are exact and positions run 1..n in every document
    assert (
        conn.execute(
            """select count(*) from ragsql.chunk c join ragsql.document d on d.id = c.document_id
           where substr(d.text, c.start_char + 1, c.end_char - c.start_char) <> c.text"""
        ).fetchone()[0]
        == 0
    )
    assert (
        conn.execute(
            """select count(*) from (select document_id from ragsql.chunk group by document_id
           having min(position) <> 1 or max(position) <> count(*)) x"""
        ).fetchone()[0]
        == 0
    )
    # length is the number of BM25 tokens, and every chunk has some
    assert (
        conn.execute(
            """select count(*) from ragsql.chunk c
           where c.length <> (select coalesce(sum(tf), 0) from ragsql.chunk_term t where t.chunk_id = c.id)
              or c.length = 0"""
        ).fetchone()[0]
        == 0
    )
    assert conn.execute("select sum(length) from ragsql.chunk").fetchone()[0] == summary.tokens
    # Chinese chunks carry jieba words, English chunks stemmed lexemes
    zh = conn.execute(
        """select bool_and(exists (select from ragsql.chunk_term t where t.chunk_id = c.id and t.term = '教研部'))
           from ragsql.chunk c where c.text like '%教研部%'"""
    ).fetchone()[0]
    en = conn.execute(
        """select bool_and(exists (select from ragsql.chunk_term t where t.chunk_id = c.id and t.term = 'retriev')),
                  bool_or(exists (select from ragsql.chunk_term t where t.chunk_id = c.id and t.term = 'retrieval'))
           from ragsql.chunk c join ragsql.document d on d.id = c.document_id
           where d.language = 'en' and c.text ~* '\\mretrieval\\M'"""
    ).fetchone()
    assert zh is True and en == (True, False)
    # embeddings of the version's dimensions, indexed by the version's HNSW index
    assert (
        conn.execute(
            """select count(*) from ragsql.chunk c join ragsql.corpus_version v on v.id = c.version_id
           where c.embedding is null or vector_dims(c.embedding) <> v.dimensions"""
        ).fetchone()[0]
        == 0
    )
    index = conn.execute(
        "select indexdef from pg_indexes where schemaname = 'ragsql' and indexname = %s",
        (hnsw_index_name(summary.version_id),),
    ).fetchone()
    assert index and "hnsw" in index[0] and "vector(384)" in index[0]


def test_reingest_changes_nothing_and_a_changed_document_replaces_only_its_chunks(conn, tmp_path):
    first = run(conn, [DEMO])
    before = snapshot(conn)
    again = run(conn, [DEMO])
    assert (again.added, again.changed, again.unchanged, again.chunks, again.version_id) == (
        0,
        0,
        57,
        0,
        first.version_id,
    )
    assert snapshot(conn) == before

    lines = DEMO.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] += "\n\n新增的一段：地球自转的速度并不完全均匀。"
    edited = write(tmp_path / "corpus.jsonl", "\n".join([json.dumps(record, ensure_ascii=False), *lines[1:]]))
    changed = run(conn, [edited])
    assert (changed.added, changed.changed, changed.unchanged, changed.chunked) == (0, 1, 56, 1)
    document = conn.execute("select id from ragsql.document where doc_id = %s", (record["id"],)).fetchone()[0]
    after = snapshot(conn)["chunk"]
    assert [row for row in after if row[3] != document] == [row for row in before["chunk"] if row[3] != document]
    old = {row[1] for row in before["chunk"] if row[3] == document}
    new = {row[1] for row in after if row[3] == document}
    assert old and new and not old & new
    assert conn.execute(
        """select bool_and(substr(d.text, c.start_char + 1, c.end_char - c.start_char) = c.text)
           from ragsql.chunk c join ragsql.document d on d.id = c.document_id where d.id = %s""",
        (document,),
    ).fetchone()[0]


def test_a_second_chunking_is_a_new_version_that_also_chunks_earlier_documents(conn, tmp_path):
    first = run(conn, [DEMO])
    before = snapshot(conn)["chunk"]
    extra = write(tmp_path / "notes" / "extra.txt", "Extra notes\n\nHybrid retrieval fuses BM25 and vectors.")
    second = run(conn, [extra], chunk_size=300, overlap=50)
    assert second.version_id != first.version_id
    assert (second.added, second.chunked) == (1, 58)
    versions = conn.execute("select chunk_size, overlap from ragsql.corpus_version order by id").fetchall()
    assert versions == [(500, 100), (300, 50)]
    assert [row for row in snapshot(conn)["chunk"] if row[2] == first.version_id] == before
    counts = dict(conn.execute("select version_id, count(distinct document_id) from ragsql.chunk group by 1"))
    assert counts == {first.version_id: 57, second.version_id: 58}
    assert conn.execute("select count(*) from pg_indexes where indexname like 'chunk_hnsw_v%%'").fetchone()[0] == 2


def test_txt_and_markdown_folders(conn, tmp_path):
    folder = tmp_path / "docs"
    write(folder / "a.txt", "\n  第一章 地球\n地球绕太阳公转，一年约为365天。\n")
    write(folder / "sub" / "b.md", "Intro line\n\n# Vector search\n\nHNSW indexes make **vector** search fast.\n")
    write(folder / "c.pdf", "not read")
    write(folder / ".hidden.txt", "ignored")
    single = write(tmp_path / "single.markdown", "No heading here, just words.")
    summary = run(conn, [folder, single], splitter="markdown")
    assert summary.reports == [f"{folder / 'c.pdf'}: skipped: not one of .txt, .md, .markdown, .jsonl"]
    rows = conn.execute("select doc_id, title, language, metadata, source from ragsql.document order by 1").fetchall()
    assert rows == [
        ("a", "第一章 地球", "zh", {}, str(folder / "a.txt")),
        ("single", None, "en", {}, single),
        ("sub/b", "Vector search", "en", {}, str(folder / "sub" / "b.md")),
    ]
    assert conn.execute("select splitter from ragsql.corpus_version").fetchone()[0] == "markdown"
    assert conn.execute("select count(*) from ragsql.chunk_term where term = '公转'").fetchone()[0] == 1


def test_two_files_with_one_document_id_are_an_error_naming_both(conn, tmp_path):
    """moon.md and moon.txt would both be document "moon": the second is reported with the first, not stored
    over it; with strict the ingest stops."""
    folder = tmp_path / "docs"
    write(folder / "moon.md", "# Moon\n\nThe Moon orbits the Earth.")
    write(folder / "moon.txt", "Another moon text.")
    summary = run(conn, [folder])
    assert summary.reports == [f"{folder / 'moon.txt'}: duplicate id 'moon' (also in {folder / 'moon.md'})"]
    assert conn.execute("select doc_id, source from ragsql.document").fetchall() == [("moon", str(folder / "moon.md"))]
    with pytest.raises(InputError, match="duplicate id 'moon'"):
        run(conn, [folder], corpus="strict", strict=True)


def test_a_bad_file_is_skipped_whole_and_strict_stores_nothing(fresh_db, tmp_path, capsys):
    folder = tmp_path / "in"
    write(folder / "good.jsonl", '{"id": "g1", "text": "Good text.", "source_url": "http://x"}\n')
    write(folder / "bad.jsonl", '{"id": "b1", "text": "Fine line."}\n{"id": "b2", "text": oops}\n')
    write(folder / "z_dup.jsonl", '{"id": "g1", "text": "Same id again."}\n')
    assert main(["ingest", str(folder), "--corpus", "c", "--embedder", "offline:32"]) == 0
    err = capsys.readouterr().err
    assert f"{folder / 'bad.jsonl'}:2: malformed JSON" in err
    assert f"{folder / 'z_dup.jsonl'}:1: duplicate id 'g1' (also in {folder / 'good.jsonl'}:1)" in err
    with connect(fresh_db) as conn:
        assert conn.execute("select doc_id, metadata from ragsql.document").fetchall() == [
            ("g1", {"source_url": "http://x"})
        ]
        assert conn.execute("select dimensions from ragsql.corpus_version").fetchone()[0] == 32

    assert main(["ingest", str(folder), "--corpus", "strict", "--strict", "--embedder", "offline:32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ragsql: error: {folder / 'bad.jsonl'}:2: malformed JSON")
    with connect(fresh_db) as conn:
        assert conn.execute("select count(*) from ragsql.corpus where name = 'strict'").fetchone()[0] == 0
        assert conn.execute("select count(*) from ragsql.document").fetchone()[0] == 1


def test_query_terms_tokenise_queries_like_documents(conn):
    run(conn, [DEMO])
    zh_query, en_query = "张伟在教研部负责什么工作？", "How does hybrid retrieval rank documents?"
    zh, en = query_terms(conn, [(zh_query, "zh"), (en_query, "en")], SEGMENTERS)
    assert zh == zh_terms(zh_query) and {"张伟", "教研部"} <= set(zh) and "？" not in zh
    assert en == Counter({"hybrid": 1, "retriev": 1, "rank": 1, "document": 1})
    known = {t for (t,) in conn.execute("select distinct term from ragsql.chunk_term")}
    assert {"张伟", "教研部", "hybrid", "retriev"} <= known
    assert query_terms(conn, [], SEGMENTERS) == []


@pytest.mark.parametrize("splitter", ["character", "recursive", "markdown"])
def test_chunk_spans_are_exact_even_for_repeated_text(splitter):
    paragraph = "重复的段落。Same words again, and again! 重复的段落。"
    text = "\n\n".join([paragraph] * 12 + ["# Heading\n\nTail text."])
    chunks = Chunker(splitter, 60, 20).split(text)
    assert [c.position for c in chunks] == list(range(1, len(chunks) + 1))
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    assert chunks[-1].end == len(text)


def test_bad_chunker_options():
    with pytest.raises(InputError, match="overlap"):
        Chunker("recursive", 100, 100)
    with pytest.raises(InputError, match="unknown splitter"):
        Chunker("semantic", 100, 10)


@pytest.mark.parametrize(
    "content, message, line",
    [
        (b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate id 'a' (also on line 1)", 2),
        (b'{"text": "x"}\n', "missing or empty 'id'", 1),
        (b'\n{"id": 1, "text": "  "}\n', "missing or empty 'text'", 2),
        (b'{"id": 1, "text": "x", "lang": "chinese!"}\n', "'lang' must be a language code", 1),
        (b"[1]\n", "a line must be a JSON object", 1),
        (b'{"id": 1, "text": "ok"}\n{"id": 2, "text": "caf\xe9"}\n', "not UTF-8 text (byte 23 of the line)", 2),
    ],
)
def test_bad_jsonl_files(tmp_path, content, message, line):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        read_documents(str(path), "x.jsonl")
    assert caught.value.line == line and caught.value.path == str(path)


def test_jsonl_fields(tmp_path):
    path = write(tmp_path / "x.jsonl", '{"id": 7, "text": "t", "language": "zh-CN", "tags": ["a"]}\n')
    [doc] = read_documents(path, "x.jsonl")
    assert (doc.doc_id, doc.title, doc.language, doc.metadata, doc.line) == ("7", None, "zh", {"tags": ["a"]}, 1)
    assert content_hash("t", "x", "en", {"b": 1, "a": 2}) == content_hash("t", "x", "en", {"a": 2, "b": 1})
    assert content_hash("t", "x", "en", {}) != content_hash(None, "x", "en", {})


def test_reingest_of_a_changed_document_keeps_bm25_statistics_exact(conn, tmp_path):
    """A changed document changes N and the average length of every version that held it: the ingest recomputes
    their BM25 statistics and scores in its transaction, so the fast path equals the per-query formula (stale
    scores would not), in the version re-chunked and in the other one that lost the document's chunks."""
    first = run(conn, [DEMO])
    other = run(conn, [DEMO], chunk_size=300, overlap=50)
    queries = [["retriev", "hybrid"], ["document", "rank", "search"], ["张伟", "教研部"], ["地球", "太阳", "公转"]]

    def same_as_formula(version: int) -> None:
        for terms in queries:
            fast = conn.execute("select chunk_id, score from ragsql.bm25(%s, %s, 10)", (version, terms)).fetchall()
            exact = conn.execute(
                "select chunk_id, score from ragsql._bm25_exact(%s, %s, 10)", (version, terms)
            ).fetchall()
            assert fast and [c for c, _ in fast] == [c for c, _ in exact], terms
            assert [s for _, s in fast] == pytest.approx([s for _, s in exact], abs=1e-9)

    def stats(version: int):
        return conn.execute(
            "select bm25_chunks, bm25_avgdl, bm25_fresh from ragsql.corpus_version where id = %s", (version,)
        ).fetchone()

    before = {v: stats(v) for v in (first.version_id, other.version_id)}
    old_scores = conn.execute(
        "select chunk_id, score from ragsql.bm25(%s, %s, 10)", (first.version_id, queries[0])
    ).fetchall()
    lines = DEMO.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] += "\n\n" + " ".join(["Hybrid retrieval ranks every document twice."] * 30)
    edited = write(tmp_path / "corpus.jsonl", "\n".join([json.dumps(record, ensure_ascii=False), *lines[1:]]))
    changed = run(conn, [edited])
    assert (changed.changed, changed.version_id) == (1, first.version_id)
    for version in (first.version_id, other.version_id):
        n, avgdl, fresh = stats(version)
        assert fresh is True and (n, avgdl) != before[version][:2]
        assert (n, avgdl) == conn.execute(
            "select count(*), avg(length)::float8 from ragsql.chunk where version_id = %s", (version,)
        ).fetchone()
        same_as_formula(version)
    new_scores = dict(
        conn.execute("select chunk_id, score from ragsql.bm25(%s, %s, 10)", (first.version_id, queries[0])).fetchall()
    )
    assert any(c in new_scores and abs(new_scores[c] - s) > 1e-6 for c, s in old_scores)
    # an ingest that changes nothing leaves the statistics alone
    assert run(conn, [edited]).changed == 0 and stats(first.version_id)[2] is True


@pytest.mark.parametrize("lost_at", [1, 3], ids=["first-batch", "later-batch"])
def test_database_lost_while_a_batch_is_stored_is_one_line_and_stores_nothing(
    fresh_db, tmp_path, monkeypatch, capsys, lost_at
):
    """The server ends the ingest's connection while a batch is being stored in the loader's thread (the next one
    being embedded meanwhile): exit 1 with one error line, no traceback, nothing of the corpus stored (one
    transaction), and no storing thread left behind."""
    import sys
    import threading

    import psycopg

    from ragsql.db import corpus as store

    monkeypatch.setattr(sys.modules["ragsql.ingest.ingest"], "BATCH_CHUNKS", 4)  # the module, not its function
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        write(docs / f"d{i}.txt", " ".join(f"Sentence {i}.{j} about vectors and search." for j in range(40)))
    add_chunks, calls = store.add_chunks, []

    def add_then_lose_the_connection(conn, *args, **kwargs):
        calls.append(threading.current_thread().name)
        if len(calls) == lost_at:
            with psycopg.connect(fresh_db, autocommit=True) as admin:
                admin.execute("select pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return add_chunks(conn, *args, **kwargs)

    monkeypatch.setattr(store, "add_chunks", add_then_lose_the_connection)
    before = set(threading.enumerate())
    assert main(["ingest", str(docs), "--corpus", "c", "--embedder", "offline:16"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("ragsql: error: ") and "Traceback" not in err, err
    assert len(calls) == lost_at and calls[0] != threading.main_thread().name  # stored in the loader's thread
    with psycopg.connect(fresh_db) as conn:
        assert [
            conn.execute(f"select count(*) from ragsql.{t}").fetchone()[0]
            for t in ("corpus", "document", "chunk", "chunk_term")
        ] == [0, 0, 0, 0]
    # the process's compute pool (ragsql.llm.aio) is kept on purpose and may grow a thread under load: not a leak
    left = [t for t in set(threading.enumerate()) - before if t.is_alive() and not t.name.startswith("ragsql-compute")]
    assert left == [], left
