-- Statement verdicts: faithfulness, contradiction rate, context recall, answer correctness F1.
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

-- the verdict set is ragsql._newest_verdicts's choice, as every metric's
drop function if exists ragsql._statement_judge(bigint, text[], text, text);

create or replace function ragsql._statement_tally(
    run_id bigint, purpose text, model text, prompt_version text)
returns table (
    query_id bigint, texts bigint, texts_unjudged bigint, statements bigint, judged bigint,
    supported bigint, partial bigint, unsupported bigint, contradicted bigint)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    with target as (
        -- the texts whose statements are judged: the answer, or each distinct reference answer
        select distinct a.query_id, t.text_hash
        from ragsql.answer as a
        cross join lateral (
            select ragsql.text_hash(a.text) as text_hash
            where _statement_tally.purpose in ('faithfulness', 'correctness_answer', 'factual_precision',
                                               'noise_sensitivity')
            union all
            select ragsql.text_hash(r.text)
            from ragsql.reference_answer as r
            where r.query_id = a.query_id
              and _statement_tally.purpose in ('context_recall', 'correctness_reference', 'factual_recall')
        ) as t
        where a.run_id = _statement_tally.run_id
    ),
    verdict as (
        select v.query_id, v.extraction_id, v.statement_no, v.verdict, e.text_hash
        from ragsql.statement_verdict as v
        join ragsql.statement_extraction as e on e.id = v.extraction_id
        where v.run_id = _statement_tally.run_id
          and v.purpose = _statement_tally.purpose
          and v.model = _statement_tally.model
          and v.prompt_version = _statement_tally.prompt_version
    ),
    judged as (
        select v.query_id, v.text_hash, max(v.extraction_id) as extraction_id
        from verdict as v
        group by v.query_id, v.text_hash
    ),
    chosen as (
        -- per text: the newest extraction the verdicts refer to; else the text's newest extraction
        -- when it holds no statement (nothing to judge); else none (the text is not judged)
        select tg.query_id,
               tg.text_hash,
               coalesce(
                   j.extraction_id,
                   (select n.id
                    from (select e.id from ragsql.statement_extraction as e
                          where e.text_hash = tg.text_hash
                            -- claims (factual_correctness) are extractions of their own, one per setting
                            and case when _statement_tally.purpose like 'factual\_%'
                                     then e.prompt_version = split_part(_statement_tally.prompt_version, '+', 2)
                                     else e.prompt_version not like 'claims.%'
                                end
                          order by e.id desc
                          limit 1) as n
                    where not exists (select from ragsql.text_statement as s where s.extraction_id = n.id))
               ) as extraction_id
        from target as tg
        left join judged as j on j.query_id = tg.query_id and j.text_hash = tg.text_hash
    )
    select c.query_id,
           count(distinct c.text_hash),
           count(distinct c.text_hash) filter (where c.extraction_id is null),
           count(s.statement_no),
           count(v.verdict),
           count(*) filter (where v.verdict = 'supported'),
           count(*) filter (where v.verdict = 'partial'),
           count(*) filter (where v.verdict = 'unsupported'),
           count(*) filter (where v.verdict = 'contradicted')
    from chosen as c
    left join ragsql.text_statement as s on s.extraction_id = c.extraction_id
    left join verdict as v
      on v.query_id = c.query_id and v.extraction_id = s.extraction_id and v.statement_no = s.statement_no
    group by c.query_id;
end
$$;
comment on function ragsql._statement_tally(bigint, text, text, text) is
    'Per answered query: the texts a purpose judges, how many lack verdicts, their statements and the verdict counts.';

create or replace function ragsql._judged_tally(scope jsonb, purpose text)
returns table (
    query_id bigint, texts bigint, texts_unjudged bigint, statements bigint, judged bigint,
    supported bigint, partial bigint, unsupported bigint, contradicted bigint)
language sql stable parallel safe
as $$
    -- a wrapper reading no table itself: Citus plans it (the reading is in PL/pgSQL ragsql._statement_tally)
    select t.*
    from ragsql._scope_judge(_judged_tally.scope) as j
    cross join ragsql._statement_tally(j.run_id, _judged_tally.purpose, j.judge_model, j.judge_prompt_version) as t
