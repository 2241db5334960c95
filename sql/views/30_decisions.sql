-- Run values with confidence intervals, ready to select from. The statistics live in
-- sql/functions/50_compare.sql; this view only calls them.

create or replace view ragsql.run_measure_ci as
select ru.name as run,
       c.measure,
       c.kind,
       c.value,
       c.ci_low,
       c.ci_high,
       c.queries,
       c.left_out,
       c.judge_model
from ragsql.run as ru
cross join lateral ragsql.measure_ci(ru.name, resamples => 2000) as c;
comment on view ragsql.run_measure_ci is
    'Every run''s default measures and judged generation metrics with a 95% percentile bootstrap interval '
    '(2,000 resamples, seed 0.42): so two runs are never called different on noise. '
    'ragsql.measure_ci(run, measures, resamples, seed, alpha) for other settings.';

create or replace view ragsql.run_history as
select d.name as dataset,
       h.run,
       h.created_at,
       h.measure,
       h.kind,
       h.value,
       h.ci_low,
       h.ci_high,
       h.queries,
       h.best,
       h.latest,
       h.config
from ragsql.dataset as d
cross join lateral ragsql.history(d.name, ci => true) as h;
comment on view ragsql.run_history is
    'Every run value of every dataset over time with a 95% bootstrap interval (2,000 resamples): drift across '
    'nightly runs. best marks the best value of a measure in its dataset, latest the newest run. '
    'ragsql.history(dataset, measures, ci, ...) for one dataset or other settings.';

create or replace view ragsql.judge_confusion as
select p.run,
       p.metric,
       p.kind,
       p.judge_model,
       coalesce(p.judge_verdict, p.judge_value::text) as judge_label,
       coalesce(p.verdict, p.score::text) as human_label,
       count(*) as pairs
-- the judge's stored verdicts (ragsql._review_pairs), not the values written on the review sheet
from ragsql._review_pairs(null) as p
where p.item <> '' and p.judge_verdict is not null or (p.score in (0, 1) and p.judge_value in (0, 1))
group by p.run, p.metric, p.kind, p.judge_model,
         coalesce(p.judge_verdict, p.judge_value::text),
         coalesce(p.verdict, p.score::text);
comment on view ragsql.judge_confusion is
    'Confusion matrix of the judge against reviewers: statement verdicts, and 0/1 metric values (aspect '
    'critiques), counted per (judge label, human label). ragsql.judge_agreement has the statistics.';

create or replace view ragsql.reviewer_agreement as
with paired as (
    select a.run_id, a.metric, case when a.item = '' then 'score' else 'verdict' end as kind,
           a.reviewer as reviewer_a, b.reviewer as reviewer_b,
           coalesce(a.verdict, a.score::text) as label_a, coalesce(b.verdict, b.score::text) as label_b,
           a.score as score_a, b.score as score_b
    from ragsql.review_label as a
    join ragsql.review_label as b
      on b.run_id = a.run_id and b.query_id = a.query_id and b.metric = a.metric and b.item = a.item
     and b.reviewer > a.reviewer
)
select ru.name as run,
       p.metric,
       p.kind,
       p.reviewer_a,
       p.reviewer_b,
       count(*) as items,
       avg((p.label_a = p.label_b)::integer)::float8 as agreement,
       case when count(*) >= 10 then ragsql.cohen_kappa(array_agg(p.label_a order by p.label_a, p.label_b),
                                                        array_agg(p.label_b order by p.label_a, p.label_b)) end as kappa,
       case when count(*) >= 10 and p.kind = 'score'
            then ragsql.spearman(array_agg(p.score_a order by p.score_a, p.score_b),
                                 array_agg(p.score_b order by p.score_a, p.score_b)) end as spearman
from paired as p
join ragsql.run as ru on ru.id = p.run_id
group by ru.name, p.metric, p.kind, p.reviewer_a, p.reviewer_b;
comment on view ragsql.reviewer_agreement is
    'Agreement between two reviewers on the items both labelled: exact agreement, Cohen''s kappa and (scores) '
    'Spearman; kappa and Spearman null under 10 items.';
