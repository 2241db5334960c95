-- Trigger functions. Idempotent, so a fix reaches every database on its next install; the migrations
-- that attach them (0040) keep only `create trigger`. plpgsql bodies are checked against tables when
-- they run, not when created, so install.sql applies this file before the migrations.

create or replace function ragsql._bm25_stale()
returns trigger
language plpgsql
as $$
begin
    update ragsql.corpus_version as cv set bm25_fresh = false
    where cv.bm25_fresh and cv.id in (select distinct ch.version_id from changed as ch);
    return null;
end
$$;
comment on function ragsql._bm25_stale() is
    'Statement trigger: clears bm25_fresh of the versions whose chunks or postings the statement changed.';

-- security definer: dropping the partition takes its owner, and a ragsql_writer may delete a version
create or replace function ragsql._bm25_drop_partition()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    execute format('drop table if exists ragsql.%I', 'bm25_list_v' || old.id);
    return null;
end
$$;
comment on function ragsql._bm25_drop_partition() is
    'Row trigger: drops the chunk-list partition (ragsql.bm25_list_v<id>) of a deleted corpus version.';
