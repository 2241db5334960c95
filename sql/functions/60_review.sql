-- Can the judge be trusted? Human review labels (ragsql.review_label) against the judge's values:
-- agreement statistics, the confusion matrix, agreement between reviewers, and prediction-powered
-- intervals (PPI, as ARES computes them) that correct the judge's mean by its error on labelled queries.

create or replace function ragsql.cohen_kappa(a text[], b text[], labels text[] default null, weights text default 'none')
returns float8
language sql immutable parallel safe
as $$
    -- 1 - sum(w * observed) / sum(w * expected) with disagreement weights w: 0/1 ('none'), |i - j| ('linear'),
    -- (i - j)^2 ('quadratic') over the labels' order (given, else sorted); pairs with a null are left out
    with pair as (
        select p.x, p.y from unnest(cohen_kappa.a, cohen_kappa.b) as p(x, y) where p.x is not null and p.y is not null
    ),
    label as (
        select t.l, t.ord
        from unnest(coalesce(cohen_kappa.labels,
                             (select array_agg(distinct v order by v) from (select x as v from pair
                                                                             union select y from pair) as u)))
             with ordinality as t(l, ord)
    ),
    total as (select count(*)::float8 as n from pair),
    margin as (
        select lx.ord as i, ly.ord as j,
               (select count(*) from pair as p where p.x = lx.l and p.y = ly.l) as observed,
               (select count(*) from pair as p where p.x = lx.l)::float8
                   * (select count(*) from pair as p where p.y = ly.l) / nullif(t.n, 0) as expected
        from label as lx cross join label as ly cross join total as t
    ),
    weighted as (
        select sum(m.observed * w.w) as o, sum(m.expected * w.w) as e
        from margin as m
        cross join lateral (select case cohen_kappa.weights
                                        when 'linear' then abs(m.i - m.j)::float8
                                        when 'quadratic' then ((m.i - m.j) ^ 2)::float8
                                        else (m.i <> m.j)::integer::float8 end as w) as w
    )
    select case when w.e = 0 then null else 1 - w.o / w.e end
    from weighted as w
    where cohen_kappa.weights in ('none', 'linear', 'quadratic')
$$;
comment on function ragsql.cohen_kappa(text[], text[], text[], text) is
    'Cohen''s kappa of two raters'' labels (pairs with a null left out); weights none, linear or quadratic '
    'over the labels'' order (labels given, else sorted), as scikit-learn''s cohen_kappa_score. Null when '
    'chance agreement is total (one label only), or for an unknown weighting.';

create or replace function ragsql.spearman(a float8[], b float8[])
returns float8
language sql immutable parallel safe
as $$
    -- Pearson correlation of average ranks (ties share the mean of their ranks)
    with pair as (
        select p.x, p.y from unnest(spearman.a, spearman.b) as p(x, y) where p.x is not null and p.y is not null
    ),
    ranked as (
        select rank() over (order by p.x) + (count(*) over (partition by p.x) - 1) / 2.0 as rx,
               rank() over (order by p.y) + (count(*) over (partition by p.y) - 1) / 2.0 as ry
        from pair as p
    )
    select corr(r.rx, r.ry) from ranked as r
$$;
comment on function ragsql.spearman(float8[], float8[]) is
    'Spearman''s rank correlation (average ranks for ties) of paired values; null without variation.';

create or replace function ragsql.kendall_tau(a float8[], b float8[])
returns float8
language sql immutable parallel safe
as $$
    -- tau-b = (concordant - discordant) / sqrt((n0 - ties in a) (n0 - ties in b)) over all pairs of pairs
    with pair as (
        select p.x, p.y, p.k
        from unnest(kendall_tau.a, kendall_tau.b) with ordinality as p(x, y, k)
        where p.x is not null and p.y is not null
    ),
    counts as (
        select sum(sign(i.x - j.x) * sign(i.y - j.y)) as s,
               count(*) filter (where i.x <> j.x) as untied_x,
               count(*) filter (where i.y <> j.y) as untied_y
        from pair as i join pair as j on i.k < j.k
    )
    select c.s / sqrt(c.untied_x::float8 * c.untied_y) from counts as c where c.untied_x > 0 and c.untied_y > 0
