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
    'Statement trigger: deleting runs or queries deletes their ragsql.run_result rows (on delete cascade).';

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
