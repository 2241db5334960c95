-- Judge consistency: the same answers judged N times (a different seed each), and how much the values move.
-- Repeat k >= 2 of run R is the run "R#k": a copy of R's answers and contexts in the same dataset, with
-- config.repeat_of = R and config.repeat = k, judged like any run (`ragsql judge --run R --repeat N`).
-- Idempotent: create or replace only.

create or replace function ragsql._answers_digest(run_id bigint)
returns text
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return (
    select md5(coalesce(string_agg(a.query_id::text || E'\x1f' || a.text || E'\x1f' || coalesce((
        select string_agg(c.position::text || E'\x1e' || coalesce(c.docno, '') || E'\x1e' || coalesce(c.text, ''),
                          E'\x1d' order by c.position)
        from ragsql.answer_context as c where c.run_id = a.run_id and c.query_id = a.query_id), ''),
        E'\x1c' order by a.query_id), ''))
    from ragsql.answer as a
    where a.run_id = _answers_digest.run_id
    );
end
$$;
comment on function ragsql._answers_digest(bigint) is
    'A digest of a run''s answers and their contexts: equal digests, the same things to judge.';

create or replace function ragsql.repeat_run(run text, repeat integer)
returns text
language plpgsql volatile
as $$
declare
    source ragsql.run%rowtype;
    existing ragsql.run%rowtype;
    target_name text;
    target_id bigint;
begin
    if repeat_run.repeat is null or repeat_run.repeat < 2 then
        raise exception 'repeat must be 2 or more (repeat 1 is the run itself), got %', repeat_run.repeat
            using errcode = 'invalid_parameter_value';
    end if;
    select * into source from ragsql.run as r where r.id = ragsql._run_id(repeat_run.run);
    if source.config ? 'repeat_of' then
        raise exception 'run "%" is itself a repeat of "%"; repeat "%" instead', source.name,
            source.config ->> 'repeat_of', source.config ->> 'repeat_of' using errcode = 'invalid_parameter_value';
    end if;
    target_name := source.name || '#' || repeat_run.repeat;
    select * into existing from ragsql.run as r where r.name = target_name;
    if found then
        if existing.config ->> 'repeat_of' is distinct from source.name then
            raise exception 'run "%" exists and is not a repeat of "%"', target_name, source.name
                using errcode = 'unique_violation', hint = 'rename or delete it: ragsql delete run ' || target_name;
        end if;
        if ragsql._answers_digest(existing.id) = ragsql._answers_digest(source.id) then
            return target_name;  -- the same answers: its verdicts stand
        end if;
        delete from ragsql.answer as a where a.run_id = existing.id;  -- their tasks and verdicts go with them
        target_id := existing.id;
    else
        insert into ragsql.run (name, dataset_id, config, notes)
        values (target_name, source.dataset_id,
                source.config || jsonb_build_object('repeat_of', source.name, 'repeat', repeat_run.repeat),
                format('judge repeat %s of run %s', repeat_run.repeat, source.name))
        returning id into target_id;
    end if;
    insert into ragsql.answer (run_id, dataset_id, query_id, text, metadata)
    select target_id, a.dataset_id, a.query_id, a.text, a.metadata
    from ragsql.answer as a where a.run_id = source.id;
    insert into ragsql.answer_context (run_id, query_id, position, docno, text)
    select target_id, c.query_id, c.position, c.docno, c.text
    from ragsql.answer_context as c where c.run_id = source.id;
    return target_name;
end
$$;
comment on function ragsql.repeat_run(text, integer) is
    'Repeat k (>= 2) of a run for judge consistency: the run "<run>#k" holding a copy of the run''s answers and '
    'contexts (config.repeat_of, config.repeat), created when missing and refreshed when the answers changed. '
    'Returns its name.';

