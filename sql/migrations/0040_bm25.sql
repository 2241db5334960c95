-- BM25 statistics and precomputed posting scores (ragsql.refresh_bm25, ragsql.bm25's pruned path).

-- BM25 statistics, kept exact by ragsql.refresh_bm25(version_id) (sql/functions/30_retrieval.sql): the version's
-- N (chunks) and average chunk length, per term df, idf and the highest posting score (the term's upper bound),
-- and every posting's score idf * tf / (tf + k1 * (1 - b + b * len / avglen)) for the version's k1 and b.
-- Any change to a version's chunks or postings clears bm25_fresh (statement triggers below); ragsql.bm25
-- then computes the exact formula per query until the next refresh, which every ingest that changed a version
-- runs at its end, in the same transaction. So a stale precomputed score is never returned.
alter table ragsql.corpus_version add column if not exists bm25_chunks bigint;
alter table ragsql.corpus_version add column if not exists bm25_avgdl float8;
alter table ragsql.corpus_version add column if not exists bm25_fresh boolean not null default false;
comment on column ragsql.corpus_version.bm25_fresh is
    'Whether bm25_chunks, bm25_avgdl, ragsql.bm25_term and ragsql.bm25_posting match the version''s chunks '
    '(set by ragsql.refresh_bm25, cleared by any change to its chunks or postings).';

create table if not exists ragsql.bm25_term (
    version_id bigint not null references ragsql.corpus_version (id) on delete cascade,
    term text collate "C" not null,
    df integer not null check (df > 0),
    idf float8 not null,
    ub float8 not null,
    primary key (version_id, term)
);
comment on table ragsql.bm25_term is
    'Per-term BM25 statistics of a corpus version at its last ragsql.refresh_bm25: df (chunks containing the '
    'term), Lucene idf ln(1 + (N - df + 0.5) / (df + 0.5)), and ub, the highest score of any of its postings '
    '(the upper bound the pruning of ragsql.bm25 relies on).';

create table if not exists ragsql.bm25_posting (
    version_id bigint not null,
    term text collate "C" not null,
    chunk_id bigint not null,
    score float8 not null
) partition by list (version_id);
comment on table ragsql.bm25_posting is
    'Precomputed BM25 score of every posting (ragsql.chunk_term row) of a corpus version, one partition per '
    'version (bm25_posting_v<id>, rebuilt whole by ragsql.refresh_bm25) with two indexes: (term, score desc), '
    'where a term''s best postings are a short range, and (term, chunk_id), to look a chunk''s score up. Terms '
    'compare bytewise (collate "C"): faster sorts and index builds, and equality is the same.';

-- ragsql._bm25_stale() is in sql/functions/00_triggers.sql (idempotent), so a fix reaches every database.
create or replace trigger chunk_bm25_stale_ins after insert on ragsql.chunk
    referencing new table as changed for each statement execute function ragsql._bm25_stale();
create or replace trigger chunk_bm25_stale_upd after update on ragsql.chunk
    referencing new table as changed for each statement execute function ragsql._bm25_stale();
create or replace trigger chunk_bm25_stale_del after delete on ragsql.chunk
    referencing old table as changed for each statement execute function ragsql._bm25_stale();
-- postings are deleted with their chunk (on delete cascade), which the chunk trigger already sees
create or replace trigger chunk_term_bm25_stale_ins after insert on ragsql.chunk_term
    referencing new table as changed for each statement execute function ragsql._bm25_stale();
create or replace trigger chunk_term_bm25_stale_upd after update on ragsql.chunk_term
    referencing new table as changed for each statement execute function ragsql._bm25_stale();

-- ragsql._bm25_drop_partition() is in sql/functions/00_triggers.sql.
create or replace trigger corpus_version_bm25_drop after delete on ragsql.corpus_version
    for each row execute function ragsql._bm25_drop_partition();


insert into ragsql.schema_migration (name) values ('0040_bm25') on conflict do nothing;
