-- Generation metrics over the judge's verdicts (tables in sql/migrations/0020_judge.sql): the building
-- blocks every generation metric (21_ to 24_) uses. The judge cache and queue are in 25_judge_queue.sql.
--
-- Rules every metric here keeps:
--   * A query's value is computed from one verdict set: the verdicts of one (model, prompt_version)
--     pair. With model and prompt_version left null, the pair is that of the newest verdict of the
--     metric's kind in the run (ties: smallest model, then prompt_version, bytewise), so a run value never
--     mixes prompts or models: queries judged only under another pair are missing, and their reason names
--     the pair in use. Every metric makes this one choice by calling ragsql._newest_verdicts. An LLM judge's verdicts win over the offline judge's, whatever their age: the
--     offline heuristics are read only when no LLM judged the metric (ragsql._judge_preference). Give
--     model (a model name, or 'offline' for the offline judge) and/or prompt_version to read another set.
--   * Embedding metrics use one embedder per run in the same way: the one given, else the embedder that
--     judged the run with the verdict set's judge (ragsql.run_embedder), never one chosen from other runs.
--   * Every query of the run's dataset gets a row. A query whose verdicts are missing, incomplete or
--     failed has value null and a reason, never 0 and never NaN.
--   * Statement texts are matched by ragsql.text_hash, so a replaced answer never reuses old verdicts.

-- ---------------------------------------------------------------------------------------------------
-- Building blocks

create or replace function ragsql.is_offline_judge(model text)
returns boolean
language sql immutable parallel safe
as $$ select is_offline_judge.model like 'offline%' $$;
comment on function ragsql.is_offline_judge(text) is
    'True for the offline heuristic judge and embedder (model names starting with offline): their values are labelled OFFLINE.';

create or replace function ragsql._judge_matches(chosen text, model text)
returns boolean
language sql immutable parallel safe
as $$
    select _judge_matches.chosen is null
        or _judge_matches.model = _judge_matches.chosen
        or (lower(_judge_matches.chosen) = 'offline' and ragsql.is_offline_judge(_judge_matches.model))
$$;
comment on function ragsql._judge_matches(text, text) is
    'Whether verdicts of model belong to the judge chosen: any when null, the offline judge for ''offline'', else that model.';

create or replace function ragsql._judge_preference(model text)
returns integer
language sql immutable parallel safe
as $$ select case when ragsql.is_offline_judge(_judge_preference.model) then 1 else 0 end $$;
comment on function ragsql._judge_preference(text) is
    'Sort key of verdict sets: an LLM judge (0) before the offline judge (1), then the newest.';

create or replace function ragsql.text_hash(content text)
returns text
language sql immutable parallel safe strict
as $$
    select encode(sha256(convert_to(text_hash.content, 'UTF8')), 'hex')
$$;
comment on function ragsql.text_hash(text) is
    'sha256 hex of the UTF-8 bytes of a text (Python: hashlib.sha256(text.encode()).hexdigest()): the key of '
    'ragsql.statement_extraction and ragsql.text_embedding.';

-- A SQL-standard body: pgvector's vector_dims and <=> are bound here, wherever the DBA put the extension, so the
-- security definer wrappers of ragsql_report (sql/views/90_report.sql) run it on a path without pgvector's schema.
-- Still inlined.
create or replace function ragsql.cosine_similarity(a vector, b vector)
returns float8
language sql immutable parallel safe
return case
    when vector_dims(cosine_similarity.a) = vector_dims(cosine_similarity.b)
        then nullif(1 - (cosine_similarity.a <=> cosine_similarity.b), 'NaN'::float8)
end;
comment on function ragsql.cosine_similarity(vector, vector) is
    'cos(a, b) = 1 - (a <=> b) with pgvector; null (never NaN) when a vector has zero norm or the dimensions differ.';

