-- Schema, extensions and the migration ledger. Safe to run any number of times.

set local client_min_messages = warning;

-- Two installs at once queue here instead of racing on catalog rows.
do $$
begin
    perform pg_advisory_xact_lock(hashtext('ragsql.install'));
end
$$;

create schema if not exists ragsql;
comment on schema ragsql is 'ragsql: RAG evaluation in PostgreSQL (datasets, runs, judgments, metrics).';

create extension if not exists vector;

create table if not exists ragsql.schema_migration (
    name text primary key,
    applied_at timestamptz not null default now()
);
comment on table ragsql.schema_migration is
    'Migrations applied to this database, by file name; the newest is the schema version.';
