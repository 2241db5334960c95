-- The value of every yes/no metric of the registry (ragsql/registry.py `yes_no`): 1 where the judge said yes to the
-- metric's question about the answer, 0 where it said no, from ragsql.yes_no_verdict.
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

create or replace function ragsql.yes_no_metric(
    run text, metric text, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(yes_no_metric.run);
    -- a yes/no metric's judge task kind is its name
    judged constant jsonb := ragsql._judged_scope(rid, yes_no_metric.metric, 'yes_no_verdict',
                                                  array[yes_no_metric.metric], yes_no_metric.model,
                                                  yes_no_metric.prompt_version);
begin
    return query
    select s.qid,
           y.verdict::integer::float8,
           case
               when s.answer is null then 'no answer in the run'
               when y.verdict is not null then null
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when y.verdict is not null then jsonb_build_object('verdict', y.verdict, 'reason', y.reason) end
    from ragsql._scope_rows(judged) as s
    left join ragsql.yes_no_verdict as y
      on y.run_id = rid and y.query_id = s.query_id and y.metric = yes_no_metric.metric
     and y.model = s.judge_model and y.prompt_version = s.judge_prompt_version
    order by s.qid collate "C";
end
$$;
comment on function ragsql.yes_no_metric(text, text, text, text) is
    'A yes/no metric of the registry per query: 1 where the judge answered yes to the metric''s question about the '
    'answer, 0 for no (ragsql.yes_no_verdict); NULL with the reason where it gave no verdict.';
