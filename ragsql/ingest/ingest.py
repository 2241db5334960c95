"""Ingest files into a corpus in one transaction: upsert changed documents, then chunk every document that has
no chunks in the chosen version, with BM25 postings and embeddings, and index the version's vectors.

Re-ingesting the same files changes nothing; a changed document replaces only its own chunks, and the BM25
statistics and chunk lists of every version it changed are recomputed at the end (their N and average length
changed). A bad file is
reported as ``path:line: message`` and skipped whole, or with strict=True stops the ingest (nothing stored); a
document PostgreSQL cannot store (a NUL character, which text cannot hold, or a lone surrogate in JSON) makes
its file bad. Memory stays bounded whatever the corpus and document sizes: documents are upserted and chunked
in batches of at most BATCH_BYTES of text, and chunks are embedded and loaded BATCH_CHUNKS at a time (one batch
is embedded while the one before is stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from ragsql.corpus import EXTENSIONS, SEGMENTERS, Chunker, SourceDocument, content_hash, find_files, read_documents
from ragsql.db import corpus as store
from ragsql.embed import Embedder, make_embedder, prepare
from ragsql.errors import InputError
from ragsql.formats.values import UnstorableValue, check_storable, id_problem, text_problem
from ragsql.judge.language import detect_language
from ragsql.llm.aio import off_loop
from ragsql.llm.settings import EndpointSettings

__all__ = ["IngestSummary", "ingest"]

T = TypeVar("T")
Progress = Callable[[float, int, str], None]

BATCH_DOCUMENTS = 128
"""Most documents upserted, or fetched and chunked, per round."""
BATCH_BYTES = 8_000_000
"""Most document text (UTF-8 bytes) upserted, or fetched and chunked, per round (a longer document goes alone)."""
BATCH_CHUNKS = 1024
"""Chunks embedded and loaded per round (one embed call, one COPY per table)."""
EMBED_STEP = 64
"""Chunks a local model embeds between two progress updates."""
DETECT_SAMPLE = 1_000_000
"""Characters a document's language is detected from: all of a shorter one, 64 evenly spread slices of a longer."""


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
    conn: psycopg.Connection,
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    corpus: str,
    *,
    splitter: str = "recursive",
    chunk_size: int = 500,
    overlap: int = 100,
    embedder: str | None = None,
    settings: EndpointSettings | None = None,
    strict: bool = False,
    on_report: Callable[[str], None] | None = None,
    on_progress: Progress | None = None,
    on_note: Callable[[str], None] | None = None,
) -> IngestSummary:
    """Ingest `paths` (files or folders) into `corpus` and chunk it into the version (splitter, chunk_size,
    overlap, embedder spec as for `ragsql judge`; none given: settings.embedder (RAGSQL_EMBEDDER), else auto, which is
    openai when an endpoint is configured, else e5).

    on_report gets each bad or skipped file's line as it is found; on_progress (done, total, note) documents chunked,
    from the start (0 of all the documents to chunk) and after every embedded step of chunks (a document part done
    counts as its share of its text), the note counting the chunks embedded; on_note a line before and after a local
    model's one-time preparation (e5-onnx's first use builds its graph).
    """
    started = time.perf_counter()
    if not corpus or not corpus.strip():
        raise InputError("the corpus name must not be empty")
    chunker = Chunker(splitter, chunk_size, overlap)
    settings = settings or EndpointSettings.from_env()
    model = make_embedder(embedder or settings.embedder, settings)
    summary = IngestSummary(corpus, embedder=model.name)

    def report(line: str) -> None:
        summary.reports.append(line)
        if on_report is not None:
            on_report(line)

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else paths
    asyncio.run(
        _run(conn, [os.fspath(p) for p in paths], chunker, model, strict, summary, report, on_progress, on_note)
    )
    summary.seconds = time.perf_counter() - started
    return summary


