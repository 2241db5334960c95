-- One entry point for every generation metric: evaluate_generation, generation_measure, summarize_generation.
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

create or replace function ragsql._generation_metric_spec(metrics text[])
returns table (ord integer, metric text, family text, aspect text, task_kind text)
language plpgsql stable parallel safe
as $$
declare
    name text;
    cleaned text;
begin
    for ord, name in select n.ord, n.name
                     from ragsql._names(metrics, 'generation metric', 'array[''faithfulness'', ''answer_relevancy'']') as n
    loop
        cleaned := lower(btrim(coalesce(name, '')));
        if cleaned like 'aspect:%' then
            aspect := substr(cleaned, length('aspect:') + 1);
            perform ragsql._known((select a.name from ragsql.aspect as a where a.name = aspect), 'aspect', aspect,
                                  'see: select name, definition from ragsql.aspect', 'invalid_parameter_value');
            metric := 'aspect:' || aspect;
            family := 'aspect';
            task_kind := 'aspect_critique';
        else
            select m.metric, coalesce(m.computed_by, m.metric), null, m.task_kind
              into metric, family, aspect, task_kind
            from ragsql.generation_metric as m
            where m.metric = cleaned;
            if not found then
                raise exception 'unknown generation metric "%"', name
                    using errcode = 'invalid_parameter_value',
                          hint = 'see: select metric from ragsql.generation_metric; aspects are spelled aspect:<name>';
            end if;
        end if;
        return next;
    end loop;
end
$$;
comment on function ragsql._generation_metric_spec(text[]) is 'Parses generation metric names (ragsql.generation_metric or aspect:<name>).';

-- the dispatch is ragsql._evaluate_generation's loop, over ragsql._metric_calls
drop function if exists ragsql._metric_rows(text, text, bigint, text, text, text, float8, float8, float8);

create or replace function ragsql._evaluate_generation(
    run text, metrics text[], model text, prompt_version text, embedder text,
    partial_weight float8, factual_weight float8, similarity_weight float8)
returns table (
    ord integer, qid text, metric text, value float8, reason text, judge_model text,
    judge_prompt_version text, judge_embedder text, detail jsonb, has_task boolean)
language plpgsql stable parallel safe
as $$
declare
    spec record;
    rid bigint := ragsql._run_id(run);
    has_task boolean;
    call text;
begin
    perform ragsql._unit_weight(partial_weight, 'partial_weight');
    perform ragsql._correctness_weights(factual_weight, similarity_weight);
    for spec in select * from ragsql._generation_metric_spec(metrics) loop
        -- looked up first: on Citus a query naming a run-scoped table runs on its shard, where the metric
        -- functions below could not run their own distributed queries
        has_task := exists (select from ragsql.judge_task as t where t.run_id = rid and t.kind = spec.task_kind);
        call := (select c.call from ragsql._metric_calls() as c
                 where spec.metric = any (c.names) or starts_with(spec.metric, c.prefix));
        if call is null then
            raise exception 'no function computes generation metric "%"', spec.metric
                using errcode = 'invalid_parameter_value';
        end if;
        -- the metric's own function, by the call the registry declares: the names it reads are the columns of a
        return query execute format(
            'select $10, f.qid, $1, f.value, f.reason, f.judge_model, f.judge_prompt_version, f.judge_embedder, '
            'f.detail, $11 '
            'from (select $1 as metric, $2 as run, $3 as rid, $4 as model, $5 as prompt_version, $6 as embedder, '
            '$7 as partial_weight, $8 as factual_weight, $9 as similarity_weight) as a '
            'cross join lateral %s as f', call)
        using spec.metric, run, rid, model, prompt_version, embedder, partial_weight, factual_weight,
              similarity_weight, spec.ord, has_task;
    end loop;
end
$$;
comment on function ragsql._evaluate_generation(text, text[], text, text, text, float8, float8, float8) is
    'Per-query rows of the named generation metrics of a run, each from its own function by the call '
    'ragsql._metric_calls declares; has_task = the run has judge tasks of its kind.';

create or replace function ragsql._default_generation_metrics(run text)
returns text[]
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(_default_generation_metrics.run);
    judged text[];
begin
    -- the run's aspects first, by its key (one shard on Citus, which allows no correlated subquery here)
    select array_agg(distinct v.aspect) into judged
    from ragsql.aspect_verdict as v
    where v.run_id = rid;
    return (
    select array(
        select d.metric
        from (
            select m.metric, m.position as pos
            from ragsql.generation_metric as m
            union all
            select 'aspect:' || a.name, 1000 + row_number() over (order by a.name collate "C")
            from ragsql.aspect as a
            where a.name = any (judged)
        ) as d
        order by d.pos
    )
    );
end
$$;
comment on function ragsql._default_generation_metrics(text) is
    'Every metric of ragsql.generation_metric, then aspect:<name> for each aspect judged in the run.';

