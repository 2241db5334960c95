-- Quality gates for scheduled jobs and CI: does a run meet its minimums, and did it drop against a
-- baseline? `ragsql check` exits 4 when a gate fails; this function returns the same rows.

create or replace function ragsql._gate_limits(gates jsonb, kind text)
returns table (ord integer, name text, limit_value float8)
language plpgsql immutable parallel safe
as $$
-- An object {"measure": number} can hold one gate per key (jsonb keeps the last of repeated keys), so
-- `ragsql check` sends an array of ["measure", number] pairs: every gate given is a row (by name, then as given).
declare
    g record;
begin
    if gates is null then
        return;
    elsif jsonb_typeof(gates) not in ('object', 'array') then
        raise exception '% gates must be a JSON object {"measure": number} or an array [["measure", number], ...], not %',
            kind, gates
            using errcode = 'invalid_parameter_value';
    end if;
    ord := 0;
    for g in
        select u.key, u.value, u.pair
        from (select e.key, e.value, null::jsonb as pair, 0::bigint as n
              from jsonb_each(case when jsonb_typeof(gates) = 'object' then gates end) as e
              union all
              select a.pair ->> 0, a.pair -> 1, a.pair, a.n
              from jsonb_array_elements(case when jsonb_typeof(gates) = 'array' then gates end)
                   with ordinality as a(pair, n)) as u
        order by u.key collate "C", u.n
    loop
        -- (no case expression here: PL/pgSQL ends an if's condition at the first "then")
        if g.pair is not null and (jsonb_typeof(g.pair) is distinct from 'array' or g.pair -> 1 is null
                                   or g.pair -> 2 is not null or jsonb_typeof(g.pair -> 0) is distinct from 'string') then
            raise exception '% gate %: expected a pair ["measure", number]', kind, g.pair
                using errcode = 'invalid_parameter_value';
        elsif jsonb_typeof(g.value) <> 'number' then
            raise exception '% gate "%": the limit must be a number, not %', kind, g.key, g.value
                using errcode = 'invalid_parameter_value';
        elsif abs((g.value #>> '{}')::numeric) > 1.7976931348623157e308 then
            raise exception '% gate "%": the limit is beyond the range of float8 (about 1.8e308)', kind, g.key
                using errcode = 'invalid_parameter_value';
        end if;
        ord := ord + 1;
        name := g.key;
        limit_value := (g.value #>> '{}')::float8;
        return next;
    end loop;
end
$$;
comment on function ragsql._gate_limits(jsonb, text) is
    'The (measure, limit) rows of a gates object {"measure": number} or array [["measure", number], ...] '
    '(repeated measures kept), checked to be numbers.';

create or replace function ragsql.check(
    run text, baseline text default null, min_values jsonb default '{}', max_values jsonb default '{}',
    max_drops jsonb default '{}', significant boolean default false, resamples integer default 10000,
    seed float8 default 0.42, alpha float8 default 0.05, rel_level integer default 1, judge text default null)
returns table (
    gate text, measure text, value float8, limit_value float8, baseline_value float8, diff float8,
    ci_low float8, ci_high float8, p_value float8, p_adjusted float8, passed boolean, reason text)
language plpgsql stable parallel safe
as $$
-- min: the run value must be at least the limit; max: at most the limit; max_drop: the change from the
-- baseline in the bad direction (ragsql.higher_is_better) must be at most the limit, and with
-- significant only a drop whose Holm-adjusted randomization p is below alpha counts. A metric without
-- any value fails its gate ("no value"): it is never compared as 0.
declare
    level_names text[];
    drop_names text[];
begin
    perform ragsql._check_resampling(resamples, alpha);
    perform ragsql._run_id(run);
    if exists (select from ragsql._gate_limits(max_drops, 'max_drop')) then
        if baseline is null then
            raise exception 'max_drop gates need a baseline run' using errcode = 'invalid_parameter_value';
        end if;
        perform ragsql._comparable_runs(baseline, run);
    end if;
    select array_agg(distinct s.measure) into level_names
    from (select l.name from ragsql._gate_limits(min_values, 'min') as l
          union all select l.name from ragsql._gate_limits(max_values, 'max') as l) as g
    cross join lateral ragsql._metric_spec(array[run], array[g.name]) as s;
    select array_agg(distinct s.measure) into drop_names
    from ragsql._gate_limits(max_drops, 'max_drop') as l
    cross join lateral ragsql._metric_spec(array[run], array[l.name]) as s;

    return query
    with gates as (
        select 'min'::text as gate, 1 as kind, l.ord, s.measure, l.limit_value
        from ragsql._gate_limits(min_values, 'min') as l
        cross join lateral ragsql._metric_spec(array[run], array[l.name]) as s
        union all
        select 'max', 2, l.ord, s.measure, l.limit_value
        from ragsql._gate_limits(max_values, 'max') as l
        cross join lateral ragsql._metric_spec(array[run], array[l.name]) as s
    ),
    level as (
        select v.measure, avg(v.value) as value, count(v.value) as queries
        from ragsql._metric_values(run, level_names, rel_level, judge) as v
        where level_names is not null
        group by v.measure
    )
    select g.gate, g.measure, lv.value, g.limit_value, null::float8, null::float8, null::float8, null::float8,
           null::float8, null::float8,
           coalesce(case g.gate when 'min' then lv.value >= g.limit_value else lv.value <= g.limit_value end, false),
           case
               when lv.value is null then format('%s has no value in run %s (null for every query)', g.measure, run)
               when g.gate = 'min' and lv.value < g.limit_value
                   then format('%s = %s < min %s', g.measure, round(lv.value::numeric, 4), g.limit_value)
               when g.gate = 'max' and lv.value > g.limit_value
                   then format('%s = %s > max %s', g.measure, round(lv.value::numeric, 4), g.limit_value)
           end
    from gates as g
    left join level as lv on lv.measure = g.measure
    order by g.kind, g.ord;

    return query
    with compared as (
        select c.*, ragsql.higher_is_better(c.measure) as up
        from ragsql.compare(baseline, run, drop_names, resamples, seed, alpha, rel_level, judge) as c
        where drop_names is not null
    ),
    gates as (
        select l.ord, s.measure, l.limit_value
        from ragsql._gate_limits(max_drops, 'max_drop') as l
        cross join lateral ragsql._metric_spec(array[run], array[l.name]) as s
    ),
    judged as (
        select g.ord, g.measure, g.limit_value, c.value, c.baseline_value, c.diff, c.ci_low, c.ci_high, c.p_value,
               c.p_adjusted,
               case when c.up then -c.diff else c.diff end as dropped,
               c.note
        from gates as g
        left join compared as c on c.measure = g.measure
    )
    select 'max_drop'::text, j.measure, j.value, j.limit_value, j.baseline_value, j.diff, j.ci_low, j.ci_high,
           j.p_value, j.p_adjusted,
           j.dropped is not null
               and (j.dropped <= j.limit_value or (significant and not coalesce(j.p_adjusted < alpha, false))),
           case
               when j.dropped is null then format('%s cannot be compared with %s: %s', j.measure, baseline,
                                                  coalesce(j.note, 'no value'))
               when j.dropped > j.limit_value then format(
                   '%s dropped %s > max drop %s (%s → %s; %s%% interval of the change [%s, %s], p = %s)%s',
                   j.measure, round(j.dropped::numeric, 4), j.limit_value, round(j.baseline_value::numeric, 4),
                   round(j.value::numeric, 4), round(((1 - alpha) * 100)::numeric, 1), round(j.ci_low::numeric, 4),
                   round(j.ci_high::numeric, 4), round(j.p_adjusted::numeric, 4),
                   case when significant and not coalesce(j.p_adjusted < alpha, false)
                        then format(': not significant at alpha %s, so it passes', alpha) else '' end)
           end
    from judged as j
    order by j.ord;
end
$$;
comment on function ragsql.check(text, text, jsonb, jsonb, jsonb, boolean, integer, float8, float8, integer, text) is
    'Quality gates of a run, one row per gate: min_values / max_values {"measure": limit} on the run value, '
    'max_drops {"measure": limit} on the change from baseline in the metric''s bad direction (with '
    'significant, only a drop whose Holm-adjusted randomization p < alpha fails). Each may also be an array '
    '[["measure", limit], ...] to give one measure several gates: every gate is a row. passed and a reason for '
    'every failure; a metric without any value fails its gate. `ragsql check` exits 4 when any row fails.';
