-- RAGAS's id-based context precision and recall: the ids of the contexts an answer used against the query's
-- gold ids, no judge. The registry now says which function computes a metric that needs no judge.

alter table ragsql.generation_metric add column if not exists computed_by text;
comment on column ragsql.generation_metric.computed_by is
    'For a metric with no judge task: the function that computes it, text_metric (the answer against its '
    'references) or context_id_metric (the ids of the answer''s contexts against the gold ids); null otherwise.';
update ragsql.generation_metric set computed_by = 'text_metric' where task_kind is null and computed_by is null;

insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description, computed_by)
values
    ('id_based_context_precision', 21, null, false,
     'share of the distinct ids of the answer''s contexts that are gold (relevance >= 1) ids of the query (RAGAS)',
     'context_id_metric'),
    ('id_based_context_recall', 22, null, false,
     'share of the query''s gold ids (relevance >= 1) among the ids of the answer''s contexts (RAGAS)',
     'context_id_metric')
on conflict (metric) do nothing;

insert into ragsql.schema_migration (name) values ('0110_context_id_metrics') on conflict do nothing;
