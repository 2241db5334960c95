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

create or replace function ragsql._bm25_exact(version_id bigint, terms text[], k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable parallel safe
set jit = off
as $$
declare
    v ragsql.corpus_version := ragsql._version(_bm25_exact.version_id);
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
          and ct.term = any (_bm25_exact.terms)
        group by ct.term
    )
    select ct.chunk_id,
           sum(ln(1 + (corpus.n - d.df + 0.5) / (d.df + 0.5))
               * ct.tf / (ct.tf + v.k1 * (1 - v.b + v.b * c.length / nullif(corpus.avgdl, 0)))
               order by ct.term collate "C") as score
    from term_df as d
    join ragsql.chunk_term as ct on ct.version_id = v.id and ct.term = d.term
    join ragsql.chunk as c on c.id = ct.chunk_id
    cross join corpus
    group by ct.chunk_id
    order by score desc, ct.chunk_id
    limit _bm25_exact.k;
end
$$;
comment on function ragsql._bm25_exact(bigint, text[], integer) is
    'BM25 computed from the postings per query (N, avglen and df counted on each call; each chunk''s terms '
    'summed in term order, as every path does, so equal scores tie exactly): the definition '
    'ragsql.bm25 must equal, and its path while the version''s statistics are stale. Slow on large versions.';

create or replace function ragsql._bm25_term_score(idf float8, tf integer, length integer, v ragsql.corpus_version)
returns float8
language sql immutable parallel safe
return idf * tf / (tf + v.k1 * (1 - v.b + v.b * length / nullif(v.bm25_avgdl, 0)));
comment on function ragsql._bm25_term_score(float8, integer, integer, ragsql.corpus_version) is
    'One posting''s BM25 score from its term''s idf, its tf and its chunk''s length, for the version''s k1, b and '
    'average length: the expression of ragsql._bm25_exact, so every path gives the same bits.';

-- Security definer: it drops and creates the version's partition, which takes the owner, and a ragsql_writer
-- ingests. Its path holds no schema a caller may create in; intarray's sort is named with its schema
-- (ragsql_intarray, or public where a DBA installed intarray before), found at each call.
create or replace function ragsql.refresh_bm25(version_id bigint)
returns bigint
language plpgsql volatile
security definer
set jit = off
set work_mem = '256MB'
set search_path = pg_catalog, pg_temp
as $$
declare
    v ragsql.corpus_version := ragsql._version(refresh_bm25.version_id);
    intarray text := (select quote_ident(n.nspname) from pg_extension as e
                      join pg_namespace as n on n.oid = e.extnamespace where e.extname = 'intarray');
    part text := 'bm25_list_v' || v.id;
    n bigint;
    avgdl float8;
    edges float8[];
    lists boolean;
    pct float8;
    sampled bigint;
    wrong bigint;
    postings bigint;
