-- Embedding and answer-relevancy metrics: answer similarity, answer relevancy (generated questions, rating, cosine).
-- Part of the generation metrics; the rules all of them keep are at the top of 20_generation.sql.

create or replace function ragsql.answer_similarity(run text, embedder text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(answer_similarity.run);
    emb constant text := ragsql._run_embedder(rid, answer_similarity.embedder);
    -- no judge: the scope alone
    judged constant jsonb := ragsql._judged_scope(rid, 'answer_similarity', null, null, null, null);
begin
    return query
    with ctx as materialized (
        select rid as run_id, emb as embedder
    ),
    pair as materialized (
        select a.query_id,
               ea.embedding is not null as answer_embedded,
               count(*) as refs,
               count(er.embedding) as refs_embedded,
               count(ragsql.similarity_score(ea.embedding, er.embedding)) as cosines,
               avg(ragsql.similarity_score(ea.embedding, er.embedding)) as mean_cosine
        from ctx
        join ragsql.answer as a on a.run_id = ctx.run_id
        cross join lateral (
            select distinct ragsql.text_hash(r.text) as text_hash
            from ragsql.reference_answer as r
            where r.query_id = a.query_id
        ) as ref
        left join ragsql.text_embedding as ea
          on ea.text_hash = ragsql.text_hash(a.text) and ea.embedder = ctx.embedder
        left join ragsql.text_embedding as er on er.text_hash = ref.text_hash and er.embedder = ctx.embedder
        group by a.query_id, ea.embedding is not null
    )
    select s.qid,
           case when p.cosines = p.refs then p.mean_cosine end,
           case
               when s.answer is null then 'no answer in the run'
               when s.n_references = 0 then 'no reference answer'
               when p.cosines = p.refs then null
               when p.answer_embedded and p.refs_embedded = p.refs
                   then 'an embedding has zero norm or another dimension'
               when c.embedder is null or s.task_status in ('failed', 'pending', 'running') then s.judge_reason
               when p.answer_embedded and p.refs_embedded > 0
                   then format('%s of %s reference answers have no embedding by %s',
                               p.refs - p.refs_embedded, p.refs, c.embedder)
               when p.answer_embedded
                   then format('the reference answers have no embedding by %s', c.embedder)
               when p.refs_embedded > 0
                   then format('the answer has no embedding by %s', c.embedder)
               else format('the answer and the reference answers have no embedding by %s', c.embedder)
           end,
           null::text,
           null::text,
           c.embedder,
           case when p.query_id is not null
                then jsonb_build_object('references', p.refs, 'embedded', p.refs_embedded)
           end
    from ctx as c
    cross join ragsql._scope_rows(judged) as s
    left join pair as p on p.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.answer_similarity(text, text) is
    'Answer similarity per query = mean over the distinct reference answers t_i of max(cos(answer, t_i), 0) (seed '
    'ragas-metrics-overview: AS = 1/n sum sim(a, t_i); ragsql.similarity_score), in [0, 1], computed with '
    'pgvector from ragsql.text_embedding. '
    'embedder: default the one that judged the run (ragsql._run_embedder). Null with a reason without a reference or '
    'an embedding.';

create or replace function ragsql.answer_relevancy_cosine(run text, embedder text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(answer_relevancy_cosine.run);
    emb constant text := ragsql._run_embedder(rid, answer_relevancy_cosine.embedder);
    -- no judge: the scope alone
    judged constant jsonb := ragsql._judged_scope(rid, 'answer_relevancy', null, null, null, null);
begin
    return query
    with ctx as materialized (
        select rid as run_id, emb as embedder
    )
    select s.qid,
           ragsql.similarity_score(eq.embedding, ea.embedding),
           case
               when s.answer is null then 'no answer in the run'
               when s.question is null then 'the query has no text'
               when eq.embedding is not null and ea.embedding is not null
                   then case when ragsql.similarity_score(eq.embedding, ea.embedding) is null
                             then 'an embedding has zero norm or another dimension' end
               when c.embedder is null or s.task_status in ('failed', 'pending', 'running') then s.judge_reason
               when eq.embedding is not null then format('the answer has no embedding by %s', c.embedder)
               when ea.embedding is not null then format('the question has no embedding by %s', c.embedder)
               else format('the question and the answer have no embedding by %s', c.embedder)
           end,
           null::text,
           null::text,
           c.embedder,
           null::jsonb
    from ctx as c
    cross join ragsql._scope_rows(judged) as s
    left join ragsql.text_embedding as eq
      on eq.text_hash = ragsql.text_hash(s.question) and eq.embedder = c.embedder
    left join ragsql.text_embedding as ea
      on ea.text_hash = ragsql.text_hash(s.answer) and ea.embedder = c.embedder
    order by s.qid collate "C";
end
$$;
comment on function ragsql.answer_relevancy_cosine(text, text) is
    'Answer relevancy by embeddings per query = max(cos(question, answer), 0) (seed rag-eval-core-dimensions '
    '4.3.2, similarity method; ragsql.similarity_score), in [0, 1]. embedder: default the one that judged the run '
    '(ragsql._run_embedder).';

-- ---------------------------------------------------------------------------------------------------
-- Answer relevancy from generated questions and from a 1-5 rating

create or replace function ragsql.answer_relevancy(
    run text, model text default null, prompt_version text default null, embedder text default null)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid constant bigint := ragsql._run_id(answer_relevancy.run);
    judged constant jsonb := ragsql._judged_scope(rid, 'answer_relevancy', 'generated_question', null,
                                                  answer_relevancy.model, answer_relevancy.prompt_version);
    -- the embedder that judged the run with the questions' judge
    emb constant text := ragsql._run_embedder(rid, answer_relevancy.embedder, judged ->> 'judge_model');
begin
    return query
    with judge as materialized (
        select j.*, emb as embedder
        from ragsql._scope_judge(judged) as j
    ),
    generated as materialized (
        select g.query_id,
               count(*) as questions,
               count(eg.embedding) as embedded,
               bool_and(g.noncommittal) as noncommittal,
               count(ragsql.similarity_score(eq.embedding, eg.embedding)) as cosines,
               avg(ragsql.similarity_score(eq.embedding, eg.embedding)) as mean_cosine,
               bool_or(eq.embedding is not null) as question_embedded
        from judge as j
        join ragsql.generated_question as g
          on g.run_id = rid and g.model = j.judge_model and g.prompt_version = j.judge_prompt_version
        join ragsql.query as q on q.id = g.query_id
        left join ragsql.text_embedding as eq
          on eq.text_hash = ragsql.text_hash(q.text) and eq.embedder = j.embedder
        left join ragsql.text_embedding as eg
          on eg.text_hash = ragsql.text_hash(g.question) and eg.embedder = j.embedder
        group by g.query_id
    )
    select s.qid,
           case
               when g.noncommittal then 0
               when g.cosines = g.questions then g.mean_cosine
           end,
           case
               when s.answer is null then 'no answer in the run'
               when g.noncommittal or g.cosines = g.questions then null
               when g.query_id is not null and s.question is null then 'the query has no text'
               when g.query_id is not null and not g.question_embedded
                   then format('the question has no embedding by %s', j.embedder)
               when g.query_id is not null and g.embedded < g.questions
                   then format('%s of %s generated questions have no embedding by %s',
                               g.questions - g.embedded, g.questions, j.embedder)
               when g.query_id is not null then 'an embedding has zero norm or another dimension'
               else s.judge_reason
           end,
           s.judge_model,
           s.judge_prompt_version,
           j.embedder,
           case when g.query_id is not null
                then jsonb_build_object('questions', g.questions, 'noncommittal', g.noncommittal)
           end
    from judge as j
    cross join ragsql._scope_rows(judged) as s
    left join generated as g on g.query_id = s.query_id
    order by s.qid collate "C";
end
$$;
comment on function ragsql.answer_relevancy(text, text, text, text) is
    'Answer relevancy (RAGAS) per query = mean over the generated questions q_i of max(cos(q, q_i), 0) (seed '
    'ragas-metrics-overview: AR = 1/n sum sim(q, q_i); ragsql.similarity_score), in [0, 1]; 0 when every '
    'generated question flags the answer '
    'non-committal (RAGAS). Questions from ragsql.generated_question, embeddings from ragsql.text_embedding by the '
    'embedder that judged the run with the questions'' judge (ragsql._run_embedder) unless embedder is given.';

call ragsql._metric_function(
    'answer_relevancy_rating',
    'run text, model text default null, prompt_version text default null',
    'ragsql._verdict_metric(run, ''answer_relevancy_rating'', ''rating'', ''answer_relevancy'', model, prompt_version)',
    'Answer relevancy by rating per query = (s - 1) / 4 for the judge''s score s in 1..5 (seed '
    'rag-eval-core-dimensions 4.3.2.1.1: 5 -> 1.0, 4 -> 0.75, 1 -> 0), from ragsql.rating criterion answer_relevancy.');

