-- Decisions: is run B better than run A, and how sure are we? Paired significance tests and
-- bootstrap confidence intervals over per-query values of retrieval measures and generation metrics.
--
-- Resampling is set-based and shares its random vectors across measures:
--   * randomness is counter-based (a hash of (stream, index, seed)), so a result depends on the seed
--     only, never on the plan or on the session's random() state, and the functions stay stable;
--   * per-query values are laid out as pgvector vectors (chunks of ragsql._resample_chunk() queries) and
--     every resample statistic is one inner product computed in C, so no row per (query, resample) exists;
--   * randomization test (random sign flips of the paired differences): resample (a, b) flips by the
--     element-wise product of pool sign vectors a < b. Each such product is a uniform sign vector and
--     any two of them are independent (pairwise independence), so the p-value estimate has the mean
--     and the variance of one from independent flips; with 2^n <= resamples the exact distribution is used;
--   * bootstrap: resample (a, t) is pool count vector a (n draws with replacement) applied to the
--     values rotated by t positions in a seeded random order. A fixed rotation of a multinomial count
--     vector is a multinomial count vector, so each resample is exactly a bootstrap resample; the
--     rotations of one pool vector balance each other (every query drawn equally often over all of
--     them), as in the balanced bootstrap.
-- The float4 inner products are accurate to about 1e-6 of the sum of magnitudes; a resample whose
-- statistic ties the observed one within 1e-5 of it counts as at least as extreme (conservative). The
-- bootstrap resamples the deviations from the sample's float8 mean (summed in the sample's order, as the
-- callers' run values are) and adds them to it, so float4 carries only the spread, a constant sample resamples
-- to its mean, and the interval is widened to hold the mean if rounding still left it outside.

create or replace function ragsql._resample_chunk()
returns integer
language sql immutable parallel safe
as $$ select 4096 $$;
comment on function ragsql._resample_chunk() is
    'Queries per resampling vector: short enough that a float4 inner product stays accurate, far below pgvector''s limit.';

create or replace function ragsql._uniform(stream bigint, i bigint, seed float8)
returns float8
language sql immutable parallel safe
as $$
    -- two rounds of PostgreSQL's 64-bit hash: one round leaves consecutive counters correlated
    -- (the variance of a sum of 15 draws was 20% low); two rounds measure as independent
    select ((hashint8extended(hashint8extended(_uniform.i, hashfloat8extended(_uniform.seed, _uniform.stream)),
                              hashfloat8extended(_uniform.seed, -_uniform.stream - 1)) >> 11)
            & 9007199254740991)::float8 / 9007199254740992.0
$$;
comment on function ragsql._uniform(bigint, bigint, float8) is
    'Counter-based uniform random number in [0, 1): the i-th of stream `stream` for `seed`; no state, any order.';

create or replace function ragsql._check_resampling(resamples integer, alpha float8)
returns boolean
language plpgsql immutable parallel safe
as $$
begin
    if resamples is null or resamples < 1 then
        raise exception 'resamples must be a positive number, not %', coalesce(resamples::text, 'null')
            using errcode = 'invalid_parameter_value';
    elsif resamples > 1000000 then
        raise exception 'resamples must be at most 1000000, not %', resamples
            using errcode = 'invalid_parameter_value';
    elsif alpha is null or not (alpha > 0 and alpha < 1) then
        raise exception 'alpha must be between 0 and 1 (exclusive), not %', coalesce(alpha::text, 'null')
            using errcode = 'invalid_parameter_value';
    end if;
    return true;
end
$$;
comment on function ragsql._check_resampling(integer, float8) is 'True, or invalid_parameter_value for resamples outside 1 .. 1000000 or alpha outside (0, 1).';

create or replace function ragsql._slices(lengths integer[])
returns table (ord integer, n integer, start integer)
language sql immutable parallel safe
as $$
    select o.ord::integer, o.n, (sum(o.n) over (order by o.ord) - o.n)::integer
    from unnest(_slices.lengths) with ordinality as o(n, ord)
$$;
comment on function ragsql._slices(integer[]) is
    'Where each sample lies in a concatenation of samples: its position, length and offset.';

-- _chunks, bootstrap_mean_ci and sign_flip_p have SQL-standard bodies (begin atomic): pgvector's types, casts,
-- operators and functions are bound when they are created, wherever the DBA put the extension, so that the
-- security definer wrappers of ragsql_report (sql/views/90_report.sql) run them on a path without pgvector's
-- schema. They are still inlined. Being bound, they keep the ragsql functions they call: a migration that drops
-- one of those drops them first.
create or replace function ragsql._chunks(vals float8[], start integer, n integer)
returns table (chunk integer, v vector)
language sql immutable parallel safe
begin atomic
    select c.chunk,
           (_chunks.vals[_chunks.start + c.chunk * ragsql._resample_chunk() + 1
                         : _chunks.start + least((c.chunk + 1) * ragsql._resample_chunk(), _chunks.n)])::float4[]::vector
    from generate_series(0, (_chunks.n - 1) / ragsql._resample_chunk()) as c(chunk)
    where _chunks.n > 0;
end;
comment on function ragsql._chunks(float8[], integer, integer) is
    'vals[start + 1 .. start + n] as vectors of ragsql._resample_chunk() values.';

create or replace function ragsql.bootstrap_mean_ci(
    vals float8[], lengths integer[], resamples integer default 10000, seed float8 default 0.42,
    alpha float8 default 0.05)