create or replace function ragsql.similarity_score(a vector, b vector)
returns float8
language sql immutable parallel safe
as $$
    select case when s.c < 0 then 0 else s.c end
    from (select ragsql.cosine_similarity(similarity_score.a, similarity_score.b) as c) as s
$$;
comment on function ragsql.similarity_score(vector, vector) is
    'max(cos(a, b), 0): the similarity every embedding metric averages, so answer similarity, answer relevancy '
    'and answer correctness stay in [0, 1] whatever the embedder (opposite vectors count as unrelated, not as '
    'less than unrelated). RAGAS averages the raw cosine, which equals this whenever no cosine is negative (as '
    'with OpenAI embeddings); hashed or centred embeddings give negative cosines. Null as ragsql.cosine_similarity.';

create or replace function ragsql._judge_reason(
    task_status text, task_error text, model text, prompt_version text)
returns text
language sql immutable parallel safe
as $$
    select case _judge_reason.task_status
        when 'failed' then 'judge failed: ' || coalesce(_judge_reason.task_error, 'no error recorded')
        when 'pending' then 'waiting for the judge'
        when 'running' then 'being judged'
        else case
            when _judge_reason.model is not null
                then format('no verdicts of model %s, prompt %s', _judge_reason.model,
                            coalesce(_judge_reason.prompt_version, 'any'))
            when _judge_reason.task_status = 'done' then 'judge task done but no verdicts stored'
            else 'not judged'
        end
    end
$$;
comment on function ragsql._judge_reason(text, text, text, text) is
    'Why a query has no complete verdict set, from its judge task (failed, pending, running) and the verdict set in use.';

create or replace function ragsql._unit_weight(weight float8, name text)
returns float8
language plpgsql immutable parallel safe
as $$
begin
    if weight is null or weight < 0 or weight > 1 or weight = 'NaN'::float8 then
        raise exception '% must be between 0 and 1, got %', name, weight
            using errcode = 'invalid_parameter_value', hint = 'e.g. partial_weight => 0.5';
    end if;
    return weight;
end
$$;
comment on function ragsql._unit_weight(float8, text) is 'The weight itself, or invalid_parameter_value when it is outside [0, 1].';

create or replace function ragsql._correctness_weights(factual_weight float8, similarity_weight float8)
returns table (factual float8, similarity float8)
language plpgsql immutable parallel safe
as $$
begin
    if factual_weight is null or similarity_weight is null or factual_weight < 0 or similarity_weight < 0
       or factual_weight = 'NaN'::float8 or similarity_weight = 'NaN'::float8
       or factual_weight + similarity_weight <= 0 or factual_weight + similarity_weight = 'Infinity'::float8 then
        raise exception 'answer correctness weights must be >= 0 and not both 0, got % and %',
            factual_weight, similarity_weight
            using errcode = 'invalid_parameter_value',
                  hint = 'defaults: factual_weight => 0.75, similarity_weight => 0.25';
    end if;
    factual := factual_weight / (factual_weight + similarity_weight);
    similarity := similarity_weight / (factual_weight + similarity_weight);
    return next;
end
$$;
comment on function ragsql._correctness_weights(float8, float8) is
    'Answer correctness weights normalised to sum 1 (numpy.average as RAGAS uses it); rejects negative or all-zero weights.';

