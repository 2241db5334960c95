-- Faster ingest (issue 15): the BM25 postings partitioned per corpus version, and the trigram index per version.
--
-- chunk_term becomes list-partitioned by version_id: chunk_term_v<id> per version, and chunk_term_default for
-- postings of a version that has no partition of its own (loaded by hand). The first ingest of a version loads
-- its postings into a plain table with neither indexes nor foreign-key triggers, then attaches it as the
-- version's partition: its primary key and chunk index are built once, sorted, and its references to the chunks
-- checked in one pass, instead of one index insert per posting and key and one foreign-key query per posting.
-- The trigram index on the chunks' text (pg_trgm, ragsql.fuzzy_search) becomes a partial index per version,
-- chunk_trgm_v<id>, built once after a version's first load rather than updated chunk by chunk (four times
-- slower). Existing postings move into their versions' partitions here, and existing versions get their
-- trigram index.

do $$
declare
    v bigint;
begin
    if (select c.relkind from pg_class as c where c.oid = 'ragsql.chunk_term'::regclass) = 'p' then
        return;
    end if;
    -- a function with a SQL-standard body depends on the table it reads: sql/functions/30_retrieval.sql, applied
    -- after the migrations, creates it again on the new table
    drop function if exists ragsql._bm25_scores(ragsql.corpus_version, text[], float8[], integer[]);
    alter table ragsql.chunk_term rename to chunk_term_0050;
    alter table ragsql.chunk_term_0050 rename constraint chunk_term_pkey to chunk_term_0050_pkey;
    alter table ragsql.chunk_term_0050 rename constraint chunk_term_chunk_id_fkey to chunk_term_0050_chunk_id_fkey;
    alter table ragsql.chunk_term_0050 rename constraint chunk_term_tf_check to chunk_term_0050_tf_check;
    alter index ragsql.chunk_term_chunk rename to chunk_term_0050_chunk;
    create table ragsql.chunk_term (
        version_id bigint not null,
        term text not null,
        chunk_id bigint not null references ragsql.chunk (id) on delete cascade,
        tf integer not null check (tf > 0),
        length integer not null,
        primary key (version_id, term, chunk_id) include (tf, length)
    ) partition by list (version_id);
    create index chunk_term_chunk on ragsql.chunk_term (chunk_id);
    create table ragsql.chunk_term_default partition of ragsql.chunk_term default;
    for v in select distinct t.version_id from ragsql.chunk_term_0050 as t order by 1 loop
        execute format('create table ragsql.%I partition of ragsql.chunk_term for values in (%s)',
                       'chunk_term_v' || v, v);
        execute format('insert into ragsql.%I select * from ragsql.chunk_term_0050 where version_id = %s '
                       'order by term, chunk_id', 'chunk_term_v' || v, v);
    end loop;
    drop table ragsql.chunk_term_0050;
end
$$;
comment on table ragsql.chunk_term is
    'BM25 postings: how often each token occurs in each chunk (tokens from a text search configuration, or '
    'jieba for Chinese). One partition per corpus version (chunk_term_v<id>, attached by the version''s first '
    'ingest once loaded and indexed); chunk_term_default holds the postings of versions without one.';
comment on table ragsql.chunk_term_default is
    'The postings of corpus versions that have no partition of their own in ragsql.chunk_term (loaded by hand, or '
    'by a database upgraded in place); empty otherwise.';
comment on column ragsql.chunk_term.length is
    'The BM25 length of the chunk (ragsql.chunk.length), repeated so that the primary key alone scores a posting.';

-- ragsql._bm25_stale() is in sql/functions/00_triggers.sql; the table is new, so are its triggers
create or replace trigger chunk_term_bm25_stale_ins after insert on ragsql.chunk_term
    referencing new table as changed for each statement execute function ragsql._bm25_stale();
create or replace trigger chunk_term_bm25_stale_upd after update on ragsql.chunk_term
    referencing new table as changed for each statement execute function ragsql._bm25_stale();

-- one trigram index per version with chunks (ragsql._create_trigram_index builds the next ones)
drop index if exists ragsql.chunk_text_trgm;
do $$
declare
    v bigint;
begin
    -- the ids first: an index cannot be created on a table a loop's open query still reads
    foreach v in array coalesce((select array_agg(cv.id order by cv.id) from ragsql.corpus_version as cv
                                 where exists (select from ragsql.chunk as c where c.version_id = cv.id)), '{}') loop
        execute format('create index if not exists %I on ragsql.chunk using gin (text gin_trgm_ops) '
                       'where version_id = %s', 'chunk_trgm_v' || v, v);
    end loop;
end
$$;

insert into ragsql.schema_migration (name) values ('0150_ingest_fast') on conflict do nothing;
