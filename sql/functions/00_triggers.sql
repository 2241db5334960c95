-- Trigger functions. Idempotent, so a fix reaches every database on its next install; the migrations
-- that attach them (0040) keep only `create trigger`. plpgsql bodies are checked against tables when
-- they run, not when created, so install.sql applies this file before the migrations.

create or replace function ragsql._bm25_stale()
returns trigger
language plpgsql
as $$
begin
    update ragsql.corpus_version as cv set bm25_fresh = false
    where cv.bm25_fresh and cv.id in (select distinct ch.version_id from changed as ch);
    return null;
end
$$;
comment on function ragsql._bm25_stale() is
    'Statement trigger: clears bm25_fresh of the versions whose chunks or postings the statement changed.';

-- security definer: dropping the partition takes its owner, and a ragsql_writer may delete a version
create or replace function ragsql._bm25_drop_partition()
returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    execute format('drop table if exists ragsql.%I', 'bm25_list_v' || old.id);
    -- the version's postings partition, emptied by the cascade from its chunks (migration 0150)
    execute format('drop table if exists ragsql.%I', 'chunk_term_v' || old.id);
    return null;
end
$$;
comment on function ragsql._bm25_drop_partition() is
    'Row trigger: drops the chunk-list and postings partitions (ragsql.bm25_list_v<id>, ragsql.chunk_term_v<id>) '
    'of a deleted corpus version.';

-- ragsql.run_result's references to its run and query, kept by statement triggers (migration 0120): a foreign
-- key checks each inserted row with a query of its own, two thirds of the time of a 1M-row import, where these
-- check the distinct keys of a statement's rows in one pass. They do what the two foreign keys did: a result
-- must name a run and a query of one dataset, whose rows are locked (for key share) until commit so that no
-- other transaction deletes them first; deleting a run or a query deletes its results; a run or a query with
-- results keeps its (id, dataset_id); and run or query is truncated only with run_result. The errors keep the
-- foreign keys' SQLSTATE (23503), names and details.
-- The error a foreign key raises, with its SQLSTATE (23503), constraint, table and detail: the statement triggers
-- below keep run_result's references and must fail as the foreign keys they replace would.
create or replace function ragsql._fk_violation(tab text, constraint_name text, detail text, referencing text default null)
returns void
language plpgsql
as $$
begin
    raise exception '% on table "%" violates foreign key constraint "%"%',
        case when referencing is null then 'insert or update' else 'update or delete' end, tab, constraint_name,
        case when referencing is null then '' else format(' on table "%s"', referencing) end
        using errcode = 'foreign_key_violation', schema = 'ragsql', table = tab, constraint = constraint_name,
              detail = detail;
end
$$;
comment on function ragsql._fk_violation(text, text, text, text) is
    'Raises SQLSTATE 23503 as PostgreSQL words a foreign key violation: on insert or update into tab, or (with '
    'referencing) on update or delete of a key of tab still referenced from that table.';

-- run_result's reference to its query, checked for a statement's rows by ragsql._run_result_check and for a run's
-- own table of results by ragsql._run_result_index
create or replace function ragsql._run_result_queries(datasets bigint[], queries bigint[])
returns void
language plpgsql
as $$
declare
    missing record;
begin
    perform from ragsql.query as q
    where (q.dataset_id, q.id) in (select * from unnest(datasets, queries))
    for key share of q;
    select k.dataset_id, k.query_id into missing
    from unnest(datasets, queries) as k(dataset_id, query_id)
    where not exists (select from ragsql.query as q where q.dataset_id = k.dataset_id and q.id = k.query_id)
    limit 1;
    if found then
        perform ragsql._fk_violation('run_result', 'run_result_dataset_id_query_id_fkey',
                                     format('Key (dataset_id, query_id)=(%s, %s) is not present in table "query".',
                                            missing.dataset_id, missing.query_id));
    end if;
end
$$;
comment on function ragsql._run_result_queries(bigint[], bigint[]) is
    'Every (dataset, query) pair names an existing query of that dataset, locked for key share until commit, as '
    'run_result''s foreign key to query would; else SQLSTATE 23503.';

