-- Retrieval measures of every run, ready to select from. The formulas live in
-- sql/functions/10_measure.sql; these views only call them.

create or replace view ragsql.query_measure as
select ru.name as run,
       e.qid,
       e.measure,
       e.value,
       e.relevant,
       e.retrieved
from ragsql.run as ru
cross join lateral ragsql.evaluate(ru.name) as e;
comment on view ragsql.query_measure is
    'Per-query value of each default measure (ragsql.default_measure) for every run, relevance level 1. '
    'relevant = R, the query''s relevant judgments; retrieved = false for a judged query missing from the run.';

create or replace view ragsql.run_measure as
select ru.name as run,
       s.measure,
       s.value,
       s.queries,
       s.answerable,
       s.no_relevant,
       s.missing,
       s.value_answerable
from ragsql.run as ru
cross join lateral ragsql.summarize(ru.name) as s;
comment on view ragsql.run_measure is
    'Run value of each default measure, relevance level 1: value = mean over judged queries (trec_eval -c), '
    'queries, answerable (with a relevant item), no_relevant, missing (judged but absent from the run), '
    'value_answerable = mean over answerable queries. ragsql.summarize(run, measures, rel_level) for others.';
