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