begin
    -- one refresh of a version at a time
    perform from ragsql.corpus_version as cv where cv.id = v.id for update;
    -- the lists store chunk ids as integers: a version with larger ids gets none (ragsql.bm25 then sums postings)
    select count(*), avg(c.length)::float8, coalesce(max(c.id), 0) <= 2147483647
    into n, avgdl, lists
    from ragsql.chunk as c where c.version_id = v.id;
    update ragsql.corpus_version as cv set bm25_chunks = n, bm25_avgdl = avgdl where cv.id = v.id returning * into v;
    -- band edges: the 80th, 95th and 99th percentiles of tf / (tf + k1 * (1 - b + b * len / avglen)) over the
    -- version's postings, from a repeatable 1% sample of the table's pages (every posting when that has few).
    -- The same postings check that each carries its chunk's length (postings loaded by hand must).
    foreach pct in array array[1, 100] loop
        select percentile_disc(array[0.8, 0.95, 0.99]) within group (order by s.g), count(*),
               count(*) filter (where s.wrong)
        into edges, sampled, wrong
        from (select ragsql._bm25_term_score(1, ct.tf, ct.length, v) as g, ct.length <> c.length as wrong
              from ragsql.chunk_term as ct tablesample system (pct) repeatable (0)
              join ragsql.chunk as c on c.id = ct.chunk_id
              where ct.version_id = v.id) as s;
        exit when sampled >= 10000;
    end loop;
    if wrong > 0 then
        raise exception 'corpus version %: % postings checked have a length other than their chunk''s', v.id, wrong
            using errcode = 'data_exception',
                  hint = format('every ragsql.chunk_term row must carry its chunk''s length: update ragsql.chunk_term '
                                'as ct set length = c.length from ragsql.chunk as c where c.id = ct.chunk_id and '
                                'ct.version_id = %s and ct.length <> c.length', v.id);
    end if;
    delete from ragsql.bm25_term as t where t.version_id = v.id;
    if to_regclass(format('ragsql.%I', part)) is not null then
        execute format('drop table ragsql.%I', part);
    end if;
    execute format('create table ragsql.%I partition of ragsql.bm25_list for values in (%s)', part, v.id);
    execute format('alter table ragsql.%I alter column chunk_ids set storage external', part);
    -- one pass over the version's postings in index order (term, chunk id, so sort finds the ids sorted): per
    -- term its df, and per band the chunk ids and the highest g; then idf, and a band's ub = idf * its highest g
    execute format($sql$
        with pass as (
            select ct.term, count(*) as df,
                   max(g.g) filter (where g.band = 0) as g0,
                   %2$s.sort(array_agg(ct.chunk_id::integer) filter (where g.band = 0 and $2)) as ids0,
                   max(g.g) filter (where g.band = 1) as g1,
                   %2$s.sort(array_agg(ct.chunk_id::integer) filter (where g.band = 1 and $2)) as ids1,
                   max(g.g) filter (where g.band = 2) as g2,
                   %2$s.sort(array_agg(ct.chunk_id::integer) filter (where g.band = 2 and $2)) as ids2,
                   max(g.g) filter (where g.band = 3) as g3,
                   %2$s.sort(array_agg(ct.chunk_id::integer) filter (where g.band = 3 and $2)) as ids3
            from ragsql.chunk_term as ct
            cross join lateral (
                select x.g, case when x.g >= $3[3] then 0 when x.g >= $3[2] then 1 when x.g >= $3[1] then 2
                                 else 3 end as band
                from (select ragsql._bm25_term_score(1, ct.tf, ct.length, $4) as g) as x
            ) as g
            where ct.version_id = $1
            group by ct.term
        ),
        scored as (
            select p.*, ln(1 + ($5::float8 - p.df::float8 + 0.5) / (p.df::float8 + 0.5)) as idf from pass as p
        ),
        terms as (
            insert into ragsql.bm25_term (version_id, term, df, idf, ub)
            select $1, s.term, s.df, s.idf, s.idf * greatest(s.g0, s.g1, s.g2, s.g3) from scored as s
        )
        insert into ragsql.%1$I (version_id, term, band, ub, chunk_ids)
        select $1, s.term, b.band, s.idf * b.g, b.ids
        from scored as s
        cross join lateral (values (0, s.g0, s.ids0), (1, s.g1, s.ids1), (2, s.g2, s.ids2), (3, s.g3, s.ids3))
            as b (band, g, ids)
        where b.ids is not null
        $sql$, part, intarray)
        using v.id, lists, edges, v, n;
    execute format('create index %I on ragsql.%I (term)', part || '_term', part);
    execute format('analyze ragsql.%I', part);
    analyze ragsql.bm25_term;
    select coalesce(sum(t.df), 0) into postings from ragsql.bm25_term as t where t.version_id = v.id;
    update ragsql.corpus_version as cv
    set bm25_fresh = true, bm25_lists = lists
    where cv.id = v.id;
    return postings;
end
$$;
comment on function ragsql.refresh_bm25(bigint) is
    'Recomputes, set-based, a corpus version''s BM25 statistics (N, avglen, per-term df, idf and upper bound) '
    'and its chunk lists by score band (ragsql.bm25_list), and marks them fresh. idf and the bands depend on N '
    'and avglen, so any change of the version''s chunks makes them stale: the ingest calls this at its end, in '
    'its transaction, for every version it changed. Returns the number of postings.';

