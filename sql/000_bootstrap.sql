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

create table if not exists ragsql.schema_install (
    singleton boolean primary key default true check (singleton),
    version text not null,
    fingerprint text not null check (fingerprint ~ '^[0-9a-f]{64}$'),
    installed_at timestamptz not null default now()
);
comment on table ragsql.schema_install is
    'The install this database holds: ragsql version and fingerprint, the sha256 of every file install.sql '
    'applies. A ragsql whose files differ applies them again (in one transaction, under an advisory lock).';

create or replace procedure ragsql._record_install(version text, fingerprint text)
language sql
as $$
    insert into ragsql.schema_install (version, fingerprint)
    values (_record_install.version, _record_install.fingerprint)
    on conflict (singleton) do update
        set version = excluded.version, fingerprint = excluded.fingerprint, installed_at = now();
$$;
comment on procedure ragsql._record_install(text, text) is
    'Records the version and fingerprint of the install that just ran (the last step of install.sql).';