create or replace function ragsql._run_result_check()
returns trigger
language plpgsql
as $$
declare
    runs bigint[];
    datasets bigint[];
    queries bigint[];
    missing record;
begin
    -- one pass over the statement's rows for the (run, dataset, query) keys they name, few however many rows
    select array_agg(k.run_id), array_agg(k.dataset_id), array_agg(k.query_id)
    into runs, datasets, queries
    from (select distinct run_id, dataset_id, query_id from added) as k;
    perform from ragsql.run as r
    where (r.id, r.dataset_id) in (select * from unnest(runs, datasets))
    for key share of r;
    select k.run_id, k.dataset_id into missing
    from unnest(runs, datasets) as k(run_id, dataset_id)
    where not exists (select from ragsql.run as r where r.id = k.run_id and r.dataset_id = k.dataset_id)
    limit 1;
    if found then
        perform ragsql._fk_violation('run_result', 'run_result_run_id_dataset_id_fkey',
                                     format('Key (run_id, dataset_id)=(%s, %s) is not present in table "run".',
                                            missing.run_id, missing.dataset_id));
    end if;
    perform ragsql._run_result_queries(datasets, queries);
    return null;
end
$$;
comment on function ragsql._run_result_check() is
    'Statement trigger: every inserted or updated ragsql.run_result row names an existing run and query of its '
    'dataset (locked for key share until commit), as a foreign key would; else SQLSTATE 23503.';

create or replace function ragsql._run_result_cascade()
returns trigger
language plpgsql
as $$
begin
    if tg_table_name = 'run' then
        -- a run imported into a partition of its own takes it along; the others' rows are in the default partition
        perform ragsql._run_result_drop(array(select g.id from gone as g));
        delete from ragsql.run_result as r using gone as g where r.run_id = g.id and r.dataset_id = g.dataset_id;
    else
        -- a query's results belong to runs of its dataset: reach them through the indexes that lead with run_id
        delete from ragsql.run_result as r using gone as g
        where r.query_id = g.id and r.dataset_id = g.dataset_id
          and r.run_id = any (array(select ru.id from ragsql.run as ru
                                    where ru.dataset_id in (select distinct dataset_id from gone)));
    end if;
    return null;
end
$$;
comment on function ragsql._run_result_cascade() is
    'Statement trigger: deleting runs or queries deletes their ragsql.run_result rows (on delete cascade); a '
    'deleted run''s partition of its own is dropped.';

create or replace function ragsql._run_result_keep_key()
returns trigger
language plpgsql
as $$
begin
    if tg_table_name = 'run' then
        if exists (select from ragsql.run_result as r where r.run_id = old.id and r.dataset_id = old.dataset_id) then
            perform ragsql._fk_violation('run', 'run_result_run_id_dataset_id_fkey',
                format('Key (id, dataset_id)=(%s, %s) is still referenced from table "run_result".', old.id,
                       old.dataset_id), 'run_result');
        end if;
    elsif exists (select from ragsql.run_result as r
                  where r.query_id = old.id and r.dataset_id = old.dataset_id
                    and r.run_id = any (array(select ru.id from ragsql.run as ru
                                              where ru.dataset_id = old.dataset_id))) then
        perform ragsql._fk_violation('query', 'run_result_dataset_id_query_id_fkey',
            format('Key (dataset_id, id)=(%s, %s) is still referenced from table "run_result".', old.dataset_id,
                   old.id), 'run_result');
    end if;
    return null;
end
$$;
comment on function ragsql._run_result_keep_key() is
    'Row trigger: a run or query whose (id, dataset_id) changes must have no ragsql.run_result rows (on update no '
    'action).';

create or replace function ragsql._run_result_truncated()
returns trigger
language plpgsql
as $$
begin
    if exists (select from ragsql.run_result) then
        raise exception 'cannot truncate a table referenced in a foreign key constraint'
            using errcode = 'feature_not_supported',
                  detail = format('Table "run_result" references "%s".', tg_table_name),
                  hint = 'Truncate table "ragsql.run_result" in the same command.';
    end if;
    return null;
end
$$;
comment on function ragsql._run_result_truncated() is
    'Statement trigger: ragsql.run or ragsql.query is truncated only together with ragsql.run_result.';