create or replace function ragsql._bm25_full(version_id bigint, terms text[], k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable parallel safe
set jit = off
as $$
declare
    v ragsql.corpus_version := ragsql._version(_bm25_full.version_id);
begin
    if not v.bm25_fresh then
        return query select * from ragsql._bm25_exact(v.id, terms, k);
        return;
    end if;
    -- (t.term compares as "C", chunk_term's index as the default collation: join on the default one)
    return query
    select ct.chunk_id,
           sum(ragsql._bm25_term_score(t.idf, ct.tf, ct.length, v) order by ct.term collate "C") as score
    from ragsql.bm25_term as t
    join ragsql.chunk_term as ct on ct.version_id = v.id and ct.term = t.term collate "default"
    where t.version_id = v.id and t.term = any (_bm25_full.terms)
    group by ct.chunk_id
    order by score desc, ct.chunk_id
    limit _bm25_full.k;
end
$$;
comment on function ragsql._bm25_full(bigint, text[], integer) is
    'BM25 summed over every posting of the query terms (the version''s statistics, each posting read from the '
    'primary key of chunk_term): the path of ragsql.bm25 for short posting lists, and what its pruned result '
    'must equal.';

create or replace function ragsql._bm25_scores(v ragsql.corpus_version, ts text[], idfs float8[],
                                              chunk_ids integer[])
returns table (chunk_id bigint, score float8)
language sql stable parallel safe
begin atomic
    select ct.chunk_id, sum(ragsql._bm25_term_score(q.idf, ct.tf, ct.length, v) order by ct.term collate "C")
    from unnest(ts, idfs) as q (term, idf)
    join ragsql.chunk_term as ct on ct.version_id = v.id and ct.term = q.term
    where ct.chunk_id = any (chunk_ids::bigint[])
    group by ct.chunk_id;
end;
comment on function ragsql._bm25_scores(ragsql.corpus_version, text[], float8[], integer[]) is
    'The exact BM25 scores of these chunks for the terms (with their idfs), read from chunk_term''s primary key; '
    'each chunk''s terms summed in term order, as every path sums, so equal scores tie exactly.';

create or replace function ragsql.bm25(version_id bigint, terms text[], k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable parallel safe
set jit = off
-- intarray's & and | (in schema ragsql_intarray, or in public where a DBA installed it before)
set search_path = ragsql_intarray, public
as $$
declare
    v ragsql.corpus_version := ragsql._version(bm25.version_id);
    ts text[];      -- the query's known terms, rarest first
    idfs float8[];
    postings bigint;
    x record;
    cur integer := 0;
    a integer[];            -- the chunks of the current term
    seen integer[] := '{}'; -- the chunks of the terms before it
    multi integer[] := '{}'; -- the chunks holding two or more query terms
    mids integer[];  -- those, by upper bound, best first
    mubs float8[];
    seed integer[];
    got integer := 0;
    lb float8;
    cand integer[];
begin
    if not v.bm25_fresh then
        -- statistics stale (chunks changed since the last ragsql.refresh_bm25): the exact formula per query
        return query select * from ragsql._bm25_exact(v.id, terms, k);
        return;
    end if;
    if k is null or k < 1 then
        return;
    end if;
    select array_agg(t.term order by t.df, t.term), array_agg(t.idf order by t.df, t.term), sum(t.df)
    into ts, idfs, postings
    from ragsql.bm25_term as t
    where t.version_id = v.id and t.term = any (bm25.terms);
    if ts is null then
        return;
    end if;
    if not v.bm25_lists
       or postings <= coalesce(nullif(current_setting('ragsql.bm25_prune_above', true), '')::bigint, 2000) then
        -- short posting lists (setting ragsql.bm25_prune_above, default 2000): summing them all is cheaper
        return query select * from ragsql._bm25_full(v.id, ts, k);
        return;
    end if;
    -- A chunk holding one query term t ranks below t's k best chunks (its score is its t score, theirs at least
    -- theirs), so the top k are among the chunks holding two or more terms and the k best of each term.
    -- 1. the chunks holding two or more terms: each term's list met with the union of the rarer terms' lists
    for x in
        select q.o, l.chunk_ids
        from unnest(ts) with ordinality as q (term, o)
        join ragsql.bm25_list as l on l.version_id = v.id and l.term = q.term
        order by q.o
    loop
        if x.o <> cur then
            if cur > 1 then
                multi := multi | (a & seen);
            end if;
            if cur >= 1 then
                seen := seen | a;
            end if;
            cur := x.o;
            a := x.chunk_ids;
        else
            a := a | x.chunk_ids;
        end if;
    end loop;
    if cur > 1 then
        multi := multi | (a & seen);
    end if;
    -- 2. an upper bound of each of their scores: the sum, over the terms it holds, of the highest score in the
    --    term's band that holds it
    if cardinality(multi) > 0 then
        select array_agg(s.d order by s.ub desc, s.d), array_agg(s.ub order by s.ub desc, s.d)
        into mids, mubs
        from (
            select u.d, sum(l.ub) as ub
            from ragsql.bm25_list as l
            cross join lateral unnest(l.chunk_ids & multi) as u (d)
            where l.version_id = v.id and l.term = any (ts)
            group by u.d
        ) as s;
    end if;
    -- 3. lb, a lower bound of the k-th best score: the k-th best exact score of a seed of real chunks (those
    --    best by bound, and some of the best bands' chunks, so that there are at least k)
    seed := coalesce(mids[1:4 * k], '{}');
    for x in
        select l.chunk_ids from ragsql.bm25_list as l
        where l.version_id = v.id and l.term = any (ts)
        order by l.ub desc, l.term, l.band
    loop
        seed := seed | x.chunk_ids[1:4 * k];
        got := got + least(cardinality(x.chunk_ids), 4 * k);
        exit when got >= k;
    end loop;
    select s.score into lb from ragsql._bm25_scores(v, ts, idfs, seed) as s order by s.score desc offset k - 1 limit 1;
    -- 4. the candidates: every chunk whose score can reach lb, i.e. the chunks of step 1 whose bound does, and
    --    the chunks of every band whose highest score does (a chunk holding one term scores at most that). The
    --    margin covers rounding. The rest score below lb, below the k chunks that reach it.
    cand := '{}';
    if lb is not null then
        select coalesce(array_agg(u.d), '{}') into cand
        from unnest(mids, mubs) as u (d, ub) where u.ub >= lb * (1 - 1e-9);
        for x in
            select l.chunk_ids from ragsql.bm25_list as l
            where l.version_id = v.id and l.term = any (ts) and l.ub >= lb * (1 - 1e-9)
        loop
            cand := cand | x.chunk_ids;
        end loop;
    end if;
    if lb is null or cardinality(cand) * cardinality(ts) > postings then
        -- fewer than k chunks hold a query term, or pruning leaves no less than every posting: sum them all
        raise debug 'ragsql.bm25: every posting summed (% postings, % candidates)', postings, cardinality(cand);
        return query select * from ragsql._bm25_full(v.id, ts, k);
        return;
    end if;
    raise debug 'ragsql.bm25: % candidates scored of % postings', cardinality(cand), postings;
    -- 5. their exact scores
    return query
    select s.chunk_id, s.score from ragsql._bm25_scores(v, ts, idfs, cand) as s
    order by s.score desc, s.chunk_id
    limit k;
end
$$;
comment on function ragsql.bm25(bigint, text[], integer) is
    'Top k chunks of a corpus version by Okapi BM25 with Lucene idf, the formula of bm25s method "lucene": '
    'sum over the distinct query terms of ln(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * '
    'len / avglen)), N and avglen over the version''s chunks, k1 and b from the version; ties by chunk id. '
    'Terms must be tokenised as the documents were (ragsql.text_terms, or jieba for Chinese). Exact and pruned: '
    'from the statistics and chunk lists of ragsql.refresh_bm25, only the chunks that can enter the top k are '
    'scored (those holding two or more query terms, found by intersecting sorted chunk lists and bounded by '
    'the score bands of their terms, and the best of each term); while the statistics are stale, the formula '
    'is computed per query.';

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
    -- the version as a literal, so the planner matches its partial trigram index chunk_trgm_v<id>
    return query execute format(
        'select c.id, word_similarity($1, c.text)::float8 as score '
        'from ragsql.chunk as c where c.version_id = %s and $1 <%% c.text '
        'order by score desc, c.id limit $2', fuzzy_search.version_id::bigint)
        using query, k;
end
$$;
comment on function ragsql.fuzzy_search(bigint, text, integer) is
    'Top k chunks of a corpus version by pg_trgm word similarity of the query to the chunk text (at least 0.1): '
    'tolerant of typos and partial words, in any language; through the version''s trigram index chunk_trgm_v<id>.';

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
    select r.chunk_id,
           -- summed in path order: in plan order equal-looking scores could differ in the last bit
           sum((hybrid_search.weights ->> r.path)::float8 / (hybrid_search.rrf_k + r.rank) order by r.path collate "C")
               as score
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
    dataset bigint;
    searched jsonb;
    written bigint;
begin
    select * into r from ragsql.retrieval_run as rr where rr.run_id = retrieve_run.run_id;
    if r.run_id is null then
        raise exception 'run % is not a retrieval run', run_id using errcode = 'no_data_found';
    end if;
    select ru.dataset_id into dataset from ragsql.run as ru where ru.id = r.run_id;
    -- the run's queries first, by its key: on Citus they live on one shard, and the search below reads the
    -- corpus, which stays on the coordinator, so the insert's select must name no run-scoped table
    select coalesce(jsonb_agg(q), '[]') into searched
    from (select q.query_id, q.text, q.terms, q.embedding
          from ragsql.retrieval_query as q
          where q.run_id = r.run_id) as q;
    delete from ragsql.run_result as rs where rs.run_id = r.run_id;
    insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score, text)
    select r.run_id, dataset, q.query_id,
           row_number() over (partition by q.query_id order by hit.score desc, hit.chunk_id),
           'c' || hit.chunk_id, hit.score,
           case when r.expand > 0 then ragsql.expanded_text(hit.chunk_id, r.expand) else c.text end
    from jsonb_to_recordset(searched) as q(query_id bigint, text text, terms text[], embedding vector)
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
    join ragsql.chunk as c on c.id = hit.chunk_id;
    get diagnostics written = row_count;
    return written;
end
$$;
comment on function ragsql.retrieve_run(bigint) is
    'Retrieves every query of a retrieval run (ragsql.retrieval_query) in one statement with the run''s mode, k, '
    'fusion and expansion, replacing its ranked results (docno c<chunk id>, text expanded). Returns the rows '
    'written.';