returns table (ord integer, ci_low float8, ci_high float8)
language sql stable parallel safe
begin atomic
    with slice as (
        select s.ord, s.n, s.start,
               least(s.n, ceil(sqrt(bootstrap_mean_ci.resamples::float8))::integer) as rotations
        from ragsql._slices(bootstrap_mean_ci.lengths) as s
        where s.n > 0 and ragsql._check_resampling(bootstrap_mean_ci.resamples, bootstrap_mean_ci.alpha)
    ),
    shape as (
        -- one pool of count vectors per sample length, shared by the samples of that length
        select sl.n, max(sl.rotations) as rotations,
               ceil(bootstrap_mean_ci.resamples::float8 / max(sl.rotations))::integer as pool
        from slice as sl
        group by sl.n
    ),
    drawn as (
        select sh.n, a.a, floor(ragsql._uniform(sh.n::bigint * 1048576 + a.a, j.j, bootstrap_mean_ci.seed) * sh.n)::integer as i,
               count(*)::float4 as times
        from shape as sh
        cross join generate_series(1, sh.pool) as a(a)
        cross join generate_series(1, sh.n) as j(j)
        group by 1, 2, 3
    ),
    pool as materialized (
        -- count vector a: how often each position 0 .. n - 1 was drawn, by chunk (written sparse, stored dense;
        -- a chunk nothing was drawn from has no row and adds nothing)
        select d.n, d.a, d.i / ragsql._resample_chunk() as chunk,
               ('{' || string_agg((d.i % ragsql._resample_chunk() + 1) || ':' || d.times, ',' order by d.i) || '}/'
                || least(ragsql._resample_chunk(), d.n - d.i / ragsql._resample_chunk() * ragsql._resample_chunk())
               )::sparsevec::vector as counts
        from drawn as d
        group by 1, 2, 3
    ),
    centre as materialized (
        -- the sample's mean in float8, summed in the order given (the callers' value is avg(... order by qid),
        -- the same additions in the same order, so the same bits)
        select sl.ord, avg(bootstrap_mean_ci.vals[sl.start + k.k] order by k.k) as mean
        from slice as sl
        cross join generate_series(1, sl.n) as k(k)
        group by sl.ord
    ),
    shuffled as materialized (
        -- the sample's deviations from its mean in a seeded random order, so that rotations pair unrelated
        -- queries (the order depends on the seed and the sample's length only: a sample's interval does not
        -- depend on the others asked with it)
        select sl.ord, sl.n, sl.rotations,
               array_agg(bootstrap_mean_ci.vals[sl.start + k.k] - c.mean
                         order by ragsql._uniform(-1, k.k, bootstrap_mean_ci.seed), k.k) as x
        from slice as sl
        join centre as c on c.ord = sl.ord
        cross join generate_series(1, sl.n) as k(k)
        group by 1, 2, 3
    ),
    rotated as materialized (
        select sf.ord, sf.n, t.t, ch.chunk, ch.v
        from shuffled as sf
        cross join generate_series(0, sf.rotations - 1) as t(t)
        cross join lateral (
            select (sf.x[(t.t * sf.n) / sf.rotations + 1 : sf.n] || sf.x[1 : (t.t * sf.n) / sf.rotations]) as r
        ) as rot
        cross join lateral ragsql._chunks(rot.r, 0, sf.n) as ch
    ),
    product as materialized (
        -- one inner product per resample and chunk; only numbers leave this step (no vector is sorted)
        select ro.ord, ro.n, (po.a - 1) * sh.rotations + ro.t + 1 as r, ro.chunk,
               inner_product(po.counts, ro.v) as total
        from rotated as ro
        join shape as sh on sh.n = ro.n
        join pool as po on po.n = ro.n and po.chunk = ro.chunk
        where (po.a - 1) * sh.rotations + ro.t + 1 <= bootstrap_mean_ci.resamples
    ),
    resample as (
        -- chunks summed in a fixed order: the same seed gives the same bits whatever the plan
        select p.ord, p.r, min(c.mean) + sum(p.total order by p.chunk) / min(p.n) as mean
        from product as p
        join centre as c on c.ord = p.ord
        group by p.ord, p.r
    )
    select o.ord::integer,
           least(percentile_cont(bootstrap_mean_ci.alpha / 2) within group (order by rs.mean), min(c.mean)),
           greatest(percentile_cont(1 - bootstrap_mean_ci.alpha / 2) within group (order by rs.mean), min(c.mean))
    from unnest(bootstrap_mean_ci.lengths) with ordinality as o(n, ord)
    left join resample as rs on rs.ord = o.ord
    left join centre as c on c.ord = o.ord
    group by o.ord
    order by o.ord;
end;
comment on function ragsql.bootstrap_mean_ci(float8[], integer[], integer, float8, float8) is
    'Percentile bootstrap interval of the mean of each sample: vals holds the samples one after another, '
    'lengths their sizes. Resamples draw with replacement (balanced rotations of shared count vectors, '
    'see sql/functions/50_compare.sql); the same seed gives the same interval. It always holds the sample''s '
    'mean avg(x) summed in the given order (ci_low <= mean <= ci_high). Null for an empty sample.';

create or replace function ragsql.sign_flip_p(
    vals float8[], lengths integer[], resamples integer default 10000, seed float8 default 0.42)