-- The run a run's own table of results belongs to, checked and locked as ragsql._run_result_check does for rows
-- inserted into run_result: both ragsql._run_result_bare and ragsql._run_result_index need it.
create or replace function ragsql._run_result_run(run_id bigint)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    ds bigint;
begin
    select r.dataset_id into ds from ragsql.run as r where r.id = _run_result_run.run_id for key share;
    if not found then
        perform ragsql._fk_violation('run_result', 'run_result_run_id_dataset_id_fkey',
                                     format('Key (run_id)=(%s) is not present in table "run".', run_id));
    end if;
    return ds;
end
$$;
comment on function ragsql._run_result_run(bigint) is
    'The dataset of a run, locked for key share until commit; SQLSTATE 23503 as a foreign key when there is no such '
    'run.';

-- A table loaded before it becomes a partition: a run imported whole (`ragsql import trec`, issue 15; run_result
-- is partitioned by list of run_id, migration 0160) and a corpus version's first postings (chunk_term, by
-- version_id, migration 0150) are copied into a table of their own with no index, then indexed once (a fraction
-- of what keeping the btrees up to date row by row costs) and attached. The table belongs to the schema's owner,
-- as partitions must: the security definer functions of each (_run_result_bare/_index/_attach, _postings_table,
-- _attach_postings) check who asks and call these three, which are not security definer (called by anyone else
-- they run with the caller's rights, and a ragsql_writer may not change the schema).
create or replace function ragsql._partition_bare(parent regclass, part text, key bigint, privileges text)
returns regclass
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    key_column text;
begin
    if not has_table_privilege(session_user, parent, 'insert') then
        raise exception 'permission denied for table %', (select c.relname from pg_class as c where c.oid = parent)
            using errcode = 'insufficient_privilege';
    end if;
    select a.attname into key_column
    from pg_partitioned_table as p join pg_attribute as a on a.attrelid = p.partrelid and a.attnum = p.partattrs[0]
    where p.partrelid = parent;
    if not found then
        raise exception '% is not partitioned on this database (a Citus coordinator)', parent
            using errcode = 'feature_not_supported', hint = format('insert into %s instead', parent);
    end if;
    execute format('create table ragsql.%I (like %s including defaults including constraints)', part, parent);
    -- proves the partition's bound, so attaching it scans nothing for that; dropped once attached
    execute format('alter table ragsql.%I add constraint %I check (%I = %s)', part, part || '_bound', key_column,
                   key);
    -- the loading login fills the table (a ragsql_writer, or any role that may insert into the parent); its own
    -- grant is revoked when the table is indexed, after which it is reached through the parent
    if session_user <> current_user then
        execute format('grant %s on ragsql.%I to %I', privileges, part, session_user);
    end if;
    if exists (select from pg_roles where rolname = 'ragsql_writer') then
        execute format('grant %s on ragsql.%I to ragsql_writer', privileges, part);
    end if;
    return format('ragsql.%I', part)::regclass;
end
$$;
comment on function ragsql._partition_bare(regclass, text, bigint, text) is
    'A new table ragsql.PART like the partitioned PARENT (its columns, defaults and checks), with no index and a '
    'check that its partition key is KEY, granted PRIVILEGES to the loading login and ragsql_writer; SQLSTATE 42501 '
    'when the session user may not insert into PARENT, 0A000 when PARENT is not partitioned. Called by security '
    'definer functions only.';

create or replace function ragsql._partition_index(parent regclass, part text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    ddl text;
begin
    -- the parent's keys, unique and foreign (each checked in one pass), then its other indexes, built on the
    -- table as the attach would build them: the attach adopts them all
    for ddl in
        select format('alter table ragsql.%I add %s', part, pg_get_constraintdef(c.oid))
        from pg_constraint as c
        where c.conrelid = parent and c.contype in ('p', 'u', 'f')
        union all
        select format('create %sindex on ragsql.%I %s', case when i.indisunique then 'unique ' end, part,
                      substring(pg_get_indexdef(i.indexrelid) from ' USING .*$'))
        from pg_index as i
        where i.indrelid = parent and not exists (select from pg_constraint as c where c.conindid = i.indexrelid
                                                  and c.conrelid = parent)
    loop
        execute ddl;
    end loop;
    if session_user <> current_user then
        execute format('revoke all on ragsql.%I from %I', part, session_user);
    end if;
end
$$;
comment on function ragsql._partition_index(regclass, text) is
    'Builds on ragsql.PART, loaded by ragsql._partition_bare, every key, foreign key and index of its parent '
    '(SQLSTATE 23505, 23503 as they would fail) and revokes the loading login''s grant. Called by security '
    'definer functions only.';

create or replace function ragsql._partition_attach(parent regclass, part text, key bigint, what text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform ragsql._ddl_waiting(
        format('alter table %s attach partition ragsql.%I for values in (%s)', parent, part, key),
        format('%s were not attached to %s', what, parent));
    execute format('alter table ragsql.%I drop constraint %I', part, part || '_bound');
end
$$;
comment on function ragsql._partition_attach(regclass, text, bigint, text) is
    'Attaches ragsql.PART, indexed by ragsql._partition_index, as the partition of PARENT for KEY, never queueing '
    'readers of other partitions while it waits for the lock (ragsql._ddl_waiting; its error names WHAT), and '
    'drops the check _partition_bare proved the bound with. Called by security definer functions only.';

-- the three steps of a run's table of results (ragsql/db/results.py): security definer, so that a ragsql_writer
-- may import and delete runs (the grants in 999_grants.sql give writers no DDL)
create or replace function ragsql._run_result_bare(run_id bigint)
returns regclass
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    part text := 'run_result_r' || run_id;
    rel regclass;
begin
    -- run_result itself is not read here: an import locks it first when it attaches, so that two imports at once
    -- queue there and cannot deadlock (results of the run in the default partition make the attach fail)
    if to_regclass(format('ragsql.%I', part)) is not null then
        raise exception 'run % already has a table of results', run_id
            using errcode = 'duplicate_table', hint = 'import a run once, into a run of its own';
    end if;
    rel := ragsql._partition_bare('ragsql.run_result', part, run_id, 'select, insert, update, delete');
    -- the run's dataset is a check too: with the bound it holds the run's key for every row
    execute format('alter table %s add check (dataset_id = %s)', rel, ragsql._run_result_run(run_id));
    execute format('comment on table %s is %L', rel,
                   format('The results of run %s: its partition of ragsql.run_result (ragsql._run_result_bare).',
                          run_id));
    return rel;
end
$$;
comment on function ragsql._run_result_bare(bigint) is
    'A new table ragsql.run_result_r<run id>, with no index, for the results of a run that has none yet, to be '
    'filled (COPY) in this transaction and then attached by ragsql._run_result_attach (one server only).';

-- DDL on ragsql.run_result while other sessions read it (issue 26): attaching a run's partition takes ACCESS
-- EXCLUSIVE on the default partition, dropping one takes it on run_result itself. A statement that waits for such
-- a lock queues every later reader of the table behind it, so a long report would hold up every `metrics` of
-- other runs for as long as the import waits. Each attempt waits at most lock_timeout (100 ms) and gives the lock
-- up; between attempts readers pass, and the statement is tried again, with growing pauses, until
-- ragsql.lock_wait (default 5 minutes) has passed.
create or replace function ragsql._ddl_waiting(statement text, what text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
set lock_timeout = '100ms'
as $$
declare
    wait interval := coalesce(nullif(current_setting('ragsql.lock_wait', true), '')::interval, interval '5 minutes');
    deadline timestamptz := clock_timestamp() + wait;
    pause float8 := 0.02;
begin
    loop
        begin
            execute statement;
            return;
        exception when lock_not_available then
            if clock_timestamp() >= deadline then
                raise exception '%: another session held a lock it needs for % (ragsql.lock_wait)', what, wait
                    using errcode = 'lock_not_available',
                          hint = 'a long transaction reads the table (pg_stat_activity); nothing was changed, '
                                 'try again when it ends';
            end if;
        end;
        perform pg_sleep(greatest(0, least(pause, extract(epoch from deadline - clock_timestamp()))));
        pause := least(pause * 2, 1.0);
    end loop;
end
$$;
comment on function ragsql._ddl_waiting(text, text) is
    'Runs one DDL statement (on a partitioned table: run_result, chunk_term) without queueing other sessions '
    'behind it: '
    'each attempt waits at most 100 ms for its locks, retried with growing pauses until ragsql.lock_wait (an '
    'interval, default 5 minutes) has passed; then SQLSTATE 55P03 naming WHAT.';

create or replace function ragsql._run_result_index(run_id bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set maintenance_work_mem = '256MB'
as $$
declare
    part text := 'run_result_r' || run_id;
    queries bigint[];
begin
    if to_regclass(format('ragsql.%I', part)) is null
       or exists (select from pg_inherits as i where i.inhrelid = format('ragsql.%I', part)::regclass) then
        raise exception 'run % has no table of results to attach (ragsql._run_result_bare makes one)', run_id
            using errcode = 'undefined_table';
    end if;
    -- the keys the rows name, checked and locked as ragsql._run_result_check does: the run (its id and dataset
    -- are the table's checks) and, in one pass over the rows, their queries
    execute format('select array(select distinct x.query_id from ragsql.%I as x)', part) into queries;
    perform ragsql._run_result_queries(array_fill(ragsql._run_result_run(run_id), array[cardinality(queries)]),
                                       queries);
    -- the parent's two indexes, built once; the attach then adopts them, and the checks spare it a scan
    perform ragsql._partition_index('ragsql.run_result', part);
    execute format('analyze ragsql.%I', part);
end
$$;
comment on function ragsql._run_result_index(bigint) is
    'Checks the run and query each row of ragsql.run_result_r<run id> names (SQLSTATE 23503 as a foreign key, the '
    'keys locked until commit), builds the table''s primary key and unique index (a docno twice in a query is '
    'SQLSTATE 23505) and analyzes it: all of ragsql._run_result_attach but the attach, which locks run_result.';

create or replace function ragsql._run_result_attach(run_id bigint)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    part text := 'run_result_r' || run_id;
begin
    -- indexed already when the import had ragsql._run_result_index do it before deleting the run it replaces
    -- (that run's partition is dropped, and run_result locked, only after the long work); the table is new in
    -- this transaction, so no other session has added rows since
    if not exists (select from pg_index as i where i.indrelid = to_regclass(format('ragsql.%I', part))
                   and i.indisprimary) then
        perform ragsql._run_result_index(run_id);
    end if;
    -- last, as the import's last step: from here until commit the default partition is locked (ACCESS EXCLUSIVE),
    -- and the attach reads it whole under that lock to prove it holds no row of the run (~0.07 s a million rows)
    perform ragsql._partition_attach('ragsql.run_result', part, run_id, format('the results of run %s', run_id));
end
$$;
comment on function ragsql._run_result_attach(bigint) is
    'Checks, indexes and analyzes ragsql.run_result_r<run id> (ragsql._run_result_index, unless done) and attaches '
    'it as the run''s partition of ragsql.run_result, never queueing readers of other runs while it waits for the '
    'lock (ragsql._ddl_waiting).';

create or replace function ragsql._run_result_drop(run_ids bigint[])
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    gone bigint;
begin
    -- only the partitions of runs that are gone (a run deleted in this transaction is no longer visible here)
    for gone in
        select k.id from unnest(run_ids) as k(id)
        where not exists (select from ragsql.run as r where r.id = k.id)
          and to_regclass(format('ragsql.%I', 'run_result_r' || k.id)) is not null
    loop
        -- ACCESS EXCLUSIVE on run_result itself: waited for without queueing its readers
        perform ragsql._ddl_waiting(format('drop table ragsql.%I', 'run_result_r' || gone),
                                    format('the results of run %s were not deleted from ragsql.run_result', gone));
    end loop;
end
$$;
comment on function ragsql._run_result_drop(bigint[]) is
    'Drops the partitions of ragsql.run_result (run_result_r<id>) of these runs when they are deleted, never '
    'queueing readers of other runs while it waits for the lock (ragsql._ddl_waiting).';