create or replace function ragsql.evaluate_generation(
    run text, metrics text[] default null, model text default null, prompt_version text default null,
    embedder text default null, partial_weight float8 default 0, factual_weight float8 default 0.75,
    similarity_weight float8 default 0.25)
returns table (
    qid text, metric text, value float8, reason text, judge_model text, judge_prompt_version text,
    judge_embedder text, detail jsonb)
language sql stable parallel safe
as $$
    select e.qid, e.metric, e.value, e.reason, e.judge_model, e.judge_prompt_version, e.judge_embedder, e.detail
    from (
        select g.*, bool_or(g.value is not null) over (partition by g.ord) as any_value
        from ragsql._evaluate_generation(
            evaluate_generation.run,
            coalesce(evaluate_generation.metrics, ragsql._default_generation_metrics(evaluate_generation.run)),
            evaluate_generation.model, evaluate_generation.prompt_version, evaluate_generation.embedder,
            evaluate_generation.partial_weight, evaluate_generation.factual_weight,
            evaluate_generation.similarity_weight) as g
    ) as e
    where evaluate_generation.metrics is not null or e.any_value or e.has_task
    order by e.ord, e.qid collate "C"
$$;
comment on function ragsql.evaluate_generation(text, text[], text, text, text, float8, float8, float8) is
    'Per-query generation metrics of a run: qid, metric, value, reason (why value is null), the judge model, '
    'prompt version and embedder whose verdicts were read, and the counts behind the value. metrics: names of '
    'ragsql.generation_metric or aspect:<name>; default every metric the run has a value or a judge task for. '
    'Every query of the dataset gets a row per metric; missing or failed verdicts give null and a reason.';

create or replace function ragsql.generation_measure(
    run text, metric text, model text default null, prompt_version text default null,
    embedder text default null, partial_weight float8 default 0, factual_weight float8 default 0.75,
    similarity_weight float8 default 0.25)
returns table (qid text, value float8, reason text)
language sql stable parallel safe
as $$
    select e.qid, e.value, e.reason
    from ragsql.evaluate_generation(
        generation_measure.run, array[generation_measure.metric], generation_measure.model,
        generation_measure.prompt_version, generation_measure.embedder, generation_measure.partial_weight,
        generation_measure.factual_weight, generation_measure.similarity_weight) as e
$$;
comment on function ragsql.generation_measure(text, text, text, text, text, float8, float8, float8) is
    'Per-query value of one generation metric (faithfulness, contradiction_rate, answer_relevancy, '
    'answer_relevancy_rating, answer_relevancy_cosine, context_precision, context_relevance, context_recall, '
    'answer_similarity, answer_correctness_f1, answer_correctness, citation_coverage, citation_validity, '
    'exact_match, token_f1, rouge_l, bleu, chrf, string_presence, levenshtein_similarity, '
    'id_based_context_precision, id_based_context_recall, response_groundedness, nv_context_relevance, '
    'context_entity_recall, factual_correctness(mode=f1|precision|recall), non_llm_context_precision_with_reference, '
    'non_llm_context_recall, '
    'noise_sensitivity(mode=relevant|irrelevant), rubrics_score:<rubric>, aspect:<name>), with '
    'the reason '
    'when it is null. See ragsql.evaluate_generation.';

create or replace function ragsql.summarize_generation(
    run text, metrics text[] default null, model text default null, prompt_version text default null,
    embedder text default null, partial_weight float8 default 0, factual_weight float8 default 0.75,
    similarity_weight float8 default 0.25)
returns table (
    metric text, value float8, queries bigint, covered bigint, missing bigint, judge_model text,
    judge_prompt_version text, judge_embedder text)
language sql stable parallel safe
as $$
    select e.metric,
           avg(e.value),
           count(*),
           count(e.value),
           count(*) - count(e.value),
           max(e.judge_model),
           max(e.judge_prompt_version),
           max(e.judge_embedder)
    from ragsql._evaluate_generation(
        summarize_generation.run,
        coalesce(summarize_generation.metrics, ragsql._default_generation_metrics(summarize_generation.run)),
        summarize_generation.model, summarize_generation.prompt_version, summarize_generation.embedder,
        summarize_generation.partial_weight, summarize_generation.factual_weight,
        summarize_generation.similarity_weight) as e
    group by e.ord, e.metric
    having summarize_generation.metrics is not null or count(e.value) > 0 or bool_or(e.has_task)
    order by e.ord
$$;
comment on function ragsql.summarize_generation(text, text[], text, text, text, float8, float8, float8) is
    'Run value of each generation metric: value = mean over the covered queries (value not null); queries = '
    'queries of the dataset, covered = with a value, missing = without (their reasons are in '
    'ragsql.evaluate_generation); null when no query is covered. Same arguments as ragsql.evaluate_generation.';

