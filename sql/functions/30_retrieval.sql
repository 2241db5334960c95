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

create or replace function ragsql.refresh_bm25(version_id bigint)
returns bigint
language plpgsql volatile
-- hash joins over the version's postings (the planner's statistics may predate this ingest), big sorts in memory
set jit = off
set enable_nestloop = off
set work_mem = '256MB'
set maintenance_work_mem = '512MB'
as $$
declare
    v ragsql.corpus_version := ragsql._version(refresh_bm25.version_id);
    part text := 'bm25_posting_v' || v.id;
    n bigint;
    avgdl float8;
    scored bigint;
begin
    -- one refresh of a version at a time
    perform from ragsql.corpus_version as cv where cv.id = v.id for update;
    -- the same expressions as ragsql._bm25_exact, so the stored scores are bit for bit the per-query ones
    select count(*), avg(c.length)::float8 into n, avgdl from ragsql.chunk as c where c.version_id = v.id;
    delete from ragsql.bm25_term as t where t.version_id = v.id;
    insert into ragsql.bm25_term (version_id, term, df, idf, ub)
    select v.id, ct.term, count(*), ln(1 + (n::float8 - count(*)::float8 + 0.5) / (count(*)::float8 + 0.5)), 0
    from ragsql.chunk_term as ct
    where ct.version_id = v.id
    group by ct.term;
    -- the version's partition is rebuilt whole, then indexed in bulk (faster than maintaining the indexes)
    execute format('drop table if exists ragsql.%I', part);
    execute format('create table ragsql.%I partition of ragsql.bm25_posting for values in (%s)', part, v.id);
    execute format(
        'insert into ragsql.%I (version_id, term, chunk_id, score) '
        'select ct.version_id, ct.term, ct.chunk_id, '
        '       t.idf * ct.tf / (ct.tf + $2 * (1 - $3 + $3 * c.length / nullif($4, 0))) '
        'from ragsql.chunk_term as ct '
        'join ragsql.chunk as c on c.id = ct.chunk_id '
        'join ragsql.bm25_term as t on t.version_id = ct.version_id and t.term = ct.term '
        'where ct.version_id = $1 and $4 > 0', part)
        using v.id, v.k1, v.b, avgdl;
    get diagnostics scored = row_count;
    execute format('create index %I on ragsql.%I (term, score desc) include (chunk_id, version_id)', part || '_term_score', part);
    execute format('create index %I on ragsql.%I (term, chunk_id) include (score, version_id)', part || '_term_chunk', part);
    -- each term's upper bound: the first entry of its range in the first index
    execute format(
        'update ragsql.bm25_term as t set ub = coalesce((select p.score from ragsql.%I as p where p.term = t.term '
        'order by p.score desc limit 1), 0) where t.version_id = $1', part)
        using v.id;
    execute format('analyze ragsql.%I', part);
    analyze ragsql.bm25_term;
    update ragsql.corpus_version as cv
    set bm25_chunks = n, bm25_avgdl = avgdl, bm25_fresh = true
    where cv.id = v.id;
    return scored;
end
$$;
comment on function ragsql.refresh_bm25(bigint) is
    'Recomputes, set-based, a corpus version''s BM25 statistics (N, avglen, per-term df, idf and upper bound) '
    'and every posting''s score for its k1 and b, and marks them fresh. Every score depends on N and avglen, '
    'so any change of the version''s chunks makes all of them stale: the ingest calls this at its end, in its '
    'transaction, for every version it changed. Returns the number of postings scored.';

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
    return query
    select p.chunk_id, sum(p.score order by p.term) as score
    from ragsql.bm25_posting as p
    where p.version_id = v.id and p.term = any (_bm25_full.terms)
    group by p.chunk_id
    order by score desc, p.chunk_id
    limit _bm25_full.k;
end
$$;
comment on function ragsql._bm25_full(bigint, text[], integer) is
    'BM25 as a plain sum of the precomputed posting scores of every query term (no pruning): the fallback of '
    'ragsql.bm25, and what its pruned result must equal.';

