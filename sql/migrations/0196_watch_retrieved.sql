-- A watch's retrieved ids (issue 30): the column of the source that holds the ids the application retrieved for a
-- row, in rank order. A captured row with ids is stored as `ragsql import jsonl` stores a record with those
-- `retrieved_context_ids` (its run's results, and the answer's contexts: with the row's contexts, or ids alone).

alter table ragsql.watch add column if not exists retrieved_column text;
comment on column ragsql.watch.retrieved_column is
    'The source''s column of retrieved ids in rank order (text[], a jsonb array or one text; null: not mapped): a '
    'captured row''s ids are its run''s ranked results and its answer''s context ids, as an imported record''s '
    'retrieved_context_ids.';

-- its return type gains retrieved: create or replace cannot change it (sql/functions/70_watch.sql creates it again)
drop function if exists ragsql._watch_new_rows(bigint);

insert into ragsql.schema_migration (name) values ('0196_watch_retrieved') on conflict do nothing;
