-- A verdict shape any registry metric may use (issue 27): the judge's yes or no on one question about an answer,
-- asked by the metric's own prompt (ragsql/judge/prompts/<metric>.<language>.txt). A metric of this shape is one
-- entry in ragsql/registry.py and two prompt files: docs/adding-a-metric.md.
create table if not exists ragsql.yes_no_verdict (
    run_id bigint not null,
    query_id bigint not null,
    metric text not null check (metric ~ '^[a-z][a-z0-9_]*$'),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    verdict boolean not null,
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, metric, model, prompt_version),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.yes_no_verdict is
    'The judge''s yes (true) or no on the question a yes/no metric of the registry asks of an answer; the metric''s '
    'value is 1 for yes, 0 for no (ragsql.yes_no_metric).';

insert into ragsql.schema_migration (name) values ('0180_yes_no_verdict') on conflict do nothing;