create or replace function ragsql._generation_scope(run_id bigint, task_kind text)
returns table (
    query_id bigint, qid text, question text, answer text, n_references bigint, n_contexts bigint,
    task_status text, task_error text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    -- counts joined as grouped subqueries filtered by the run, not correlated subqueries: Citus plans these (one
    -- shard) and refuses those
    select q.id,
           q.qid,
           q.text,
           a.text,
           coalesce(rc.n, 0),
           coalesce(cc.n, 0),
           t.status,
           t.last_error
    from ragsql.run as ru
    join ragsql.query as q on q.dataset_id = ru.dataset_id
    left join ragsql.answer as a on a.run_id = _generation_scope.run_id and a.query_id = q.id
    left join (select r.query_id, count(*) as n
               from ragsql.reference_answer as r
               join ragsql.query as rq on rq.id = r.query_id
               join ragsql.run as rr on rr.dataset_id = rq.dataset_id
               where rr.id = _generation_scope.run_id
               group by r.query_id) as rc on rc.query_id = q.id
    -- contexts with a text: one given by id alone (ragsql.answer_context.text null) has nothing to judge
    left join (select c.query_id, count(c.text) as n
               from ragsql.answer_context as c
               where c.run_id = _generation_scope.run_id
               group by c.query_id) as cc on cc.query_id = q.id
    left join ragsql.judge_task as t
      on t.run_id = _generation_scope.run_id and t.query_id = q.id and t.kind = _generation_scope.task_kind
    where ru.id = _generation_scope.run_id;
end
$$;
comment on function ragsql._generation_scope(bigint, text) is
    'Every query of the run''s dataset with its question, answer, reference and context counts (contexts with a '
    'text) and judge task state.';

create or replace function ragsql._run_embedder(run_id bigint, embedder text, model text default null)
returns text
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    -- the run's own record (ragsql.run_embedder), never the newest embedding of its texts in the database: those
    -- texts are shared with other runs, whose judging must not change this run's values
    return coalesce(_run_embedder.embedder, (
        select e.embedder
        from ragsql.run_embedder as e
        where e.run_id = _run_embedder.run_id
        order by ragsql._judge_matches(_run_embedder.model, e.judge_model) desc,
                 ragsql._judge_preference(e.judge_model), e.created_at desc, e.judge_model collate "C",
                 e.embedder collate "C"
        limit 1
    ));
end
$$;
comment on function ragsql._run_embedder(bigint, text, text) is
    'The embedder a run''s embedding metrics read: the one given, else, from the run''s own record '
    '(ragsql.run_embedder), the one that judged it with the judge model given, else the one an LLM judge used '
    'before the offline judge''s, then the newest. Null when the run records none (a DBA loading embeddings by '
    'hand records the embedder there, or passes it).';

-- ---------------------------------------------------------------------------------------------------
-- The verdict set a metric reads, and scores on user definitions (aspects, rubrics)

create or replace function ragsql._newest_verdicts(
    run_id bigint, verdicts text, keys text[], model text, prompt_version text, version_like text default '%',
    definition_hash text default null)
returns table (judge_model text, judge_prompt_version text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    -- how each verdict table is filtered: by the run or not, by which column the keys match (none: the run
    -- alone), by the definition hash or not
    by_run boolean;
    key_column text;
    by_definition boolean;
begin
    -- PL/pgSQL, not SQL: Citus cannot plan a SQL function's parameterized body over distributed tables. Every
    -- metric calls this in a statement of its own before its main query, so that query reads no function's tables.
    select t.by_run, t.key_column, t.by_definition
      into by_run, key_column, by_definition
    from (values
        ('graded_verdict', true, 'metric', false), ('statement_verdict', true, 'purpose', false),
        ('aspect_verdict', true, 'aspect', true), ('rubric_verdict', true, 'rubric', true),
        ('rating', true, 'criterion', false), ('yes_no_verdict', true, 'metric', false),
        ('context_verdict', true, null, false), ('context_sentence_verdict', true, null, false),
        ('citation_verdict', true, null, false), ('generated_question', true, null, false),
        -- entity sets are kept per text, not per run: keys are the hashes of the run's texts
        ('entity_extraction', false, 'text_hash', false)
    ) as t(verdicts, by_run, key_column, by_definition)
    where t.verdicts = _newest_verdicts.verdicts;
    if not found then
        raise exception 'unknown verdict table %', _newest_verdicts.verdicts
            using errcode = 'invalid_parameter_value';
    end if;
    return query execute format(
        'select coalesce(p.model, $4), coalesce(p.prompt_version, $5)
         from (select) as one
         left join lateral (
             select v.model, v.prompt_version
             from ragsql.%I as v
             where %s and %s and %s
               and ragsql._judge_matches($4, v.model)
               and ($5 is null or v.prompt_version = $5)
               and v.prompt_version like $6
             order by ragsql._judge_preference(v.model), v.created_at desc, v.model collate "C",
                      v.prompt_version collate "C"
             limit 1
         ) as p on true',
        _newest_verdicts.verdicts,
        case when by_run then 'v.run_id = $1' else 'true' end,
        case when key_column is not null then format('v.%I = any ($2)', key_column) else 'true' end,
        case when by_definition then 'v.definition_hash = $3' else 'true' end)
    using _newest_verdicts.run_id, _newest_verdicts.keys, _newest_verdicts.definition_hash, _newest_verdicts.model,
          _newest_verdicts.prompt_version, _newest_verdicts.version_like;
end
$$;
comment on function ragsql._newest_verdicts(bigint, text, text[], text, text, text, text) is
    'The (model, prompt_version) of the verdicts a run''s metric reads from one verdict table (graded_verdict by '
    'metric, statement_verdict by purpose, aspect_verdict by aspect and rubric_verdict by rubric, both with the '
    'definition hash, rating by criterion, yes_no_verdict by metric, entity_extraction by the hashes of the run''s texts, the other tables '
    'by run alone): the filters, completed by the newest LLM judge''s, else the newest offline one''s (ties: '
    'smallest model, then prompt_version, bytewise). The one verdict-set choice of every generation metric.';

create or replace function ragsql._judged_scope(
    run_id bigint, task_kind text, verdicts text, keys text[], model text, prompt_version text,
    version_like text default '%', definition_hash text default null)
returns jsonb
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    chosen_model text;
    chosen_version text;
    context_ids jsonb;
begin
    -- PL/pgSQL, not SQL, and called before the metric's query (Citus: see ragsql._newest_verdicts): that query
    -- then reads the choice and the scope from this value (ragsql._scope_judge, ragsql._scope_rows) and calls no
    -- function that reads tables
    if _judged_scope.verdicts is not null then
        select j.judge_model, j.judge_prompt_version
          into chosen_model, chosen_version
        from ragsql._newest_verdicts(_judged_scope.run_id, _judged_scope.verdicts, _judged_scope.keys,
                                     _judged_scope.model, _judged_scope.prompt_version, _judged_scope.version_like,
                                     _judged_scope.definition_hash) as j;
    end if;
    -- per query, the contexts given by id alone (RAGAS retrieved_context_ids without texts); a statement of its own:
    -- joined with ragsql._generation_scope's call, Citus would push that call to a shard
    context_ids := (select coalesce(jsonb_object_agg(c.query_id, c.n), '{}')
                    from (select c.query_id, count(*) as n
                          from ragsql.answer_context as c
                          where c.run_id = _judged_scope.run_id and c.text is null
                          group by c.query_id) as c);
    return jsonb_build_object(
        'run_id', _judged_scope.run_id,
        'judge_model', chosen_model,
        'judge_prompt_version', chosen_version,
        'scope', (select coalesce(jsonb_agg(to_jsonb(g) || jsonb_build_object(
                                      'n_context_ids', coalesce((context_ids ->> g.query_id::text)::bigint, 0))),
                                  '[]')
                  from ragsql._generation_scope(_judged_scope.run_id, _judged_scope.task_kind) as g));
end
$$;
comment on function ragsql._judged_scope(bigint, text, text, text[], text, text, text, text) is
    'What a generation metric of a run reads before its query: the verdict set ragsql._newest_verdicts chooses '
    'from one verdict table (none when verdicts is null: a metric with no judge) and every query of the run '
    '(ragsql._generation_scope for the judge task kind), as one value for ragsql._scope_judge and ragsql._scope_rows.';

create or replace function ragsql._scope_judge(judged jsonb)
returns table (run_id bigint, judge_model text, judge_prompt_version text)
language sql immutable parallel safe
as $$
    select (_scope_judge.judged ->> 'run_id')::bigint,
           _scope_judge.judged ->> 'judge_model',
           _scope_judge.judged ->> 'judge_prompt_version'
$$;
comment on function ragsql._scope_judge(jsonb) is
    'The run and the verdict set (model, prompt_version) of a ragsql._judged_scope value.';

create or replace function ragsql._scope_rows(judged jsonb)
returns table (
    query_id bigint, qid text, question text, answer text, n_references bigint, n_contexts bigint,
    task_status text, task_error text, judge_model text, judge_prompt_version text, judge_reason text,
    no_context_texts text)
language sql immutable parallel safe
as $$
    select s.query_id, s.qid, s.question, s.answer, s.n_references, s.n_contexts, s.task_status, s.task_error,
           _scope_rows.judged ->> 'judge_model',
           _scope_rows.judged ->> 'judge_prompt_version',
           ragsql._judge_reason(s.task_status, s.task_error, _scope_rows.judged ->> 'judge_model',
                                _scope_rows.judged ->> 'judge_prompt_version'),
           case when s.n_contexts = 0 and s.n_context_ids > 0
                then 'no context texts: the record gives only ids' end
    from jsonb_to_recordset(_scope_rows.judged -> 'scope') as s(
        query_id bigint, qid text, question text, answer text, n_references bigint, n_contexts bigint,
        task_status text, task_error text, n_context_ids bigint)
$$;
comment on function ragsql._scope_rows(jsonb) is
    'Every query of a ragsql._judged_scope value with its scope (ragsql._generation_scope), the verdict set, '
    'ragsql._judge_reason (why it has no verdicts when the metric finds none) and no_context_texts: the reason of a '
    'metric that reads context texts when the answer''s contexts are given by id alone, else null.';

-- one verdict per query is ragsql._verdict_metric's, for aspects, rubrics, ratings and yes/no metrics alike
drop function if exists ragsql._definition_metric(text, text, text, text, text);
drop function if exists ragsql._definition_scores(bigint, text, text, text, text, text);

create or replace function ragsql._verdict_scores(
    run_id bigint, verdicts text, name text, definition_hash text, model text, prompt_version text)
returns table (query_id bigint, score float8, detail jsonb, earlier boolean)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    -- PL/pgSQL, not SQL: Citus cannot plan a SQL function's parameterized body over distributed tables
    return query
    select v.query_id,
           max(v.score) filter (where chosen),
           (array_agg(v.detail) filter (where chosen))[1],
           bool_or(v.definition_hash is distinct from _verdict_scores.definition_hash)
    from (
        select a.query_id, case when a.verdict then 1.0 else 0.0 end::float8 as score, null::jsonb as detail,
               a.definition_hash, a.model, a.prompt_version
        from ragsql.aspect_verdict as a
        where _verdict_scores.verdicts = 'aspect_verdict'
          and a.run_id = _verdict_scores.run_id and a.aspect = _verdict_scores.name
        union all
        select r.query_id, r.score::float8, null, r.definition_hash, r.model, r.prompt_version
        from ragsql.rubric_verdict as r
        where _verdict_scores.verdicts = 'rubric_verdict'
          and r.run_id = _verdict_scores.run_id and r.rubric = _verdict_scores.name
        union all
        select r.query_id, (r.score - 1) / 4.0::float8, jsonb_build_object('score', r.score), null, r.model,
               r.prompt_version
        from ragsql.rating as r
        where _verdict_scores.verdicts = 'rating'
          and r.run_id = _verdict_scores.run_id and r.criterion = _verdict_scores.name
        union all
        select y.query_id, y.verdict::integer::float8, jsonb_build_object('verdict', y.verdict, 'reason', y.reason),
               null, y.model, y.prompt_version
        from ragsql.yes_no_verdict as y
        where _verdict_scores.verdicts = 'yes_no_verdict'
          and y.run_id = _verdict_scores.run_id and y.metric = _verdict_scores.name
    ) as v
    cross join lateral (
        select v.definition_hash is not distinct from _verdict_scores.definition_hash
               and v.model = _verdict_scores.model and v.prompt_version = _verdict_scores.prompt_version as chosen
    ) as c
    group by v.query_id;
end
$$;
comment on function ragsql._verdict_scores(bigint, text, text, text, text, text) is
    'Per answered query: the score of one verdict per answer from a verdict table (an aspect''s yes as 1, no as 0; '
    'a rubric''s 1-5; a rating''s (s - 1) / 4; a yes/no metric''s yes as 1, no as 0) with its detail, by the given '
    'judge on the given definition (aspects and rubrics), and whether it has verdicts on an earlier definition.';

create or replace function ragsql._verdict_metric(
    run text, task_kind text, verdicts text, name text, model text, prompt_version text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(_verdict_metric.run);
    -- a criterion's current definition: only verdicts on it count
    definition constant text := case _verdict_metric.verdicts
                                    when 'aspect_verdict' then ragsql._aspect_definition_hash(_verdict_metric.name)
                                    when 'rubric_verdict' then ragsql._rubric_hash(_verdict_metric.name)
                                end;
    judged constant jsonb := ragsql._judged_scope(
        rid, _verdict_metric.task_kind, _verdict_metric.verdicts, array[_verdict_metric.name], _verdict_metric.model,
        _verdict_metric.prompt_version, '%', definition);
    with_reference constant boolean := coalesce((select r.with_reference from ragsql.rubric as r
                                                 where _verdict_metric.verdicts = 'rubric_verdict'
                                                   and r.name = _verdict_metric.name), false);
begin
    return query
    select s.qid,
           v.score,
           case
               when s.answer is null then 'no answer in the run'
               when with_reference and s.n_references = 0 then 'no reference answer'
               when v.score is not null then null
               when v.earlier
                   then format(case _verdict_metric.verdicts
                                   when 'aspect_verdict' then 'only verdicts on an earlier definition of aspect %s'
                                   else 'only scores by an earlier version of rubric %s'
                               end, _verdict_metric.name)
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           null::text,
           v.detail
    from ragsql._scope_rows(judged) as s
    left join ragsql._verdict_scores(rid, _verdict_metric.verdicts, _verdict_metric.name, definition,
                                     judged ->> 'judge_model', judged ->> 'judge_prompt_version') as v
      on v.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql._verdict_metric(text, text, text, text, text, text) is
    'Per query: the score of one verdict per answer (ragsql._verdict_scores: aspect_verdict, rubric_verdict, rating '
    'or yes_no_verdict, by name) by the verdict set of the judge task kind, on the current definition of an aspect '
    'or rubric, with the reason when there is none.';

create or replace procedure ragsql._metric_function(name text, arguments text, reads text, about text)
language plpgsql
as $$
begin
    -- a `language sql` wrapper reading no table itself: Citus plans it (the reading is in the PL/pgSQL function
    -- it calls); every metric function returns these columns
    execute format(
        'create or replace function ragsql.%I(%s) '
        'returns table (qid text, value float8, reason text, judge_model text, judge_prompt_version text, '
        'judge_embedder text, detail jsonb) '
        'language sql stable parallel safe '
        'as %L',
        _metric_function.name, _metric_function.arguments, 'select * from ' || _metric_function.reads);
    -- the identity of the function: its argument types (one word each), without names and defaults
    execute format('comment on function ragsql.%I(%s) is %L', _metric_function.name,
                   regexp_replace(_metric_function.arguments, '\w+ (\w+)( default [^,]+)?', '\1', 'g'),
                   _metric_function.about);
end
$$;
comment on procedure ragsql._metric_function(text, text, text, text) is
    'Creates (or replaces) the public function of a metric computed by a PL/pgSQL function: ragsql.<name>(arguments) '
    'returning the metric''s rows, `select * from` the call reads, and its comment about.';
