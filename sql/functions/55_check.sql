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

create or replace function ragsql._max_drop_holds(
    dropped float8, limit_value float8, significant boolean, p_adjusted float8, alpha float8)
returns boolean
language sql immutable parallel safe
as $$
    select _max_drop_holds.dropped is not null
       and (_max_drop_holds.dropped <= _max_drop_holds.limit_value
            or (_max_drop_holds.significant and not coalesce(_max_drop_holds.p_adjusted < _max_drop_holds.alpha, false)))
$$;
comment on function ragsql._max_drop_holds(float8, float8, boolean, float8, float8) is
    'Whether a max_drop gate holds: a drop (null: none could be computed, which fails) at most the limit, or with '
    'significant one whose adjusted p is not below alpha.';

create or replace function ragsql._not_significant_note(significant boolean, p_adjusted float8, alpha float8)
returns text
language sql immutable parallel safe
as $$
    select case when _not_significant_note.significant
                     and not coalesce(_not_significant_note.p_adjusted < _not_significant_note.alpha, false)
                then format(': not significant at alpha %s, so it passes', _not_significant_note.alpha) else '' end
$$;
comment on function ragsql._not_significant_note(boolean, float8, float8) is
    'The end of a failed-drop reason when --significant lets the drop pass: '': not significant at alpha A, so it '
    'passes'', else empty.';

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
           ragsql._max_drop_holds(j.dropped, j.limit_value, significant, j.p_adjusted, alpha),
           case
               when j.dropped is null then format('%s cannot be compared with %s: %s', j.measure, baseline,
                                                  coalesce(j.note, 'no value'))
               when j.dropped > j.limit_value then format(
                   '%s dropped %s > max drop %s (%s → %s; %s%% interval of the change [%s, %s], p = %s)%s',
                   j.measure, round(j.dropped::numeric, 4), j.limit_value, round(j.baseline_value::numeric, 4),
                   round(j.value::numeric, 4), round(((1 - alpha) * 100)::numeric, 1), round(j.ci_low::numeric, 4),
                   round(j.ci_high::numeric, 4), round(j.p_adjusted::numeric, 4),
                   ragsql._not_significant_note(significant, j.p_adjusted, alpha))
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

create or replace function ragsql.welch_t_p(diff float8, sd_a float8, n_a bigint, sd_b float8, n_b bigint)
returns float8
language sql immutable parallel safe
as $$
    -- two-sided p of Welch's t = diff / sqrt(sd_a^2/n_a + sd_b^2/n_b), Welch-Satterthwaite degrees of freedom;
    -- the same Student t tail as ragsql.paired_t_p: P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)
    select case
        when e.se2 is null then null
        when e.se2 = 0 then case when welch_t_p.diff = 0 then 1 else 0 end
        else ragsql._incomplete_beta(e.df / (e.df + welch_t_p.diff ^ 2 / e.se2), e.df / 2.0, 0.5)
    end
    from (select v.a + v.b as se2,
                 (v.a + v.b) ^ 2 / nullif(v.a ^ 2 / (welch_t_p.n_a - 1) + v.b ^ 2 / (welch_t_p.n_b - 1), 0) as df
          from (select welch_t_p.sd_a ^ 2 / welch_t_p.n_a as a, welch_t_p.sd_b ^ 2 / welch_t_p.n_b as b
                where welch_t_p.n_a >= 2 and welch_t_p.n_b >= 2) as v
          union all select null, null
          limit 1) as e
$$;
comment on function ragsql.welch_t_p(float8, float8, bigint, float8, bigint) is
    'Two-sided p-value of Welch''s unpaired t-test from the difference of two means and each sample''s standard '
    'deviation and count (null with fewer than 2 values in either).';

-- PL/pgSQL, not SQL: it reads the watch's windows to pick the runs before it computes anything.
create or replace function ragsql.check_watch(
    watch text, baseline interval default '7 days', max_drops jsonb default '{}', significant boolean default false,
    alpha float8 default 0.05, judge text default null)
returns table (
    gate text, measure text, value float8, limit_value float8, baseline_value float8, diff float8,
    ci_low float8, ci_high float8, p_value float8, p_adjusted float8, passed boolean, reason text)
language plpgsql stable
as $$
-- The max_drop gates of ragsql.check for a watch: the latest closed window's per-query values against those of
-- its windows that started within `baseline` before it, pooled (different rows, so an unpaired test: Welch's t,
-- Holm-adjusted over the gated metrics). A metric without a value on either side fails its gate.
#variable_conflict use_column
declare
    w ragsql.watch;
    latest text;
    latest_start timestamptz;
    baseline_runs text[];
    drop_names text[];
