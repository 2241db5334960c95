-- Diagnostics from the seeds: the correctness x context recall x context precision table of likely causes
-- (per query), the retrieval interpretation rules and the threshold report (per run). Thresholds are
-- parameters; the defaults are the seeds'. model: whose verdicts are read, as summarize_generation's.

-- a judge model to read (ragsql diagnose --judge) was added last, so that calls naming thresholds by position keep
-- working; the signatures without it go
drop function if exists ragsql.diagnose_run(text, float8, float8, float8, float8, float8, float8, float8);
drop function if exists ragsql.diagnose_queries(text, float8, float8, float8);

create or replace function ragsql.diagnose_queries(
    run text, correctness_threshold float8 default 0.7, recall_threshold float8 default 0.7,
    precision_threshold float8 default 0.7, model text default null)
returns table (
    qid text, answer_correctness float8, context_recall float8, context_precision float8, cause text)
language sql stable
as $$
    with v as (
        select c.qid, c.value as correctness, r.value as recall, p.value as precision
        from ragsql.generation_measure(diagnose_queries.run, 'answer_correctness', diagnose_queries.model) as c
        full join ragsql.generation_measure(diagnose_queries.run, 'context_recall', diagnose_queries.model) as r
            using (qid)
        full join ragsql.generation_measure(diagnose_queries.run, 'context_precision', diagnose_queries.model) as p
            using (qid)
    )
    select v.qid, v.correctness, v.recall, v.precision,
           case
               when v.correctness is null then 'not diagnosed: answer_correctness is missing'
               when v.correctness >= diagnose_queries.correctness_threshold then 'ok'
               when v.recall is null or v.precision is null
                   then 'answer wrong; not diagnosed further: context recall or precision is missing'
               when v.recall >= diagnose_queries.recall_threshold
                    and v.precision >= diagnose_queries.precision_threshold
                   then 'generation: the contexts hold the answer, the model did not use them (model or prompt)'
               when v.recall >= diagnose_queries.recall_threshold
                   then 'noise: too much irrelevant context misled the generation (rerank, fewer or cleaner chunks)'
               when v.precision >= diagnose_queries.precision_threshold
                   then 'too little recalled: the contexts miss some of the answer''s points (raise k, expand '
                        'neighbours)'
               else 'the whole pipeline: parsing, chunking, embedding and recall all need work'
           end
    from v
    order by v.qid collate "C"
$$;
comment on function ragsql.diagnose_queries(text, float8, float8, float8, text) is
    'Per query of a run: answer correctness, context recall and context precision (LLM) and the likely cause '
    'of a wrong answer from the seed''s table (correctness below its threshold; recall and precision high or '
    'low against theirs). model: the judge model whose verdicts are read, or ''offline'' (default: the newest '
    'LLM judge''s, else the offline judge''s).';

create or replace function ragsql.diagnose_run(
    run text, faithfulness_threshold float8 default 0.8, relevancy_threshold float8 default 0.8,
    correctness_threshold float8 default 0.7, success_threshold float8 default 0.8,
    rr_threshold float8 default 0.5, recall_threshold float8 default 0.7, precision_threshold float8 default 0.7,
    model text default null)
returns table (check_name text, value float8, threshold float8, passed boolean, advice text)
language sql stable
as $$
    with gen as (
        -- the three metrics checked, not every one (a run's metrics cost ten times as much; the values are equal)
        select s.metric, s.value
        from ragsql.summarize_generation(
            diagnose_run.run, array['faithfulness', 'answer_relevancy', 'answer_correctness'], diagnose_run.model) as s
    ),
    ret as (
        select s.measure, s.value
        from ragsql.summarize(diagnose_run.run, array['Success@5', 'Success@20', 'RR@5']) as s
        where s.queries > 0
    ),
    checks as (
        select 1 as ord, 'faithfulness' as check_name, g.value, diagnose_run.faithfulness_threshold as threshold,
               'answers state things the contexts do not support: ground the prompt in the contexts, ask for '
               'citations, lower the temperature' as advice
        from gen as g where g.metric = 'faithfulness'
        union all
        select 2, 'answer_relevancy', g.value, diagnose_run.relevancy_threshold,
               'answers drift from the question or are non-committal: tighten the prompt, check retrieval'
        from gen as g where g.metric = 'answer_relevancy'
        union all
        select 3, 'answer_correctness', g.value, diagnose_run.correctness_threshold,
               'answers disagree with the references: see ragsql.diagnose_queries for the likely cause per query'
        from gen as g where g.metric = 'answer_correctness'
        union all
        select 4, 'Success@5', r.value, diagnose_run.success_threshold,
               'relevant chunks are often not retrieved at all: improve retrieval itself (chunking, embedder, '
               'hybrid BM25 + vector)'
        from ret as r where r.measure = 'Success@5'
        union all
        select 5, 'RR@5 given Success@20', rr.value, diagnose_run.rr_threshold,
               'relevant chunks are retrieved but ranked low: add a reranker'
        from ret as rr join ret as s20 on s20.measure = 'Success@20'
        where rr.measure = 'RR@5' and s20.value >= diagnose_run.success_threshold
    )
    select c.check_name, c.value, c.threshold, c.value >= c.threshold,
           case when c.value >= c.threshold then 'ok' else c.advice end
    from checks as c
    where c.value is not null
    union all
    select 'queries: ' || split_part(d.cause, ':', 1), count(*)::float8, null, d.cause = 'ok',
           case when strpos(d.cause, ':') = 0 then 'answer correct'
                else btrim(substr(d.cause, strpos(d.cause, ':') + 1)) end
    from ragsql.diagnose_queries(diagnose_run.run, diagnose_run.correctness_threshold,
                                 diagnose_run.recall_threshold, diagnose_run.precision_threshold,
                                 diagnose_run.model) as d
    where d.cause not like 'not diagnosed%'
    group by d.cause
$$;
comment on function ragsql.diagnose_run(text, float8, float8, float8, float8, float8, float8, float8, text) is
    'The seeds'' threshold report for a run: faithfulness, answer relevancy and correctness against their '
    'thresholds, Success@5 low -> retrieval itself, Success@20 high but RR@5 low -> reranker, and how many '
    'queries fall in each cause of ragsql.diagnose_queries; advice for each failed check. model: as '
    'diagnose_queries''.';
