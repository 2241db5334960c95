-- Core tables: datasets, queries, gold judgments, reference answers, runs, ranked results,
-- answers and the contexts they used. Frozen once released (see sql/migrations/FROZEN).

create table if not exists ragsql.dataset (
    id bigint generated always as identity primary key,
    name text not null unique check (btrim(name) <> ''),
    description text,
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now()
);
comment on table ragsql.dataset is 'An evaluation set: queries with gold evidence and reference answers.';

create table if not exists ragsql.query (
    id bigint generated always as identity primary key,
    dataset_id bigint not null references ragsql.dataset (id) on delete cascade,
    qid text not null check (btrim(qid) <> ''),
    text text,
    language text,
    metadata jsonb not null default '{}',
    unique (dataset_id, qid),
    unique (dataset_id, id)
);
comment on table ragsql.query is 'A question of a dataset; qid is the external id (TREC topic, eval-set qid).';

create table if not exists ragsql.judgment (
    query_id bigint not null references ragsql.query (id) on delete cascade,
    docno text not null check (docno <> ''),
    relevance integer not null,
    text text,
    primary key (query_id, docno)
);
comment on table ragsql.judgment is
    'Gold evidence: graded relevance of an item (chunk, passage, document) for a query. '
    'relevance >= level is relevant (default level 1); 0 and negative grades are judged non-relevant.';

create table if not exists ragsql.reference_answer (
    query_id bigint not null references ragsql.query (id) on delete cascade,
    position integer not null check (position >= 1),
    text text not null check (btrim(text) <> ''),
    primary key (query_id, position)
);
comment on table ragsql.reference_answer is 'Reference (ground-truth) answers of a query; several are allowed.';

create table if not exists ragsql.run (
    id bigint generated always as identity primary key,
    name text not null unique check (btrim(name) <> ''),
    dataset_id bigint not null references ragsql.dataset (id) on delete cascade,
    config jsonb not null default '{}',
    notes text,
    created_at timestamptz not null default now(),
    unique (id, dataset_id)
);
comment on table ragsql.run is
    'One configuration of a RAG system evaluated on a dataset; config records everything needed to compare runs.';

create table if not exists ragsql.run_result (
    run_id bigint not null,
    dataset_id bigint not null,
    query_id bigint not null,
    rank integer not null check (rank >= 1),
    docno text not null check (docno <> ''),
    score float8,
    text text,
    primary key (run_id, query_id, rank),
    unique (run_id, query_id, docno) include (rank),
    foreign key (run_id, dataset_id) references ragsql.run (id, dataset_id) on delete cascade,
    foreign key (dataset_id, query_id) references ragsql.query (dataset_id, id) on delete cascade
);
comment on table ragsql.run_result is
    'Ranked retrieval results of a run: rank 1 is the top item. Imported TREC runs are ranked as trec_eval '
    'ranks them (score desc, ties by docno desc in byte order).';

create table if not exists ragsql.answer (
    run_id bigint not null,
    dataset_id bigint not null,
    query_id bigint not null,
    text text not null,
    metadata jsonb not null default '{}',
    created_at timestamptz not null default now(),
    primary key (run_id, query_id),
    foreign key (run_id, dataset_id) references ragsql.run (id, dataset_id) on delete cascade,
    foreign key (dataset_id, query_id) references ragsql.query (dataset_id, id) on delete cascade
);
comment on table ragsql.answer is 'The answer a run generated for a query.';

create table if not exists ragsql.answer_context (
    run_id bigint not null,
    query_id bigint not null,
    position integer not null check (position >= 1),
    docno text,
    text text not null,
    primary key (run_id, query_id, position),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.answer_context is 'The contexts an answer was generated from, in prompt order.';

create table if not exists ragsql.default_measure (
    measure text primary key,
    position integer not null unique
);
comment on table ragsql.default_measure is
    'Measures that ragsql.query_measure, ragsql.run_measure and `ragsql metrics` compute when none are named.';

insert into ragsql.default_measure (measure, position)
values
    ('Success@1', 1),
    ('Success@5', 2),
    ('Success@10', 3),
    ('R@5', 4),
    ('R@10', 5),
    ('R@20', 6),
    ('P@5', 7),
    ('P@10', 8),
    ('RR@10', 9),
    ('nDCG@5', 10),
    ('nDCG@10', 11),
    ('AP', 12),
    ('ContextPrecision@10', 13),
    ('Rprec', 14)
on conflict do nothing;

insert into ragsql.schema_migration (name) values ('0010_core') on conflict do nothing;
