-- Corpora for retrieval under test: documents, chunkings (corpus versions), chunks with embeddings and
-- BM25 postings, gold evidence given as document spans, and the retrieval runs made over them.

create extension if not exists pg_trgm;

create table if not exists ragsql.corpus (
    id bigint generated always as identity primary key,
    name text not null unique check (btrim(name) <> ''),
    created_at timestamptz not null default now()
);
comment on table ragsql.corpus is 'A named collection of documents that retrieval runs search.';

create table if not exists ragsql.document (
    id bigint generated always as identity primary key,
    corpus_id bigint not null references ragsql.corpus (id) on delete cascade,
    doc_id text not null check (btrim(doc_id) <> ''),
    title text,
    text text not null,
    language text not null check (language ~ '^[a-z]{2,3}$'),
    metadata jsonb not null default '{}',
    content_hash text not null,
    source text,
    updated_at timestamptz not null default now(),
    unique (corpus_id, doc_id)
);
comment on table ragsql.document is
    'A document of a corpus: doc_id is the external id gold evidence names; content_hash (sha256 of title, text, '
    'language and metadata) lets a re-ingest skip unchanged documents.';

create table if not exists ragsql.corpus_version (
    id bigint generated always as identity primary key,
    corpus_id bigint not null references ragsql.corpus (id) on delete cascade,
    splitter text not null check (splitter in ('character', 'recursive', 'markdown')),
    chunk_size integer not null check (chunk_size > 0),
    overlap integer not null check (overlap >= 0 and overlap < chunk_size),
    embedder text not null check (btrim(embedder) <> ''),
    dimensions integer check (dimensions > 0),
    k1 float8 not null default 1.2 check (k1 >= 0),
    b float8 not null default 0.75 check (b between 0 and 1),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    unique (corpus_id, splitter, chunk_size, overlap, embedder),
    unique (id, corpus_id)
);
comment on table ragsql.corpus_version is
    'One chunking and embedding of a corpus: two versions of the same documents coexist and can be compared. '
    'k1 and b are the BM25 parameters its postings are scored with.';

create table if not exists ragsql.chunk (
    id bigint generated always as identity primary key,
    version_id bigint not null references ragsql.corpus_version (id) on delete cascade,
    document_id bigint not null references ragsql.document (id) on delete cascade,
    position integer not null check (position >= 1),
    start_char integer not null check (start_char >= 0),
    end_char integer not null,
    text text not null,
    length integer not null check (length >= 0),
    embedding vector,
    unique (version_id, document_id, position),
    check (end_char >= start_char)
);
comment on table ragsql.chunk is
    'A chunk of a document in one corpus version: position (1-based) within the document, the character span '
    '[start_char, end_char) of the document text it covers, its BM25 length in tokens, and its embedding. '
    'Its docno in runs and citations is c<id>.';
create index if not exists chunk_document on ragsql.chunk (document_id, position);
create index if not exists chunk_text_trgm on ragsql.chunk using gin (text gin_trgm_ops);

create table if not exists ragsql.chunk_term (
    version_id bigint not null,
    term text not null,
    chunk_id bigint not null references ragsql.chunk (id) on delete cascade,
    tf integer not null check (tf > 0),
    primary key (version_id, term, chunk_id)
);
comment on table ragsql.chunk_term is
    'BM25 postings: how often each token occurs in each chunk (tokens from a text search configuration, or '
    'jieba for Chinese).';
create index if not exists chunk_term_chunk on ragsql.chunk_term (chunk_id);

create table if not exists ragsql.gold_span (
    query_id bigint not null references ragsql.query (id) on delete cascade,
    position integer not null check (position >= 1),
    doc_id text not null check (btrim(doc_id) <> ''),
    start_char integer check (start_char >= 0),
    end_char integer,
    quote text,
    relevance integer not null default 1,
    primary key (query_id, position),
    check ((start_char is null) = (end_char is null) and (end_char is null or end_char > start_char)),
    check (quote is null or btrim(quote) <> '')
);
comment on table ragsql.gold_span is
    'Gold evidence given as a document span ([start_char, end_char) of its text) or a quoted text of it, mapped '
    'onto the chunks of any corpus version: a chunk overlapping the span is relevant. A quote is located in '
    'the document when a run is evaluated; one not found maps to nothing and is reported.';

create table if not exists ragsql.retrieval_run (
    run_id bigint primary key references ragsql.run (id) on delete cascade,
    version_id bigint not null references ragsql.corpus_version (id) on delete cascade,
    mode text not null check (mode in ('bm25', 'vector', 'fuzzy', 'hybrid')),
    k integer not null check (k >= 1),
    candidates integer not null check (candidates >= 1),
    weights jsonb not null default '{"bm25": 1, "vector": 1, "fuzzy": 1}',
    rrf_k integer not null default 60 check (rrf_k >= 0),
    expand integer not null default 0 check (expand >= 0),
    created_at timestamptz not null default now()
);
comment on table ragsql.retrieval_run is
    'A run whose results ragsql retrieved from a corpus version: mode, k results per query, candidates per path '
    'fused by Reciprocal Rank Fusion (weight / (rrf_k + rank)) in hybrid mode, and expand neighbour chunks on '
    'each side added to a result''s text. Full configuration also in ragsql.run.config. Its gold labels are the '
    'dataset''s evidence mapped onto the version''s chunks.';

create table if not exists ragsql.retrieval_query (
    run_id bigint not null references ragsql.retrieval_run (run_id) on delete cascade,
    query_id bigint not null references ragsql.query (id) on delete cascade,
    text text not null,
    terms text[] not null,
    embedding vector,
    primary key (run_id, query_id)
);
comment on table ragsql.retrieval_query is
    'What a retrieval run searched with, per query: the text (fuzzy path), its BM25 terms (tokenised as the '
    'documents are) and its embedding (vector path), kept so a run can be inspected and repeated.';

insert into ragsql.schema_migration (name) values ('0030_corpus') on conflict do nothing;
