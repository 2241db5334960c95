-- RAGAS id-based records (retrieved_context_ids without retrieved_contexts, issue 29): an answer's contexts may be
-- known by id alone. Their ids are stored in prompt order with a null text; the id metrics read them
-- (ragsql.context_id_metric), the text metrics give null with the reason (ragsql._scope_rows.no_context_texts).
alter table ragsql.answer_context alter column text drop not null;
comment on column ragsql.answer_context.text is
    'The context''s text; null when the record gave its id alone (RAGAS retrieved_context_ids without texts).';

-- its return type gains no_context_texts: create or replace cannot change it (sql/functions/20_generation.sql
-- creates it again)
drop function if exists ragsql._scope_rows(jsonb);

insert into ragsql.schema_migration (name) values ('0190_context_ids_only') on conflict do nothing;
