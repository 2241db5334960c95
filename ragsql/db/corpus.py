"""Corpora in the database: documents, corpus versions (chunkings), chunks with embeddings, BM25 postings.

Every function works inside the caller's transaction. Bulk rows go through COPY into a staging table
(`ragsql.db.load`) and are moved with one set-based statement. BM25 terms of space-delimited languages are
computed here, in SQL, by ragsql.text_terms; segmented languages (Chinese) arrive as postings from Python.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import psycopg
from psycopg import sql

from ragsql.db.connect import vector_cursor
from ragsql.db.load import _copy
from ragsql.db.rows import one, value

__all__ = [
    "add_chunk_terms",
    "add_chunks",
    "analyze",
    "attach_postings",
    "corpus_documents",
    "ensure_corpus",
    "ensure_hnsw_index",
    "ensure_trigram_index",
    "ensure_version",
    "fetch_documents",
    "hnsw_index_name",
    "postings_table",
    "query_terms",
    "refresh_bm25",
    "set_dimensions",
    "stored_hashes",
    "unchunked_documents",
    "upsert_documents",
]

HNSW_BUILD_MEMORY = "2GB"  # maintenance_work_mem of an HNSW build (see ensure_hnsw_index)


def ensure_corpus(conn: psycopg.Connection, name: str) -> int:
    """Id of the named corpus, created when new (an existing row is not touched)."""
    row = conn.execute("select id from ragsql.corpus where name = %s", (name,)).fetchone()
    if row is None:
        row = one(conn.execute("insert into ragsql.corpus (name) values (%s) returning id", (name,)))
    return row[0]


def ensure_version(
    conn: psycopg.Connection,
    corpus_id: int,
    splitter: str,
    chunk_size: int,
    overlap: int,
    embedder: str,
) -> tuple[int, int | None]:
    """(id, dimensions) of the corpus version with this chunking and embedder, created when new."""
    key = (corpus_id, splitter, chunk_size, overlap, embedder)
    row = conn.execute(
        """
        select id, dimensions from ragsql.corpus_version
        where corpus_id = %s and splitter = %s and chunk_size = %s and overlap = %s and embedder = %s
        """,
        key,
    ).fetchone()
    if row is None:
        row = one(
            conn.execute(
                """
            insert into ragsql.corpus_version (corpus_id, splitter, chunk_size, overlap, embedder)
            values (%s, %s, %s, %s, %s) returning id, dimensions
            """,
                key,
            )
        )
    return row[0], row[1]


def stored_hashes(conn: psycopg.Connection, corpus_id: int) -> dict[str, str]:
    """{doc_id: content_hash} of the documents the corpus holds."""
    return dict(conn.execute("select doc_id, content_hash from ragsql.document where corpus_id = %s", (corpus_id,)))


def upsert_documents(conn: psycopg.Connection, corpus_id: int, rows: Iterable[tuple]) -> int:
    """Insert or update (doc_id, title, text, language, metadata dict, content_hash, source) documents.

    A document whose content hash changes loses its chunks in every version (their spans and text would be
    stale), so each version chunks it again on its next ingest. Returns the number of rows staged.
    """
    staged = _copy(
        conn,
        "_stage_document",
        ["doc_id", "title", "text", "language", "metadata", "content_hash", "source"],
        ["text", "text", "text", "text", "jsonb", "text", "text"],
        ((d, ti, te, la, json.dumps(m or {}, ensure_ascii=False), h, s) for d, ti, te, la, m, h, s in rows),
    )
    conn.execute(
        """
        delete from ragsql.chunk as c
        using ragsql.document as d, _stage_document as s
        where c.document_id = d.id and d.corpus_id = %s and d.doc_id = s.doc_id and d.content_hash <> s.content_hash
        """,
        (corpus_id,),
    )
    conn.execute(
        """
        insert into ragsql.document (corpus_id, doc_id, title, text, language, metadata, content_hash, source)
        select %s, s.doc_id, s.title, s.text, s.language, s.metadata, s.content_hash, s.source
        from _stage_document as s
        on conflict (corpus_id, doc_id) do update set
            title = excluded.title, text = excluded.text, language = excluded.language,
            metadata = excluded.metadata, content_hash = excluded.content_hash, source = excluded.source,
            updated_at = now()
        where ragsql.document.content_hash <> excluded.content_hash
        """,
        (corpus_id,),
    )
    return staged


def unchunked_documents(conn: psycopg.Connection, version_id: int) -> list[tuple[int, int]]:
    """(id, bytes of text) of the documents of the version's corpus that have no chunk in the version yet, in id
    order (octet_length reads a stored text's size without decompressing it)."""
    rows = conn.execute(
        """
        select d.id, octet_length(d.text)
        from ragsql.corpus_version as v
        join ragsql.document as d on d.corpus_id = v.corpus_id
        where v.id = %s
          and not exists (select from ragsql.chunk as c where c.version_id = v.id and c.document_id = d.id)
        order by d.id
        """,
        (version_id,),
    )
    return [(r[0], r[1]) for r in rows]


def corpus_documents(conn: psycopg.Connection, corpus_id: int) -> list[tuple[str, str, str]]:
    """(doc_id, text, language) of every document of a corpus, by doc_id."""
    return conn.execute(
        'select doc_id, text, language from ragsql.document where corpus_id = %s order by doc_id collate "C"',
        (corpus_id,),
    ).fetchall()


def fetch_documents(conn: psycopg.Connection, ids: Sequence[int]) -> list[tuple[int, str, str]]:
    """(id, text, language) of these documents, in id order."""
    return conn.execute(
        "select id, text, language from ragsql.document where id = any(%s) order by id", (list(ids),)
    ).fetchall()


def postings_table(conn: psycopg.Connection, version_id: int) -> sql.Composable:
    """Where the version's postings are to be loaded: on its first ingest (no chunk yet), a new table
    ragsql.chunk_term_v<id> with no index and no trigger, which attach_postings makes the version's partition of
    ragsql.chunk_term once loaded; otherwise ragsql.chunk_term itself."""
    part = value(conn.execute("select ragsql._postings_table(%s)", (version_id,)))
    return sql.Identifier("ragsql", part or "chunk_term")


def attach_postings(conn: psycopg.Connection, version_id: int) -> None:
    """Attach the table postings_table made for the version as its partition of ragsql.chunk_term (its indexes
    are built and its chunk ids checked then); nothing when there is none."""
    conn.execute("select ragsql._attach_postings(%s)", (version_id,))


def add_chunks(
    conn: psycopg.Connection,
    version_id: int,
    rows: Iterable[tuple],
    postings: sql.Composable = sql.Identifier("ragsql", "chunk_term"),
) -> tuple[int, int]:
    """Insert (document_id, position, start_char, end_char, text, length, embedding list or None) chunks; returns
    (chunks, tokens counted in SQL). The rows go in by binary COPY (embeddings as pgvector's binary vectors).

    A length of None means: tokenise the chunk here, in the same statement, with ragsql.text_terms and the
    document's language, and insert its BM25 postings into `postings` (postings_table) too (so no chunk is
    updated afterwards, which would rewrite it)."""
    staged = _copy(
        conn,
        "_stage_chunk",
        ["document_id", "position", "start_char", "end_char", "text", "length", "embedding"],
        ["bigint", "integer", "integer", "integer", "text", "integer", "vector"],
        rows,
        cursor=vector_cursor(conn),
    )
    tokens = value(
        conn.execute(
            sql.SQL(
                """
        with staged as (
            select s.document_id, s.position, s.start_char, s.end_char, s.text, s.embedding, t.terms, t.tfs,
                   coalesce(s.length, t.length, 0) as length
            from _stage_chunk as s
            left join ragsql.document as d on d.id = s.document_id
            cross join lateral (
                select array_agg(x.term) as terms, array_agg(x.tf) as tfs, sum(x.tf)::integer as length
                from ragsql.text_terms(s.text, d.language) as x
                where s.length is null
            ) as t
        ),
        inserted as (
            insert into ragsql.chunk (version_id, document_id, position, start_char, end_char, text, length, embedding)
            select %s, s.document_id, s.position, s.start_char, s.end_char, s.text, s.length, s.embedding
            from staged as s
            returning id, document_id, position, length
        ),
        postings as (
            insert into {} (version_id, term, chunk_id, tf, length)
            select %s, u.term, i.id, u.tf, i.length
            from inserted as i
            join staged as s on s.document_id = i.document_id and s.position = i.position
            cross join lateral unnest(s.terms, s.tfs) as u (term, tf)
            returning tf
        )
        select (select coalesce(sum(tf), 0) from postings)
        """
            ).format(postings),
            (version_id, version_id),
        )
    )
    return staged, int(tokens)


def add_chunk_terms(
    conn: psycopg.Connection,
    version_id: int,
    rows: Iterable[tuple],
    postings: sql.Composable = sql.Identifier("ragsql", "chunk_term"),
) -> int:
    """Insert BM25 postings given in Python as (document_id, position, term, tf) of chunks of the version into
    `postings` (postings_table)."""
    staged = _copy(
        conn,
        "_stage_chunk_term",
        ["document_id", "position", "term", "tf"],
        ["bigint", "integer", "text", "integer"],
        rows,
    )
    conn.execute(
        sql.SQL(
            """
        insert into {} (version_id, term, chunk_id, tf, length)
        select c.version_id, s.term, c.id, s.tf, c.length
        from _stage_chunk_term as s
        join ragsql.chunk as c on c.version_id = %s and c.document_id = s.document_id and c.position = s.position
        """
        ).format(postings),
        (version_id,),
    )
    return staged


def set_dimensions(conn: psycopg.Connection, version_id: int, dimensions: int | None) -> None:
    """Record the embedding dimensions of the version and that its chunks changed now."""
    conn.execute(
        """
        update ragsql.corpus_version set dimensions = coalesce(%s, dimensions), updated_at = now() where id = %s
        """,
        (dimensions, version_id),
    )


def refresh_bm25(conn: psycopg.Connection, corpus_id: int) -> list[int]:
    """Recompute, set-based and in the caller's transaction, the BM25 statistics and chunk lists of every
    version of the corpus whose chunks changed since they were last computed (ragsql.refresh_bm25). idf and
    the lists' score bands depend on the version's N and average length, so one changed chunk makes them all
    stale; the triggers on chunk and chunk_term record that (corpus_version.bm25_fresh = false), and until
    this runs ragsql.bm25 computes the formula per query. Returns the ids of the versions refreshed."""
    rows = conn.execute(
        """
        select cv.id, ragsql.refresh_bm25(cv.id)
        from ragsql.corpus_version as cv
        where cv.corpus_id = %s and not cv.bm25_fresh
        order by cv.id
        """,
        (corpus_id,),
    ).fetchall()
    return [r[0] for r in rows]


def hnsw_index_name(version_id: int) -> str:
    """Name of the version's HNSW index (in schema ragsql)."""
    return f"chunk_hnsw_v{int(version_id)}"


def ensure_hnsw_index(conn: psycopg.Connection, version_id: int, dimensions: int) -> None:
    """Create the version's partial HNSW index (cosine) unless it exists. A query uses it when it orders by
    ``embedding::vector(<dimensions>) <=> q`` and filters ``version_id = <id>`` with that literal id.

    The build gets HNSW_BUILD_MEMORY (for this transaction) unless the server allows more: pgvector builds the
    graph in maintenance_work_mem, and once it outgrows it (1M vectors of 16 dimensions need ~600 MB) the
    build goes on disk and takes many times longer."""
    conn.execute(
        "select set_config('maintenance_work_mem', %s, true) "
        "where pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
        (HNSW_BUILD_MEMORY, HNSW_BUILD_MEMORY),
    )
    # the index is created by its owner (security definer), so that a ragsql_writer may ingest
    conn.execute("select ragsql._create_hnsw_index(%s, %s)", (int(version_id), int(dimensions)))


def ensure_trigram_index(conn: psycopg.Connection, version_id: int) -> None:
    """Create the version's partial trigram index on its chunks' text (ragsql.fuzzy_search) unless it exists:
    built once after a version's first load, four times faster than keeping it chunk by chunk."""
    conn.execute("select ragsql._create_trigram_index(%s)", (int(version_id),))


def analyze(conn: psycopg.Connection) -> None:
    """Refresh planner statistics of the tables an ingest writes."""
    for table in ("corpus", "document", "corpus_version", "chunk", "chunk_term", "bm25_term", "bm25_list"):
        conn.execute(sql.SQL("analyze ragsql.{}").format(sql.Identifier(table)))


def query_terms(
    conn: psycopg.Connection,
    texts: Sequence[tuple[str, str]],
    segmenters: Mapping[str, Callable[[str], Counter[str]]],
) -> list[Counter[str]]:
    """BM25 terms of each (text, language), tokenised exactly as documents are: by the language's segmenter
    (pass ``ragsql.corpus.SEGMENTERS``, e.g. jieba for 'zh'), otherwise by ragsql.text_terms in one SQL call."""
    terms = [segmenters[lang](text) if lang in segmenters else Counter() for text, lang in texts]
    rest = [i for i, (_, lang) in enumerate(texts) if lang not in segmenters]
    if rest:
        rows = conn.execute(
            """
            select q.i, t.term, t.tf
            from unnest(%s::integer[], %s::text[], %s::text[]) as q (i, text, language)
            cross join lateral ragsql.text_terms(q.text, q.language) as t
            """,
            (rest, [texts[i][0] for i in rest], [texts[i][1] for i in rest]),
        )
        for i, term, tf in rows:
            terms[i][term] = tf
    return terms
