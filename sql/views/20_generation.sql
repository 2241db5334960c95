-- Generation metrics of every run that has answers, and readable views of the verdicts. The
-- formulas live in sql/functions/20_generation.sql; these views only call them.

create or replace view ragsql.query_generation as
with answered as materialized (select a.run_id from ragsql.answer as a group by a.run_id)
select ru.name as run,
       e.metric,
       e.qid,
       e.value,
       e.reason,
       e.judge_model,
       e.judge_prompt_version,
       e.judge_embedder,
       e.detail
from ragsql.run as ru
-- the runs with answers as a join, not a correlated exists: Citus plans no correlated subquery beside the
-- reference table run
join answered on answered.run_id = ru.id
cross join lateral ragsql.evaluate_generation(ru.name) as e;
comment on view ragsql.query_generation is
    'Per-query value of every generation metric a run has verdicts or judge tasks for, with default parameters '
    '(the newest LLM judge''s verdicts, else the offline judge''s; partial weight 0, correctness weights 0.75/0.25). reason says why value is null. '
    'ragsql.evaluate_generation(run, metrics, ...) for other parameters.';

create or replace view ragsql.run_generation as
with answered as materialized (select a.run_id from ragsql.answer as a group by a.run_id)
select ru.name as run,
       s.metric,
       s.value,
       s.queries,
       s.covered,
       s.missing,
       s.judge_model,
       s.judge_prompt_version,
       s.judge_embedder
from ragsql.run as ru
join answered on answered.run_id = ru.id
cross join lateral ragsql.summarize_generation(ru.name) as s;
comment on view ragsql.run_generation is
    'Run value of every generation metric in ragsql.query_generation: value = mean over covered queries, '
    'queries = queries of the dataset, covered = with a value, missing = null (see reason in '
    'ragsql.query_generation), and the judge model, prompt version and embedder the values come from.';

create or replace view ragsql.correctness_verdict as
select ru.name as run,
       q.qid,
       v.model,
       v.prompt_version,
       case v.purpose when 'correctness_answer' then 'answer' else 'reference' end as side,
       s.statement_no,
       s.statement,
       case
           when v.purpose = 'correctness_answer' and v.verdict = 'supported' then 'TP'
           when v.purpose = 'correctness_answer' then 'FP'
           when v.verdict = 'supported' then 'covered'
           else 'FN'
       end as label,
       v.verdict,
       v.reason,
       v.call_id
from ragsql.statement_verdict as v
join ragsql.run as ru on ru.id = v.run_id
join ragsql.query as q on q.id = v.query_id
join ragsql.text_statement as s on s.extraction_id = v.extraction_id and s.statement_no = v.statement_no
where v.purpose in ('correctness_answer', 'correctness_reference');
comment on view ragsql.correctness_verdict is
    'Answer-correctness verdicts labelled as RAGAS labels them: answer statements TP (the reference supports '
    'them) or FP, reference statements covered (the answer supports them) or FN.';

create or replace view ragsql.judge_usage as
select c.kind,
       c.model,
       c.prompt_name,
       c.prompt_version,
       count(*) as calls,
       count(*) filter (where c.status = 'failed') as failed,
       sum(c.attempts) as attempts,
       sum(c.prompt_tokens) as prompt_tokens,
       sum(c.completion_tokens) as completion_tokens,
       avg(c.latency_ms) as mean_latency_ms
from ragsql.judge_call as c
group by c.kind, c.model, c.prompt_name, c.prompt_version;
comment on view ragsql.judge_usage is
    'Calls, failures, attempts, tokens and mean latency of the judge and embedders per model and prompt, '
    'over every stored call of the database (ragsql.run_usage: per run and purpose).';

create or replace view ragsql.run_usage as
select ru.name as run,
       c.purpose,
       c.kind,
       c.model,
       c.prompt_name,
       c.prompt_version,
       count(*) as calls,
       count(*) filter (where c.status = 'failed') as failed,
       sum(c.attempts) as attempts,
       sum(c.prompt_tokens) as prompt_tokens,
       sum(c.completion_tokens) as completion_tokens,
       avg(c.latency_ms) as mean_latency_ms
from ragsql.judge_call as c
join ragsql.run as ru on ru.id = c.for_run_id
group by ru.name, c.purpose, c.kind, c.model, c.prompt_name, c.prompt_version;
comment on view ragsql.run_usage is
    'What a run cost: the calls sent for it (judge, rerank, generate), failures, attempts, tokens and mean latency '
    'per purpose, model and prompt. A reply reused from the cache costs nothing and stays with the run that bought '
    'it; calls stored before migration 0170 and synth calls belong to no run.';
