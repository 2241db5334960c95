-- RAGAS id-based records with no response (issue 29): a record giving retrieved_context_ids and no response is
-- stored as an answer with a null text, so that its ids are the answer's contexts the id metrics read
-- (ragsql.context_id_metric). A metric that reads the response gives null with its reason ("no answer in the run",
-- as for a query with no answer row); the judge makes no task of it (ragsql._enqueue_judge_tasks).
alter table ragsql.answer alter column text drop not null;
comment on column ragsql.answer.text is
    'The answer''s text; null when the record gave no response (RAGAS retrieved_context_ids alone): its contexts '
    'are then read by the id metrics only.';

insert into ragsql.schema_migration (name) values ('0192_answer_without_response') on conflict do nothing;