returns table (ord integer, p_value float8, exact boolean)
language sql stable parallel safe
begin atomic
    with slice as (
        select s.ord, s.n, s.start
        from ragsql._slices(sign_flip_p.lengths) as s
        where s.n > 0 and ragsql._check_resampling(sign_flip_p.resamples, 0.5)
    ),
    nonzero as (
        -- a zero difference flips to itself: the exact distribution needs the others only
        select sl.ord, array_agg(sign_flip_p.vals[sl.start + i.i]) filter (where sign_flip_p.vals[sl.start + i.i] <> 0) as x
        from slice as sl
        cross join generate_series(1, sl.n) as i(i)
        group by sl.ord
    ),
    exact_case as (
        -- every sign pattern when there are no more of them than resamples: the exact distribution
        select nz.ord,
               (select count(*) filter (where abs(t.total) >= o.observed - 1e-12 * (1 + o.observed))::float8 / count(*)
                from (
                    select coalesce(sum(case when (k.k >> (i.i - 1)) & 1 = 1 then -nz.x[i.i] else nz.x[i.i] end), 0) as total
                    from generate_series(0, (1 << coalesce(cardinality(nz.x), 0)) - 1) as k(k)
                    left join generate_series(1, coalesce(cardinality(nz.x), 0)) as i(i) on true
                    group by k.k
                ) as t
                cross join (select abs(coalesce(sum(x), 0)) as observed from unnest(nz.x) as x) as o) as p_value
        from nonzero as nz
        where coalesce(cardinality(nz.x), 0) <= 30 and (1::bigint << coalesce(cardinality(nz.x), 0)) <= sign_flip_p.resamples
    ),
    sampled as (
        select sl.* from slice as sl
        where sl.ord not in (select e.ord from exact_case as e)
    ),
    pool_size as (
        -- the smallest pool whose pairs a < b number at least resamples
        select ceil((1 + sqrt(1 + 8 * sign_flip_p.resamples::float8)) / 2)::integer as p
    ),
    widest as (
        select least(max(sm.n), ragsql._resample_chunk()) as width, max((sm.n - 1) / ragsql._resample_chunk()) as chunks
        from sampled as sm
    ),
    pool as materialized (
        select a.a, c.chunk,
               array_agg(case when ragsql._uniform(c.chunk::bigint * 1048576 + a.a, i.i, sign_flip_p.seed) < 0.5
                              then -1::float4 else 1::float4 end order by i.i)::vector as signs
        from pool_size as ps
        cross join widest as w
        cross join generate_series(1, ps.p) as a(a)
        cross join generate_series(0, w.chunks) as c(chunk)
        cross join generate_series(1, w.width) as i(i)
        group by 1, 2
    ),
    sample as materialized (
        select sm.ord, ch.chunk, ch.v, vector_dims(ch.v) as width,
               inner_product(ch.v, array_fill(1::float4, array[vector_dims(ch.v)])::vector) as observed,
               (select sum(abs(sign_flip_p.vals[sm.start + i])) from generate_series(1, sm.n) as i) as magnitude
        from sampled as sm
        cross join lateral ragsql._chunks(sign_flip_p.vals, sm.start, sm.n) as ch
    ),
    observed as (
        select s.ord, abs(sum(s.observed)) as observed, max(s.magnitude) as magnitude
        from sample as s
        group by s.ord
    ),
    flipped as materialized (
        -- sample times pool vector a, ready for the inner product with pool vector b
        select s.ord, s.chunk, pa.a, s.v * subvector(pa.signs, 1, s.width) as u, s.width
        from sample as s
        join pool as pa on pa.chunk = s.chunk
    ),
    pair as (
        select b.b, a.a
        from pool_size as ps
        cross join generate_series(2, ps.p) as b(b)
        cross join generate_series(1, b.b - 1) as a(a)
        order by b.b, a.a
        limit sign_flip_p.resamples
    ),
    product as materialized (
        -- one inner product per resample and chunk; only numbers leave this step (no vector is sorted)
        select f.ord, pr.a, pr.b, inner_product(f.u, subvector(pb.signs, 1, f.width)) as total
        from pair as pr
        join flipped as f on f.a = pr.a
        join pool as pb on pb.a = pr.b and pb.chunk = f.chunk
    ),
    statistic as (
        select p.ord, abs(sum(p.total)) as total
        from product as p
        group by p.ord, p.a, p.b
    ),
    sampled_p as (
        select o.ord,
               (1 + count(*) filter (where st.total >= o.observed - 1e-5 * o.magnitude))::float8
                   / (sign_flip_p.resamples + 1) as p_value
        from observed as o
        join statistic as st on st.ord = o.ord
        group by o.ord
    )
    select o.ord::integer, coalesce(e.p_value, s.p_value), e.ord is not null
    from unnest(sign_flip_p.lengths) with ordinality as o(n, ord)
    left join exact_case as e on e.ord = o.ord
    left join sampled_p as s on s.ord = o.ord
    order by o.ord;
end;
comment on function ragsql.sign_flip_p(float8[], integer[], integer, float8) is
    'Two-sided paired randomization test of each sample of differences against a mean of 0: the share of '
    'random sign flips whose |sum| is at least the observed one, (count + 1) / (resamples + 1), or exact over '
    'every flip when 2^(non-zero differences) <= resamples. vals holds the samples one after another, lengths their sizes.';

create or replace function ragsql._ln_gamma(z float8)
returns float8
language plpgsql immutable strict parallel safe
as $$
-- ln Γ(z) for z > 0: shift z up to at least 10 (Γ(z) = Γ(z + k) / (z (z+1) ... (z+k-1))), then
-- Stirling's series (z - 1/2) ln z - z + ln(2π)/2 + 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7).
declare
    shift float8 := 0;
    w float8 := z;
begin
    while w < 10 loop
        shift := shift + ln(w);
        w := w + 1;
    end loop;
    return (w - 0.5) * ln(w) - w + 0.5 * ln(2 * pi())
           + 1 / (12 * w) - 1 / (360 * w ^ 3) + 1 / (1260 * w ^ 5) - 1 / (1680 * w ^ 7)
           - shift;
end
$$;
create or replace function ragsql._ln_beta(a float8, b float8)
returns float8
language sql immutable strict parallel safe
as $$
    -- ln B(a, b) from ln Γ by Stirling's series after shifting the arguments above 10
    select ragsql._ln_gamma(_ln_beta.a) + ragsql._ln_gamma(_ln_beta.b) - ragsql._ln_gamma(_ln_beta.a + _ln_beta.b)
$$;

create or replace function ragsql._incomplete_beta(x float8, a float8, b float8)
returns float8
language plpgsql immutable strict parallel safe
as $$
-- I_x(a, b), the regularized incomplete beta function, by its continued fraction (modified Lentz),
-- evaluated on the side of the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where it converges fast.
declare
    front float8;
    f float8 := 1;
    c float8 := 1;
    d float8 := 0;
    num float8;
    m integer;
    step integer := 0;
    tiny constant float8 := 1e-300;
