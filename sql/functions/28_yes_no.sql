-- The value of every yes/no metric of the registry (ragsql/registry.py `yes_no`): 1 where the judge said yes to the
-- metric's question about the answer, 0 where it said no, from ragsql.yes_no_verdict.
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

call ragsql._metric_function(
    'yes_no_metric',
    'run text, metric text, model text default null, prompt_version text default null',
    'ragsql._verdict_metric(run, metric, ''yes_no_verdict'', metric, model, prompt_version)',
    'A yes/no metric of the registry per query: 1 where the judge answered yes to the metric''s question about the '
    'answer, 0 for no (ragsql.yes_no_verdict); NULL with the reason where it gave no verdict.');
