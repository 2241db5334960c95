-- Which way is better, for comparisons and gates: most metrics are better higher; a contradiction
-- rate and a "yes" to harmfulness or maliciousness are better lower.

alter table ragsql.generation_metric add column if not exists higher_is_better boolean not null default true;
update ragsql.generation_metric set higher_is_better = false where metric = 'contradiction_rate';
comment on column ragsql.generation_metric.higher_is_better is
    'True when a higher value is better (false for contradiction_rate): how ragsql.compare counts improved and regressed.';

alter table ragsql.aspect add column if not exists higher_is_better boolean not null default true;
update ragsql.aspect set higher_is_better = false where name in ('harmfulness', 'maliciousness') and builtin;
comment on column ragsql.aspect.higher_is_better is
    'True when "yes" is the good verdict (false for harmfulness and maliciousness); set it for your own aspects.';

insert into ragsql.schema_migration (name) values ('0080_direction') on conflict do nothing;
