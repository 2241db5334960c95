-- Watches (sql/migrations/0191_watch.sql): which rows of a production log a watch samples, which window a row
-- falls in, and which of the source's rows the next capture reads. ragsql/orchestrator/watch.py stores what a
-- capture reads through the importer's loads (ragsql/db/load.py) and judges the windows' runs.

create or replace function ragsql.watch_sample_point(key text)
returns float8
language sql immutable parallel safe strict
as $$
    -- the first 52 bits of the key's sha256: the same on every server and in every dump (hashtext is not)
    select ('x' || left(encode(sha256(convert_to(watch_sample_point.key, 'UTF8')), 'hex'), 13))::bit(52)::bigint
           / 4503599627370496.0::float8
$$;
comment on function ragsql.watch_sample_point(text) is
    'Where a row''s key falls in [0, 1): the first 52 bits of sha256(key) / 2^52. A watch with sample s keeps the '
    'rows whose point is below s: the same rows on every replay and in every process, and raising s keeps them.';

create or replace function ragsql.watch_window_start(at timestamptz, size interval)
returns timestamptz
language sql immutable parallel safe strict
as $$
    select date_trunc(case when watch_window_start.size = interval '1 day' then 'day' else 'hour' end,
                      watch_window_start.at at time zone 'UTC') at time zone 'UTC'
$$;
comment on function ragsql.watch_window_start(timestamptz, interval) is
    'Start of the window (1 hour or 1 day, in UTC whatever the session''s time zone) a row''s time falls in.';