$$;
comment on function ragsql.kendall_tau(float8[], float8[]) is
    'Kendall''s tau-b of paired values (as scipy.stats.kendalltau); null without variation.';

create or replace function ragsql._verdict_levels()
returns text[]
language sql immutable parallel safe
as $$ select array['contradicted', 'unsupported', 'partial', 'supported'] $$;
comment on function ragsql._verdict_levels() is 'Statement verdicts from worst to best: the ordinal scale weighted kappa uses.';

create or replace function ragsql._review_pairs(run_name text)
returns table (
    run text, metric text, kind text, judge_model text, reviewer text, query_id bigint, item text, score float8,
    verdict text, judge_value float8, judge_verdict text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    -- each label with the judge's STORED value of its item, joined by run, query, metric (or purpose and statement)
    -- and the judge the label names: the values written on the sheet (review_label.judge_value, judge_verdict)
    -- are never read, so an edited or spreadsheet-rounded sheet changes no statistic
    with label as (
        select ru.name as run, q.qid, l.query_id, l.metric, l.item, l.judge_model, l.reviewer, l.score, l.verdict,
               split_part(l.item, ':', 1) as purpose, nullif(split_part(l.item, ':', 2), '')::integer as statement_no
        from ragsql.review_label as l
        join ragsql.run as ru on ru.id = l.run_id
        join ragsql.query as q on q.id = l.query_id
        where _review_pairs.run_name is null or ru.name = _review_pairs.run_name
    ),
    score_key as (select distinct l.run, l.metric, l.judge_model from label as l where l.item = ''),
    stored_score as (
        select k.run, k.metric, k.judge_model, g.qid, g.value
        from score_key as k
        cross join lateral ragsql.generation_measure(k.run, k.metric, k.judge_model) as g
    ),
    verdict_key as (select distinct l.run, l.purpose, l.judge_model from label as l where l.item <> ''),
    stored_verdict as (
        select k.run, k.purpose, k.judge_model, v.qid, v.statement_no, v.verdict
        from verdict_key as k
        cross join lateral ragsql.statement_verdicts(k.run, array[k.purpose], k.judge_model) as v
    )
    select l.run, l.metric, case when l.item = '' then 'score' else 'verdict' end, l.judge_model, l.reviewer,
           l.query_id, l.item, l.score, l.verdict, s.value, v.verdict
    from label as l
    left join stored_score as s
      on l.item = '' and s.run = l.run and s.metric = l.metric and s.judge_model is not distinct from l.judge_model
     and s.qid = l.qid
    left join stored_verdict as v
      on l.item <> '' and v.run = l.run and v.purpose = l.purpose and v.judge_model is not distinct from l.judge_model
     and v.qid = l.qid and v.statement_no = l.statement_no;
end
$$;
comment on function ragsql._review_pairs(text) is
    'Each human label (ragsql.review_label) of a run (null: every run) beside the judge''s stored value or verdict '
    'of the same item by the judge the label names; null where the judge has none. Never the sheet''s values.';

create or replace function ragsql._judge_agreement(run_name text)
returns table (
    run text, metric text, kind text, judge_model text, pairs bigint, reviewers bigint, accuracy float8,
    kappa float8, weighted_kappa float8, mean_abs_error float8, spearman float8, kendall float8, note text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    -- each (reviewer, item) label is one pair with the judge's stored value of the item (ragsql._review_pairs);
    -- a label whose item has no stored value is left out and counted in the note. kind 'verdict':
    -- statement verdicts (accuracy, kappa, linear-weighted kappa on contradicted < unsupported < partial <
    -- supported); kind 'score': metric values (mean absolute error, Spearman, Kendall; accuracy and kappa
    -- when every value is 0 or 1). Under 10 pairs the statistics are null and the note says so.
    with every_label as (
        select p.*, coalesce(p.judge_verdict, p.judge_value::text) is null as unjudged
        from ragsql._review_pairs(_judge_agreement.run_name) as p
    ),
    label as (select * from every_label as l where not l.unjudged),
    left_out as (
        select l.run, l.metric, l.kind, l.judge_model, count(*) filter (where l.unjudged) as n
        from every_label as l
        group by l.run, l.metric, l.kind, l.judge_model
    ),
    grouped as (
        select l.run, l.metric, l.kind, l.judge_model, count(*) as pairs, count(distinct l.reviewer) as reviewers,
               array_agg(coalesce(l.verdict, l.score::text) order by l.reviewer, l.query_id, l.item)
                   as human_text,
               array_agg(coalesce(l.judge_verdict, l.judge_value::text) order by l.reviewer, l.query_id, l.item)
                   as judge_text,
               array_agg(l.score order by l.reviewer, l.query_id, l.item) as human_score,
               array_agg(l.judge_value order by l.reviewer, l.query_id, l.item) as judge_score,
               bool_and(l.kind = 'verdict' or (l.score in (0, 1) and l.judge_value in (0, 1))) as categorical,
               avg(abs(l.score - l.judge_value)) as mae,
               avg((coalesce(l.verdict, l.score::text) = coalesce(l.judge_verdict, l.judge_value::text))::integer)
                   as accuracy
        from label as l
        group by l.run, l.metric, l.kind, l.judge_model
    )
    select g.run, g.metric, g.kind, g.judge_model, g.pairs, g.reviewers,
           case when g.pairs >= 10 and g.categorical then g.accuracy::float8 end,
           case when g.pairs >= 10 and g.categorical then ragsql.cohen_kappa(g.judge_text, g.human_text) end,
           case when g.pairs >= 10 and g.kind = 'verdict'
                then ragsql.cohen_kappa(g.judge_text, g.human_text, ragsql._verdict_levels(), 'linear') end,
           case when g.pairs >= 10 and g.kind = 'score' then g.mae end,
           case when g.pairs >= 10 and g.kind = 'score' then ragsql.spearman(g.judge_score, g.human_score) end,
           case when g.pairs >= 10 and g.kind = 'score' then ragsql.kendall_tau(g.judge_score, g.human_score) end,
           nullif(concat_ws('; ',
               case when g.pairs < 10 then format('only %s labelled pairs: at least 10 are needed for agreement '
                                                  'statistics', g.pairs) end,
               case when o.n > 0 then format('%s labels left out: the judge has no stored value of their item',
                                             o.n) end), '')
    from grouped as g
    join left_out as o
      on o.run = g.run and o.metric = g.metric and o.kind = g.kind and o.judge_model is not distinct from g.judge_model
    order by g.run, g.metric, g.kind;
end
$$;
comment on function ragsql._judge_agreement(text) is 'ragsql.judge_agreement in PL/pgSQL (Citus plans its queries; an output column may not share the argument''s name there).';

create or replace function ragsql.judge_agreement(run text default null)
returns table (
    run text, metric text, kind text, judge_model text, pairs bigint, reviewers bigint, accuracy float8,
    kappa float8, weighted_kappa float8, mean_abs_error float8, spearman float8, kendall float8, note text)
language sql stable parallel safe
as $$
    select * from ragsql._judge_agreement(judge_agreement.run)
$$;
comment on function ragsql.judge_agreement(text) is
    'Judge-human agreement per run, metric, kind (score: the metric''s value; verdict: statement verdicts) and '
    'judge: pairs, reviewers, accuracy, Cohen''s kappa, linear-weighted kappa (verdicts), mean absolute error, '
    'Spearman and Kendall (scores). Null statistics with a note under 10 pairs.';

create or replace function ragsql._normal_quantile(p float8)
returns float8
language plpgsql immutable strict parallel safe
as $$
-- The standard normal quantile by Acklam's rational approximations (relative error < 1.2e-9):
-- a central rational function in q = p - 1/2, and tail functions in sqrt(-2 ln p).
declare
    q float8;
    r float8;
    low constant float8 := 0.02425;
begin
    if p <= 0 or p >= 1 then
        raise exception 'normal quantile of % is not defined', p using errcode = 'invalid_parameter_value';
    end if;
    if p < low then
        q := sqrt(-2 * ln(p));
        return (((((-7.784894002430293e-03 * q - 3.223964580411365e-01) * q - 2.400758277161838e+00) * q
                  - 2.549732539343734e+00) * q + 4.374664141464968e+00) * q + 2.938163982698783e+00)
             / ((((7.784695709041462e-03 * q + 3.224671290700398e-01) * q + 2.445134137142996e+00) * q
                  + 3.754408661907416e+00) * q + 1);
    elsif p > 1 - low then
        return -ragsql._normal_quantile(1 - p);
    end if;
    q := p - 0.5;
    r := q * q;
    return (((((-3.969683028665376e+01 * r + 2.209460984245205e+02) * r - 2.759285104469687e+02) * r
              + 1.383577518672690e+02) * r - 3.066479806614716e+01) * r + 2.506628277459239e+00) * q
         / (((((-5.447609879822406e+01 * r + 1.615858368580409e+02) * r - 1.556989798598866e+02) * r
              + 6.680131188771972e+01) * r - 1.328068155288572e+01) * r + 1);
end
$$;
comment on function ragsql._normal_quantile(float8) is 'The standard normal quantile (Acklam''s approximation, 1e-9).';

create or replace function ragsql._ppi_mean(run_ text, metric_ text, alpha_ float8, judge_ text)
returns table (
    metric text, judge_model text, judge_mean float8, rectifier float8, estimate float8, ci_low float8,
    ci_high float8, unlabelled bigint, labelled bigint, note text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    -- prediction-powered mean (ARES's pp_mean_iid_asymptotic): the judge's mean over every query with a
    -- value, minus its mean error (judge - human) on the labelled queries; half-width
    -- z(1 - alpha/2) * sqrt(var(judge) / N + var(judge - human) / n), population variances
    with judged as (
        select g.qid, g.value
        from ragsql.generation_measure(_ppi_mean.run_, _ppi_mean.metric_, _ppi_mean.judge_) as g
        where g.value is not null and ragsql._check_resampling(1, _ppi_mean.alpha_)
    ),
    model as (
        select s.judge_model from ragsql.summarize_generation(_ppi_mean.run_, array[_ppi_mean.metric_], _ppi_mean.judge_) as s
    ),
    human as (
        -- one label per query: the mean of its reviewers' scores
        select q.qid, avg(l.score) as score
        from ragsql.review_label as l
        join ragsql.run as ru on ru.id = l.run_id
        join ragsql.query as q on q.id = l.query_id
        where ru.name = _ppi_mean.run_ and l.metric = lower(btrim(_ppi_mean.metric_)) and l.item = ''
        group by q.qid
    ),
    stats as (
        select count(*) as n_all, avg(j.value) as judge_mean, var_pop(j.value) as judge_var,
               (select m.judge_model from model as m) as model,
               count(h.score) as n_lab, avg(j.value - h.score) as rectifier, var_pop(j.value - h.score) as error_var
        from judged as j
        left join human as h on h.qid = j.qid
    )
    select lower(btrim(_ppi_mean.metric_)), s.model, s.judge_mean, s.rectifier, s.judge_mean - s.rectifier,
           s.judge_mean - s.rectifier - ragsql._normal_quantile(1 - _ppi_mean.alpha_ / 2)
               * sqrt(s.judge_var / s.n_all + s.error_var / nullif(s.n_lab, 0)),
           s.judge_mean - s.rectifier + ragsql._normal_quantile(1 - _ppi_mean.alpha_ / 2)
               * sqrt(s.judge_var / s.n_all + s.error_var / nullif(s.n_lab, 0)),
           s.n_all, s.n_lab,
           case when s.n_all = 0 then format('%s has no judged value in run %s', _ppi_mean.metric_, _ppi_mean.run_)
                when s.n_lab = 0 then format('no human label of %s in run %s: see ragsql review export',
                                             _ppi_mean.metric_, _ppi_mean.run_) end
    from stats as s;
end
$$;

comment on function ragsql._ppi_mean(text, text, float8, text) is
    'ragsql.ppi_mean in PL/pgSQL (Citus plans its queries; there an argument may not share an output column''s name).';

create or replace function ragsql.ppi_mean(run text, metric text, alpha float8 default 0.05, judge text default null)
returns table (
    metric text, judge_model text, judge_mean float8, rectifier float8, estimate float8, ci_low float8,
    ci_high float8, unlabelled bigint, labelled bigint, note text)
language sql stable parallel safe
as $$
    select * from ragsql._ppi_mean(ppi_mean.run, ppi_mean.metric, ppi_mean.alpha, ppi_mean.judge)
$$;
comment on function ragsql.ppi_mean(text, text, float8, text) is
    'Prediction-powered estimate of a generation metric''s run mean (ARES''s PPI): the judge''s mean over all '
    'judged queries corrected by its mean error on the human-labelled ones (ragsql.review_label scores), with '
    'the asymptotic (1 - alpha) interval; null with a note without labels.';

create or replace function ragsql._ppi_compare(run_a_ text, run_b_ text, metric_ text, alpha_ float8, judge_ text)
returns table (
    metric text, baseline_estimate float8, estimate float8, diff float8, ci_low float8, ci_high float8,
    queries bigint, labelled_both bigint, labelled_a bigint, labelled_b bigint, method text, note text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    -- the prediction-powered difference run_b - run_a. Paired, when two or more queries are labelled in both
    -- runs: the mean per-query difference of the judge's values over the queries both runs have a value for,
    -- minus the mean difference of the judge's errors (judge - human) over the queries labelled in both;
    -- half-width z(1 - alpha/2) * sqrt(var(judge diff) / N + var(error diff) / n), population variances.
    -- Otherwise, with labels in each run, the two ppi_mean estimates as independent: half-widths add in
    -- quadrature.
    with a as (select * from ragsql.ppi_mean(_ppi_compare.run_a_, _ppi_compare.metric_, _ppi_compare.alpha_, _ppi_compare.judge_)),
    b as (select * from ragsql.ppi_mean(_ppi_compare.run_b_, _ppi_compare.metric_, _ppi_compare.alpha_, _ppi_compare.judge_)),
    judged as (
        select ja.qid, ja.value as value_a, jb.value as value_b
        from ragsql.generation_measure(_ppi_compare.run_a_, _ppi_compare.metric_, _ppi_compare.judge_) as ja
        join ragsql.generation_measure(_ppi_compare.run_b_, _ppi_compare.metric_, _ppi_compare.judge_) as jb
          on jb.qid = ja.qid
        where ja.value is not null and jb.value is not null
    ),
    human as (
        select ru.name as run, q.qid, avg(l.score) as score
        from ragsql.review_label as l
        join ragsql.run as ru on ru.id = l.run_id
        join ragsql.query as q on q.id = l.query_id
        where ru.name in (_ppi_compare.run_a_, _ppi_compare.run_b_) and l.metric = lower(btrim(_ppi_compare.metric_))
          and l.item = ''
        group by ru.name, q.qid
    ),
    paired as (
        select j.value_b - j.value_a as judge_diff,
               (j.value_b - hb.score) - (j.value_a - ha.score) as error_diff
        from judged as j
        left join human as ha on ha.run = _ppi_compare.run_a_ and ha.qid = j.qid
        left join human as hb on hb.run = _ppi_compare.run_b_ and hb.qid = j.qid
    ),
    p as (
        select count(*) as n_all, avg(judge_diff) as judge_mean, var_pop(judge_diff) as judge_var,
               count(error_diff) as n_lab, avg(error_diff) as error_mean, var_pop(error_diff) as error_var
        from paired
    ),
    z as (select ragsql._normal_quantile(1 - _ppi_compare.alpha_ / 2) as z)
    select lower(btrim(_ppi_compare.metric_)), a.estimate, b.estimate,
           case when p.n_lab >= 2 then p.judge_mean - p.error_mean else b.estimate - a.estimate end,
           case when p.n_lab >= 2 then p.judge_mean - p.error_mean
                                       - z.z * sqrt(p.judge_var / p.n_all + p.error_var / p.n_lab)
                else b.estimate - a.estimate - sqrt((a.ci_high - a.estimate) ^ 2 + (b.ci_high - b.estimate) ^ 2) end,
           case when p.n_lab >= 2 then p.judge_mean - p.error_mean
                                       + z.z * sqrt(p.judge_var / p.n_all + p.error_var / p.n_lab)
                else b.estimate - a.estimate + sqrt((a.ci_high - a.estimate) ^ 2 + (b.ci_high - b.estimate) ^ 2) end,
           p.n_all, p.n_lab, a.labelled, b.labelled,
           case when p.n_lab >= 2 then 'paired' when b.estimate is not null and a.estimate is not null
                then 'independent' end,
           case when a.estimate is null or b.estimate is null
                then coalesce(a.note, b.note, 'no prediction-powered estimate')
                when p.n_lab < 2 then 'fewer than two queries labelled in both runs: the runs'' estimates are '
                                      'combined as independent' end
    from a, b, p, z;
end
$$;

comment on function ragsql._ppi_compare(text, text, text, float8, text) is
    'ragsql.ppi_compare in PL/pgSQL (Citus plans its queries; there an argument may not share an output column''s name).';

create or replace function ragsql.ppi_compare(
    run_a text, run_b text, metric text, alpha float8 default 0.05, judge text default null)
returns table (
    metric text, baseline_estimate float8, estimate float8, diff float8, ci_low float8, ci_high float8,
    queries bigint, labelled_both bigint, labelled_a bigint, labelled_b bigint, method text, note text)
language sql stable parallel safe
as $$
    select * from ragsql._ppi_compare(ppi_compare.run_a, ppi_compare.run_b, ppi_compare.metric, ppi_compare.alpha, ppi_compare.judge)
$$;
comment on function ragsql.ppi_compare(text, text, text, float8, text) is
    'Prediction-powered difference of a generation metric between two runs (run_b - run_a) with its (1 - alpha) '
    'interval: paired over the queries labelled in both runs (two or more), else the runs'' ppi_mean estimates '
    'combined as independent; null with a note when a run has no label.';

create or replace function ragsql.review_sample(
    run text, sample integer, stratify text default null, seed float8 default 0.42, judge text default null)
returns table (qid text, stratum integer)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(review_sample.run);
    answered_qids text[];
begin
    -- the answered queries first, by the run's key (one shard on Citus); the query below calls
    -- ragsql.generation_measure, which reads the run's tables itself
    select array_agg(q.qid) into answered_qids
    from ragsql.answer as a
    join ragsql.query as q on q.id = a.query_id
    where a.run_id = rid and a.text is not null;  -- an answer without text (no response) has nothing to review
    return query
    -- answered queries in a seeded random order (the same seed, the same sample on any server); with
    -- stratify, taken in turn from the quintiles of that metric's value (queries without a value last)
    with answered as (
        select x.qid
        from unnest(answered_qids) as x(qid)
        where ragsql._check_resampling(review_sample.sample, 0.5)
    ),
    valued as (
        select a.qid, g.value
        from answered as a
        left join ragsql.generation_measure(review_sample.run, coalesce(review_sample.stratify, 'faithfulness'),
                                            review_sample.judge) as g
          on g.qid = a.qid and review_sample.stratify is not null
    ),
    strata as (
        select v.qid,
               case when review_sample.stratify is null then 1
                    when v.value is null then 6
                    else ntile(least(5, review_sample.sample)) over (partition by v.value is null order by v.value, v.qid)
               end as stratum,
               ragsql._uniform(0, hashtextextended(v.qid, 0), review_sample.seed) as draw
        from valued as v
    )
    select s.qid, s.stratum::integer
    from (select s.*, row_number() over (partition by s.stratum order by s.draw, s.qid) as turn from strata as s) as s
    order by s.turn, s.stratum
    limit review_sample.sample;
end
$$;
comment on function ragsql.review_sample(text, integer, text, float8, text) is
    'Which answered queries of a run to review: a seeded random sample, stratified by the quintiles of a '
    'metric''s value when asked (stratum 6: no value). The same seed gives the same sample.';
