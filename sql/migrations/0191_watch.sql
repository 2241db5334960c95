-- Watches (issue 30): ragsql judges the rows a RAG application logs to a table of its own, where they are. A watch
-- maps the source's columns; each window (`NAME@<window start>`) is a dataset and a run of that name, and each
-- captured row a query of its window's dataset (qid = the row's key, so a key is captured once) and an answer of
-- its run, judged by the judge queue. A dataset per window: a window's values and counts (queries, missing) are its
-- own rows', and no row captured in another window moves them (DESIGN.md, principle 7).
-- Polling reads the source with SELECT only: a table by its rows' xmin against the snapshot of the last capture
-- (late-committing transactions included), a view (no xmin) by its time column with a settle delay.

create table if not exists ragsql.watch (
    id bigint generated always as identity primary key,
    name text not null unique check (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]*$'),
    source_schema text not null,
    source_table text not null,
    key_column text not null,
    time_column text not null,
    question_column text not null,
    answer_column text not null,
    contexts_column text,
    reference_column text,
    sample float8 not null default 1 check (sample > 0 and sample <= 1),
    window_size interval not null default '1 hour' check (window_size in ('1 hour', '1 day')),
    settle interval not null default '5 minutes' check (settle >= '0 seconds'),
    metrics text[],
    judge text check (btrim(judge) <> ''),
    paused boolean not null default false,
    starts_at timestamptz,
    captured_xmin xid8,
    captured_until timestamptz,
    created_at timestamptz not null default now()
);
comment on table ragsql.watch is
    'A production log table (or view) ragsql judges as rows arrive: the source''s columns, the deterministic sample '
    '(rows with ragsql.watch_sample_point(key) < sample), the window size (1 hour or 1 day, UTC), the settle delay '
    'after which a window counts as closed, the metrics and judge (null: the configured endpoint, else offline). '
    'starts_at: rows with an earlier time are not captured (null: every row). captured_xmin: the oldest transaction '
    'still running at the last capture of a table source (rows of transactions from it on are read again, and kept '
    'once by key); captured_until: when the last capture read (a view source reads rows from captured_until - '
    'settle on).';

create table if not exists ragsql.watch_window (
    watch_id bigint not null references ragsql.watch (id) on delete cascade,
    window_start timestamptz not null,
    run_id bigint not null unique references ragsql.run (id) on delete cascade,
    captured bigint not null default 0 check (captured >= 0),
    skipped bigint not null default 0 check (skipped >= 0),
    judged bigint not null default 0 check (judged >= 0),
    primary key (watch_id, window_start)
);
comment on table ragsql.watch_window is
    'A window of a watch and its run (NAME@<window start>, of the dataset of the same name): captured = answers stored, skipped = sampled rows '
    'stored without an answer (the reason in ragsql.query.metadata->>''skipped''), judged = answers whose judge '
    'tasks were all done at the last `ragsql watch run`.';

insert into ragsql.schema_migration (name) values ('0191_watch') on conflict do nothing;
