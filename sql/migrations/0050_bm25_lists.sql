-- BM25 from the postings themselves plus per-term chunk lists (ragsql.refresh_bm25, ragsql.bm25): replaces the
-- table of precomputed posting scores of 0040, which took ~10 minutes to build at 1M chunks.

-- intarray: the C intersection and union of sorted integer arrays that ragsql.bm25 finds its candidates with.
-- Created in a schema of its own, so that its operators change how int[] expressions resolve nowhere else
-- (where a DBA installed it before, in public, ragsql uses that one).
create schema if not exists ragsql_intarray;
comment on schema ragsql_intarray is 'The intarray extension, for ragsql.bm25 and ragsql.refresh_bm25.';
create extension if not exists intarray schema ragsql_intarray;

-- Each posting carries its chunk's BM25 length, and the primary key covers tf and length: a posting's score is
-- then read from the index alone (no visit to the chunk or the table). Filled once here for existing rows;
-- the ingest writes it with the posting.
do $$
begin
    if not exists (select from pg_attribute
                   where attrelid = 'ragsql.chunk_term'::regclass and attname = 'length' and not attisdropped) then
        alter table ragsql.chunk_term add column length integer;
        update ragsql.chunk_term as ct set length = c.length from ragsql.chunk as c where c.id = ct.chunk_id;
        alter table ragsql.chunk_term alter column length set not null;
    end if;
    if not exists (select from pg_index as i join pg_attribute as a on a.attrelid = i.indrelid
                   where i.indexrelid = 'ragsql.chunk_term_pkey'::regclass and a.attname = 'length'
                     and a.attnum = any (i.indkey::smallint[])) then
        alter table ragsql.chunk_term drop constraint chunk_term_pkey,
            add constraint chunk_term_pkey primary key (version_id, term, chunk_id) include (tf, length);
    end if;
end
$$;
comment on column ragsql.chunk_term.length is
    'The BM25 length of the chunk (ragsql.chunk.length), repeated so that the primary key alone scores a posting.';

-- The precomputed posting scores are gone: scores come from chunk_term (tf, length) and bm25_term (idf).
drop table if exists ragsql.bm25_posting cascade;

alter table ragsql.corpus_version add column if not exists bm25_lists boolean not null default false;
comment on column ragsql.corpus_version.bm25_lists is
    'Whether ragsql.bm25_list holds the version''s chunk lists (set by ragsql.refresh_bm25; false when a chunk id '
    'exceeds the integer range the lists store, and ragsql.bm25 then sums every posting instead).';

create table if not exists ragsql.bm25_list (
    version_id bigint not null,
    term text collate "C" not null,
    band smallint not null,
    ub float8 not null,
    chunk_ids integer[] not null
) partition by list (version_id);
comment on table ragsql.bm25_list is
    'Per term of a corpus version, the ids of the chunks containing it, sorted, split into bands by the term''s '
    'score in the chunk (a band holds the postings whose tf / (tf + k1 * (1 - b + b * len / avglen)) falls in '
    'the same range of the version''s quantiles), with ub the highest score in the band. One partition per '
    'version (bm25_list_v<id>, rebuilt whole by ragsql.refresh_bm25).';

-- The marks of 0040 said fresh for statistics that included the posting scores: until the next refresh
-- (the next ingest of the corpus, or select ragsql.refresh_bm25(id)), ragsql.bm25 computes the formula per query.
do $$
begin
    if not exists (select from ragsql.schema_migration where name = '0050_bm25_lists') then
        update ragsql.corpus_version set bm25_fresh = false where bm25_fresh;
    end if;
end
$$;

-- ragsql._bm25_drop_partition() (now dropping bm25_list_v<id>) is in sql/functions/00_triggers.sql.

insert into ragsql.schema_migration (name) values ('0050_bm25_lists') on conflict do nothing;