create or replace function ragsql.bm25(version_id bigint, terms text[], k integer default 10)
returns table (chunk_id bigint, score float8)
language plpgsql stable parallel safe
set jit = off
as $$
declare
    v ragsql.corpus_version := ragsql._version(bm25.version_id);
    ts text[];      -- the query's known terms, most frequent (longest posting list) first
    ubs float8[];   -- their upper bounds (highest posting score)
    dfs bigint[];   -- their posting counts
    fetched bigint; -- postings of the terms a pass fetches, whole or in part
    postings bigint;
    cs float8[];    -- per-term cutoffs: the postings scoring above them are fetched
    n integer;
    lb float8;      -- a lower bound of the k-th best score (k real chunks score at least this)
    guess float8;   -- the k-th best score this pass assumes; checked at its end
    target float8;
    remaining float8;
    csum float8;
    cid bigint[];   -- candidates: chunk id, known part of the score, upper bound of the score, terms known
    part float8[];
    bnd float8[];
    known integer[];
    kth float8;
    u integer;
begin
    if not v.bm25_fresh then
        -- statistics stale (chunks changed since the last ragsql.refresh_bm25): the exact formula per query
        return query select * from ragsql._bm25_exact(v.id, terms, k);
        return;
    end if;
    if k is null or k < 1 then
        return;
    end if;
    select array_agg(t.term order by t.df desc, t.term), array_agg(t.ub order by t.df desc, t.term),
           array_agg(t.df::bigint order by t.df desc, t.term), sum(t.df)
    into ts, ubs, dfs, postings
    from ragsql.bm25_term as t
    where t.version_id = v.id and t.term = any (bm25.terms);
    if ts is null then
        return;
    end if;
    n := cardinality(ts);
    if n > 30 or postings <= coalesce(nullif(current_setting('ragsql.bm25_prune_above', true), '')::bigint, 20000) then
        -- short posting lists (measured: up to ~20k postings; setting ragsql.bm25_prune_above changes it):
        -- summing them all is cheaper than pruning
        return query select * from ragsql._bm25_full(v.id, ts, k);
        return;
    end if;
    -- 1. lb: the k-th best sum, per chunk, of its scores among each term's k best postings. A partial score
    --    is at most the chunk's score, so at least k chunks score lb or more.
    select (array_agg(s.partial order by s.partial desc))[bm25.k]
    into lb
    from (
        select p.chunk_id, sum(p.score) as partial
        from unnest(ts) as q (term)
        cross join lateral (
            select b.chunk_id, b.score from ragsql.bm25_posting as b
            where b.version_id = v.id and b.term = q.term
            order by b.score desc
            limit bm25.k
        ) as p
        group by p.chunk_id
    ) as s;
    if lb is null or lb <= 0 then
        -- fewer than k chunks contain a query term: the whole query is as cheap
        return query select * from ragsql._bm25_full(v.id, ts, k);
        return;
    end if;
    -- A pass assumes a k-th best score (guess) and checks it at its end. Guessing above lb (fewer postings
    -- fetched, a failed pass wasted) measured slower than one pass at lb itself, which cannot fail.
    foreach guess in array array[lb] loop
        -- 2. cutoffs c_t with sum c_t = target < guess: a chunk none of whose postings scores above its term's
        --    cutoff scores at most target. The budget goes to the most frequent terms first, up to their upper
        --    bound (then they fetch nothing: MaxScore's non-essential terms); the rest to the next term, as a
        --    partial cut of its list; the rarer terms are fetched whole (cutoff 0). The margin covers rounding.
        target := guess * (1 - 1e-9);
        remaining := target;
        cs := array_fill(0::float8, array[n]);
        for i in 1 .. n loop
            cs[i] := least(ubs[i], remaining);
            remaining := remaining - cs[i];
        end loop;
        csum := target - remaining;
        -- A pass pays about what the plain sum pays for each posting it fetches, plus an index probe per
        -- candidate and partly known term. It wins when the terms it does not skip whole are rare (MaxScore's
        -- case: a frequent term and a rare one, 1M chunks: 0.9 ms instead of 15 ms) and loses when several
        -- frequent terms must be fetched (2-4x slower): then sum every posting. Setting
        -- ragsql.bm25_prune_share (default 0.25) is the largest share of the postings a pass may fetch.
        fetched := 0;
        for i in 1 .. n loop
            if cs[i] < ubs[i] then
                fetched := fetched + dfs[i];
            end if;
        end loop;
        if fetched > postings * coalesce(nullif(current_setting('ragsql.bm25_prune_share', true), '')::float8, 0.25)
        then
            return query select * from ragsql._bm25_full(v.id, ts, k);
            return;
        end if;
        -- 3. candidates, with the sum of their fetched scores (exact for those terms) and an upper bound (plus
        --    the cutoff of every other term); only those whose bound reaches target
        select array_agg(f.chunk_id), array_agg(f.part), array_agg(f.part + csum - f.cut), array_agg(f.known)
        into cid, part, bnd, known
        from (
            select b.chunk_id, sum(b.score) as part, sum(q.c) as cut, bit_or(1 << (q.i::integer - 1)) as known
            from unnest(ts, cs) with ordinality as q (term, c, i)
            cross join lateral (
                select b.chunk_id, b.score from ragsql.bm25_posting as b
                where b.version_id = v.id and b.term = q.term and b.score > q.c
            ) as b
            group by b.chunk_id
            having sum(b.score) + csum - sum(q.c) >= target
        ) as f;
        -- 4. the other terms' scores of the candidates, the most uncertain term first (a term with cutoff 0 was
        --    fetched whole: a candidate without its posting has none). After each term the floor rises to the
        --    k-th best known part (a lower bound) and candidates whose bound falls below it are dropped.
        if cid is not null then
            for u in select o.i::integer from unnest(cs) with ordinality as o (c, i) where o.c > 0 order by o.c desc
            loop
                with probed as (
                    select x.cid, x.part + coalesce(p.score, 0) as part,
                           case when x.known & (1 << (u - 1)) = 0 then x.bnd - cs[u] + coalesce(p.score, 0)
                                else x.bnd end as bnd,
                           x.known | (1 << (u - 1)) as known
                    from unnest(cid, part, bnd, known) as x (cid, part, bnd, known)
                    left join lateral (
                        select b.score from ragsql.bm25_posting as b
                        where b.version_id = v.id and b.term = ts[u] and b.chunk_id = x.cid
                          and x.known & (1 << (u - 1)) = 0
                    ) as p on true
                ),
                floor as (
                    select greatest(target, coalesce((
                        select pr.part from probed as pr order by pr.part desc offset bm25.k - 1 limit 1), 0)
                        * (1 - 1e-9)) as t
                )
                select array_agg(pr.cid), array_agg(pr.part), array_agg(pr.bnd), array_agg(pr.known)
                into cid, part, bnd, known
                from probed as pr, floor
                where pr.bnd >= floor.t;
            end loop;
        end if;
        -- 5. every candidate's score is now exact. Check: if k of them score guess or more (up to rounding:
        --    1e-10 < the 1e-9 of target), no chunk left out (all score at most target) can enter the top k.
        --    Otherwise the k-th best found, a real score, is a better lower bound for another pass.
        kth := null;
        if coalesce(cardinality(cid), 0) >= k then
            select x.p into kth from unnest(part) as x (p) order by x.p desc offset k - 1 limit 1;
        end if;
        if kth >= guess * (1 - 1e-10) then
            -- the survivors (the top k and near ties) summed again in term order, as every path sums: equal
            -- per-term scores then give bit-equal sums, and ties go to the lower chunk id
            return query
            select x.cid, s.score
            from unnest(cid, part) as x (cid, part)
            cross join lateral (
                select sum(b.score order by b.term) as score from ragsql.bm25_posting as b
                where b.version_id = v.id and b.term = any (ts) and b.chunk_id = x.cid
            ) as s
            where x.part >= kth * (1 - 1e-9)
            order by s.score desc, x.cid
            limit k;
            return;
        end if;
        lb := greatest(lb, kth);
    end loop;
    -- never expected (the pass's guess was a true lower bound): the whole query
    return query select * from ragsql._bm25_full(v.id, ts, k);
end
$$;
comment on function ragsql.bm25(bigint, text[], integer) is
    'Top k chunks of a corpus version by Okapi BM25 with Lucene idf, the formula of bm25s method "lucene": '
    'sum over the distinct query terms of ln(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * '
    'len / avglen)), N and avglen over the version''s chunks, k1 and b from the version; ties by chunk id. '
    'Terms must be tokenised as the documents were (ragsql.text_terms, or jieba for Chinese). Exact and pruned: '
    'from the precomputed statistics of ragsql.refresh_bm25, only the chunks that can enter the top k are '
    'scored (per-term upper bounds, MaxScore-like) when that is cheaper than summing every posting; while they '
    'are stale, the formula is computed per query.';

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