async def _run(
    conn: psycopg.Connection,
    paths: list[str],
    chunker: Chunker,
    model: Embedder,
    strict: bool,
    summary: IngestSummary,
    report: Callable[[str], None],
    on_progress: Progress | None,
    on_note: Callable[[str], None] | None,
) -> None:
    """The ingest proper, in one transaction (committed when the caller had none open); closes the embedder."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    try:
        with conn.transaction():
            corpus_id = store.ensure_corpus(conn, summary.corpus)
            summary.version_id, summary.dimensions = store.ensure_version(
                conn, corpus_id, chunker.kind, chunker.size, chunker.overlap, model.name
            )
            _store_documents(conn, corpus_id, _read(paths, strict, summary, report), summary)
            await _chunk(conn, chunker, model, summary, on_progress, on_note)
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


def _read(paths, strict: bool, summary: IngestSummary, report: Callable[[str], None]) -> Iterator[SourceDocument]:
    """Every document of the good files, with its language; a bad file is reported and skipped (or raised).
    Finding no file of a supported kind, or no good one, is an InputError."""
    seen: dict[str, str] = {}
    unsupported: Counter[str] = Counter()
    found = 0

    def skip(path: str, message: str) -> None:
        unsupported[os.path.splitext(path)[1].lower() or "no extension"] += 1
        report(f"{path}: {message}")

    for path, name in find_files(paths, skip):
        found += 1
        try:
            docs = read_documents(path, name)
            for doc in docs:
                _require_storable(doc, path)
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
            language = doc.language or _detect(doc.text)
            yield SourceDocument(doc.doc_id, doc.text, doc.title, language, doc.metadata, path, doc.line)
        del docs
    if not found:
        kinds = ", ".join(f"{n} {ext}" for ext, n in sorted(unsupported.items()))
        raise InputError(
            f"nothing to ingest: found {sum(unsupported.values())} files ({kinds or 'none'}), none "
            f"of a supported kind ({', '.join(EXTENSIONS)})",
            ", ".join(map(str, paths)),
        )
    if not seen:
        raise InputError(
            f"nothing to ingest: no good file among the {found} of a supported kind (each bad one "
            "is reported as FILE:LINE: message)"
        )


def _require_storable(doc: SourceDocument, path: str) -> None:
    """InputError (file and line) for a document PostgreSQL cannot store: a NUL character, a lone surrogate,
    a control character in the id, NaN or nesting too deep in the metadata."""
    if problem := id_problem(doc.doc_id):
        raise InputError(f"the id {doc.doc_id[:60]!r} {problem}", path, doc.line)
    if found := text_problem(doc.text):
        raise InputError(f"the text {found[1]}", path, doc.line or doc.text.count("\n", 0, found[0]) + 1)
    try:
        check_storable(doc.title, "title")
        check_storable(doc.metadata, "metadata")
    except UnstorableValue as exc:
        raise InputError(str(exc), path, doc.line) from None


def _detect(text: str) -> str:
    """The language of a document, detected from at most DETECT_SAMPLE characters of it."""
    if len(text) <= DETECT_SAMPLE:
        return detect_language(text)
    step, width = len(text) // 64, DETECT_SAMPLE // 64
    return detect_language(" ".join(text[i * step : i * step + width] for i in range(64)))


def _store_documents(
    conn: psycopg.Connection, corpus_id: int, documents: Iterable[SourceDocument], summary: IngestSummary
) -> None:
    """Upsert the new and changed documents in batches; count them and the unchanged ones."""
    stored = store.stored_hashes(conn, corpus_id)
    rows: list[tuple] = []
    size = 0
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
        size += len(doc.text)
        if size >= BATCH_BYTES or len(rows) >= BATCH_DOCUMENTS:
            store.upsert_documents(conn, corpus_id, rows)
            rows, size = [], 0
    if rows:
        store.upsert_documents(conn, corpus_id, rows)


async def _chunk(
    conn: psycopg.Connection,
    chunker: Chunker,
    model: Embedder,
    summary: IngestSummary,
    on_progress: Progress | None,
    on_note: Callable[[str], None] | None = None,
) -> None:
    """Chunk, tokenise and embed every document without chunks in the version, in batches. The first ingest of a
    version loads its postings into a table of their own, attached as the version's partition at the end; a local
    model's one-time preparation comes first, as a step of its own."""
    pending = store.unchunked_documents(conn, summary.version_id)
    loader = _Loader(conn, model, summary, store.postings_table(conn, summary.version_id))
    if on_progress is not None:
        on_progress(0, len(pending), "")

    def starting(line: str) -> None:
        if on_progress is not None:
            on_progress(0, len(pending), "preparing the local embedder (once) …")
        if on_note is not None:
            on_note(line)

    seconds = await prepare(model, starting) if pending else None
    if seconds is not None and on_note is not None:
        on_note(f"the local embedder is ready ({seconds:.0f} s); later ingests skip this step")
    try:
        for ids in _batches(pending):
            documents = store.fetch_documents(conn, ids)
            if on_progress is not None:
                loader.on_step = _Share(documents, summary.chunked, len(pending), on_progress)
            await _chunk_batch(documents, chunker, loader)
            del documents
            summary.chunked += len(ids)
            if on_progress is not None:
                on_progress(summary.chunked, len(pending), f"{loader.embedded} chunks")
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to tell
            await loader.wait()
        raise
    await loader.wait()
    store.attach_postings(conn, summary.version_id)
    store.ensure_trigram_index(conn, summary.version_id)


def _batches(documents: Sequence[tuple[int, int]]) -> Iterator[list[int]]:
    """Ids of (id, bytes of text) documents in rounds of at most BATCH_DOCUMENTS and BATCH_BYTES (a longer
    document goes alone)."""
    ids: list[int] = []
    size = 0
    for doc_id, length in documents:
        if ids and (size + length > BATCH_BYTES or len(ids) >= BATCH_DOCUMENTS):
            yield ids
            ids, size = [], 0
        ids.append(doc_id)
        size += length
    if ids:
        yield ids