begin
    if x <= 0 then
        return 0;
    elsif x >= 1 then
        return 1;
    elsif x > (a + 1) / (a + b + 2) then
        return 1 - ragsql._incomplete_beta(1 - x, b, a);
    end if;
    front := exp(a * ln(x) + b * ln(1 - x) - (ragsql._ln_beta(a, b))) / a;
    -- f = 1 / (1 + d1 / (1 + d2 / (1 + ...))), d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)),
    -- d_{2m} = m(b-m)x / ((a+2m-1)(a+2m))
    d := 1 - (a + b) * x / (a + 1);
    if abs(d) < tiny then d := tiny; end if;
    d := 1 / d;
    f := d;
    for m in 1 .. 300 loop
        num := m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
        d := 1 + num * d;
        if abs(d) < tiny then d := tiny; end if;
        c := 1 + num / c;
        if abs(c) < tiny then c := tiny; end if;
        d := 1 / d;
        f := f * d * c;
        num := -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
        d := 1 + num * d;
        if abs(d) < tiny then d := tiny; end if;
        c := 1 + num / c;
        if abs(c) < tiny then c := tiny; end if;
        d := 1 / d;
        step := step + 1;
        f := f * d * c;
        exit when abs(d * c - 1) < 1e-15;
    end loop;
    return front * f;
end
$$;

comment on function ragsql._ln_gamma(float8) is 'ln Γ(z), z > 0 (Stirling''s series after an upward shift; ~1e-13 relative).';
comment on function ragsql._ln_beta(float8, float8) is 'ln B(a, b) = ln Γ(a) + ln Γ(b) - ln Γ(a + b).';
comment on function ragsql._incomplete_beta(float8, float8, float8) is
    'The regularized incomplete beta function I_x(a, b) (continued fraction), for Student''s t distribution.';

create or replace function ragsql.paired_t_p(mean float8, sd float8, n bigint)
returns float8
language sql immutable parallel safe
as $$
    -- two-sided p of Student's t = mean / (sd / sqrt(n)) with n - 1 degrees of freedom:
    -- P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2)
    select case
        when paired_t_p.n is null or paired_t_p.n < 2 or paired_t_p.sd is null then null
        when paired_t_p.sd = 0 then case when paired_t_p.mean = 0 then 1 else 0 end
        else ragsql._incomplete_beta(
            (paired_t_p.n - 1) / ((paired_t_p.n - 1) + (paired_t_p.mean / (paired_t_p.sd / sqrt(paired_t_p.n))) ^ 2),
            (paired_t_p.n - 1) / 2.0, 0.5)
    end
$$;
comment on function ragsql.paired_t_p(float8, float8, bigint) is
    'Two-sided p-value of the paired t-test from the mean, sample standard deviation and count of the differences.';

create or replace function ragsql.holm(p_values float8[])
returns float8[]
language sql immutable parallel safe
as $$
    -- Holm's step-down adjustment: the i-th smallest of m p-values becomes
    -- max over j <= i of min(1, (m - j + 1) p_(j)); nulls stay null and do not count in m
    select array(
        select adj.p
        from unnest(holm.p_values) with ordinality as o(p, pos)
        left join (
            select s.pos, max(least(1, (s.m - s.rank + 1) * s.p)) over (order by s.rank) as p
            from (
                select u.pos, u.p, row_number() over (order by u.p, u.pos) as rank, count(*) over () as m
                from unnest(holm.p_values) with ordinality as u(p, pos)
                where u.p is not null
            ) as s
        ) as adj on adj.pos = o.pos
        order by o.pos
    )
$$;
comment on function ragsql.holm(float8[]) is
    'Holm-adjusted p-values (step-down Bonferroni) in the order given; nulls stay null.';

create or replace function ragsql.higher_is_better(measure text)
returns boolean
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return (
    select coalesce(
        (select m.higher_is_better from ragsql.generation_metric as m where m.metric = lower(btrim(higher_is_better.measure))),
        (select a.higher_is_better from ragsql.aspect as a
         where 'aspect:' || a.name = lower(btrim(higher_is_better.measure))),
        true)
    );
end
$$;
comment on function ragsql.higher_is_better(text) is
    'False for metrics where lower is better (contradiction_rate, aspect:harmfulness, aspect:maliciousness), else true.';

create or replace function ragsql._metric_spec(runs text[], measures text[], judge text default null)
returns table (ord integer, measure text, kind text)
language plpgsql stable parallel safe
as $$
-- Resolves measure names of both kinds: a generation metric (ragsql.generation_metric, aspect:<name>)
-- or a retrieval measure (ragsql._measure_spec, aliases included). With none named: the default
-- retrieval measures when any of the runs has ranked results, then every generation metric any of
-- the runs has verdicts or judge tasks for.
declare
    name text;
    spelled text;
    message text;
    hint text;
    rid bigint;
    ranked boolean := false;
begin
    if measures is not null and cardinality(measures) = 0 then
        raise exception 'no measure named' using errcode = 'invalid_parameter_value';
    end if;
    ord := 0;
    if measures is null then
        -- by run id, one run at a time: on Citus each probe is one shard's
        foreach name in array _metric_spec.runs loop
            rid := ragsql._run_id(name);
            ranked := ranked or exists (select 1 from ragsql.run_result as r where r.run_id = rid);
        end loop;
        if ranked then
            for measure in select d.measure from ragsql.default_measure as d order by d.position loop
                ord := ord + 1;
                kind := 'retrieval';
                return next;
            end loop;
        end if;
        for measure in
            select g.metric
            from (select distinct e.metric from unnest(_metric_spec.runs) as r(name)
                  cross join lateral ragsql.evaluate_generation(r.name, model => _metric_spec.judge) as e) as g
            left join ragsql.generation_metric as m on m.metric = g.metric
            order by coalesce(m.position, 1000), g.metric collate "C"
        loop
            ord := ord + 1;
            kind := 'generation';
            return next;
        end loop;
        return;
    end if;
    foreach name in array measures loop
        ord := ord + 1;
        spelled := lower(btrim(coalesce(name, '')));
        if spelled like 'aspect:%' or exists (select from ragsql.generation_metric as m where m.metric = spelled) then
            select s.metric into measure from ragsql._generation_metric_spec(array[name]) as s;
            kind := 'generation';
        else
            begin
                select s.measure into measure from ragsql._measure_spec(array[name]) as s;
            exception when invalid_parameter_value then
                get stacked diagnostics message = message_text, hint = pg_exception_hint;
                raise exception '%', message using errcode = 'invalid_parameter_value',
                    hint = concat_ws('; ', nullif(hint, ''), 'generation metrics: see select metric from ragsql.generation_metric, '
                                     'or aspect:<name>');
            end;
            kind := 'retrieval';
        end if;
        return next;
    end loop;
