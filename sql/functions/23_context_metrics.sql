-- Context verdict metrics (LLM context precision, context relevance), answer correctness, aspect critique, citations.
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

create or replace function ragsql.context_precision(
    run text, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(context_precision.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'context_precision', 'context_verdict', null,
                                                  context_precision.model, context_precision.prompt_version);
begin
    return query
    with useful as materialized (
        select v.query_id, count(*) as verdicts, array_agg(v.useful order by v.position) as useful
        from ragsql._scope_judge(judged) as j
        join ragsql.context_verdict as v
          on v.run_id = rid and v.model = j.judge_model and v.prompt_version = j.judge_prompt_version
        group by v.query_id
    )
    select s.qid,
           case when s.n_contexts > 0 and v.verdicts = s.n_contexts
                then (select ragsql.context_precision_at(p.rel_ranks, p.prec_cum, s.n_contexts::integer)
                      from ragsql.relevance_profile(v.useful) as p)
           end,
           case
               when s.answer is null then 'no answer in the run'
               when s.no_context_texts is not null then s.no_context_texts
               when s.n_contexts = 0 then 'no contexts'
               when v.verdicts = s.n_contexts then null
               when v.verdicts > 0
                   then format('%s of %s contexts have no verdict', s.n_contexts - v.verdicts, s.n_contexts)
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when v.query_id is not null then jsonb_build_object('useful', to_jsonb(v.useful)) end
    from ragsql._scope_rows(judged) as s
    left join useful as v on v.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.context_precision(text, text, text) is
    'LLM context precision per query = sum over contexts i of P@i * rel_i / (useful contexts), 0 when none, '
    'with rel_i the judge''s ragsql.context_verdict in prompt order: the very formula of ContextPrecision@k '
    '(ragsql.relevance_profile + ragsql.context_precision_at, k = all contexts). Seed polardb 张伟 row 3: '
    '[no, yes] -> 0.5.';

create or replace function ragsql.context_relevance(
    run text, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(context_relevance.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'context_relevance', 'context_sentence_verdict', null,
                                                  context_relevance.model, context_relevance.prompt_version);
begin
    return query
    with per_context as materialized (
        -- contexts holding any non-space text, with their judged sentences
        select c.query_id,
               count(*) as contexts,
               count(*) filter (where sv.sentences is null) as unjudged,
               coalesce(sum(sv.sentences), 0) as sentences,
               coalesce(sum(sv.relevant), 0) as relevant
        from ragsql._scope_judge(judged) as j
        join ragsql.answer_context as c on c.run_id = rid and c.text ~ '\S'
        left join (
            select v.query_id, v.position, count(*) as sentences, count(*) filter (where v.relevant) as relevant
            from ragsql._scope_judge(judged) as j2
            join ragsql.context_sentence_verdict as v
              on v.run_id = rid and v.model = j2.judge_model and v.prompt_version = j2.judge_prompt_version
            group by v.query_id, v.position
        ) as sv on sv.query_id = c.query_id and sv.position = c.position
        group by c.query_id
    )
    select s.qid,
           case when c.unjudged = 0 then c.relevant::float8 / c.sentences end,
           case
               when s.answer is null then 'no answer in the run'
               when s.no_context_texts is not null then s.no_context_texts
               when c.query_id is null then 'no contexts'
               when c.unjudged = 0 then null
               when c.unjudged < c.contexts
                   then format('%s of %s contexts have no sentence verdicts', c.unjudged, c.contexts)
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.query_id is not null
                then jsonb_build_object('sentences', c.sentences, 'relevant', c.relevant)
           end
    from ragsql._scope_rows(judged) as s
    left join per_context as c on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.context_relevance(text, text, text) is
    'Context relevance per query = context sentences relevant to the question / all context sentences (seed '
    'ragas-metrics-overview: CR = |V_c| / |S_c|), over every context with text; null until each has sentence verdicts.';

-- ---------------------------------------------------------------------------------------------------
-- Answer correctness: F1 and similarity combined

create or replace function ragsql.answer_correctness(
    run text, model text default null, prompt_version text default null, embedder text default null,
    factual_weight float8 default 0.75, similarity_weight float8 default 0.25)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language sql stable parallel safe
as $$
    with w as materialized (
        select * from ragsql._correctness_weights(answer_correctness.factual_weight,
                                                  answer_correctness.similarity_weight)
    ),
    f as materialized (
        select * from ragsql.answer_correctness_f1(answer_correctness.run, answer_correctness.model,
                                                   answer_correctness.prompt_version)
    ),
    s as materialized (
        -- the embedder that judged the run with the F1 part's judge: both parts read one judge's work
        select *
        from ragsql.answer_similarity(
            answer_correctness.run,
            coalesce(answer_correctness.embedder,
                     ragsql._run_embedder(ragsql._run_id(answer_correctness.run), null,
                                          (select f.judge_model from f limit 1))))
    )
    select f.qid,
           case
               when w.similarity = 0 then w.factual * f.value
               when w.factual = 0 then w.similarity * s.value
               else w.factual * f.value + w.similarity * s.value
           end,
           case
               when w.similarity = 0 then f.reason
               when w.factual = 0 then s.reason
               when f.reason is not null and s.reason is not null and f.reason = s.reason then f.reason
               when f.reason is not null and s.reason is not null
                   then 'factual: ' || f.reason || '; similarity: ' || s.reason
               when f.reason is not null then 'factual: ' || f.reason
               when s.reason is not null then 'similarity: ' || s.reason
           end,
           f.judge_model,
           f.judge_prompt_version,
           s.judge_embedder,
           jsonb_build_object('f1', f.value, 'similarity', s.value, 'factual_weight', w.factual,
                              'similarity_weight', w.similarity) || coalesce(f.detail, '{}')
    from w
    cross join f
    join s on s.qid = f.qid
    order by f.qid collate "C"
$$;
comment on function ragsql.answer_correctness(text, text, text, text, float8, float8) is
    'Answer correctness per query = (w_f * F1 + w_s * answer similarity) / (w_f + w_s) with F1 from '
    'ragsql.answer_correctness_f1 and similarity from ragsql.answer_similarity; defaults w_f = 0.75, w_s = 0.25 '
    '(RAGAS; seed polardb); in [0, 1], as both parts are. A part whose weight is 0 is not needed.';

-- ---------------------------------------------------------------------------------------------------
-- Aspect critique and citations

create or replace function ragsql._aspect_definition_hash(aspect text)
returns text
language plpgsql stable parallel safe
as $$
begin
    return ragsql._known(
        (select ragsql.text_hash(a.definition) from ragsql.aspect as a where a.name = _aspect_definition_hash.aspect),
        'aspect', aspect, 'see: select name, definition from ragsql.aspect');
end
$$;
comment on function ragsql._aspect_definition_hash(text) is 'ragsql.text_hash of an aspect''s definition; no_data_found for an unknown aspect.';

call ragsql._metric_function(
    'aspect_critique',
    'run text, aspect text, model text default null, prompt_version text default null',
    'ragsql._verdict_metric(run, ''aspect_critique'', ''aspect_verdict'', aspect, model, prompt_version)',
    'Aspect critique per query = 1 if the judge answers yes to the aspect''s definition, else 0 (RAGAS aspect '
    'critique; seed ragas-metrics-overview); the run value is the yes rate. Only verdicts on the aspect''s current '
    'definition count.');

-- citation coverage and validity are ragsql._citation_metric's
drop function if exists ragsql._citation_tally(text, text, text);

create or replace function ragsql._citation_metric(run text, which text, model text, prompt_version text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(_citation_metric.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'citations', 'citation_verdict', null, _citation_metric.model,
                                                  _citation_metric.prompt_version);
    coverage constant boolean := _citation_metric.which = 'coverage';
begin
    return query
    with counted as materialized (
        select v.query_id,
               count(distinct v.sentence_no) as sentences,
               count(distinct v.sentence_no) filter (where v.citation_no > 0) as cited_sentences,
               count(*) filter (where v.citation_no > 0) as citations,
               count(*) filter (where v.supports) as supporting
        from ragsql._scope_judge(judged) as j
        join ragsql.citation_verdict as v
          on v.run_id = rid and v.model = j.judge_model and v.prompt_version = j.judge_prompt_version
        group by v.query_id
    )
    select s.qid,
           case when coverage then c.cited_sentences::float8 / c.sentences
                else c.supporting::float8 / nullif(c.citations, 0)
           end,
           case
               when not coverage and c.citations = 0 then 'the answer cites nothing'
               when s.answer is null then 'no answer in the run'
               when c.query_id is null then s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.sentences is not null and coverage
                    then jsonb_build_object('sentences', c.sentences, 'cited', c.cited_sentences)
                when c.sentences is not null
                    then jsonb_build_object('citations', c.citations, 'supporting', c.supporting)
           end
    from ragsql._scope_rows(judged) as s
    left join counted as c on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql._citation_metric(text, text, text, text) is
    'Per query: citation coverage (which ''coverage'': answer sentences with a citation / answer sentences) or '
    'validity (supporting citations / citations) of one citation verdict set, with the reason when there is none.';

call ragsql._metric_function(
    'citation_coverage',
    'run text, model text default null, prompt_version text default null',
    'ragsql._citation_metric(run, ''coverage'', model, prompt_version)',
    'Citation coverage per query = answer sentences carrying a citation / answer sentences (seed '
    'retrieval-metrics 5.1 Coverage), from ragsql.citation_verdict.');

call ragsql._metric_function(
    'citation_validity',
    'run text, model text default null, prompt_version text default null',
    'ragsql._citation_metric(run, ''validity'', model, prompt_version)',
    'Citation validity per query = citations whose cited item supports the sentence / citations (seed '
    'retrieval-metrics 5.1 Validity); null with a reason when the answer cites nothing.');

