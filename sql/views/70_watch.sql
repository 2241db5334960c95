-- Watches over time: each window's metric values with their intervals, and how far capture and judging lag.
-- The statistics are ragsql.measure_ci's (sql/functions/50_compare.sql); these views only call it.

create or replace view ragsql.watch_metrics as
select w.name as watch,
       ww.window_start,
       ww.window_start + w.window_size as window_end,
       ww.window_start + w.window_size + w.settle <= now() as closed,
       ru.name as run,
       c.measure as metric,
       c.value,
       c.ci_low,
       c.ci_high,
       ww.captured + ww.skipped as n,
       c.queries as judged,
       c.left_out as skipped
from ragsql.watch as w
join ragsql.watch_window as ww on ww.watch_id = w.id
join ragsql.run as ru on ru.id = ww.run_id
cross join lateral ragsql.measure_ci(ru.name, resamples => 2000, judge => w.judge) as c
where c.kind = 'generation';
comment on view ragsql.watch_metrics is
    'Each window of each watch, per judged metric: value = mean over the window''s rows with a value, with a 95% '
    'percentile bootstrap interval (2,000 resamples, seed 0.42); n = sampled rows captured in the window (the '
    'queries of its dataset), judged = rows with a value, skipped = rows without one (no answer logged, or no '
    'verdict: the reason in ragsql.query_generation). '
    'closed: the window ended more than the watch''s settle delay ago.';

create or replace view ragsql.watch_lag as
select w.name as watch,
       w.paused,
       w.captured_until as last_capture,
       u.uncaptured,
       u.oldest as oldest_uncaptured,
       u.reason,
       j.unjudged,
       j.oldest as oldest_unjudged
from ragsql.watch as w
cross join lateral ragsql.watch_uncaptured(w.name) as u
cross join lateral ragsql._watch_unjudged(w.id) as j;
comment on view ragsql.watch_lag is
    'How far each watch is behind, for a dashboard: uncaptured = sampled rows of the source the next capture would '
    'store (null with the reason when the source cannot be read) and the time of the oldest; unjudged = captured '
    'rows whose judge tasks are not all done, and the time of the oldest.';
