-- RAGAS's remaining LLM metrics (issue 16): context_entity_recall, noise_sensitivity, factual_correctness,
-- response_groundedness, the NVIDIA-style context relevance and rubrics_score with stored rubrics; and the
-- non-LLM context precision and recall (no judge: Levenshtein similarity of context texts). Their formulas are in
-- sql/functions/27_ragas_metrics.sql; this file adds the verdict tables they read and their registry rows.
--
-- Extractions stay shared: noise_sensitivity reads the answer statements faithfulness extracted and the
-- reference statements context_recall extracted (ragsql.statement_extraction); factual_correctness's claims
-- are extractions too, with RAGAS's atomicity and coverage settings in their prompt_version
-- ('claims.v1[atomicity=low,coverage=low]').

-- new statement verdict purposes: claims against the other text (factual_correctness) and answer statements
-- against the reference answers (noise_sensitivity's ground_truth2answer)
alter table ragsql.statement_verdict drop constraint if exists statement_verdict_purpose_check;
alter table ragsql.statement_verdict add constraint statement_verdict_purpose_check
    check (purpose in ('faithfulness', 'context_recall', 'correctness_answer', 'correctness_reference',
                       'factual_precision', 'factual_recall', 'noise_sensitivity'));
comment on column ragsql.statement_verdict.purpose is
    'faithfulness = answer statements vs the contexts; context_recall = reference statements vs the contexts; '
    'correctness_answer / correctness_reference = answer correctness''s TP/FP and TP/FN; factual_precision = the '
    'answer''s claims vs the reference answers; factual_recall = a reference answer''s claims vs the answer; '
    'noise_sensitivity = answer statements vs the reference answers.';

create table if not exists ragsql.statement_attribution (
    run_id bigint not null,
    query_id bigint not null,
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    extraction_id bigint not null,
    statement_no integer not null,
    position integer not null,
    supported boolean not null,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, model, prompt_version, extraction_id, statement_no, position),
    foreign key (run_id, query_id, position) references ragsql.answer_context (run_id, query_id, position)
        on delete cascade,
    foreign key (extraction_id, statement_no) references ragsql.text_statement (extraction_id, statement_no)
        on delete cascade
);
comment on table ragsql.statement_attribution is
    'Whether the context at position supports a statement (of the answer or of a reference answer), one row per '
    'statement and context: the per-context NLI matrices of RAGAS noise_sensitivity (retrieved2answer, '
    'retrieved2ground_truth). All statements of a text against all contexts are judged in one call.';

create table if not exists ragsql.entity_extraction (
    id bigint generated always as identity primary key,
    text_hash text not null check (text_hash ~ '^[0-9a-f]{64}$'),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    entities text[] not null,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    unique (text_hash, model, prompt_version)
);
comment on table ragsql.entity_extraction is
    'Named entities of a text, extracted once per text and reused by every run: a reference answer, or the '
    'contexts of an answer joined by newlines (RAGAS context_entity_recall extracts from "\n".join(contexts)); '
    'text_hash = ragsql.text_hash(text). An empty array records that the text names no entity.';

create table if not exists ragsql.graded_verdict (
    run_id bigint not null,
    query_id bigint not null,
    metric text not null check (metric in ('response_groundedness', 'nv_context_relevance')),
    judge_pass integer not null check (judge_pass in (1, 2)),
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    score integer check (score between 0 and 2),
    reason text,
    call_id bigint references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, metric, model, prompt_version, judge_pass),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade,
    check (score is not null or reason is not null)
);
comment on table ragsql.graded_verdict is
    'The 0/1/2 ratings of RAGAS''s NVIDIA metrics, two judge passes with different prompts per answer: '
    'response_groundedness (is the answer supported by the contexts) and nv_context_relevance (are the contexts '
    'relevant to the question). score null with a reason: that pass gave no usable rating (RAGAS then uses the '
    'other pass alone).';

insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description, higher_is_better)
values
    ('response_groundedness', 23, 'response_groundedness', false,
     'mean of two judge passes'' 0/1/2 rating of how far the contexts support the answer, / 2 (RAGAS, NVIDIA)',
     true),
    ('nv_context_relevance', 24, 'nv_context_relevance', false,
     'mean of two judge passes'' 0/1/2 rating of how relevant the contexts are to the question, / 2 (RAGAS '
     'ContextRelevance, NVIDIA)', true),
    ('context_entity_recall', 25, 'context_entity_recall', true,
     '|entities of the reference answers that the contexts name| / |entities of the reference answers| (RAGAS)',
     true),
    ('factual_correctness(mode=f1)', 26, 'factual_correctness', true,
     'F-beta (beta 1) of the answer''s claims supported by the reference (TP, else FP) and the reference''s claims '
     'the answer misses (FN) (RAGAS)', true),
    ('factual_correctness(mode=precision)', 27, 'factual_correctness', true,
     'answer claims the reference supports / answer claims (RAGAS)', true),
    ('factual_correctness(mode=recall)', 28, 'factual_correctness', true,
     'TP / (TP + reference claims the answer does not support) (RAGAS)', true),
    ('noise_sensitivity(mode=relevant)', 29, 'noise_sensitivity', true,
     'answer statements that a relevant context supports but the reference does not / answer statements (RAGAS; '
     'lower is better)', false),
    ('noise_sensitivity(mode=irrelevant)', 30, 'noise_sensitivity', true,
     'answer statements that only an irrelevant context supports and the reference does not / answer statements '
     '(RAGAS; lower is better)', false)
