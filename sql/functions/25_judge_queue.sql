-- The judge call cache and the judge work queue (tables in sql/migrations/0020_judge.sql).

-- ---------------------------------------------------------------------------------------------------
-- Judge call cache

create or replace function ragsql.cached_response(request_hash text)
returns table (call_id bigint, response jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select c.id, c.response
    from ragsql.judge_call as c
    where c.request_hash = cached_response.request_hash and c.status = 'ok';
end
$$;
comment on function ragsql.cached_response(text) is
    'The successful call for a request hash and its validated reply, or no row: ask before calling the judge.';

create or replace function ragsql.cached_responses(request_hashes text[])
returns table (request_hash text, call_id bigint, response jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select c.request_hash, c.id, c.response
    from ragsql.judge_call as c
    where c.request_hash = any (cached_responses.request_hashes) and c.status = 'ok';
end
$$;
comment on function ragsql.cached_responses(text[]) is
    'ragsql.cached_response for many request hashes at once (e.g. a dry run counting what the cache holds).';

-- ---------------------------------------------------------------------------------------------------
-- Claims on requests in flight (table in sql/migrations/0070_call_claim.sql)

create or replace function ragsql._claim_call(
    request_hash text, owner text, lease interval default '1 minute', since timestamptz default null,
    take_from text default null)
returns table (state text, call_id bigint, response jsonb, holder text, error text)
language plpgsql volatile
as $$
#variable_conflict use_column
declare
    now_ts timestamptz := clock_timestamp();
    got boolean;
    held_by text;
begin
    if owner is null or btrim(owner) = '' then
        raise exception 'an owner is required' using errcode = 'invalid_parameter_value';
    end if;
    return query
    select 'cached'::text, c.id, c.response, null::text, null::text
    from ragsql.judge_call as c
    where c.request_hash = _claim_call.request_hash and c.status = 'ok';
    if found then
        return;
    end if;
    insert into ragsql.judge_call_claim as k (request_hash, owner, lease_until)
    values (_claim_call.request_hash, _claim_call.owner, now_ts + _claim_call.lease)
    on conflict (request_hash) do update
    set owner = excluded.owner, lease_until = excluded.lease_until, claimed_at = now_ts
    where k.lease_until < now_ts or k.owner = excluded.owner or k.owner = _claim_call.take_from
    returning true into got;
    if got is null then
        select k.owner into held_by from ragsql.judge_call_claim as k where k.request_hash = _claim_call.request_hash;
        return query select 'wait'::text, null::bigint, null::jsonb, held_by, null::text;
        return;
    end if;
    -- a new snapshot: a reply stored (and its claim released) since the first look is seen now
    return query
    select 'cached'::text, c.id, c.response, null::text, null::text
    from ragsql.judge_call as c
    where c.request_hash = _claim_call.request_hash and c.status = 'ok';
    if not found and _claim_call.since is not null then
        return query
        select 'failed'::text, c.id, null::jsonb, null::text, c.error
        from ragsql.judge_call as c
        where c.request_hash = _claim_call.request_hash and c.status = 'failed' and c.created_at >= _claim_call.since
        order by c.id desc
        limit 1;
    end if;
    if found then
        delete from ragsql.judge_call_claim as k
        where k.request_hash = _claim_call.request_hash and k.owner = _claim_call.owner;
        return;
    end if;
    return query select 'claimed'::text, null::bigint, null::jsonb, _claim_call.owner, null::text;
end
$$;
comment on function ragsql._claim_call(text, text, interval, timestamptz, text) is
    'Before sending a request: state cached (its stored reply: send nothing), claimed (the caller sends it and '
    'stores the call, which releases the claim), wait (holder is sending it: ask again later, passing since = '
    'when the wait began) or failed (the holder''s call failed since then: error says why). A claim whose lease '
    'ran out, or held by take_from (an owner known to be dead), is taken over.';

create or replace function ragsql._renew_call_claims(owner text, lease interval default '1 minute')
returns bigint
language plpgsql volatile
as $$
declare
    now_ts timestamptz := clock_timestamp();
    renewed bigint;
begin
    -- the time taken once: Citus ships no volatile function (clock_timestamp) to the shards of an update
    update ragsql.judge_call_claim as k
    set lease_until = now_ts + _renew_call_claims.lease
    where k.owner = _renew_call_claims.owner;
    get diagnostics renewed = row_count;
    return renewed;
end
$$;
comment on function ragsql._renew_call_claims(text, interval) is
    'Extends the lease of every request claim the owner holds; returns how many.';

-- PL/pgSQL: Citus cannot plan a parameterized `language sql` body over judge_call_claim (a reference table), so
-- as SQL this failed there and a stopped judge left its claims until their leases ran out
create or replace function ragsql._release_call_claims(owner text)
returns bigint
language plpgsql volatile
as $$
declare
    released bigint;
begin
    delete from ragsql.judge_call_claim as k where k.owner = _release_call_claims.owner;
    get diagnostics released = row_count;
    return released;
end
$$;
comment on function ragsql._release_call_claims(text) is
    'Drops every request claim of an owner (a process that stops, or one found dead): others may send them.';

-- PL/pgSQL, not SQL: Citus cannot plan a parameterized `language sql` body over run_calls (distributed by run_id).
-- One statement per reservation: the row's lock makes concurrent reservations of every process and machine queue,
-- and the update re-reads the row it waited for, so no two pass the budget together.
create or replace function ragsql._reserve_calls(run_id bigint, places bigint, budget bigint)
returns boolean
language plpgsql volatile
as $$
declare
    got boolean;
    bought bigint;
begin
    if places < 1 then
        raise exception 'places must be at least 1, got %', places using errcode = 'invalid_parameter_value';
    end if;
    -- a run judged before its first budgeted call (or before this table existed) starts at the calls it bought;
    -- counted first, not in the insert: Citus allows no subquery in an INSERT
    if not exists (select from ragsql.run_calls as c where c.run_id = _reserve_calls.run_id) then
        select count(*) into bought from ragsql.judge_call as j where j.for_run_id = _reserve_calls.run_id;
        insert into ragsql.run_calls (run_id, reserved)
        values (_reserve_calls.run_id, bought)
        on conflict on constraint run_calls_pkey do nothing;  -- not (run_id): the parameter of that name
    end if;
    update ragsql.run_calls as c
    set reserved = c.reserved + _reserve_calls.places
    where c.run_id = _reserve_calls.run_id and c.reserved + _reserve_calls.places <= _reserve_calls.budget
    returning true into got;
    return coalesce(got, false);
end
$$;
comment on function ragsql._reserve_calls(bigint, bigint, bigint) is
    'Before a budgeted call is sent: takes `places` places of the run''s call budget (ragsql.run_calls) if the '
    'places taken stay within `budget`, atomically across processes; false (nothing taken) when they would not.';

create or replace function ragsql._release_calls(run_id bigint, places bigint)
returns void
language plpgsql volatile
as $$
begin
    update ragsql.run_calls as c
    set reserved = greatest(0, c.reserved - _release_calls.places)
    where c.run_id = _release_calls.run_id;
end
$$;
comment on function ragsql._release_calls(bigint, bigint) is
    'Gives back places ragsql._reserve_calls took for calls known not to have been sent (no attempt got a '
    'connection to the endpoint): nothing was bought with them.';

create or replace function ragsql._calls_reserved(run_id bigint)
returns bigint
language plpgsql stable
as $$
declare
    taken bigint;
begin
    -- two statements: on Citus run_calls is distributed and judge_call a reference table
    select c.reserved into taken from ragsql.run_calls as c where c.run_id = _calls_reserved.run_id;
    if taken is null then
        select count(*) into taken from ragsql.judge_call as j where j.for_run_id = _calls_reserved.run_id;
    end if;
    return taken;
end
$$;
comment on function ragsql._calls_reserved(bigint) is
    'The places of the run''s call budget taken so far (ragsql.run_calls), or before its first budgeted call the '
    'calls stored as bought for it: what a budget compares with.';

-- ---------------------------------------------------------------------------------------------------
-- Judge work queue

-- earlier signatures (before the judge argument); dropping them keeps calls unambiguous
drop function if exists ragsql._enqueue_judge_tasks(bigint, text[], boolean, boolean);
drop function if exists ragsql._finish_judge_task(bigint, text, text);
-- before the run argument (issue 17)
drop function if exists ragsql._renew_judge_lease(bigint, text, interval);
drop function if exists ragsql._finish_judge_task(bigint, text, text, text);

create or replace function ragsql._enqueue_judge_tasks(
    run_id bigint, kinds text[], retry_failed boolean default true, reset_done boolean default false,
    judge text default null)
returns bigint
language plpgsql volatile
as $$
#variable_conflict use_column
declare
    added bigint;
    reset bigint;
begin
    -- counted from the returned rows: on Citus an insert ... on conflict do nothing reports the skipped rows in
    -- row_count too (a re-enqueue of a judged run then said it added every task again)
    with inserted as (
        insert into ragsql.judge_task (run_id, query_id, kind)
        select a.run_id, a.query_id, k.kind
        from ragsql.answer as a
        cross join unnest(_enqueue_judge_tasks.kinds) as k(kind)
        -- an answer without text (a record with no response, ids alone) has nothing to judge: no task, no call
        where a.run_id = _enqueue_judge_tasks.run_id and a.text is not null
        order by a.query_id, k.kind
        on conflict (run_id, query_id, kind) do nothing
        returning 1)
    select count(*) into added from inserted;
    update ragsql.judge_task as t
    set status = 'pending', attempts = 0, worker = null, updated_at = statement_timestamp()
    where t.run_id = _enqueue_judge_tasks.run_id
      and t.kind = any (_enqueue_judge_tasks.kinds)
      and (t.status = 'failed' and _enqueue_judge_tasks.retry_failed
           or t.status = 'done' and (_enqueue_judge_tasks.reset_done
                                     or t.judge is distinct from _enqueue_judge_tasks.judge
                                        and _enqueue_judge_tasks.judge is not null));
    get diagnostics reset = row_count;
    return added + reset;
end
$$;
comment on function ragsql._enqueue_judge_tasks(bigint, text[], boolean, boolean, text) is
    'Adds a pending task per answered query of the run (an answer with a text) and kind (existing tasks are kept), puts failed tasks back '
    'to pending (retry_failed) and, with reset_done or when done by another judge than the given one, done ones '
    'too: judging with another model or prompt set repeats the work, and stored verdicts and cached calls make '
    'the repeat of unchanged requests free. Returns how many tasks were added or reset.';

create or replace function ragsql._unjudged_definitions(run_id bigint, kinds text[], model text)
returns table (query_id bigint, kind text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    aspect_names text[];
    aspect_hashes text[];
    rubric_names text[];
    rubric_hashes text[];
    rubric_references boolean[];
    referenced bigint[];
    aspect_ids bigint[] := '{}';
    rubric_ids bigint[] := '{}';
    i integer;
begin
    -- PL/pgSQL, not SQL: the definitions (and the queries with a reference answer) are read first from their own
    -- tables (reference tables on Citus); each query below then reads only the run's rows, by its key (one shard),
    -- one definition at a time: Citus plans no correlated subquery beside a set-returning function such as unnest
    select array_agg(a.name order by a.name), array_agg(ragsql.text_hash(a.definition) order by a.name)
    into aspect_names, aspect_hashes
    from ragsql.aspect as a
    where 'aspect_critique' = any (_unjudged_definitions.kinds);
    select array_agg(r.name order by r.name), array_agg(ragsql._rubric_hash(r.name) order by r.name),
           array_agg(r.with_reference order by r.name)
    into rubric_names, rubric_hashes, rubric_references
    from ragsql.rubric as r
    where 'rubrics_score' = any (_unjudged_definitions.kinds);
    if true = any (rubric_references) then
        select array_agg(distinct r.query_id) into referenced
        from ragsql.reference_answer as r
        join ragsql.query as q on q.id = r.query_id
        join ragsql.run as ru on ru.dataset_id = q.dataset_id
        where ru.id = _unjudged_definitions.run_id;
    end if;
    -- a loop per verdict table: one query reading both, each behind a guard on the definition's kind, is refused
    -- by Citus (complex joins, tests/citus/test_flows.py)
    for i in 1 .. coalesce(cardinality(aspect_names), 0) loop
        aspect_ids := aspect_ids || array(
            select a.query_id
            from ragsql.answer as a
            where a.run_id = _unjudged_definitions.run_id and a.text is not null
              and not exists (select from ragsql.aspect_verdict as v
                              where v.run_id = a.run_id and v.query_id = a.query_id and v.aspect = aspect_names[i]
                                and v.definition_hash = aspect_hashes[i] and v.model = _unjudged_definitions.model));
    end loop;
    for i in 1 .. coalesce(cardinality(rubric_names), 0) loop
        rubric_ids := rubric_ids || array(
            select a.query_id
            from ragsql.answer as a
            where a.run_id = _unjudged_definitions.run_id and a.text is not null
              -- a rubric with reference skips a query without one (ragsql.orchestrator.tasks.rubrics_score)
              and (not rubric_references[i] or a.query_id = any (coalesce(referenced, '{}')))
              and not exists (select from ragsql.rubric_verdict as v
                              where v.run_id = a.run_id and v.query_id = a.query_id and v.rubric = rubric_names[i]
                                and v.definition_hash = rubric_hashes[i] and v.model = _unjudged_definitions.model));
    end loop;
    return query
    select distinct u.query_id, u.kind
    from (select unnest(aspect_ids) as query_id, 'aspect_critique'::text as kind
          union all
          select unnest(rubric_ids), 'rubrics_score'::text) as u
    order by 1, 2;
end
$$;
comment on function ragsql._unjudged_definitions(bigint, text[], text) is
    'The (query, kind) of a run whose aspect critique or rubric score lacks a verdict by the model on an aspect '
    'or rubric as defined now (added, or redefined, since the run was judged): judged without --again.';

create or replace function ragsql._reopen_unjudged_definitions(run_id bigint, kinds text[], model text)
returns bigint
language plpgsql volatile
as $$
declare
    query_ids bigint[];
    task_kinds text[];
    reopened bigint;
begin
    -- the tasks first, then the update by the run's key and those ids (Citus: no function reading tables in a
    -- distributed update)
    select array_agg(u.query_id), array_agg(u.kind) into query_ids, task_kinds
    from ragsql._unjudged_definitions(_reopen_unjudged_definitions.run_id, _reopen_unjudged_definitions.kinds,
                                      _reopen_unjudged_definitions.model) as u;
    update ragsql.judge_task as t
    set status = 'pending', attempts = 0, worker = null, updated_at = statement_timestamp()
    where t.run_id = _reopen_unjudged_definitions.run_id
      and t.status = 'done'
      and (t.query_id, t.kind) in (select * from unnest(query_ids, task_kinds));
    get diagnostics reopened = row_count;
    return reopened;
end
$$;
comment on function ragsql._reopen_unjudged_definitions(bigint, text[], text) is
    'Puts back to pending the done tasks ragsql._unjudged_definitions names (an aspect or rubric added or redefined '
    'since): they ask only what has no verdict yet. Returns how many.';

create or replace function ragsql._claim_judge_tasks(
    run_id bigint, worker text, n integer default 1, lease interval default '5 minutes',
    max_attempts integer default 3, kinds text[] default null)
returns setof ragsql.judge_task
language plpgsql volatile
as $$
#variable_conflict use_column
declare
    now_ts timestamptz := clock_timestamp();
begin
    if worker is null or btrim(worker) = '' then
        raise exception 'a worker name is required'
            using errcode = 'invalid_parameter_value', hint = 'e.g. host:pid:thread, unique per worker';
    elsif n is null or n < 1 then
        raise exception 'n must be at least 1, got %', n using errcode = 'invalid_parameter_value';
    elsif lease is null or lease <= interval '0' then
        raise exception 'lease must be positive, got %', lease
            using errcode = 'invalid_parameter_value', hint = 'e.g. interval ''5 minutes''';
    elsif max_attempts is null or max_attempts < 1 then
        raise exception 'max_attempts must be at least 1, got %', max_attempts
            using errcode = 'invalid_parameter_value';
    end if;

    -- a task whose lease ran out max_attempts times keeps killing its workers: stop handing it out
    update ragsql.judge_task as t
    set status = 'failed',
        lease_until = null,
        -- what format('lease expired %s times (last worker %s)', ...) wrote, in operators Citus ships to a shard
        last_error = 'lease expired ' || t.attempts::text || ' times (last worker ' || coalesce(t.worker, '') || ')',
        updated_at = now_ts
    where t.run_id = _claim_judge_tasks.run_id and t.id in (
        select e.id
        from ragsql.judge_task as e
        where e.run_id = _claim_judge_tasks.run_id
          and e.status = 'running'
          and e.lease_until < now_ts
          and e.attempts >= _claim_judge_tasks.max_attempts
        for update skip locked
    );

    return query
    update ragsql.judge_task as t
    set status = 'running',
        attempts = t.attempts + 1,
        worker = _claim_judge_tasks.worker,
        lease_until = now_ts + _claim_judge_tasks.lease,
        updated_at = now_ts
    where t.run_id = _claim_judge_tasks.run_id and t.id in (
        select c.id
        from ragsql.judge_task as c
        where c.run_id = _claim_judge_tasks.run_id
          and (_claim_judge_tasks.kinds is null or c.kind = any (_claim_judge_tasks.kinds))
          and (c.status = 'pending'
               or c.status = 'running' and c.lease_until < now_ts
                  and c.attempts < _claim_judge_tasks.max_attempts)
        order by c.id
        limit _claim_judge_tasks.n
        for update skip locked
    )
    returning t.*;
end
$$;
comment on function ragsql._claim_judge_tasks(bigint, text, integer, interval, integer, text[]) is
    'Claims up to n tasks of a run (of the given kinds, default all) for a worker: pending ones and running ones '
    'whose lease expired, with for update skip locked so concurrent workers never get the same task and never '
    'wait for each other. A task whose lease expired max_attempts times is marked failed instead.';

-- The task functions take the run with the task id: the key of ragsql.judge_task is (run_id, id), so the lookup
-- is one index probe on one server and one shard on Citus. Timestamps are taken once into a variable: Citus
-- refuses volatile functions (clock_timestamp) and stable ones over columns (format) in a distributed update.
create or replace function ragsql._renew_judge_lease(
    run_id bigint, task_id bigint, worker text, lease interval default '5 minutes')
returns boolean
language plpgsql volatile
as $$
declare
    now_ts timestamptz := clock_timestamp();
begin
    update ragsql.judge_task as t
    set lease_until = now_ts + _renew_judge_lease.lease, updated_at = now_ts
    where t.run_id = _renew_judge_lease.run_id and t.id = _renew_judge_lease.task_id
      and t.status = 'running' and t.worker = _renew_judge_lease.worker;
    return found;
end
$$;
comment on function ragsql._renew_judge_lease(bigint, bigint, text, interval) is
    'Extends the lease of a task (run, id) the worker still holds; false when it lost the task.';

create or replace function ragsql._finish_judge_task(
    run_id bigint, task_id bigint, worker text, error text default null, judge text default null)
returns boolean
language plpgsql volatile
as $$
declare
    now_ts timestamptz := clock_timestamp();
begin
    update ragsql.judge_task as t
    set status = case when _finish_judge_task.error is null then 'done' else 'failed' end,
        last_error = _finish_judge_task.error,
        judge = _finish_judge_task.judge,
        lease_until = null,
        updated_at = now_ts
    where t.run_id = _finish_judge_task.run_id and t.id = _finish_judge_task.task_id
      and t.status = 'running' and t.worker = _finish_judge_task.worker;
    return found;
end
$$;
comment on function ragsql._finish_judge_task(bigint, bigint, text, text, text) is
    'Marks a task (run, id) the worker holds done, or failed with the error, by the given judge (model and '
    'embedder); call it in the transaction that stores the verdicts, so a killed worker leaves either both or '
    'neither. False when the worker lost the task (its lease expired and another worker claimed it): roll back then.';