end
$$;
comment on function ragsql._metric_spec(text[], text[], text) is
    'Canonical names and kinds (retrieval | generation) of the measures named, or the defaults for the runs.';

create or replace function ragsql._metric_values(run text, measures text[], rel_level integer, judge text)
returns table (ord integer, measure text, kind text, qid text, value float8, judge_model text)
language plpgsql stable parallel safe
as $$
-- Per-query values of measures of both kinds (as _metric_spec names them): retrieval measures for
-- every judged query (trec_eval -c), generation metrics for every query with null where there is none.
declare
    rid bigint := ragsql._run_id(run);
    retrieval_names text[];
    retrieval_ords integer[];
    generation_names text[];
    generation_ords integer[];
begin
    if measures is null then
        -- the defaults: _metric_spec finds the generation metrics by evaluating every one, so evaluate them once
        -- here and keep the rows of those it would find, numbered and in the order it gives them
        if exists (select 1 from ragsql.run_result as r where r.run_id = rid) then
            retrieval_names := array(select d.measure from ragsql.default_measure as d order by d.position);
            return query
            select e.ord, e.measure, 'retrieval'::text, e.qid, e.value, null::text
            from ragsql._evaluate(rid, retrieval_names, rel_level) as e;
        end if;
        return query
        with g as materialized (
            select *
            from ragsql._evaluate_generation(run, ragsql._default_generation_metrics(run), judge, null, null, 0, 0.75,
                                             0.25) with ordinality
                as g(ord, qid, metric, value, reason, judge_model, judge_prompt_version, judge_embedder, detail,
                     has_task, n)
        ),
        found as (
            select f.ord, coalesce(cardinality(retrieval_names), 0)
                          + row_number() over (order by coalesce(m.position, 1000), f.metric collate "C") as at
            from (select g.ord, g.metric from g group by g.ord, g.metric
                  having bool_or(g.value is not null) or bool_or(g.has_task)) as f
            left join ragsql.generation_metric as m on m.metric = f.metric
        )
        select f.at::integer, g.metric, 'generation'::text, g.qid, g.value, g.judge_model
        from g join found as f on f.ord = g.ord
        order by f.at, g.n;
        return;
    end if;
    select array_agg(s.measure order by s.ord) filter (where s.kind = 'retrieval'),
           array_agg(s.ord order by s.ord) filter (where s.kind = 'retrieval'),
           array_agg(s.measure order by s.ord) filter (where s.kind = 'generation'),
           array_agg(s.ord order by s.ord) filter (where s.kind = 'generation')
      into retrieval_names, retrieval_ords, generation_names, generation_ords
    from ragsql._metric_spec(array[run], measures, judge) as s;
    if retrieval_names is not null then
        return query
        select retrieval_ords[e.ord], e.measure, 'retrieval'::text, e.qid, e.value, null::text
        from ragsql._evaluate(rid, retrieval_names, rel_level) as e;
    end if;
    if generation_names is not null then
        return query
        select generation_ords[g.ord], g.metric, 'generation'::text, g.qid, g.value, g.judge_model
        from ragsql._evaluate_generation(run, generation_names, judge, null, null, 0, 0.75, 0.25) as g;
    end if;
end
$$;
comment on function ragsql._metric_values(text, text[], integer, text) is
    'Per-query values of retrieval measures and generation metrics of a run, with the judge model of each.';

create or replace function ragsql._comparable_runs(run_a text, run_b text)
returns bigint
language plpgsql stable parallel safe
as $$
declare
    dataset_a bigint;
    dataset_b bigint;
begin
    select ru.dataset_id into dataset_a from ragsql.run as ru where ru.id = ragsql._run_id(run_a);
    select ru.dataset_id into dataset_b from ragsql.run as ru where ru.id = ragsql._run_id(run_b);
    if dataset_a <> dataset_b then
        raise exception 'runs "%" and "%" are of different datasets ("%" and "%"): only runs of one dataset compare',
            run_a, run_b, (select d.name from ragsql.dataset as d where d.id = dataset_a),
            (select d.name from ragsql.dataset as d where d.id = dataset_b)
            using errcode = 'invalid_parameter_value';
    end if;
    return dataset_a;
end
$$;
comment on function ragsql._comparable_runs(text, text) is
    'The dataset of two runs; raises no_data_found for an unknown run, invalid_parameter_value for two datasets.';

create or replace function ragsql._paired_values(run_a text, run_b text, measures text[], rel_level integer, judge text)
returns table (ord integer, measure text, kind text, qid text, a float8, b float8, judge_a text, judge_b text)
language plpgsql stable parallel safe
as $$
declare
    names text[];
