"""Ingest files into a corpus in one transaction: upsert changed documents, then chunk every document that has
no chunks in the chosen version, with BM25 postings and embeddings, and index the version's vectors.

Re-ingesting the same files changes nothing; a changed document replaces only its own chunks, and the BM25
statistics and chunk lists of every version it changed are recomputed at the end (their N and average length
changed). A bad file is
reported as ``path:line: message`` and skipped whole, or with strict=True stops the ingest (nothing stored).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg.pq import TransactionStatus

from ragsql.corpus import SEGMENTERS, Chunker, SourceDocument, content_hash, find_files, read_documents
from ragsql.db import corpus as store
from ragsql.embed import Embedder, make_embedder
from ragsql.errors import InputError
from ragsql.judge.language import detect_language
from ragsql.llm.settings import EndpointSettings

__all__ = ["IngestSummary", "ingest"]

BATCH_DOCUMENTS = 128
"""Documents chunked, embedded and loaded per round (one embed call, one COPY per table)."""


@dataclass
class IngestSummary:
    """What one ingest did; `reports` are the `path[:line]: message` lines of bad and skipped files."""

    corpus: str
    version_id: int = 0
    embedder: str = ""
    dimensions: int | None = None
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    bad_files: int = 0
    chunked: int = 0
    chunks: int = 0
    tokens: int = 0
    seconds: float = 0.0
    reports: list[str] = field(default_factory=list)


def ingest(
    conn: psycopg.Connection, paths: Iterable[str | os.PathLike], corpus: str, *, splitter: str = "recursive",
    chunk_size: int = 500, overlap: int = 100, embedder: str | None = None, settings: EndpointSettings | None = None,
    strict: bool = False, on_report: Callable[[str], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> IngestSummary:
    """Ingest `paths` (files or folders) into `corpus` and chunk it into the version (splitter, chunk_size,
    overlap, embedder spec as for `ragsql judge`: default openai when an endpoint is configured, else offline).

    on_report gets each bad or skipped file's line as it is found; on_progress (done, total) documents chunked.
    """
    started = time.perf_counter()
    if not corpus or not corpus.strip():
        raise InputError("the corpus name must not be empty")
    chunker = Chunker(splitter, chunk_size, overlap)
    model = make_embedder(embedder, settings or EndpointSettings.from_env())
    summary = IngestSummary(corpus, embedder=model.name)

    def report(line: str) -> None:
        summary.reports.append(line)
        if on_report is not None:
            on_report(line)

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else paths
    asyncio.run(_run(conn, [os.fspath(p) for p in paths], chunker, model, strict, summary, report, on_progress))
    summary.seconds = time.perf_counter() - started
    return summary


async def _run(conn: psycopg.Connection, paths: list[str], chunker: Chunker, model: Embedder, strict: bool,
               summary: IngestSummary, report: Callable[[str], None],
               on_progress: Callable[[int, int], None] | None) -> None:
    """The ingest proper, in one transaction (committed when the caller had none open); closes the embedder."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    try:
        with conn.transaction():
            corpus_id = store.ensure_corpus(conn, summary.corpus)
            summary.version_id, summary.dimensions = store.ensure_version(
                conn, corpus_id, chunker.kind, chunker.size, chunker.overlap, model.name)
            _store_documents(conn, corpus_id, _read(paths, strict, summary, report), summary)
            await _chunk(conn, chunker, model, summary, on_progress)
            if summary.chunked:
                store.set_dimensions(conn, summary.version_id, summary.dimensions)
            if summary.dimensions:
                store.ensure_hnsw_index(conn, summary.version_id, summary.dimensions)
            # last, in the same transaction: BM25 statistics and chunk lists of every version whose chunks
            # changed (this one, and any other that lost the chunks of a changed document), so ragsql.bm25
            # answers exactly from them as soon as the ingest commits
            store.refresh_bm25(conn, corpus_id)
    finally:
        await model.aclose()
    store.analyze(conn)
    if idle and not conn.autocommit:
        conn.commit()


