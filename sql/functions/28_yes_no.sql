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
    rid bigint := ragsql._run_id(yes_no_metric.run);
    chosen_model text;
    chosen_version text;
    scope jsonb;
begin
    -- the run first, then its verdict set and scope: the query below names the run id on every run-scoped table
    -- and calls no function that reads tables, so on Citus it is one shard's
    select j.judge_model, j.judge_prompt_version
      into chosen_model, chosen_version
    from ragsql._newest_verdicts(rid, 'yes_no_verdict', array[yes_no_metric.metric], yes_no_metric.model,
                                 yes_no_metric.prompt_version) as j;
    scope := (select coalesce(jsonb_agg(g), '[]') from ragsql._generation_scope(rid, yes_no_metric.metric) as g);
    return query
    select s.qid,
           case when y.verdict then 1.0::float8 when not y.verdict then 0.0::float8 end,
           case
               when s.answer is null then 'no answer in the run'
               when y.verdict is not null then null
               else ragsql._judge_reason(s.task_status, s.task_error, chosen_model, chosen_version)
           end,
           chosen_model,
           chosen_version,
           null::text,
           case when y.verdict is not null then jsonb_build_object('verdict', y.verdict, 'reason', y.reason) end
    from jsonb_to_recordset(scope) as s(
        query_id bigint, qid text, question text, answer text, n_references bigint, n_contexts bigint,
        task_status text, task_error text)
    left join ragsql.yes_no_verdict as y
      on y.run_id = rid and y.query_id = s.query_id and y.metric = yes_no_metric.metric
     and y.model = chosen_model and y.prompt_version = chosen_version
    order by s.qid collate "C";
end
$$;
comment on function ragsql.yes_no_metric(text, text, text, text) is
    'A yes/no metric of the registry per query: 1 where the judge answered yes to the metric''s question about the '
    'answer, 0 for no (ragsql.yes_no_verdict); NULL with the reason where it gave no verdict.';