begin
    perform ragsql._comparable_runs(run_a, run_b);
    if measures is null then
        -- _metric_spec would evaluate both runs' generation metrics to name those of the pair, and _metric_values
        -- evaluate them again: when each run has the same default measures (the usual case), they are the pair's,
        -- and one evaluation of each run gives every value. Otherwise (no rows here) as below.
        return query
        with x as materialized (select * from ragsql._metric_values(run_a, null, rel_level, judge)),
        y as materialized (select * from ragsql._metric_values(run_b, null, rel_level, judge)),
        agree as (
            select (select string_agg(m.k, ',' order by m.k) from (select distinct x.ord || ' ' || x.measure as k
                                                                     from x) as m)
                   = (select string_agg(m.k, ',' order by m.k) from (select distinct y.ord || ' ' || y.measure as k
                                                                       from y) as m) as same
        )
        select coalesce(x.ord, y.ord), coalesce(x.measure, y.measure), coalesce(x.kind, y.kind),
               coalesce(x.qid, y.qid), x.value, y.value, x.judge_model, y.judge_model
        from x full join y on y.ord = x.ord and y.qid = x.qid
        where (select agree.same from agree)
        order by 1, 4;
        if found then
            return;
        end if;
    end if;
    select array_agg(s.measure order by s.ord) into names
    from ragsql._metric_spec(array[run_a, run_b], measures, judge) as s;
    if names is null then
        raise exception 'runs "%" and "%" have no measure to compare: no ranked results and no judged answers', run_a, run_b
            using errcode = 'invalid_parameter_value';
    end if;
    return query
    select coalesce(x.ord, y.ord), coalesce(x.measure, y.measure), coalesce(x.kind, y.kind), coalesce(x.qid, y.qid),
           x.value, y.value, x.judge_model, y.judge_model
    from ragsql._metric_values(run_a, names, rel_level, judge) as x
    full join ragsql._metric_values(run_b, names, rel_level, judge) as y on y.ord = x.ord and y.qid = x.qid
    order by 1, 4;  -- the merge join's order, fixed: the callers' sums are taken in it
end
$$;
comment on function ragsql._paired_values(text, text, text[], integer, text) is
    'Per-query values of two runs of one dataset side by side, measure by measure (null where a run has none).';

-- The resampling of ragsql.compare and ragsql.measure_ci, one piece so that both read the same sample the same way:
-- the per-query values (ord, qid, x; x null where a query has none) packed into one array, measure by measure
-- (ord) and query by query (qid, collation "C"), which fixes the bits of every interval and p-value.
create or replace function ragsql._resampled(
    ords integer[], qids text[], xs float8[], resamples integer, seed float8, alpha float8, test boolean)
returns table (ord integer, ci_low float8, ci_high float8, p_value float8, p_adjusted float8)
language sql stable parallel safe
as $$
    with sample as materialized (
        select s.ord, s.qid, s.x from unnest(_resampled.ords, _resampled.qids, _resampled.xs) as s(ord, qid, x)
    ),
    packed as materialized (
        select coalesce((select array_agg(s.x order by s.ord, s.qid collate "C") from sample as s
                         where s.x is not null), '{}') as vals,
               array_agg(m.n order by m.ord) as lengths,
               array_agg(m.ord order by m.ord) as ords
        from (select s.ord, count(s.x)::integer as n from sample as s group by s.ord) as m
    ),
    interval_of as (
        select pk.ords[c.ord] as ord, c.ci_low, c.ci_high
        from packed as pk
        cross join ragsql.bootstrap_mean_ci(pk.vals, pk.lengths, _resampled.resamples, _resampled.seed,
                                            _resampled.alpha) as c
    ),
    p_of as materialized (
        select pk.ords[s.ord] as ord, s.p_value
        from packed as pk
        cross join ragsql.sign_flip_p(pk.vals, pk.lengths, _resampled.resamples, _resampled.seed) as s
        where _resampled.test
    ),
    adjusted as (
        select h.ord, h.p_adjusted
        from (select array_agg(p.p_value order by p.ord) as ps, array_agg(p.ord order by p.ord) as ords from p_of as p) as a
        cross join unnest(a.ords, ragsql.holm(a.ps)) as h(ord, p_adjusted)
        where _resampled.test
    )
    select o.ord, i.ci_low, i.ci_high, p.p_value, ad.p_adjusted
    from packed as pk
    cross join unnest(pk.ords) as o(ord)
    left join interval_of as i on i.ord = o.ord
    left join p_of as p on p.ord = o.ord
    left join adjusted as ad on ad.ord = o.ord
$$;
comment on function ragsql._resampled(integer[], text[], float8[], integer, float8, float8, boolean) is
    'Per measure (ord) of per-query values: the percentile bootstrap interval of the mean (ragsql.bootstrap_mean_ci) '
    'and, with test, the sign-flip p (ragsql.sign_flip_p) and its Holm adjustment over the measures tested.';

create or replace function ragsql.compare(
    run_a text, run_b text, measures text[] default null, resamples integer default 10000,
    seed float8 default 0.42, alpha float8 default 0.05, rel_level integer default 1, judge text default null)
returns table (
    measure text, kind text, baseline_value float8, value float8, diff float8, ci_low float8, ci_high float8,
    p_value float8, p_adjusted float8, p_t float8, significant boolean, queries bigint, improved bigint,
    regressed bigint, tied bigint, left_out bigint, judge_model text, note text)
language sql stable parallel safe
as $$
    with paired as materialized (
        select p.*, p.b - p.a as d, ragsql.higher_is_better(p.measure) as up
        from ragsql._paired_values(compare.run_a, compare.run_b, compare.measures, compare.rel_level, compare.judge) as p
        where ragsql._check_resampling(compare.resamples, compare.alpha)
    ),
    per_measure as materialized (
        select p.ord, p.measure, p.kind,
               avg(p.a) filter (where p.d is not null) as baseline_value,
               avg(p.b) filter (where p.d is not null) as value,
               avg(p.d order by p.qid collate "C") as diff,
               stddev_samp(p.d) as sd,
               count(p.d) as queries,
               count(*) filter (where (p.d > 0) = p.up and p.d <> 0) as improved,
               count(*) filter (where (p.d < 0) = p.up and p.d <> 0) as regressed,
               count(*) filter (where p.d = 0) as tied,
               count(*) - count(p.d) as left_out,
               count(p.a) as with_a,
               count(p.b) as with_b,
               nullif(concat_ws(' / ', string_agg(distinct p.judge_a, ', '),
                                nullif(string_agg(distinct p.judge_b, ', '), string_agg(distinct p.judge_a, ', '))),
                      '') as judge_model
        from paired as p
        group by p.ord, p.measure, p.kind
    ),
    resampled as (
        select r.*
        from (select array_agg(p.ord) as ords, array_agg(p.qid) as qids, array_agg(p.d) as ds from paired as p) as a
        cross join ragsql._resampled(a.ords, a.qids, a.ds, compare.resamples, compare.seed, compare.alpha, true) as r
    )
    select pm.measure, pm.kind, pm.baseline_value, pm.value, pm.diff, least(r.ci_low, pm.diff),
           greatest(r.ci_high, pm.diff),
           r.p_value, r.p_adjusted, ragsql.paired_t_p(pm.diff, pm.sd, pm.queries),
           r.p_adjusted < compare.alpha,
           pm.queries, pm.improved, pm.regressed, pm.tied, pm.left_out, pm.judge_model,
           case
               when pm.with_a = 0 and pm.with_b = 0 then 'no value in either run'
               when pm.with_a = 0 then format('no value in run %s', compare.run_a)
               when pm.with_b = 0 then format('no value in run %s', compare.run_b)
               when pm.queries = 0 then 'no query has a value in both runs'
               when pm.left_out > 0 then format('%s of %s queries left out: no value in one of the runs',
                                                pm.left_out, pm.queries + pm.left_out)
           end
    from per_measure as pm
    left join resampled as r on r.ord = pm.ord
    order by pm.ord
