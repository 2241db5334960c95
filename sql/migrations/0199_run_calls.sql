-- A run's call budget, exact across processes (issue 30): places are reserved in one row per run before a call is
-- sent (ragsql._reserve_calls), given back when the call is known not to have been sent, and kept otherwise, also
-- when the process that held them dies. No foreign key: ragsql.judge_call.for_run_id has none either, and a run id
-- (an identity) is never reused.

create table if not exists ragsql.run_calls (
    run_id bigint primary key,
    reserved bigint not null check (reserved >= 0)
);
comment on table ragsql.run_calls is
    'Places a run''s call budget has given out: calls bought for the run (ragsql.judge_call.for_run_id) while a '
    'budget was set, plus calls in flight, plus calls of processes that died while sending (counted as bought). '
    'The row starts at the run''s stored calls when its first budgeted call reserves a place.';
comment on column ragsql.run_calls.reserved is
    'Places taken: a call is sent only once ragsql._reserve_calls has raised this without passing the budget.';

comment on column ragsql.watch.budget is
    'The most judge calls bought for one window''s run (null: no limit), by every process together: each call takes '
    'a place in ragsql.run_calls before it is sent. The window''s rows left unjudged when it is spent are kept, with '
    'the reason in ragsql.query.metadata->>''skipped''.';

insert into ragsql.schema_migration (name) values ('0199_run_calls') on conflict do nothing;