create or replace function ragsql._judge_repeats(run_ text)
returns table (repeat integer, run text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select 1, r.name from ragsql.run as r where r.id = ragsql._run_id(_judge_repeats.run_)
    union all
    select (r.config ->> 'repeat')::integer, r.name
    from ragsql.run as r
    where r.config ->> 'repeat_of' = _judge_repeats.run_ and r.config ? 'repeat'
    order by 1;
end
$$;

comment on function ragsql._judge_repeats(text) is
    'ragsql.judge_repeats in PL/pgSQL (Citus plans its queries; there an argument may not share an output column''s name).';

create or replace function ragsql.judge_repeats(run text)
returns table (repeat integer, run text)
language sql stable parallel safe
as $$
    select * from ragsql._judge_repeats(judge_repeats.run)
$$;
comment on function ragsql.judge_repeats(text) is
    'A run and its judge repeats ("<run>#k", k >= 2), numbered from 1.';

create or replace function ragsql._repeat_values(run text, metrics text[], judge text)
returns table (repeat integer, qid text, metric text, value float8, judge_model text)
language plpgsql stable parallel safe
as $$
declare
    r record;
begin
    for r in select * from ragsql.judge_repeats(_repeat_values.run) loop
        return query
        select r.repeat, e.qid, e.metric, e.value, e.judge_model
        from ragsql.evaluate_generation(r.run, _repeat_values.metrics, _repeat_values.judge) as e;
    end loop;
end
$$;

create or replace function ragsql.judge_flips(run text, metric text, judge text default null)
returns table (qid text, "values" float8[], range float8, repeats integer)
language sql stable parallel safe
as $$
    select v.qid, array_agg(v.value order by v.repeat), max(v.value) - min(v.value), count(v.value)::integer
    from ragsql._repeat_values(judge_flips.run, array[judge_flips.metric], judge_flips.judge) as v
    group by v.qid
    having count(v.value) >= 2 and max(v.value) > min(v.value)
    order by max(v.value) - min(v.value) desc, v.qid collate "C"
$$;
comment on function ragsql.judge_flips(text, text, text) is
    'The queries whose value of one generation metric differs between the judge repeats of a run, with the value '
    'of each repeat (in repeat order) and the range; judge: a model name or ''offline'' (default as scores).';

create or replace function ragsql.judge_consistency(run text, metrics text[] default null, judge text default null)
returns table (
    metric text, repeats integer, mean float8, sd float8, min float8, max float8, queries integer,
    flipping integer, flip_share float8, mean_query_range float8, judge_model text, note text)
language sql stable parallel safe
as $$
    with v as (
        select * from ragsql._repeat_values(judge_consistency.run, judge_consistency.metrics, judge_consistency.judge)
    ),
    per_repeat as (  -- the run value of each repeat: the mean over the queries it has a value for
        select v.metric, v.repeat, avg(v.value) as value from v where v.value is not null group by 1, 2
    ),
    per_query as (
        select v.metric, v.qid, max(v.value) - min(v.value) as range, count(v.value) as n
        from v group by 1, 2
    )
    select m.metric,
           (select count(*) from per_repeat as p where p.metric = m.metric)::integer,
           (select avg(p.value) from per_repeat as p where p.metric = m.metric),
           (select stddev_samp(p.value) from per_repeat as p where p.metric = m.metric),
           (select min(p.value) from per_repeat as p where p.metric = m.metric),
           (select max(p.value) from per_repeat as p where p.metric = m.metric),
           (select count(*) from per_query as q where q.metric = m.metric and q.n >= 2)::integer,
           (select count(*) from per_query as q where q.metric = m.metric and q.n >= 2 and q.range > 0)::integer,
           (select count(*) filter (where q.range > 0)::float8 / nullif(count(*), 0)
            from per_query as q where q.metric = m.metric and q.n >= 2),
           (select avg(q.range) from per_query as q where q.metric = m.metric and q.n >= 2),
           (select string_agg(distinct v.judge_model, ', ') from v where v.metric = m.metric),
           case
               when (select count(*) from ragsql.judge_repeats(judge_consistency.run)) < 2
                   then 'one judging only: run `ragsql judge --run ' || judge_consistency.run || ' --repeat N`'
               when (select count(*) from per_repeat as p where p.metric = m.metric) < 2
                   then 'fewer than two repeats have a value'
           end
    from (select distinct v.metric from v) as m
    order by m.metric
$$;
comment on function ragsql.judge_consistency(text, text[], text) is
    'How consistent the judge is on a run judged several times (ragsql judge --repeat N): per generation metric '
    'the number of repeats with a value, the mean, sample standard deviation, min and max of the run value over '
    'the repeats, the queries judged at least twice, how many (and what share) got different values, and the mean '
    'per-query range. Fewer than two repeats: the spread is NULL and note says why.';