$$;
comment on function ragsql.compare(text, text, text[], integer, float8, float8, integer, text) is
    'Run b against baseline run a, per measure: the means over the queries both runs have a value for (every '
    'judged query for retrieval measures, as trec_eval -c), diff = mean of b - a, a percentile bootstrap '
    'interval of diff, the two-sided paired randomization test p (sign flips; exact for few queries), p '
    'adjusted by Holm over the measures compared, the paired t-test p, significant = p_adjusted < alpha, '
    'improved / regressed / tied query counts (by the metric''s direction), left_out = queries without a '
    'value in one run (generation metrics), the judge model(s) and a note when something is missing. '
    'measures: retrieval measures and generation metrics (default: the default measures and every judged '
    'metric). judge: a model name or ''offline'' (default: the newest LLM judge''s verdicts, else the offline '
    'judge''s). The same seed gives the same intervals and p-values.';

create or replace function ragsql.compare_queries(
    run_a text, run_b text, measures text[] default null, rel_level integer default 1, judge text default null)
returns table (measure text, qid text, question text, baseline_value float8, value float8, diff float8)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select p.measure, p.qid, q.text, p.a, p.b, p.b - p.a
    from ragsql._paired_values(compare_queries.run_a, compare_queries.run_b, compare_queries.measures,
                               compare_queries.rel_level, compare_queries.judge) as p
    join ragsql.run as ru on ru.name = compare_queries.run_a
    left join ragsql.query as q on q.dataset_id = ru.dataset_id and q.qid = p.qid
    where p.a is not null and p.b is not null
    order by p.ord, p.qid collate "C";
end
$$;
comment on function ragsql.compare_queries(text, text, text[], integer, text) is
    'Every query both runs have a value for, per measure: the question, both values and b - a.';

create or replace function ragsql.measure_ci(
    run text, measures text[] default null, resamples integer default 10000, seed float8 default 0.42,
    alpha float8 default 0.05, rel_level integer default 1, judge text default null)
returns table (
    measure text, kind text, value float8, ci_low float8, ci_high float8, queries bigint, left_out bigint,
    judge_model text)
language sql stable parallel safe
as $$
    with per_query as materialized (
        select v.*
        from ragsql._metric_values(measure_ci.run, measure_ci.measures, measure_ci.rel_level, measure_ci.judge) as v
        where ragsql._check_resampling(measure_ci.resamples, measure_ci.alpha)
    ),
    per_measure as materialized (
        select v.ord, v.measure, v.kind, avg(v.value order by v.qid collate "C") as value, count(v.value) as queries,
               count(*) - count(v.value) as left_out, string_agg(distinct v.judge_model, ', ') as judge_model
        from per_query as v
        group by v.ord, v.measure, v.kind
    ),
    interval_of as (
        select r.ord, r.ci_low, r.ci_high
        from (select array_agg(v.ord) as ords, array_agg(v.qid) as qids, array_agg(v.value) as xs
              from per_query as v) as a
        cross join ragsql._resampled(a.ords, a.qids, a.xs, measure_ci.resamples, measure_ci.seed, measure_ci.alpha,
                                     false) as r
    )
    -- least / greatest: an interval never excludes its own value (bootstrap_mean_ci's mean is this value's bits)
    select pm.measure, pm.kind, pm.value, least(i.ci_low, pm.value), greatest(i.ci_high, pm.value), pm.queries,
           pm.left_out, pm.judge_model
    from per_measure as pm
    left join interval_of as i on i.ord = pm.ord
    order by pm.ord
$$;
comment on function ragsql.measure_ci(text, text[], integer, float8, float8, integer, text) is
    'Run value of each measure (retrieval and generation; default: the default measures and every judged '
    'metric) with its percentile bootstrap interval: value = mean over the queries with a value (every judged '
    'query for retrieval, as ragsql.summarize), left_out = queries without a value. judge: a model name or ''offline'' '
    '(default: the newest LLM judge''s, else the offline judge''s). Same seed, same interval.';

