-- A watch's per-window call budget and its retention (issue 30). budget: the most judge calls stored for one
-- window's run (ragsql.judge_call.for_run_id); rows beyond it are kept as skipped with the reason, never dropped.
-- keep: windows that started longer ago than this are deleted by `ragsql watch run` (their dataset and run).

alter table ragsql.watch
    add column if not exists budget bigint check (budget > 0),
    add column if not exists keep interval check (keep > '0 seconds');
comment on column ragsql.watch.budget is
    'The most judge calls stored for one window''s run (null: no limit); the window''s rows left unjudged when it '
    'is spent are kept, with the reason in ragsql.query.metadata->>''skipped''.';
comment on column ragsql.watch.keep is
    'How long a window is kept (null: forever): `ragsql watch run` deletes the dataset and run of every window that '
    'started longer ago than this.';

-- a budgeted window counts its run's stored calls before each call it sends: by index, not a scan of the cache
create index if not exists judge_call_for_run_id on ragsql.judge_call (for_run_id) where for_run_id is not null;

insert into ragsql.schema_migration (name) values ('0195_watch_budget_keep') on conflict do nothing;
