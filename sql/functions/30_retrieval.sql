-- Retrieval under test, in SQL: exact BM25 over stored postings, pgvector (HNSW, cosine), pg_trgm fuzzy
-- matching, Reciprocal Rank Fusion, neighbour expansion, and a whole retrieval run as one statement.
-- Ties are broken by chunk id so every ranking is reproducible.

create or replace function ragsql._version(version_id bigint)
returns ragsql.corpus_version
language plpgsql stable parallel safe
as $$
declare
    found ragsql.corpus_version;
begin
    select * into found from ragsql.corpus_version as cv where cv.id = _version.version_id;
    if found.id is null then
        raise exception 'unknown corpus version %', version_id
            using errcode = 'no_data_found', hint = 'see: select * from ragsql.corpus_version';
    end if;
    return found;
end
$$;
comment on function ragsql._version(bigint) is 'The corpus version row; raises no_data_found for an unknown id.';

create or replace function ragsql.bm25(version_id bigint, terms text[], k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable parallel safe
as $$
declare
    v ragsql.corpus_version := ragsql._version(bm25.version_id);
begin
    return query
    with corpus as (
        select count(*)::float8 as n, avg(c.length)::float8 as avgdl
        from ragsql.chunk as c
        where c.version_id = v.id
    ),
    term_df as (
        select ct.term, count(*)::float8 as df
        from ragsql.chunk_term as ct
        where ct.version_id = v.id
          and ct.term = any (bm25.terms)
        group by ct.term
    )
    select ct.chunk_id,
           sum(ln(1 + (corpus.n - d.df + 0.5) / (d.df + 0.5))
               * ct.tf / (ct.tf + v.k1 * (1 - v.b + v.b * c.length / nullif(corpus.avgdl, 0)))) as score
    from term_df as d
    join ragsql.chunk_term as ct on ct.version_id = v.id and ct.term = d.term
    join ragsql.chunk as c on c.id = ct.chunk_id
    cross join corpus
    group by ct.chunk_id
    order by score desc, ct.chunk_id
    limit bm25.k;
end
$$;
comment on function ragsql.bm25(bigint, text[], integer) is
    'Top k chunks of a corpus version by Okapi BM25 with Lucene idf, the formula of bm25s method "lucene": '
    'sum over the distinct query terms of ln(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * '
    'len / avglen)), N and avglen over the version''s chunks, k1 and b from the version. Terms must be '
    'tokenised as the documents were (ragsql.text_terms, or jieba for Chinese).';

create or replace function ragsql.vector_search(version_id bigint, query vector, k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable
as $$
declare
    v ragsql.corpus_version := ragsql._version(vector_search.version_id);
begin
    if v.dimensions is null then
        raise exception 'corpus version % has no embeddings', v.id using errcode = 'no_data_found';
    elsif vector_dims(query) <> v.dimensions then
        raise exception 'the query embedding has % dimensions, corpus version % has %',
            vector_dims(query), v.id, v.dimensions
            using errcode = 'data_exception', hint = 'embed the queries with the version''s embedder: ' || v.embedder;
    end if;
    -- HNSW returns at most ef_search rows: ask for enough
    perform set_config('hnsw.ef_search', greatest(40, least(1000, 2 * k))::text, true);
    -- literals for the dimension and version, so the planner matches the version's partial HNSW index
    return query execute format(
        'select c.id, 1 - (c.embedding::vector(%1$s) <=> $1::vector(%1$s)) '
        'from ragsql.chunk as c where c.version_id = %2$s and c.embedding is not null '
        'order by c.embedding::vector(%1$s) <=> $1::vector(%1$s), c.id limit $2',
        v.dimensions, v.id)
        using query, k;
end
$$;
comment on function ragsql.vector_search(bigint, vector, integer) is
    'Top k chunks of a corpus version by cosine similarity to the query embedding (score = 1 - cosine distance), '
    'through the version''s HNSW index chunk_hnsw_v<id> when it exists (approximate, as HNSW is).';

create or replace function ragsql.fuzzy_search(version_id bigint, query text, k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable
as $$
begin
    perform ragsql._version(fuzzy_search.version_id);
    perform set_config('pg_trgm.word_similarity_threshold', '0.1', true);
    return query
        select c.id, word_similarity(fuzzy_search.query, c.text)::float8 as score
        from ragsql.chunk as c
        where c.version_id = fuzzy_search.version_id
          and fuzzy_search.query <% c.text
        order by score desc, c.id
        limit fuzzy_search.k;
end
$$;
comment on function ragsql.fuzzy_search(bigint, text, integer) is
    'Top k chunks of a corpus version by pg_trgm word similarity of the query to the chunk text (at least 0.1): '
    'tolerant of typos and partial words, in any language.';

create or replace function ragsql.hybrid_search(
    version_id bigint, query text, terms text[], embedding vector, k integer default 10,
    candidates integer default 50, weights jsonb default '{"bm25": 1, "vector": 1, "fuzzy": 1}',
    rrf_k integer default 60)
returns table (chunk_id bigint, score float8)
language sql stable
as $$
    with ranked as (
        select 'bm25' as path, p.chunk_id, row_number() over (order by p.score desc, p.chunk_id) as rank
        from ragsql.bm25(hybrid_search.version_id, hybrid_search.terms, hybrid_search.candidates) as p
        where coalesce((hybrid_search.weights ->> 'bm25')::float8, 0) > 0
        union all
        select 'vector', p.chunk_id, row_number() over (order by p.score desc, p.chunk_id)
        from ragsql.vector_search(hybrid_search.version_id, hybrid_search.embedding, hybrid_search.candidates) as p
        where coalesce((hybrid_search.weights ->> 'vector')::float8, 0) > 0 and hybrid_search.embedding is not null
        union all
        select 'fuzzy', p.chunk_id, row_number() over (order by p.score desc, p.chunk_id)
        from ragsql.fuzzy_search(hybrid_search.version_id, hybrid_search.query, hybrid_search.candidates) as p
        where coalesce((hybrid_search.weights ->> 'fuzzy')::float8, 0) > 0
    )
    select r.chunk_id, sum((hybrid_search.weights ->> r.path)::float8 / (hybrid_search.rrf_k + r.rank)) as score
    from ranked as r
    group by r.chunk_id
    order by score desc, r.chunk_id
    limit hybrid_search.k
$$;
comment on function ragsql.hybrid_search(bigint, text, text[], vector, integer, integer, jsonb, integer) is
    'Reciprocal Rank Fusion of the bm25, vector and fuzzy paths: each path''s top `candidates`, score = sum over '
    'paths of weight / (rrf_k + rank in that path); a path with weight 0 (or no embedding) is not run.';

create or replace function ragsql.expanded_text(chunk_id bigint, expand integer)
returns text
language sql stable parallel safe
as $$
    select substr(d.text, min(n.start_char) + 1, max(n.end_char) - min(n.start_char))
    from ragsql.chunk as c
    join ragsql.document as d on d.id = c.document_id
    join ragsql.chunk as n
      on n.version_id = c.version_id and n.document_id = c.document_id
     and n.position between c.position - expanded_text.expand and c.position + expanded_text.expand
    where c.id = expanded_text.chunk_id
    group by d.text
$$;
comment on function ragsql.expanded_text(bigint, integer) is
    'The document text a chunk covers together with its `expand` neighbours on each side (one span, overlaps '
    'not repeated): the context expansion of the retrieval pipeline.';

create or replace function ragsql.retrieve_run(run_id bigint)
returns bigint
language plpgsql volatile
as $$
declare
    r ragsql.retrieval_run;
    written bigint;
begin
    select * into r from ragsql.retrieval_run as rr where rr.run_id = retrieve_run.run_id;
    if r.run_id is null then
        raise exception 'run % is not a retrieval run', run_id using errcode = 'no_data_found';
    end if;
    delete from ragsql.run_result as rs where rs.run_id = r.run_id;
    insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score, text)
    select r.run_id, ru.dataset_id, q.query_id,
           row_number() over (partition by q.query_id order by hit.score desc, hit.chunk_id),
           'c' || hit.chunk_id, hit.score,
           case when r.expand > 0 then ragsql.expanded_text(hit.chunk_id, r.expand) else c.text end
    from ragsql.retrieval_query as q
    join ragsql.run as ru on ru.id = q.run_id
    cross join lateral (
        select s.chunk_id, s.score from ragsql.bm25(r.version_id, q.terms, r.k) as s where r.mode = 'bm25'
        union all
        select s.chunk_id, s.score from ragsql.vector_search(r.version_id, q.embedding, r.k) as s
        where r.mode = 'vector'
        union all
        select s.chunk_id, s.score from ragsql.fuzzy_search(r.version_id, q.text, r.k) as s where r.mode = 'fuzzy'
        union all
        select s.chunk_id, s.score
        from ragsql.hybrid_search(r.version_id, q.text, q.terms, q.embedding, r.k, r.candidates, r.weights,
                                  r.rrf_k) as s
        where r.mode = 'hybrid'
    ) as hit
    join ragsql.chunk as c on c.id = hit.chunk_id
    where q.run_id = r.run_id;
    get diagnostics written = row_count;
    return written;
end
$$;
comment on function ragsql.retrieve_run(bigint) is
    'Retrieves every query of a retrieval run (ragsql.retrieval_query) in one statement with the run''s mode, k, '
    'fusion and expansion, replacing its ranked results (docno c<chunk id>, text expanded). Returns the rows '
    'written.';