async def _chunk_batch(documents: Sequence[tuple[int, str, str]], chunker: Chunker, loader: _Loader) -> None:
    """Split the documents and load their chunks BATCH_CHUNKS at a time. Splitting and segmenting (jieba for
    Chinese) run in the compute pool, a batch at a time: off the event loop, where the loader's store waits."""
    pieces = _split(documents, chunker)
    while batch := await off_loop(_take, pieces, BATCH_CHUNKS):
        await loader.load([chunk for chunk, _ in batch], [p for _, postings in batch for p in postings])


def _split(documents: Sequence[tuple[int, str, str]], chunker: Chunker) -> Iterator[tuple[tuple, list[tuple]]]:
    """Each chunk's row and, for a segmented language, its BM25 postings."""
    for doc_id, text, language in documents:
        segment = SEGMENTERS.get(language)
        for chunk in chunker.chunks(text):
            length = None  # tokenised in SQL, by ragsql.text_terms, as the chunk is inserted
            postings: list[tuple] = []
            if segment is not None:
                terms = segment(chunk.text)
                length = sum(terms.values())
                postings = [(doc_id, chunk.position, term, tf) for term, tf in terms.items()]
            yield (doc_id, chunk.position, chunk.start, chunk.end, chunk.text, length), postings


def _take(pieces: Iterator[T], n: int) -> list[T]:
    return list(itertools.islice(pieces, n))


class _Share:
    """Progress within a batch of documents: each counts as the share of its text its embedded chunks reach."""

    def __init__(self, documents: Sequence[tuple[int, str, str]], before: int, total: int, on_progress: Progress):
        self.lengths = {doc_id: max(1, len(text)) for doc_id, text, _ in documents}
        self.reached: dict[int, int] = {}
        self.before, self.total, self.on_progress = before, total, on_progress

    def __call__(self, chunks: list[tuple], embedded: int) -> None:
        for doc_id, _, _, end, *_ in chunks:
            self.reached[doc_id] = max(end, self.reached.get(doc_id, 0))
        done = sum(min(1.0, end / self.lengths[doc_id]) for doc_id, end in self.reached.items())
        self.on_progress(self.before + done, self.total, f"{embedded} chunks")


class _Loader:
    """Embeds batches of chunks and loads them with their postings, one batch at a time in a thread: while the
    database tokenises and stores one batch, the next is split and embedded (at most two batches in memory)."""

    def __init__(self, conn: psycopg.Connection, model: Embedder, summary: IngestSummary, postings) -> None:
        self.conn, self.model, self.summary, self.postings = conn, model, summary, postings
        self.running: asyncio.Future | None = None
        self.embedded = 0  # chunks embedded so far
        self.on_step: Callable[[list[tuple], int], None] | None = None  # the chunks of each step embedded

    async def load(self, chunks: list[tuple], postings: list[tuple]) -> None:
        """Embed the chunks, then store them (and, for segmented languages, their postings) once the batch before
        is stored."""
        vectors = await self._embed(chunks)
        dimensions = {len(v) for v in vectors}
        if self.summary.dimensions is not None:
            dimensions.add(self.summary.dimensions)
        if len(dimensions) != 1:
            raise InputError(
                f"the embedder {self.model.name} returned vectors of {sorted(dimensions)} dimensions "
                f"for corpus version {self.summary.version_id}"
            )
        self.summary.dimensions = dimensions.pop()
        await self.wait()
        self.running = asyncio.ensure_future(asyncio.to_thread(self._store, chunks, vectors, postings))

    async def _embed(self, chunks: list[tuple]) -> list:
        """The chunks' vectors. A local model embeds EMBED_STEP chunks at a time, so that progress moves every few
        seconds; an endpoint gets the whole batch, which its embedder sends as concurrent requests."""
        step = EMBED_STEP if self.model.offline and self.on_step is not None else len(chunks)
        vectors: list = []
        for start in range(0, len(chunks), step):
            part = chunks[start : start + step]
            vectors += (await self.model.embed([row[4] for row in part]))[0]
            self.embedded += len(part)
            if self.on_step is not None:
                self.on_step(part, self.embedded)
        return vectors

    async def wait(self) -> None:
        """Until the batch being stored is stored (its error raised here)."""
        running, self.running = self.running, None
        if running is not None:
            await running

    def _store(self, chunks: list[tuple], vectors: list, postings: list[tuple]) -> None:
        version = self.summary.version_id
        added, sql_tokens = store.add_chunks(
            self.conn, version, ((*row, vector) for row, vector in zip(chunks, vectors)), self.postings
        )
        if postings:
            store.add_chunk_terms(self.conn, version, postings, self.postings)
        self.summary.chunks += added
        self.summary.tokens += sql_tokens + sum(row[5] or 0 for row in chunks)