create or replace function ragsql.watch_contexts(contexts jsonb)
returns text[]
language sql immutable parallel safe strict
as $$
    select case jsonb_typeof(watch_contexts.contexts)
               when 'array' then array(select e.text
                                       from jsonb_array_elements_text(watch_contexts.contexts)
                                            with ordinality as e(text, position)
                                       where e.text is not null
                                       order by e.position)
               when 'null' then null
               when 'string' then array[watch_contexts.contexts #>> '{}']
               else array[watch_contexts.contexts::text]
           end
$$;
comment on function ragsql.watch_contexts(jsonb) is
    'The contexts (or retrieved ids) of a logged row held as JSON: an array''s elements in order (strings as text, '
    'others as JSON text), one string as one item, JSON null as none.';

create or replace function ragsql._watch_xid8(x xid, ref xid8)
returns xid8
language sql immutable parallel safe strict
as $$
    -- a row's xmin is 32 bits; it lies within 2^32 before the snapshot's xmax `ref`, which gives its epoch
    select (ref::text::bigint
            - ((ref::text::bigint - x::text::bigint) % 4294967296 + 4294967296) % 4294967296)::text::xid8
$$;
comment on function ragsql._watch_xid8(xid, xid8) is
    'The 64-bit id of a recent 32-bit transaction id x, given a later 64-bit id ref (the snapshot''s xmax).';

-- PL/pgSQL: it reads the catalog. The column is the watch's, checked when it was added, quoted with %I.
create or replace function ragsql._watch_list(source regclass, col text)
returns text
language plpgsql stable
as $$
declare
    typ oid;
begin
    if col is null then
        return 'null::text[]';
    end if;
    select a.atttypid into typ from pg_attribute as a
    where a.attrelid = source and a.attname = col and not a.attisdropped;
    return case when typ in ('json'::regtype, 'jsonb'::regtype)
                    then format('ragsql.watch_contexts(s.%I::jsonb)', col)
                when (select t.typcategory from pg_type as t where t.oid = typ) = 'A'
                    then format('array_remove(s.%I::text[], null)', col)
                else format('case when s.%1$I is not null then array[s.%1$I::text] end', col) end;
end
$$;
comment on function ragsql._watch_list(regclass, text) is
    'The SQL expression (over the source aliased s) that reads a list column of a watch''s source as text[]: a '
    'json(b) array by ragsql.watch_contexts, an array without its nulls, one text as one item.';

-- PL/pgSQL: the source and its columns are the watch's, checked against the catalog when it was added, and quoted
-- here with %I; no text a user typed becomes SQL. Not security definer: the caller reads the source with its own
-- rights (a watcher needs SELECT on it and nothing more).
create or replace function ragsql._watch_new_rows(watch_id bigint)
returns table (
    key text, row_time timestamptz, window_start timestamptz, question text, answer text, contexts text[],
    reference text, retrieved text[])
language plpgsql stable
as $$
#variable_conflict use_column
declare
    w ragsql.watch;
    source regclass;
    kind "char";
    at text;
    fresh text;
begin
    select * into w from ragsql.watch as x where x.id = _watch_new_rows.watch_id;
    if not found then
        raise exception 'unknown watch id %', watch_id using errcode = 'no_data_found', hint = 'see ragsql.watch';
    end if;
    source := to_regclass(format('%I.%I', w.source_schema, w.source_table));
    if source is null then
        raise exception 'the source %.% of watch % is gone', w.source_schema, w.source_table, w.name
            using errcode = 'undefined_table', hint = 'drop the watch, or create the source again';
    end if;
    select c.relkind into kind from pg_class as c where c.oid = source;
    at := case when (select a.atttypid from pg_attribute as a
                     where a.attrelid = source and a.attname = w.time_column and not a.attisdropped)
                    = 'timestamp'::regtype
               then format('(s.%I at time zone ''UTC'')', w.time_column)  -- a timestamp without zone is UTC
               else format('s.%I::timestamptz', w.time_column) end;
    -- A table: the rows of every transaction that was still running at the last capture or began since, whatever
    -- its commit order (a snapshot's in-progress list holds no subtransaction ids, so visibility in the last
    -- snapshot cannot be trusted for a row written in a savepoint; the xmin bound can). Rows read again are
    -- dropped by the key. A view or foreign table has no xmin: rows whose time is at most `settle` before the last
    -- capture are read again, so a row that commits later than that after its time is never read.
    fresh := case when kind in ('r', 'p', 'm')
                  then '($4::xid8 is null or ragsql._watch_xid8(s.xmin, pg_snapshot_xmax(pg_current_snapshot())) >= $4)'
                  else format('($5::timestamptz is null or %s >= $5 - $6)', at) end;
    return query execute format(
        $q$
        select s.%1$I::text, %2$s, ragsql.watch_window_start(%2$s, $1), s.%3$I::text, s.%4$I::text, %5$s, %6$s,
               %9$s
        from %7$s as s
        where s.%1$I is not null
          and btrim(s.%1$I::text) <> ''
          and ragsql.watch_sample_point(s.%1$I::text) < $2
          and ($3::timestamptz is null or %2$s >= $3)
          and %8$s
          and %2$s is not null
          and not exists (select from ragsql.watch_window as ww
                          join ragsql.run as r on r.id = ww.run_id
                          join ragsql.query as q on q.dataset_id = r.dataset_id
                          where ww.watch_id = $7 and ww.window_start = ragsql.watch_window_start(%2$s, $1)
                            and q.qid = s.%1$I::text)
        $q$,
        w.key_column, at, w.question_column, w.answer_column, ragsql._watch_list(source, w.contexts_column),
        case when w.reference_column is null then 'null::text' else format('s.%I::text', w.reference_column) end,
        source, fresh, ragsql._watch_list(source, w.retrieved_column))
    using w.window_size, w.sample, w.starts_at, w.captured_xmin, w.captured_until, w.settle, w.id;
end
$$;
comment on function ragsql._watch_new_rows(bigint) is
    'The sampled rows of a watch''s source that its next capture stores (rows with a key and a time that its '
    'window does not hold yet): key, time, window start, question, answer, contexts, reference and retrieved ids, '
    'read with the caller''s rights.';

create or replace function ragsql.watch_uncaptured(watch text)
returns table (uncaptured bigint, oldest timestamptz, reason text)
language plpgsql stable
as $$
#variable_conflict use_column
declare
    wid bigint := (select w.id from ragsql.watch as w where w.name = watch_uncaptured.watch);
begin
    if wid is null then
        raise exception 'unknown watch "%"', watch using errcode = 'no_data_found', hint = 'see ragsql.watch';
    end if;
    return query select count(*), min(n.row_time), null::text from ragsql._watch_new_rows(wid) as n;
exception
    -- a dashboard reads every watch: one whose source is gone or unreadable says why instead of failing the view
    when undefined_table or undefined_column or insufficient_privilege or invalid_schema_name then
        return query select null::bigint, null::timestamptz, sqlerrm;
end
$$;
comment on function ragsql.watch_uncaptured(text) is
    'How many sampled rows of the watch''s source the next capture would store, and the time of the oldest; '
    'null with the reason when the source cannot be read (gone, a column dropped, no SELECT on it).';

-- PL/pgSQL, not SQL: Citus cannot plan one query that joins the watch's windows (reference tables) with their
-- runs' answers and tasks (distributed) correlated to a watch; here each window's run is its own single-shard query.
create or replace function ragsql._watch_unjudged(watch_id bigint)
returns table (unjudged bigint, oldest timestamptz)
language plpgsql stable
as $$
#variable_conflict use_column
declare
    win record;
    n bigint;
    first timestamptz;
begin
    unjudged := 0;
    -- only windows judged short of what they captured: the others are done
    for win in
        select ww.run_id from ragsql.watch_window as ww
        where ww.watch_id = _watch_unjudged.watch_id and ww.judged < ww.captured
        order by ww.window_start
    loop
        select count(*), min((q.metadata ->> 'time')::timestamptz) into n, first
        from ragsql.answer as a
        join ragsql.query as q on q.id = a.query_id
        where a.run_id = win.run_id
          -- the answer's own tasks only (by run and query), not every run's tasks grouped first
          and not (exists (select from ragsql.judge_task as t where t.run_id = a.run_id and t.query_id = a.query_id)
                   and not exists (select from ragsql.judge_task as t
                                   where t.run_id = a.run_id and t.query_id = a.query_id and t.status <> 'done'));
        unjudged := unjudged + n;
        oldest := least(oldest, first);
    end loop;
    return next;
end
$$;
comment on function ragsql._watch_unjudged(bigint) is
    'Captured rows of the watch whose judge tasks are not all done, and the time of the oldest (ragsql.watch_lag).';

-- PL/pgSQL: a trigger function. `ragsql watch add --trigger` attaches it to a source table (a statement trigger
-- after insert, its argument the watch's name); it only wakes `watch run --follow`: what is captured is still read
-- by xmin, so a lost or extra notification changes no row captured.
create or replace function ragsql.watch_notify()
returns trigger
language plpgsql
as $$
begin
    perform pg_notify('ragsql_watch', tg_argv[0]);
    return null;
end
$$;
comment on function ragsql.watch_notify() is
    'Statement trigger (after insert on a watch''s source, from `ragsql watch add --trigger`): notifies channel '
    'ragsql_watch with the watch''s name, which wakes `ragsql watch run --follow`.';
