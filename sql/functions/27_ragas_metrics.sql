-- RAGAS's remaining LLM metrics (tables in sql/migrations/0130_ragas_metrics.sql): response_groundedness and
-- nv_context_relevance (two 0/1/2 judge passes), context_entity_recall (entity sets), factual_correctness
-- (claims against the other text) and noise_sensitivity (per-context support of answer and reference statements).
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql. Where RAGAS
-- scores a missing input 0 (no entity in the reference, no claim in the answer) these give null and the reason.

-- ---------------------------------------------------------------------------------------------------
-- The NVIDIA metrics: two judge passes, each a 0/1/2 rating

create or replace function ragsql._graded_metric(run text, metric text, model text, prompt_version text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(_graded_metric.run);
    judged constant jsonb := ragsql._judged_scope(rid, _graded_metric.metric, 'graded_verdict',
                                                  array[_graded_metric.metric], _graded_metric.model,
                                                  _graded_metric.prompt_version);
begin
    return query
    with rated as materialized (
        select v.query_id,
               count(*) as passes,
               count(v.score) as rated,
               avg(v.score / 2.0)::float8 as mean,
               min(v.score) filter (where v.judge_pass = 1) as pass1,
               min(v.score) filter (where v.judge_pass = 2) as pass2,
               string_agg(v.reason, '; ' order by v.judge_pass) filter (where v.score is null) as errors
        from ragsql._scope_judge(judged) as j
        join ragsql.graded_verdict as v
          on v.run_id = rid and v.metric = _graded_metric.metric and v.model = j.judge_model
         and v.prompt_version = j.judge_prompt_version
        group by v.query_id
    )
    select s.qid,
           case when r.rated > 0 then r.mean end,
           case
               when s.answer is null then 'no answer in the run'
               when r.rated > 0 then null
               when r.passes > 0 then 'no judge pass gave a rating: ' || r.errors
               when s.no_context_texts is not null then s.no_context_texts
               when s.n_contexts = 0 then 'no contexts'
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when r.query_id is not null then jsonb_build_object('pass1', r.pass1, 'pass2', r.pass2) end
    from ragsql._scope_rows(judged) as s
    left join rated as r on r.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql._graded_metric(text, text, text, text) is
    'Per query: the mean of the two judge passes'' 0/1/2 ratings / 2 of a metric of ragsql.graded_verdict; one '
    'pass alone when the other gave no rating.';

call ragsql._metric_function(
    'response_groundedness',
    'run text, model text default null, prompt_version text default null',
    'ragsql._graded_metric(run, ''response_groundedness'', model, prompt_version)',
    'Response groundedness per query (RAGAS ResponseGroundedness, NVIDIA) = (r1 / 2 + r2 / 2) / 2, r1 and r2 the '
    'ratings of two judge passes with different prompts: 0 the contexts do not support the answer, 1 partly, 2 '
    'fully; one pass alone when the other gave no usable rating (as RAGAS), null with a reason when neither did. '
    'detail: pass1, pass2. Example: ratings 2 and 1 -> 0.75.');

call ragsql._metric_function(
    'nv_context_relevance',
    'run text, model text default null, prompt_version text default null',
    'ragsql._graded_metric(run, ''nv_context_relevance'', model, prompt_version)',
    'RAGAS''s newer context relevance (ContextRelevance, legacy name nv_context_relevance; ragsql.context_relevance '
    'is the older sentence share) per query = (r1 / 2 + r2 / 2) / 2, r1 and r2 two judge passes'' ratings of the '
    'contexts joined by newlines against the question: 0 irrelevant, 1 partly, 2 fully relevant; one pass alone '
    'when the other gave no rating. Contexts equal to or contained in the question score 0 without a call (RAGAS).');

-- ---------------------------------------------------------------------------------------------------
-- Context entity recall

create or replace function ragsql.context_entity_recall(
    run text, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    -- the run first: a function that reads a table must not run inside the query over the run's shard (Citus)
    rid bigint := ragsql._run_id(context_entity_recall.run);
    compared jsonb;
    judged jsonb;
begin
    -- the texts whose entities are compared: each distinct reference answer, and the contexts joined; their
    -- entity sets are chosen by these hashes (entity_extraction is kept per text, not per run)
    compared := (
        select coalesce(jsonb_agg(t), '[]')
        from (select a.query_id, 'reference' as side, ragsql.text_hash(r.text) as text_hash
              from ragsql.answer as a
              join ragsql.reference_answer as r on r.query_id = a.query_id
              where a.run_id = rid
              union
              select c.query_id, 'contexts', ragsql.text_hash(string_agg(c.text, E'\n' order by c.position))
              from ragsql.answer_context as c
              where c.run_id = rid and c.text is not null
              group by c.query_id) as t);
    judged := ragsql._judged_scope(rid, 'context_entity_recall', 'entity_extraction',
                                   array(select t ->> 'text_hash' from jsonb_array_elements(compared) as t),
                                   context_entity_recall.model, context_entity_recall.prompt_version);
    return query
    with texts as materialized (
        select t.query_id, t.side, t.text_hash
        from jsonb_to_recordset(compared) as t(query_id bigint, side text, text_hash text)
    ),
    extracted as materialized (
        select t.query_id, t.side, t.text_hash, e.entities
        from texts as t
        cross join ragsql._scope_judge(judged) as j
        left join ragsql.entity_extraction as e
          on e.text_hash = t.text_hash and e.model = j.judge_model and e.prompt_version = j.judge_prompt_version
    ),
    counted as materialized (
        select x.query_id,
               count(*) filter (where x.side = 'reference') as refs,
               count(*) filter (where x.side = 'reference' and x.entities is null) as refs_unextracted,
               bool_or(x.side = 'contexts') as has_contexts,
               bool_or(x.side = 'contexts' and x.entities is null) as contexts_unextracted,
               (select count(distinct g.entity)
                from extracted as y cross join unnest(y.entities) as g(entity)
                where y.query_id = x.query_id and y.side = 'reference') as reference_entities,
               (select count(distinct g.entity)
                from extracted as y cross join unnest(y.entities) as g(entity)
                where y.query_id = x.query_id and y.side = 'reference'
                  and exists (select from extracted as z cross join unnest(z.entities) as h(entity)
                              where z.query_id = x.query_id and z.side = 'contexts' and h.entity = g.entity))
                   as found
        from extracted as x
        group by x.query_id
    )
    select s.qid,
           case when c.refs_unextracted = 0 and not c.contexts_unextracted and c.reference_entities > 0
                then c.found::float8 / c.reference_entities
           end,
           case
               when s.answer is null then 'no answer in the run'
               when s.n_references = 0 then 'no reference answer'
               when s.no_context_texts is not null then s.no_context_texts
               when s.n_contexts = 0 then 'no contexts'
               when c.refs_unextracted = 0 and not c.contexts_unextracted and c.reference_entities = 0
                   then 'the reference answers name no entity'
               when c.refs_unextracted = 0 and not c.contexts_unextracted then null
               when c.refs_unextracted < c.refs or not c.contexts_unextracted and c.refs_unextracted > 0
                   then format('%s of %s reference answers have no entity extraction', c.refs_unextracted, c.refs)
               when c.refs_unextracted = 0 then 'the contexts have no entity extraction'
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.refs_unextracted = 0 and not c.contexts_unextracted
                then jsonb_build_object('reference_entities', c.reference_entities, 'found', c.found)
           end
    from ragsql._scope_rows(judged) as s
    left join counted as c on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.context_entity_recall(text, text, text) is
    'Context entity recall per query (RAGAS ContextEntityRecall) = |GN ∩ CN| / |GN|, GN the distinct entities the '
    'judge extracted from the reference answers (pooled), CN those it extracted from the contexts joined by '
    'newlines; entities match exactly, as RAGAS''s set intersection. Null with a reason when the references name '
    'no entity (RAGAS: 0). Example: GN {Taj Mahal, Agra, India, Shah Jahan, 1631, 1653}, CN holds four -> 4/6.';

-- ---------------------------------------------------------------------------------------------------
-- Factual correctness

create or replace function ragsql._claim_setting(atomicity text, coverage text)
returns text
language plpgsql immutable parallel safe
as $$
begin
    if atomicity is not null and atomicity not in ('low', 'high')
       or coverage is not null and coverage not in ('low', 'high') then
        raise exception 'atomicity and coverage must be low or high, got % and %', atomicity, coverage
            using errcode = 'invalid_parameter_value', hint = 'RAGAS''s default: atomicity => ''low'', coverage => ''low''';
    end if;
    return format('[atomicity=%s,coverage=%s]', coalesce(atomicity, '%'), coalesce(coverage, '%'));
end
$$;
comment on function ragsql._claim_setting(text, text) is
    'The suffix a claim extraction''s prompt_version carries for RAGAS''s atomicity and coverage (a LIKE pattern: '
    'null matches either); invalid_parameter_value for anything but low or high.';

create or replace function ragsql._fbeta(tp bigint, fp bigint, fn bigint, beta float8)
returns float8
language sql immutable parallel safe
as $$
    with pr as (
        select case when _fbeta.tp + _fbeta.fp = 0 then 0 else _fbeta.tp::float8 / (_fbeta.tp + _fbeta.fp) end as p,
               case when _fbeta.tp + _fbeta.fn = 0 then 0 else _fbeta.tp::float8 / (_fbeta.tp + _fbeta.fn) end as r
    )
    select case when pr.p = 0 and pr.r = 0 then 0
                else (1 + _fbeta.beta ^ 2) * pr.p * pr.r / (_fbeta.beta ^ 2 * pr.p + pr.r)
           end
    from pr
$$;
comment on function ragsql._fbeta(bigint, bigint, bigint, float8) is
    'RAGAS''s fbeta_score: (1 + b^2) P R / (b^2 P + R), P = TP / (TP + FP) (0 when no TP + FP), R = TP / (TP + FN) '
    '(0 when no TP + FN), 0 when both are 0.';

create or replace function ragsql._metric_mode(metric text, mode text, modes text[], default_mode text)
returns text
language plpgsql immutable parallel safe
as $$
begin
    if mode is null or not mode = any (modes) then
        raise exception '% mode must be % or %, got %', metric, array_to_string(modes[:cardinality(modes) - 1], ', '),
                        modes[cardinality(modes)], coalesce(mode, 'null')
            using errcode = 'invalid_parameter_value', hint = format('RAGAS''s default: mode => %L', default_mode);
    end if;
    return mode;
end
$$;
comment on function ragsql._metric_mode(text, text, text[], text) is
    'A metric''s mode, checked: one of modes; invalid_parameter_value, naming RAGAS''s default, otherwise.';

create or replace function ragsql._factual_mode(mode text, beta float8)
returns text
language plpgsql immutable parallel safe
as $$
begin
    perform ragsql._metric_mode('factual_correctness', mode, array['precision', 'recall', 'f1'], 'f1');
    if beta is null or beta <= 0 or beta = 'NaN'::float8 or beta = 'Infinity'::float8 then
        raise exception 'beta must be a positive number, got %', beta
            using errcode = 'invalid_parameter_value', hint = 'beta > 1 favours recall, < 1 precision; default 1';
    end if;
    return mode;
end
$$;
comment on function ragsql._factual_mode(text, float8) is
    'factual_correctness''s mode, checked: precision, recall or f1 with a positive beta.';

create or replace function ragsql.factual_correctness(
    run text, mode text default 'f1', beta float8 default 1.0, atomicity text default null,
    coverage text default null, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(factual_correctness.run);
    judged constant jsonb := ragsql._judged_scope(
        rid, 'factual_correctness', 'statement_verdict', array['factual_precision', 'factual_recall'],
        factual_correctness.model, factual_correctness.prompt_version,
        '%' || ragsql._claim_setting(factual_correctness.atomicity, factual_correctness.coverage));
    checked_mode constant text := ragsql._factual_mode(factual_correctness.mode, factual_correctness.beta);
begin
    return query
    select s.qid,
           case
               when not c.complete then null
               when checked_mode = 'precision' and c.answer_claims > 0 then c.tp::float8 / (c.tp + c.fp)
               when checked_mode = 'recall' and c.reference_claims > 0
                   then case when c.tp + c.fn > 0 then c.tp::float8 / (c.tp + c.fn) else 0 end
               when checked_mode = 'f1' and c.answer_claims > 0 and c.reference_claims > 0
                   then ragsql._fbeta(c.tp, c.fp, c.fn, factual_correctness.beta)
           end,
           case
               when s.answer is null then 'no answer in the run'
               when s.n_references = 0 then 'no reference answer'
               when not c.complete or c.complete is null then coalesce(c.gap, s.judge_reason)
               when checked_mode <> 'recall' and c.answer_claims = 0 then 'the answer has no claims'
               when checked_mode <> 'precision' and c.reference_claims = 0 then 'the reference answers have no claims'
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.complete
                then jsonb_build_object('tp', c.tp, 'fp', c.fp) || case when checked_mode <> 'precision'
                                                                      then jsonb_build_object('fn', c.fn)
                                                                      else '{}' end
           end
    from ragsql._scope_rows(judged) as s
    left join ragsql._claim_counts(judged, 'factual_precision', 'factual_recall', checked_mode <> 'precision') as c
      on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.factual_correctness(text, text, float8, text, text, text, text) is
    'Factual correctness per query (RAGAS FactualCorrectness): the judge splits the answer and each reference '
    'answer into claims (atomicity and coverage low or high, stored with the claims; default the newest setting '
    'judged) and checks the answer''s claims against the reference answers (TP supported, else FP) and each '
    'reference''s claims against the answer (FN not supported). mode precision = TP / (TP + FP); recall = TP / '
    '(TP + FN) (0 when both are 0, as RAGAS); f1 = RAGAS''s fbeta_score with beta (default 1). RAGAS rounds to 2 '
    'decimals; this does not. Null with a reason when the answer (precision, f1) or the references (recall, f1) '
    'have no claims. Example: TP 1, FP 1, FN 2 -> precision 0.5, recall 1/3, f1 0.4.';

-- ---------------------------------------------------------------------------------------------------
-- Noise sensitivity

create or replace function ragsql._noise_mode(mode text)
returns text
language sql immutable parallel safe
as $$
    select ragsql._metric_mode('noise_sensitivity', _noise_mode.mode, array['relevant', 'irrelevant'], 'relevant')
$$;
comment on function ragsql._noise_mode(text) is 'noise_sensitivity''s mode, checked: relevant or irrelevant.';

create or replace function ragsql.noise_sensitivity(
    run text, mode text default 'relevant', model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(noise_sensitivity.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'noise_sensitivity', 'statement_verdict',
                                                  array['noise_sensitivity'], noise_sensitivity.model,
                                                  noise_sensitivity.prompt_version);
begin
    return query
    with judge as materialized (
        select j.*, ragsql._noise_mode(noise_sensitivity.mode) as mode
        from ragsql._scope_judge(judged) as j
    ),
    tally as materialized (
        select t.* from ragsql._judged_tally(judged, 'noise_sensitivity') as t
    ),
    relevance as materialized (
        -- a context is relevant when it supports a statement of a reference answer (RAGAS retrieved2ground_truth)
        select c.query_id, c.position, coalesce(bool_or(at.supported), false) as relevant
        from judge as j
        join ragsql.answer_context as c on c.run_id = j.run_id
        left join ragsql.statement_attribution as at
          on at.run_id = c.run_id and at.query_id = c.query_id and at.position = c.position
         and at.model = j.judge_model and at.prompt_version = j.judge_prompt_version
         and exists (select from ragsql.statement_extraction as e
                     join ragsql.reference_answer as r on ragsql.text_hash(r.text) = e.text_hash
                     where e.id = at.extraction_id and r.query_id = c.query_id)
        group by c.query_id, c.position
    ),
    per_statement as materialized (
        -- each answer statement: wrong (the references do not support it) and which contexts support it
        select v.query_id,
               v.verdict <> 'supported' as incorrect,
               coalesce(bool_or(at.supported and rel.relevant), false) as relevant_faithful,
               coalesce(bool_or(at.supported and not rel.relevant), false) as irrelevant_faithful,
               count(at.position) as contexts_judged
        from judge as j
        join ragsql.statement_verdict as v
          on v.run_id = j.run_id and v.purpose = 'noise_sensitivity' and v.model = j.judge_model
         and v.prompt_version = j.judge_prompt_version
        left join ragsql.statement_attribution as at
          on at.run_id = v.run_id and at.query_id = v.query_id and at.model = v.model
         and at.prompt_version = v.prompt_version and at.extraction_id = v.extraction_id
         and at.statement_no = v.statement_no
        left join relevance as rel on rel.query_id = at.query_id and rel.position = at.position
        group by v.query_id, v.extraction_id, v.statement_no, v.verdict
    ),
    counted as materialized (
        select ps.query_id,
               count(*) filter (where ps.incorrect and ps.relevant_faithful) as relevant_wrong,
               count(*) filter (where ps.incorrect and ps.irrelevant_faithful and not ps.relevant_faithful)
                   as irrelevant_wrong,
               count(*) filter (where ps.incorrect) as incorrect,
               min(ps.contexts_judged) as min_contexts_judged
        from per_statement as ps
        group by ps.query_id
    )
    select s.qid,
           case when t.texts_unjudged = 0 and t.judged = t.statements and t.statements > 0
                     and c.min_contexts_judged = s.n_contexts
                then case j.mode when 'relevant' then c.relevant_wrong else c.irrelevant_wrong end::float8
                     / t.statements
           end,
           case
               when s.answer is null then 'no answer in the run'
               when s.n_references = 0 then 'no reference answer'
               when s.no_context_texts is not null then s.no_context_texts
               when s.n_contexts = 0 then 'no contexts'
               when t.texts_unjudged = 0 and t.statements = 0 then 'the answer has no statements'
               when t.texts_unjudged = 0 and t.judged = t.statements and c.min_contexts_judged = s.n_contexts
                   then null
               when t.texts_unjudged = 0 and t.judged = t.statements
                   then 'an answer statement has no verdict for every context'
               else coalesce(ragsql._statement_gap(t.texts, t.texts_unjudged, t.statements, t.judged, 'answer'),
                             s.judge_reason)
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.query_id is not null then jsonb_build_object(
               'statements', t.statements, 'incorrect', c.incorrect, 'relevant_wrong', c.relevant_wrong,
               'irrelevant_wrong', c.irrelevant_wrong,
               'relevant_contexts', (select count(*) from relevance as r where r.query_id = s.query_id and r.relevant))
           end
    from judge as j
    cross join ragsql._scope_rows(judged) as s
    left join tally as t on t.query_id = s.query_id
    left join counted as c on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.noise_sensitivity(text, text, text, text) is
    'Noise sensitivity per query (RAGAS NoiseSensitivity; lower is better). A context is relevant when it supports '
    'a statement of a reference answer; an answer statement is incorrect when the reference answers do not support '
    'it. mode relevant = incorrect answer statements that a relevant context supports / answer statements; mode '
    'irrelevant = incorrect answer statements that only irrelevant contexts support / answer statements. The '
    'answer''s statements are faithfulness''s, the references'' those of context_recall (shared extractions); '
    'per-context support is ragsql.statement_attribution, the reference check purpose noise_sensitivity of '
    'ragsql.statement_verdict. Example (RAGAS docs, LIC): 1 incorrect statement of 3 from a relevant context -> 1/3.';

-- ---------------------------------------------------------------------------------------------------
-- Rubrics score

create or replace function ragsql._rubric_hash(rubric text)
returns text
language plpgsql stable parallel safe
as $$
begin
    return ragsql._known(
        (select ragsql.text_hash(array_to_string(r.descriptions, E'\n')
                                 || case when r.with_reference then E'\nwith reference' else '' end)
         from ragsql.rubric as r
         where r.name = _rubric_hash.rubric),
        'rubric', rubric, 'see: select name, descriptions from ragsql.rubric', 'invalid_parameter_value');
end
$$;
comment on function ragsql._rubric_hash(text) is
    'ragsql.text_hash of a rubric''s five descriptions joined by newlines (and a line "with reference" when it '
    'shows the references): the definition_hash its verdicts are stored under; invalid_parameter_value when unknown.';

call ragsql._metric_function(
    'rubrics_score',
    'run text, rubric text default ''default'', model text default null, prompt_version text default null',
    'ragsql._verdict_metric(run, ''rubrics_score'', ''rubric_verdict'', rubric, model, prompt_version)',
    'Rubrics score per query (RAGAS RubricsScore) = the judge''s score 1..5 of the answer by the rubric''s five '
    'descriptions (ragsql.rubric; the built-ins default and reference are RAGAS''s default rubrics), not scaled, as '
    'RAGAS returns it. Only scores by the rubric''s current descriptions count. Metric name rubrics_score:<rubric>.');