begin
    perform ragsql._check_resampling(1, alpha);
    select * into w from ragsql.watch as x where x.name = check_watch.watch;
    if not found then
        raise exception 'unknown watch "%"', watch using errcode = 'no_data_found', hint = 'see ragsql.watch';
    end if;
    select r.name, ww.window_start into latest, latest_start
    from ragsql.watch_window as ww join ragsql.run as r on r.id = ww.run_id
    where ww.watch_id = w.id and ww.window_start + w.window_size + w.settle <= now()
    order by ww.window_start desc
    limit 1;
    if latest is null then
        raise exception 'watch % has no closed window yet: nothing to check', watch using errcode = 'no_data_found';
    end if;
    select array_agg(r.name order by ww.window_start) into baseline_runs
    from ragsql.watch_window as ww join ragsql.run as r on r.id = ww.run_id
    where ww.watch_id = w.id and ww.window_start < latest_start and ww.window_start >= latest_start - baseline;
    if baseline_runs is null then
        raise exception 'watch %: no window in the % before its latest closed window % to compare with',
            watch, baseline, latest using errcode = 'no_data_found';
    end if;
    select array_agg(distinct s.measure) into drop_names
    from ragsql._gate_limits(max_drops, 'max_drop') as l
    cross join lateral ragsql._metric_spec(array[latest], array[l.name]) as s;

    return query
    with vals as (
        select v.measure, r.name = latest as is_latest, v.value
        from unnest(baseline_runs || latest) as r(name)
        cross join lateral ragsql._metric_values(r.name, drop_names, 1, check_watch.judge) as v
        where v.value is not null and drop_names is not null
    ),
    per_measure as (
        select v.measure,
               avg(v.value) filter (where v.is_latest) as value,
               avg(v.value) filter (where not v.is_latest) as baseline_value,
               ragsql.welch_t_p(avg(v.value) filter (where v.is_latest) - avg(v.value) filter (where not v.is_latest),
                                stddev_samp(v.value) filter (where v.is_latest), count(*) filter (where v.is_latest),
                                stddev_samp(v.value) filter (where not v.is_latest),
                                count(*) filter (where not v.is_latest)) as p_value
        from vals as v
        group by v.measure
    ),
    adjusted as (
        select pm.*, pm.value - pm.baseline_value as diff, h.p_adjusted
        from per_measure as pm
        join (select u.measure, u.p_adjusted
              from (select array_agg(x.measure order by x.measure) as names,
                           ragsql.holm(array_agg(x.p_value order by x.measure)) as ps
                    from per_measure as x) as a
              cross join lateral unnest(a.names, a.ps) as u(measure, p_adjusted)) as h on h.measure = pm.measure
    ),
    judged as (
        select l.ord, s.measure, l.limit_value, a.value, a.baseline_value, a.diff, a.p_value, a.p_adjusted,
               case when ragsql.higher_is_better(s.measure) then -a.diff else a.diff end as dropped
        from ragsql._gate_limits(max_drops, 'max_drop') as l
        cross join lateral ragsql._metric_spec(array[latest], array[l.name]) as s
        left join adjusted as a on a.measure = s.measure
    )
    select 'max_drop'::text, j.measure, j.value, j.limit_value, j.baseline_value, j.diff, null::float8,
           null::float8, j.p_value, j.p_adjusted,
           ragsql._max_drop_holds(j.dropped, j.limit_value, significant, j.p_adjusted, alpha),
           case
               when j.dropped is null then format('%s cannot be compared in watch %s: no value in %s or in its '
                                                  'baseline windows', j.measure, watch, latest)
               when j.dropped > j.limit_value then format(
                   '%s dropped %s > max drop %s in %s (baseline %s over %s windows → %s; Welch p = %s)%s',
                   j.measure, round(j.dropped::numeric, 4), j.limit_value, latest,
                   round(j.baseline_value::numeric, 4), cardinality(baseline_runs), round(j.value::numeric, 4),
                   coalesce(round(j.p_adjusted::numeric, 4)::text, 'none: fewer than 2 values on a side'),
                   ragsql._not_significant_note(significant, j.p_adjusted, alpha))
           end
    from judged as j
    order by j.ord;
end
$$;
comment on function ragsql.check_watch(text, interval, jsonb, boolean, float8, text) is
    'ragsql.check''s max_drop gates for a watch: the latest closed window (value) against its windows that started '
    'within baseline before it, their per-query values pooled (baseline_value); the drop in the metric''s bad '
    'direction must be at most the limit, and with significant only a drop whose Holm-adjusted Welch t-test p < '
    'alpha fails. One row per gate; an error (no_data_found) when there is no closed window or no baseline window.';
