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
