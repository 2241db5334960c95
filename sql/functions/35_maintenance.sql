-- Schema changes an ingest needs, for a ragsql_writer who may not change the schema itself: security
-- definer, with a fixed search_path and every name qualified.

create or replace function ragsql._create_hnsw_index(version_id bigint, dimensions integer)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    vector_schema text := (select quote_ident(n.nspname) from pg_extension as e
                           join pg_namespace as n on n.oid = e.extnamespace where e.extname = 'vector');
begin
    execute format('create index if not exists %I on ragsql.chunk using hnsw ((embedding::%s.vector(%s)) '
                   '%s.vector_cosine_ops) where version_id = %s',
                   'chunk_hnsw_v' || _create_hnsw_index.version_id, vector_schema,
                   _create_hnsw_index.dimensions::integer, vector_schema, _create_hnsw_index.version_id);
end
$$;
comment on function ragsql._create_hnsw_index(bigint, integer) is
    'Creates the partial HNSW index (cosine) of a corpus version''s embeddings of this dimension, unless it exists; '
    'ragsql.vector_search uses it.';

-- The first ingest of a corpus version loads its postings into a plain table, ragsql.chunk_term_v<id>, with no
-- index and no foreign-key trigger, then attaches it as the version's partition of ragsql.chunk_term (migration
-- 0150; the steps are ragsql._partition_bare/_index/_attach, shared with a run's results): its indexes are built
-- once, sorted, and its references to the chunks checked in one pass. Both steps need the owner of chunk_term
-- (security definer), so that a ragsql_writer may ingest.
create or replace function ragsql._postings_table(version_id bigint)
returns text
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    part text := 'chunk_term_v' || _postings_table.version_id;
    rel regclass := to_regclass(format('ragsql.%I', part));
begin
    if rel is not null then
        -- attached: postings go through ragsql.chunk_term; not yet (made by this transaction): into it
        return case when (select c.relispartition from pg_class as c where c.oid = rel) then null else part end;
    end if;
    if exists (select from ragsql.chunk as c where c.version_id = _postings_table.version_id)
       or exists (select from ragsql.chunk_term_default as t where t.version_id = _postings_table.version_id) then
        return null;  -- a version with chunks and no partition of its own keeps its postings in the default one
    end if;
    perform ragsql._partition_bare('ragsql.chunk_term', part, _postings_table.version_id, 'select, insert');
    return part;
end
$$;
comment on function ragsql._postings_table(bigint) is
    'The table the postings of a corpus version''s first ingest are loaded into: ragsql.chunk_term_v<id>, created '
    'here (no index, not attached) when the version has no chunk and no partition yet; null when its postings go '
    'through ragsql.chunk_term. ragsql._attach_postings makes it the version''s partition.';

create or replace function ragsql._attach_postings(version_id bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    part text := 'chunk_term_v' || _attach_postings.version_id;
    rel regclass := to_regclass(format('ragsql.%I', part));
begin
    if rel is null or (select c.relispartition from pg_class as c where c.oid = rel) then
        return;
    end if;
    perform set_config('maintenance_work_mem', '1GB', true)
    where pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB');
    -- the partition's primary key, chunk index and reference to the chunks, built and checked before the attach
    -- (which adopts them): the attach locks the default partition (ACCESS EXCLUSIVE) until commit, and BM25
    -- searches of every version without a partition, or with plans that may read it, wait for it (issue 26)
    perform ragsql._partition_index('ragsql.chunk_term', part);
    perform ragsql._partition_attach('ragsql.chunk_term', part, _attach_postings.version_id,
                                     format('the postings of corpus version %s', _attach_postings.version_id));
    -- the rows came in without chunk_term's statement triggers: the version's BM25 statistics are stale
    update ragsql.corpus_version as cv set bm25_fresh = false
    where cv.id = _attach_postings.version_id and cv.bm25_fresh;
end
$$;
comment on function ragsql._attach_postings(bigint) is
    'Attaches ragsql.chunk_term_v<id>, loaded by the version''s first ingest, as its partition of ragsql.chunk_term '
    '(indexes built, references checked) and marks its BM25 statistics stale; nothing when already attached.';

create or replace function ragsql._create_trigram_index(version_id bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    trgm_schema text := (select quote_ident(n.nspname) from pg_extension as e
                         join pg_namespace as n on n.oid = e.extnamespace where e.extname = 'pg_trgm');
begin
    if to_regclass(format('ragsql.%I', 'chunk_trgm_v' || _create_trigram_index.version_id)) is not null then
        return;
    end if;
    perform set_config('maintenance_work_mem', '1GB', true)
    where pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB');
    execute format('create index %I on ragsql.chunk using gin (text %s.gin_trgm_ops) where version_id = %s',
                   'chunk_trgm_v' || _create_trigram_index.version_id, trgm_schema,
                   _create_trigram_index.version_id);
end
$$;
comment on function ragsql._create_trigram_index(bigint) is
    'Creates the partial trigram index (pg_trgm) of a corpus version''s chunk texts, unless it exists: built once '
    'after the version''s first load, then kept by later inserts; ragsql.fuzzy_search uses it.';
