-- Human review of the judge: labels people give to sampled queries of a run, for judge-human
-- agreement and prediction-powered intervals (sql/functions/60_review.sql).

create table if not exists ragsql.review_label (
    run_id bigint not null references ragsql.run (id) on delete cascade,
    query_id bigint not null references ragsql.query (id) on delete cascade,
    metric text not null check (btrim(metric) <> ''),
    item text not null default '' check (item = '' or item ~ '^[a-z_]+:[0-9]+$'),
    reviewer text not null check (btrim(reviewer) <> ''),
    score float8 check (score >= 0 and score <= 1),
    verdict text check (verdict in ('supported', 'partial', 'unsupported', 'contradicted')),
    judge_model text,
    judge_value float8,
    judge_verdict text,
    source text,
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, metric, item, reviewer),
    check ((item = '') = (score is not null)),
    check ((item <> '') = (verdict is not null))
);
comment on table ragsql.review_label is
    'A reviewer''s label of one judged item: item '''' labels the metric''s value of the query (score in [0, 1]); '
    'item <purpose>:<statement_no> labels one statement verdict (supported, partial, unsupported, contradicted). '
    'judge_model / judge_value / judge_verdict record what the judge said on the sheet the reviewer saw; '
    'source is the file:line the label came from. One label per reviewer and item.';

insert into ragsql.schema_migration (name) values ('0090_review') on conflict do nothing;
