-- A claim on a request before it is sent: one process at a time sends a given request, and none sends one
-- whose reply is stored (ragsql._claim_call, sql/functions/25_judge_queue.sql).

create table if not exists ragsql.judge_call_claim (
    request_hash text primary key check (request_hash ~ '^[0-9a-f]{64}$'),
    owner text not null check (btrim(owner) <> ''),
    lease_until timestamptz not null,
    claimed_at timestamptz not null default clock_timestamp()
);
comment on table ragsql.judge_call_claim is
    'Requests being sent right now: the process (owner) that claimed a request hash sends it, until its lease '
    'runs out; others wait for its reply in ragsql.judge_call. The row goes when the call is stored.';

create index if not exists judge_call_claim_owner on ragsql.judge_call_claim (owner);

insert into ragsql.schema_migration (name) values ('0070_call_claim') on conflict do nothing;