create or replace function ragsql.run_config(run text)
returns table (key text, value text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(run_config.run);
    judges text;
begin
    -- the judges first, by the run's key (one shard on Citus); the query below reads only the run's row
    select string_agg(distinct t.judge, ', ' order by t.judge) into judges
    from ragsql.judge_task as t
    where t.run_id = rid;
    return query
    -- the run's configuration as dotted keys (retriever, chunking, embedder, ...), and the judges that
    -- closed its judge tasks
    with recursive flat (key, value) as (
        select e.key, e.value
        from ragsql.run as ru
        cross join lateral jsonb_each(ru.config) as e
        where ru.id = rid
        union all
        select f.key || '.' || e.key, e.value
        from flat as f
        cross join lateral jsonb_each(f.value) as e
        where jsonb_typeof(f.value) = 'object'
    )
    select f.key, f.value #>> '{}'
    from flat as f
    where jsonb_typeof(f.value) <> 'object'
    union all
    select 'judge', judges
    where judges is not null
    order by 1;
end
$$;
comment on function ragsql.run_config(text) is
    'A run''s configuration as (key, value) rows: its config flattened to dotted keys, and judge = the judge '
    'models (and embedders) that closed its judge tasks.';

create or replace function ragsql.run_config_diff(run_a text, run_b text)
returns table (key text, baseline text, value text)
language sql stable parallel safe
as $$
    select coalesce(a.key, b.key), a.value, b.value
    from ragsql.run_config(run_config_diff.run_a) as a
    full join ragsql.run_config(run_config_diff.run_b) as b on b.key = a.key
    where a.value is distinct from b.value
    order by 1
$$;
comment on function ragsql.run_config_diff(text, text) is
    'What changed between two runs: the configuration keys (ragsql.run_config) whose values differ.';

create or replace function ragsql.history(
    dataset text, measures text[] default null, ci boolean default false, resamples integer default 2000,
    seed float8 default 0.42, alpha float8 default 0.05, rel_level integer default 1, judge text default null)
returns table (
    run text, created_at timestamptz, measure text, kind text, value float8, ci_low float8, ci_high float8,
    queries bigint, best boolean, latest boolean, config jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    with runs as (
        -- in order of creation; runs created in one transaction share created_at, their ids order them
        select ru.name, ru.created_at, ru.config, row_number() over (order by ru.created_at, ru.id) as position,
               count(*) over () as runs
        from ragsql.run as ru
        where ru.dataset_id = ragsql._dataset_id(history.dataset)
    ),
    valued as (
        select r.name, r.created_at, r.config, r.position, r.runs, v.measure, min(v.kind) as kind,
               avg(v.value) as value, null::float8 as ci_low, null::float8 as ci_high, count(v.value) as queries
        from runs as r
        cross join lateral ragsql._metric_values(r.name, history.measures, history.rel_level, history.judge) as v
        where not history.ci
        group by r.name, r.created_at, r.config, r.position, r.runs, v.ord, v.measure
        union all
        select r.name, r.created_at, r.config, r.position, r.runs, c.measure, c.kind, c.value, c.ci_low, c.ci_high,
               c.queries
        from runs as r
        cross join lateral ragsql.measure_ci(r.name, history.measures, history.resamples, history.seed, history.alpha,
                                             history.rel_level, history.judge) as c
        where history.ci
    )
    select v.name, v.created_at, v.measure, v.kind, v.value, v.ci_low, v.ci_high, v.queries,
           v.value is not null and v.value = case when ragsql.higher_is_better(v.measure)
                                                  then max(v.value) over (partition by v.measure)
                                                  else min(v.value) over (partition by v.measure) end,
           v.position = v.runs,
           v.config
    from valued as v
    order by v.measure, v.position;
end
$$;
comment on function ragsql.history(text, text[], boolean, integer, float8, float8, integer, text) is
    'Every run value of a dataset over time, per measure (default: the default measures and every judged metric '
    'of each run): run, created_at, value (with a bootstrap interval when ci), best = the best value of the '
    'measure so far (by its direction), latest = the newest run, and the run''s configuration.';

create or replace function ragsql.query_values(
    run text, measures text[] default null, rel_level integer default 1, judge text default null)
returns table (measure text, kind text, qid text, value float8, judge_model text)
language sql stable parallel safe
as $$
    select v.measure, v.kind, v.qid, v.value, v.judge_model
    from ragsql._metric_values(query_values.run, query_values.measures, query_values.rel_level, query_values.judge) as v
    order by v.ord, v.qid collate "C"
$$;
comment on function ragsql.query_values(text, text[], integer, text) is
    'Per-query values of retrieval measures and generation metrics together (default: the default measures and '
    'every judged metric), null where a query has none (see ragsql.evaluate_generation for the reason).';

create or replace function ragsql.statement_verdicts(
    run text, purposes text[] default array['faithfulness'], judge text default null)
returns table (
    qid text, purpose text, model text, prompt_version text, statement_no integer, statement text, verdict text,
    reason text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid bigint;
    judged_purpose text[];
    judged_model text[];
    judged_version text[];
begin
    -- the run and each purpose's verdict set (ragsql._newest_verdicts) first: the query below then reads the
    -- run's verdicts by its id, one shard on Citus
    select ru.id into rid from ragsql.run as ru where ru.name = statement_verdicts.run;
    select array_agg(p.purpose), array_agg(j.judge_model), array_agg(j.judge_prompt_version)
    into judged_purpose, judged_model, judged_version
    from unnest(statement_verdicts.purposes) as p(purpose)
    cross join lateral ragsql._newest_verdicts(rid, 'statement_verdict', array[p.purpose], statement_verdicts.judge,
                                               null) as j
    where rid is not null;
    return query
    -- the verdict set each purpose's metric reads, statement by statement
    select q.qid, v.purpose, v.model, v.prompt_version, v.statement_no, s.statement, v.verdict, v.reason
    from unnest(judged_purpose, judged_model, judged_version) as j(purpose, judge_model, judge_prompt_version)
    join ragsql.statement_verdict as v
      on v.run_id = rid and v.purpose = j.purpose and v.model = j.judge_model
     and v.prompt_version = j.judge_prompt_version
    join ragsql.text_statement as s on s.extraction_id = v.extraction_id and s.statement_no = v.statement_no
    join ragsql.query as q on q.id = v.query_id
    order by q.qid collate "C", v.purpose, v.statement_no;
end
$$;
comment on function ragsql.statement_verdicts(text, text[], text) is
    'The judge''s statement-by-statement verdicts (supported, partial, unsupported, contradicted) with reasons, '
    'from the verdict set the metrics read: purposes faithfulness, context_recall, correctness_answer, '
    'correctness_reference.';