def _read(paths, strict: bool, summary: IngestSummary, report: Callable[[str], None]) -> list[SourceDocument]:
    """Every document of the good files, with its language; a bad file is reported and skipped (or raised)."""
    documents: list[SourceDocument] = []
    seen: dict[str, str] = {}
    for path, name in find_files(paths, lambda p, message: report(f"{p}: {message}")):
        try:
            docs = read_documents(path, name)
            for doc in docs:
                if doc.doc_id in seen:
                    raise InputError(f"duplicate id {doc.doc_id!r} (also in {seen[doc.doc_id]})", path, doc.line)
        except InputError as exc:
            if strict:
                raise
            summary.bad_files += 1
            report(str(exc))
            continue
        for doc in docs:
            seen[doc.doc_id] = f"{path}:{doc.line}" if doc.line else path
            language = doc.language or detect_language(doc.text)
            documents.append(SourceDocument(doc.doc_id, doc.text, doc.title, language, doc.metadata, path, doc.line))
    return documents


def _store_documents(conn: psycopg.Connection, corpus_id: int, documents: list[SourceDocument],
                     summary: IngestSummary) -> None:
    """Upsert the new and changed documents; count them and the unchanged ones."""
    stored = store.stored_hashes(conn, corpus_id)
    rows = []
    for doc in documents:
        digest = content_hash(doc.title, doc.text, doc.language, doc.metadata)
        old = stored.get(doc.doc_id)
        if old == digest:
            summary.unchanged += 1
            continue
        if old is None:
            summary.added += 1
        else:
            summary.changed += 1
        rows.append((doc.doc_id, doc.title, doc.text, doc.language, doc.metadata, digest, doc.source))
    if rows:
        store.upsert_documents(conn, corpus_id, rows)


async def _chunk(conn: psycopg.Connection, chunker: Chunker, model: Embedder, summary: IngestSummary,
                 on_progress: Callable[[int, int], None] | None) -> None:
    """Chunk, tokenise and embed every document without chunks in the version, in batches."""
    ids = store.unchunked_documents(conn, summary.version_id)
    sql_tokenised: list[int] = []
    for start in range(0, len(ids), BATCH_DOCUMENTS):
        documents = store.fetch_documents(conn, ids[start:start + BATCH_DOCUMENTS])
        sql_tokenised += [doc_id for doc_id, _, language in documents if language not in SEGMENTERS]
        await _chunk_batch(conn, documents, chunker, model, summary)
        summary.chunked += len(documents)
        if on_progress is not None:
            on_progress(summary.chunked, len(ids))
    summary.tokens += store.add_text_terms(conn, summary.version_id, sql_tokenised)


async def _chunk_batch(conn: psycopg.Connection, documents: Sequence[tuple[int, str, str]], chunker: Chunker,
                       model: Embedder, summary: IngestSummary) -> None:
    """Split the documents, embed their chunks and load chunks and (for segmented languages) postings."""
    chunks, postings = [], []
    for doc_id, text, language in documents:
        segment = SEGMENTERS.get(language)
        for chunk in chunker.split(text):
            length = 0
            if segment is not None:
                terms = segment(chunk.text)
                length = sum(terms.values())
                postings += [(doc_id, chunk.position, term, tf) for term, tf in terms.items()]
            chunks.append((doc_id, chunk.position, chunk.start, chunk.end, chunk.text, length))
    if not chunks:
        return
    vectors, _ = await model.embed([row[4] for row in chunks])
    dimensions = {len(v) for v in vectors}
    if summary.dimensions is not None:
        dimensions.add(summary.dimensions)
    if len(dimensions) != 1:
        raise InputError(f"the embedder {model.name} returned vectors of {sorted(dimensions)} dimensions "
                         f"for corpus version {summary.version_id}")
    summary.dimensions = dimensions.pop()
    summary.chunks += store.add_chunks(conn, summary.version_id, (
        (*row, vector) for row, vector in zip(chunks, vectors)))
    store.add_chunk_terms(conn, summary.version_id, postings)
    summary.tokens += sum(row[5] for row in chunks)
