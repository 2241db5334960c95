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