on conflict (metric) do nothing;

-- Rubrics (RAGAS RubricsScore): five score descriptions the judge scores each answer by. A rubric is a metric,
-- rubrics_score:<name>, a row of the registry like every other ('ragsql rubric add' adds both).
create table if not exists ragsql.rubric (
    name text primary key check (name ~ '^[a-z][a-z0-9_]*$'),
    descriptions text[] not null
        check (cardinality(descriptions) = 5 and array_position(descriptions, null) is null),
    with_reference boolean not null default false,
    builtin boolean not null default false,
    created_at timestamptz not null default now()
);
comment on table ragsql.rubric is
    'Rubrics for RAGAS''s rubrics_score: descriptions[s] says what earns score s (1..5). with_reference: the judge '
    'also sees the reference answers. The built-ins are RAGAS''s default rubrics, reference-free and with reference.';

insert into ragsql.rubric (name, descriptions, with_reference, builtin)
values
    ('default', array[
        'The response is entirely incorrect and fails to address any aspect of the user input.',
        'The response contains partial accuracy but includes major errors or significant omissions that affect its '
        'relevance to the user input.',
        'The response is mostly accurate but lacks clarity, thoroughness, or minor details needed to fully address '
        'the user input.',
        'The response is accurate and clear, with only minor omissions or slight inaccuracies in addressing the user '
        'input.',
        'The response is completely accurate, clear, and thoroughly addresses the user input without any errors or '
        'omissions.'], false, true),
    ('reference', array[
        'The response is entirely incorrect, irrelevant, or does not align with the reference in any meaningful way.',
        'The response partially matches the reference but contains major errors, significant omissions, or '
        'irrelevant information.',
        'The response aligns with the reference overall but lacks sufficient detail, clarity, or contains minor '
        'inaccuracies.',
        'The response is mostly accurate, aligns closely with the reference, and contains only minor issues or '
        'omissions.',
        'The response is fully accurate, completely aligns with the reference, and is clear, thorough, and '
        'detailed.'], true, true)
on conflict (name) do nothing;

create table if not exists ragsql.rubric_verdict (
    run_id bigint not null,
    query_id bigint not null,
    rubric text not null references ragsql.rubric (name) on update cascade on delete cascade,
    model text not null check (btrim(model) <> ''),
    prompt_version text not null,
    definition_hash text not null check (definition_hash ~ '^[0-9a-f]{64}$'),
    score integer not null check (score between 1 and 5),
    reason text,
    call_id bigint not null references ragsql.judge_call (id),
    created_at timestamptz not null default now(),
    primary key (run_id, query_id, rubric, model, prompt_version, definition_hash),
    foreign key (run_id, query_id) references ragsql.answer (run_id, query_id) on delete cascade
);
comment on table ragsql.rubric_verdict is
    'The judge''s 1-5 score of an answer by a rubric, with its reason. definition_hash = ragsql.text_hash of the '
    'rubric''s descriptions joined by newlines (and '' with reference'' when it has one) when judged: after they '
    'change, old scores no longer count.';

insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description, higher_is_better)
values
    ('rubrics_score:default', 31, 'rubrics_score', false,
     'the judge''s 1-5 score by RAGAS''s reference-free default rubric (RAGAS rubrics_score; not scaled)', true),
    ('rubrics_score:reference', 32, 'rubrics_score', true,
     'the judge''s 1-5 score by RAGAS''s default rubric with reference (RAGAS rubrics_score; not scaled)', true)
on conflict (metric) do nothing;

-- RAGAS's non-LLM context precision and recall: string similarity of retrieved and reference contexts, no judge
comment on column ragsql.generation_metric.computed_by is
    'For a metric with no judge task: the function that computes it, text_metric (the answer against its '
    'references), context_id_metric (the ids of the answer''s contexts against the gold ids) or '
    'string_context_metric (the texts of the answer''s contexts against the gold texts); null otherwise.';
insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description, computed_by)
values
    ('non_llm_context_precision_with_reference', 33, null, false,
     'ContextPrecision over the answer''s contexts with rel_i = 1 when the context''s best Levenshtein similarity '
     'to a gold text (relevance >= 1) is >= 0.5 (RAGAS NonLLMContextPrecisionWithReference)', 'string_context_metric'),
    ('non_llm_context_recall', 34, null, false,
     'share of the gold texts (relevance >= 1) whose best Levenshtein similarity to a context of the answer is > 0.5 '
     '(RAGAS NonLLMContextRecall)', 'string_context_metric')
on conflict (metric) do nothing;

insert into ragsql.schema_migration (name) values ('0130_ragas_metrics') on conflict do nothing;