$$;
comment on function ragsql._judged_tally(jsonb, text) is
    'ragsql._statement_tally of a purpose, on the run and verdict set of a ragsql._judged_scope value.';

create or replace function ragsql._statement_gap(
    texts bigint, texts_unjudged bigint, statements bigint, judged bigint, what text)
returns text
language sql immutable parallel safe
as $$
    select case
        when _statement_gap.texts is null or _statement_gap.texts_unjudged = _statement_gap.texts then null
        when _statement_gap.texts_unjudged > 0
            then format('%s of %s %s texts have no verdicts', _statement_gap.texts_unjudged, _statement_gap.texts,
                        _statement_gap.what)
        when _statement_gap.judged < _statement_gap.statements
            then format('%s of %s %s statements have no verdict', _statement_gap.statements - _statement_gap.judged,
                        _statement_gap.statements, _statement_gap.what)
    end
$$;
comment on function ragsql._statement_gap(bigint, bigint, bigint, bigint, text) is
    'Reason a partly judged statement set is incomplete; null when complete or not judged at all.';

-- contradiction_rate is ragsql._supported_share's share of contradicted statements
drop function if exists ragsql._supported_share(text, text, text, text, float8);

create or replace function ragsql._supported_share(
    run text, purpose text, model text, prompt_version text, partial_weight float8, counted text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(_supported_share.run);
    judged constant jsonb := ragsql._judged_scope(rid, _supported_share.purpose, 'statement_verdict',
                                                  array[_supported_share.purpose], _supported_share.model,
                                                  _supported_share.prompt_version);
    weight constant float8 := ragsql._unit_weight(_supported_share.partial_weight, 'partial_weight');
    -- faithfulness judges the answer's statements, context_recall those of the reference answers
    side constant text := case when _supported_share.purpose = 'faithfulness' then 'answer' else 'reference' end;
begin
    return query
    with tally as materialized (
        select t.* from ragsql._judged_tally(judged, _supported_share.purpose) as t
    )
    select s.qid,
           case when t.texts_unjudged = 0 and t.judged = t.statements and t.statements > 0
                then case _supported_share.counted
                         when 'contradicted' then t.contradicted::float8 / t.statements::float8
                         else (t.supported + weight * t.partial) / t.statements
                     end
           end,
           case
               when s.answer is null then 'no answer in the run'
               when s.no_context_texts is not null then s.no_context_texts
               when side = 'reference' and s.n_references = 0 then 'no reference answer'
               when t.texts_unjudged = 0 and t.statements = 0
                   then case side when 'answer' then 'the answer has no statements'
                                  else 'the reference answers have no statements' end
               when t.texts_unjudged = 0 and t.judged = t.statements then null
               else coalesce(ragsql._statement_gap(t.texts, t.texts_unjudged, t.statements, t.judged, side),
                             s.judge_reason)
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when t.query_id is not null then jsonb_build_object(
               'statements', t.statements, 'judged', t.judged, 'supported', t.supported, 'partial', t.partial,
               'unsupported', t.unsupported, 'contradicted', t.contradicted)
           end
    from ragsql._scope_rows(judged) as s
    left join tally as t on t.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql._supported_share(text, text, text, text, float8, text) is
    'Per query: (supported + partial_weight * partial) / statements of one statement_verdict purpose, faithfulness '
    '(the answer''s statements) or context_recall (the reference answers''), or contradicted / statements when '
    'counted is ''contradicted'', with the reason when there is none.';

call ragsql._metric_function(
    'faithfulness',
    'run text, model text default null, prompt_version text default null, partial_weight float8 default 0',
    'ragsql._supported_share(run, ''faithfulness'', model, prompt_version, partial_weight, ''supported'')',
    'Faithfulness per query = (supported + partial_weight * partial) / answer statements, verdicts of the answer''s '
    'statements against the contexts (RAGAS faithfulness; seed rag-eval-core-dimensions 4.2: Einstein example 2/3). '
    'partial_weight defaults to 0 (RAGAS parity). Null with a reason when the answer has no statements or a '
    'statement lacks a verdict. model (a name or ''offline'')/prompt_version select the verdict set (default: the newest LLM judge''s, else the offline judge''s).');

call ragsql._metric_function(
    'contradiction_rate',
    'run text, model text default null, prompt_version text default null',
    'ragsql._supported_share(run, ''faithfulness'', model, prompt_version, 0, ''contradicted'')',
    'Contradiction rate per query = answer statements the contexts contradict / answer statements (seed '
    'rag-eval-core-dimensions 4.2.2.2), from the same verdicts as ragsql.faithfulness; null exactly where it is.');

call ragsql._metric_function(
    'context_recall',
    'run text, model text default null, prompt_version text default null, partial_weight float8 default 0',
    'ragsql._supported_share(run, ''context_recall'', model, prompt_version, partial_weight, ''supported'')',
    'LLM context recall per query = reference statements supported by the contexts / reference statements '
    '(RAGAS context_recall; seed polardb: 张伟 row 3 = 1/1). The statements of all reference answers of the query '
    'are pooled; partial counts partial_weight (default 0). Null with a reason without a reference answer.');

create or replace function ragsql._claim_counts(
    judged jsonb, answer_purpose text, reference_purpose text, with_reference boolean)
returns table (
    query_id bigint, tp bigint, fp bigint, fn bigint, answer_claims bigint, reference_claims bigint,
    complete boolean, gap text)
language sql stable parallel safe
as $$
    with answer_side as materialized (
        select t.* from ragsql._judged_tally(_claim_counts.judged, _claim_counts.answer_purpose) as t
    ),
    reference_side as materialized (
        select t.* from ragsql._judged_tally(_claim_counts.judged, _claim_counts.reference_purpose) as t
    )
    select coalesce(a.query_id, r.query_id),
           a.supported,
           a.statements - a.supported,
           r.statements - r.supported,
           a.statements,
           r.statements,
           a.texts_unjudged = 0 and a.judged = a.statements
               and (not _claim_counts.with_reference or r.texts_unjudged = 0 and r.judged = r.statements),
           coalesce(ragsql._statement_gap(a.texts, a.texts_unjudged, a.statements, a.judged, 'answer'),
                    case when _claim_counts.with_reference then
                        ragsql._statement_gap(r.texts, r.texts_unjudged, r.statements, r.judged, 'reference')
                    end)
    from answer_side as a
    full join reference_side as r on r.query_id = a.query_id
$$;
comment on function ragsql._claim_counts(jsonb, text, text, boolean) is
    'Per answered query: TP (answer statements supported), FP (the others) and FN (reference statements not '
    'supported) of two statement_verdict purposes by the verdict set of a ragsql._judged_scope value, whether they '
    'are complete (the reference side only when with_reference) and the reason when not.';

create or replace function ragsql.answer_correctness_f1(
    run text, model text default null, prompt_version text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(answer_correctness_f1.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'answer_correctness', 'statement_verdict',
                                                  array['correctness_answer', 'correctness_reference'],
                                                  answer_correctness_f1.model, answer_correctness_f1.prompt_version);
begin
    return query
    select s.qid,
           -- numeric, then float8: the value the SQL function's result conversion gave
           (case when c.complete then
               case when c.tp > 0 then c.tp / (c.tp + 0.5 * (c.fp + c.fn)) else 0 end
           end)::float8,
           case
               when s.answer is null then 'no answer in the run'
               when s.n_references = 0 then 'no reference answer'
               when c.complete then null
               else coalesce(c.gap, s.judge_reason)
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           case when c.tp is not null and c.fn is not null
                then jsonb_build_object('tp', c.tp, 'fp', c.fp, 'fn', c.fn)
           end
    from ragsql._scope_rows(judged) as s
    left join ragsql._claim_counts(judged, 'correctness_answer', 'correctness_reference', true) as c
      on c.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.answer_correctness_f1(text, text, text) is
    'Factual F1 per query = TP / (TP + 0.5 * (FP + FN)), 0 when TP = 0 (RAGAS answer_correctness; seed polardb: '
    '张伟 TP 1, FP 1, FN 1 -> 0.5). TP = answer statements the reference answers support, FP = the other answer '
    'statements, FN = reference statements the answer does not support (purposes correctness_answer and '
    'correctness_reference of ragsql.statement_verdict; partial is not TP).';

